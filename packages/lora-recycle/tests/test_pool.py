import json
import math
import shutil

import pytest
import torch
from lora_recycle import (
    AdapterError,
    IncompatibleAdapterError,
    LoraExpert,
    LoraPool,
    NonFiniteAdapterError,
    UnsupportedAdapterError,
)
from lora_testmodels import ADAPTERS, LLAMA_MODULES, make_llama
from safetensors.torch import load_file, save_file


def test_loads_peft_folders_with_scaling_folded_once(adapter_dirs):
    pool = LoraPool.from_pretrained(adapter_dirs, make_llama())
    assert len(pool) == 3 and pool.filter_report()["kept"] == adapter_dirs
    for expert, (rank, alpha, rslora) in zip(pool, ADAPTERS, strict=False):
        expected = alpha / (math.sqrt(rank) if rslora else rank)
        assert expert.scaling == pytest.approx(expected)
        assert expert.rank == rank
        assert len(expert.factors) == 2 * len(LLAMA_MODULES)
    # factors are the saved tensors, byte for byte
    saved = load_file(f"{adapter_dirs[0]}/adapter_model.safetensors")
    a, b = pool[0].factors["model.layers.1.mlp.down_proj"]
    assert torch.equal(a, saved["base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"])
    assert torch.equal(b, saved["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"])
    # scaled factors carry s once: (√s B)(√s A) = s B A
    a_s, b_s = pool[1].scaled_factors("model.layers.0.self_attn.q_proj")
    a, b = pool[1].factors["model.layers.0.self_attn.q_proj"]
    torch.testing.assert_close(b_s @ a_s, pool[1].scaling * b @ a)


def _copy_with(src, dst, config_update=None, tensors=None):
    shutil.copytree(src, dst)
    if config_update:
        config = json.loads((dst / "adapter_config.json").read_text())
        config.update(config_update)
        (dst / "adapter_config.json").write_text(json.dumps(config))
    if tensors is not None:
        state = load_file(str(dst / "adapter_model.safetensors"))
        save_file(tensors(state), str(dst / "adapter_model.safetensors"))
    return str(dst)


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        ({"use_dora": True}, "dora"),
        ({"rank_pattern": {"q_proj": 8}}, "rank_pattern"),
        ({"alpha_pattern": {"q_proj": 8}}, "alpha_pattern"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"bias": "lora_only"}, "bias"),
        ({"task_type": "SEQ_CLS"}, "task_type"),
        ({"init_lora_weights": "loftq"}, "special_init"),
    ],
)
def test_config_filters_reject_with_reason(adapter_dirs, tmp_path, update, reason):
    bad = _copy_with(adapter_dirs[0], tmp_path / "bad", update)
    with pytest.raises(UnsupportedAdapterError, match="bad") as info:
        LoraPool.from_pretrained([bad], make_llama())
    assert info.value.reason == reason
    pool = LoraPool.from_pretrained([adapter_dirs[0], bad], make_llama(), on_incompatible="skip")
    assert pool.ids == [adapter_dirs[0]] and pool.filter_report()[reason] == [bad]


def test_adapter_for_another_base_names_both_shapes(adapter_dirs):
    from shared_core.models import tiny_llama

    other = tiny_llama(
        vocab_size=24, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=24
    )
    with pytest.raises(
        IncompatibleAdapterError,
        match=r"expected \(out, in\) = \(32, \d+\), got B·A of shape \(16, \d+\)",
    ):
        LoraPool.from_pretrained(adapter_dirs[:1], other)
    pool = LoraPool.from_pretrained(adapter_dirs, other, on_incompatible="skip")
    assert len(pool) == 0 and pool.filter_report()["incompatible"] == adapter_dirs


def test_lone_factor_nan_and_missing_weights(adapter_dirs, tmp_path):
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    lone = _copy_with(
        adapter_dirs[0],
        tmp_path / "lone",
        tensors=lambda s: {k: v for k, v in s.items() if k != key},
    )
    with pytest.raises(AdapterError, match="only lora_A"):
        LoraPool.from_pretrained([lone], make_llama())

    def poison(state):
        state[key] = state[key].clone()
        state[key][0, 0] = float("nan")
        return state

    nan = _copy_with(adapter_dirs[0], tmp_path / "nan", tensors=poison)
    with pytest.raises(NonFiniteAdapterError, match=f"nan.*{key}"):
        LoraPool.from_pretrained([nan], make_llama())
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "adapter_config.json").write_text("{}")
    pool = LoraPool.from_pretrained([str(empty)], make_llama(), on_incompatible="skip")
    assert pool.filter_report()["missing_weights"] == [str(empty)]


def test_duplicates_empty_and_lm_head(adapter_dirs, tmp_path):
    with pytest.warns(UserWarning, match="duplicate"):
        pool = LoraPool.from_pretrained([adapter_dirs[0], adapter_dirs[0] + "/"], make_llama())
    assert len(pool) == 1 and pool.filter_report()["duplicate"] == [adapter_dirs[0] + "/"]
    with pytest.raises(ValueError, match="empty pool"):
        LoraPool.from_pretrained([], make_llama())
    with pytest.raises(ValueError, match="on_incompatible"):
        LoraPool.from_pretrained(adapter_dirs, make_llama(), on_incompatible="ignore")

    def add_head(state):
        state["base_model.model.lm_head.lora_A.weight"] = torch.ones(2, 16)
        state["base_model.model.lm_head.lora_B.weight"] = torch.ones(24, 2)
        return state

    head = _copy_with(adapter_dirs[0], tmp_path / "head", tensors=add_head)
    pool = LoraPool.from_pretrained([head], make_llama())
    assert "lm_head" not in pool[0].factors and pool.filter_report()["lm_head_dropped"] == [head]


def test_nan_alpha_and_non_finite_in_memory_experts():
    from lora_recycle.adapters import scaling_from_config

    for alpha in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="lora_alpha must be a finite number > 0"):
            scaling_from_config({"lora_alpha": alpha}, 4)
    base = make_llama()
    module = "model.layers.0.self_attn.q_proj"
    linear = base.get_submodule(module)
    a, b = torch.randn(2, linear.in_features), torch.randn(linear.out_features, 2)
    bad_b = b.clone()
    bad_b[0, 0] = float("inf")
    with pytest.raises(NonFiniteAdapterError, match=r"bad.*q_proj\.lora_B"):
        LoraPool.from_experts([LoraExpert("bad", {module: (a, bad_b)}, 1.0)], base)
    with pytest.raises(NonFiniteAdapterError, match="scaling"):
        LoraPool.from_experts([LoraExpert("bad", {module: (a, b)}, float("nan"))], base)
