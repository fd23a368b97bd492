import pytest
import torch
from lora_recycle import (
    AdaptiveMergeConfig,
    LoraExpert,
    LoraPool,
    get_adaptive_merge_model,
    presets,
)
from lora_recycle.kernels import lora_cat_forward
from lora_recycle.layer import AdaptiveMergeLinear
from lora_testmodels import make_llama, make_mlp


def _set_logits(model, value):
    with torch.no_grad():
        for group in model.coefficient_groups.values():
            group.w.fill_(value)


def test_zero_init_ours_is_bit_identical_to_base(llama_pool, ids):
    base_logits = make_llama()(input_ids=ids).logits
    model = get_adaptive_merge_model(make_llama(), llama_pool, presets.ours().config)
    assert torch.equal(model(input_ids=ids).logits, base_logits)
    assert all(torch.equal(c, torch.zeros(3)) for c in model.coefficients().values())
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith(".w") for n in trainable)
    assert model.get_nb_trainable_parameters()[0] == 3 * 14  # K per module, 14 modules


def test_one_expert_equals_peft_lora_forward(adapter_dirs, ids):
    from peft import PeftModel

    pool = LoraPool.from_pretrained(adapter_dirs[1:2], make_llama())  # the rsLoRA adapter
    model = get_adaptive_merge_model(
        make_llama(), pool, AdaptiveMergeConfig(activation="identity", init="ones")
    )
    reference = PeftModel.from_pretrained(make_llama(), adapter_dirs[1]).eval()
    with torch.no_grad():
        torch.testing.assert_close(
            model(input_ids=ids).logits, reference(input_ids=ids).logits, atol=1e-6, rtol=0
        )
        # and the adapter really moves the output
        assert (
            reference(input_ids=ids).logits - make_llama()(input_ids=ids).logits
        ).abs().max() > 1e-3


def test_k_experts_equal_k_active_peft_adapters(adapter_dirs, llama_pool, ids):
    from peft import PeftModel

    reference = PeftModel.from_pretrained(make_llama(), adapter_dirs[0], adapter_name="a0")
    for i, folder in enumerate(adapter_dirs[1:], start=1):
        reference.load_adapter(folder, adapter_name=f"a{i}")
    reference.base_model.set_adapter(["a0", "a1", "a2"])
    model = get_adaptive_merge_model(
        make_llama(), llama_pool, AdaptiveMergeConfig(activation="identity", init="ones")
    )
    with torch.no_grad():
        torch.testing.assert_close(
            model(input_ids=ids).logits, reference.eval()(input_ids=ids).logits, atol=1e-6, rtol=0
        )


def test_forward_equals_merge_and_unload_with_negative_coefficients(llama_pool, ids):
    model = get_adaptive_merge_model(make_llama(), llama_pool, presets.adamerging().config)
    with torch.no_grad():
        for i, group in enumerate(model.coefficient_groups.values()):
            group.w.copy_(torch.tensor([0.7, -1.3, 0.4]) * (1 + 0.1 * i))
        expected = model(input_ids=ids).logits
        deltas = model.delta_weights()
        merged = model.merge_and_unload()
        assert not any(isinstance(m, AdaptiveMergeLinear) for m in merged.modules())
        torch.testing.assert_close(merged(input_ids=ids).logits, expected, atol=1e-5, rtol=0)
        # explicit W + Σ c_i s_i B_i A_i for one module
        name = "model.layers.1.self_attn.v_proj"
        c = torch.tensor([0.7, -1.3, 0.4]) * (1 + 0.1 * list(deltas).index(name))
        explicit = sum(ci * e.delta(name) for ci, e in zip(c, llama_pool, strict=False))
        torch.testing.assert_close(deltas[name], explicit, atol=1e-6, rtol=0)


def test_to_lora_roundtrip_through_peft(llama_pool, ids, tmp_path):
    from peft import PeftModel

    model = get_adaptive_merge_model(make_llama(), llama_pool, presets.adamerging().config)
    _set_logits(model, 0.3)
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    exported = model.to_lora()
    assert exported.config["r"] == 2 + 4 + 3  # heterogeneous ranks concatenated
    exported.save_pretrained(tmp_path / "merged")
    loaded = PeftModel.from_pretrained(make_llama(), str(tmp_path / "merged")).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, expected, atol=1e-5, rtol=0)
    # a truncated export at rank >= the true rank is exact; our own pool reads the folder back
    exact = model.to_lora(rank=9)
    for name, delta in model.delta_weights().items():
        a, b = exact.factors[name]
        torch.testing.assert_close(b @ a, delta, atol=1e-5, rtol=0)
    back = LoraPool.from_pretrained([str(tmp_path / "merged")], make_llama(), task_type=None)
    assert back[0].scaling == 1.0
    with pytest.raises(ValueError, match="rank"):
        model.to_lora(rank=0)


def test_save_pretrained_writes_a_peft_adapter_folder(llama_pool, ids, tmp_path):
    # save_pretrained used to fall through __getattr__ to the base model's and write a checkpoint
    # that reloads as the base model (review o10); it now saves to_lora(), as PeftModel does.
    from peft import PeftModel

    model = get_adaptive_merge_model(make_llama(), llama_pool, presets.adamerging().config)
    _set_logits(model, 0.3)
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    folder = model.save_pretrained(tmp_path / "saved")
    assert sorted(p.name for p in folder.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    loaded = PeftModel.from_pretrained(make_llama(), str(folder)).eval()
    with torch.no_grad():
        got = loaded(input_ids=ids).logits
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
        assert not torch.allclose(got, make_llama()(input_ids=ids).logits, atol=1e-3)


def _llama_pool_modules(pool):
    return len(pool.modules)


@pytest.mark.parametrize(
    ("granularity", "count"),
    [
        ("per_expert", 1),
        ("per_layer", 2),
        ("per_sublayer", 4),
        ("per_module", 14),
        ("per_dimension", 14),
    ],
)
def test_granularity_ties_coefficients(llama_pool, granularity, count):
    model = get_adaptive_merge_model(
        make_llama(), llama_pool, AdaptiveMergeConfig(granularity=granularity)
    )
    assert len(model.coefficient_groups) == count
    sizes = {g.w.numel() for g in model.coefficient_groups.values()}
    assert sizes == ({2 + 4 + 3} if granularity == "per_dimension" else {3})
    # sharing is real: one parameter per group, whatever the number of modules using it
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == count * sizes.pop()


def test_inits_activations_and_presets(llama_pool):
    adam = get_adaptive_merge_model(make_llama(), llama_pool, presets.adamerging().config)
    for c in adam.coefficients().values():
        torch.testing.assert_close(c, torch.full((3,), 3**-0.5))
    pi = presets.pi_tuning()
    assert pi.lr == 1e-4
    model = get_adaptive_merge_model(make_llama(), llama_pool, pi.config)
    for c in model.coefficients().values():  # softmax of equal logits, a=1, b=0
        torch.testing.assert_close(c, torch.full((3,), 1 / 3))
    layer = model.base_model.get_submodule("model.layers.0.mlp.up_proj")
    assert layer.lora_A.requires_grad and layer.lora_B.requires_grad
    assert torch.equal(
        layer.lora_B[:, :2], torch.zeros(layer.out_features, 2)
    )  # target re-init: B = 0
    assert layer.lora_A[:2].std().item() == pytest.approx(0.01, rel=0.5)
    # the first expert of the pool is not modified in place
    assert llama_pool[0].factors["model.layers.0.mlp.up_proj"][1].abs().sum() > 0
    with pytest.warns(UserWarning, match="identity"):
        assert AdaptiveMergeConfig(activation="linear").activation == "identity"
    with pytest.raises(ValueError, match="granularity"):
        AdaptiveMergeConfig(granularity="per_head")
    with pytest.raises(ValueError, match="include_activation_coeff"):
        AdaptiveMergeConfig(activation="leaky_relu", include_activation_coeff=True)


def test_mlp_pool_with_partial_modules_and_gradients():
    base = make_mlp()
    g = torch.Generator().manual_seed(0)
    e0 = LoraExpert(
        "e0", {"0": (torch.randn(2, 8, generator=g), torch.randn(12, 2, generator=g))}, 0.5
    )
    e1 = LoraExpert(
        "e1",
        {
            "0": (torch.randn(3, 8, generator=g), torch.randn(12, 3, generator=g)),
            "2": (torch.randn(3, 12, generator=g), torch.randn(4, 3, generator=g)),
        },
        2.0,
    )
    pool = LoraPool.from_experts([e0, e1], base)
    model = get_adaptive_merge_model(
        make_mlp(), pool, AdaptiveMergeConfig(activation="identity", init="ones")
    )
    x = torch.randn(5, 8, generator=g)
    explicit = make_mlp()
    with torch.no_grad():
        explicit[0].weight += e0.delta("0") + e1.delta("0")
        explicit[2].weight += e1.delta("2")
    torch.testing.assert_close(model(x), explicit(x), atol=1e-5, rtol=1e-5)
    model(x).sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert len(grads) == 2 and all(gr is not None and gr.abs().sum() > 0 for gr in grads)
    with pytest.raises(ValueError, match="empty pool"):
        get_adaptive_merge_model(make_mlp(), pool.subset([]))


def test_explicit_triton_request_never_falls_back(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    if torch.cuda.is_available():
        pytest.skip("a GPU runs the kernel")
    with pytest.raises(RuntimeError, match="triton"):
        lora_cat_forward(
            torch.ones(2, 3), torch.ones(4, 3), torch.ones(4), torch.ones(5, 4), backend="triton"
        )


def test_state_dict_round_trip_and_bf16_base(llama_pool, ids):
    model = get_adaptive_merge_model(make_llama(), llama_pool, presets.adamerging().config)
    _set_logits(model, -0.4)
    fresh = get_adaptive_merge_model(make_llama(), llama_pool, presets.adamerging().config)
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.equal(fresh(input_ids=ids).logits, model(input_ids=ids).logits)
    half = get_adaptive_merge_model(
        make_llama().to(torch.bfloat16), llama_pool, presets.ours().config
    )
    with torch.no_grad():
        logits = half(input_ids=ids).logits
        assert logits.dtype == torch.bfloat16
        assert torch.equal(logits, make_llama().to(torch.bfloat16)(input_ids=ids).logits)
