"""Generated tasks and the LLaDA SFT loss."""

import pytest
import torch
from dllm_cache import TinyLLaDA
from dllm_cache.tasks import (
    EOS,
    MASK,
    OPS,
    VOCAB_SIZE,
    TaskSpec,
    digits_right,
    exact_match,
    make_batch,
    pick_valid,
    solved,
)
from dllm_cache.train import EPS, sft_loss, train_tiny_llada


def test_tasks_answer_is_the_operation_on_the_query():
    spec = TaskSpec(digits=5, response_length=8)
    prompts, answers = make_batch(spec, 64, 3, torch.Generator().manual_seed(0))
    assert prompts.shape == (64, spec.prompt_length(3)) and answers.shape == (64, 8)
    assert spec.shots_for(spec.prompt_length(3)) == 3
    query = prompts[:, -6:-1]
    reverse = prompts[:, 1] == OPS["reverse"]
    assert torch.equal(answers[reverse, :5], query[reverse].flip(-1))
    assert torch.equal(answers[~reverse, :5], query[~reverse])
    assert (answers[:, 5:] == EOS).all()
    assert exact_match(answers, answers, 5).all()
    assert 0 < reverse.sum() < 64


class Spy(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.vocab, self.inputs = vocab, []

    def forward(self, ids, logits_to_keep=0):
        self.inputs.append(ids)
        logits = torch.zeros(*ids[:, -logits_to_keep:].shape, self.vocab, requires_grad=True)
        return type("Out", (), {"logits": logits})()


def test_sft_loss_masks_only_the_answer_and_weights_by_inverse_probability():
    spec = TaskSpec(digits=4, response_length=6)
    prompts, answers = make_batch(spec, 4000, 1, torch.Generator().manual_seed(0))
    spy = Spy(vocab=20)
    loss = sft_loss(spy, prompts, answers, MASK, torch.Generator().manual_seed(1))
    seen = spy.inputs[0]
    assert torch.equal(seen[:, : prompts.shape[1]], prompts)  # the prompt is never masked
    masked = seen[:, prompts.shape[1] :] == MASK
    assert 0.45 < masked.float().mean() < 0.55  # E[p] = (1 - ε)/2 + ε
    # uniform logits: CE = log V per masked token, weighted by 1/p, averaged over B·R
    g = torch.Generator().manual_seed(1)
    t = torch.rand(4000, 1, generator=g)
    p = (1 - EPS) * t + EPS
    expected = (masked.float() / p).sum() * torch.log(torch.tensor(20.0)) / masked.numel()
    torch.testing.assert_close(loss, expected)


def test_training_runs_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("ADAPTIVE_METHODS_CACHE", str(tmp_path))
    model, losses = train_tiny_llada(3, size="toy", batch_size=2, max_shots=2)
    assert isinstance(model, TinyLLaDA) and len(losses) == 3
    again, losses_again = train_tiny_llada(3, size="toy", batch_size=2, max_shots=2)
    assert losses_again == losses
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)


def test_train_cli_builds_the_longer_response_recipe(tmp_path, monkeypatch):
    """``--response-length 32`` trains the issue's R = 32 variant of the reproduction's task."""
    import json

    from dllm_cache.train import main

    monkeypatch.setenv("ADAPTIVE_METHODS_CACHE", str(tmp_path))
    assert main(["--response-length", "32", "--steps", "1", "--size", "toy", "--from-scratch"]) == 0
    (losses,) = tmp_path.rglob("losses.json")
    recipe = json.loads(losses.read_text())["recipe"]
    assert recipe["response_length"] == 32 and recipe["ops"] == ["pick"] and "init" not in recipe
    assert recipe["lr"] == 3e-3 and recipe["batch_size"] == 64
    with pytest.raises(ValueError, match="at least the 4 answer digits, got 3"):
        main(["--response-length", "3", "--steps", "1", "--size", "toy"])


def test_train_cli_rejects_zero_steps_instead_of_training_the_default(tmp_path, monkeypatch):
    import dllm_cache.train as train

    def no_fit(*args, **kwargs):
        raise AssertionError("trained although --steps 0")

    monkeypatch.setenv("ADAPTIVE_METHODS_CACHE", str(tmp_path))
    monkeypatch.setattr(train, "_fit", no_fit)
    for extra in ([], ["--from-scratch"]):
        with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
            train.main(["--steps", "0", "--size", "toy", *extra])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [(dict(size="small", init=dict(steps=2, size="toy")), ValueError,
      "size 'small' disagrees with the init recipe's size 'toy'"),
     (dict(init=[1, 2]), ValueError, r"init must be a mapping .* got list \[1, 2\]"),
     (dict(size="tiny"), ValueError, r"size must be one of \['small', 'toy'\], got 'tiny'")],
)  # fmt: skip
def test_train_rejects_bad_size_and_init_before_training(
    tmp_path, monkeypatch, kwargs, error, match
):
    import dllm_cache.train as train

    monkeypatch.setenv("ADAPTIVE_METHODS_CACHE", str(tmp_path))
    monkeypatch.setattr(train, "_fit", lambda *a, **k: pytest.fail("trained a bad recipe"))
    with pytest.raises(error, match=match):
        train.train_tiny_llada(1, **kwargs)
    with pytest.raises(error, match=match):
        train.checkpoint_name(steps=1, **kwargs)
    with pytest.raises(ValueError, match="got 'tiny'"):
        train.model_config("tiny")
    with pytest.raises(TypeError, match=r"unknown train_tiny_llada arguments \['stepz'\]"):
        train.checkpoint_name(stepz=5, steps=1)
    # a size that agrees with the init recipe's is the same recipe as leaving it out
    init = dict(steps=2, size="toy")
    assert train.checkpoint_name(steps=1, size="toy", init=init) == train.checkpoint_name(
        steps=1, init=init
    )


def test_fine_tuning_starts_from_the_init_recipe_and_names_it(tmp_path, monkeypatch):
    """``init=`` fine-tunes the model of another recipe (trained first, then cached), and the
    fine-tuned checkpoint's name depends on that recipe."""
    from dllm_cache.train import checkpoint_name

    monkeypatch.setenv("ADAPTIVE_METHODS_CACHE", str(tmp_path))
    base = dict(steps=2, size="toy", batch_size=2, max_shots=2, spec=TaskSpec(ops=("pick",)))
    start, _ = train_tiny_llada(**base)
    long = TaskSpec(ops=("pick",), response_length=12)
    tuned, losses = train_tiny_llada(1, batch_size=2, max_shots=2, lr=0.0, spec=long, init=base)
    assert len(losses) == 1
    for a, b in zip(start.parameters(), tuned.parameters(), strict=True):
        assert torch.equal(a, b)  # lr 0: the starting weights are the init recipe's
    other = dict(base, seed=1)
    assert checkpoint_name(steps=1, batch_size=2, max_shots=2, lr=0.0, spec=long, init=base) != (
        checkpoint_name(steps=1, batch_size=2, max_shots=2, lr=0.0, spec=long, init=other)
    )
    names = {p.parent.name for p in tmp_path.rglob("losses.json")}
    assert names == {checkpoint_name(**base),
                     checkpoint_name(steps=1, batch_size=2, max_shots=2, lr=0.0, spec=long, init=base)}  # fmt: skip


def test_pick_task_layout_and_scores():
    """``a ; b ->`` queries, the answer is one of the two strings; a mix of both scores less."""
    spec = TaskSpec(ops=("pick",))
    prompts, answers = make_batch(spec, 200, 2, torch.Generator().manual_seed(0))
    assert prompts.shape == (200, spec.prompt_length(2)) and spec.shots_for(prompts.shape[1]) == 2
    a, b = prompts[:, -10:-6], prompts[:, -5:-1]
    assert ((answers[:, :4] == a).all(1) | (answers[:, :4] == b).all(1)).all()
    assert 0.35 < (answers[:, :4] == a).all(1).float().mean() < 0.65  # a coin flip
    assert (answers[:, 4:] == EOS).all() and (prompts[:, 1] == OPS["pick"]).all()
    assert solved(spec, answers, prompts, answers).all()
    other = torch.where((answers[:, :4] == a).all(1, keepdim=True), b, a)
    assert solved(spec, torch.cat([other, answers[:, 4:]], 1), prompts, answers).all()
    mixed = torch.cat([a[:, :2], b[:, 2:], answers[:, 4:]], 1)
    differ = (a[:, :2] != b[:, :2]).any(1) & (a[:, 2:] != b[:, 2:]).any(1)
    assert not pick_valid(mixed, prompts, 4)[differ].any()
    assert (digits_right(spec, mixed, prompts, answers)[differ] < 1).all()
    with pytest.raises(ValueError, match="pick"):
        make_batch(TaskSpec(ops=("pick", "copy")), 2, 1, torch.Generator())


def test_packaged_checkpoint_solves_the_task_and_the_cache_keeps_it():
    """The shipped reproduction model (R = 32) solves the pick task and needs refinement for it
    (one step mixes the two strings); the cache at Kp = Kr = 1 leaves its output unchanged."""
    from dllm_cache import DLLMCacheConfig, apply_dllm_cache, generate
    from dllm_cache.train import (
        PACKAGED,
        REPRODUCTION_RECIPE,
        REPRODUCTION_SPEC,
        REPRODUCTION_STEPS,
        checkpoint_name,
    )

    spec = REPRODUCTION_SPEC
    name = checkpoint_name(steps=REPRODUCTION_STEPS, spec=spec, **REPRODUCTION_RECIPE)
    assert (PACKAGED / name / "losses.json").exists(), (
        "the reproduction's checkpoint is not shipped"
    )
    assert sorted(p.name for p in PACKAGED.glob("tiny-llada-*")) == [name]
    model = TinyLLaDA.from_pretrained(PACKAGED / name).eval()
    assert model.config.vocab_size == VOCAB_SIZE
    prompts, answers = make_batch(spec, 32, 3, torch.Generator().manual_seed(5))
    R = spec.response_length
    assert R == 32
    kw = dict(mask_id=MASK, gen_length=R, block_length=R)
    plain = generate(model, prompts, **kw, steps=R)
    one_step = generate(model, prompts, **kw, steps=1)
    with apply_dllm_cache(model, DLLMCacheConfig(1, 1, 0.25)) as handle:
        cached = generate(model, prompts, **kw, steps=R, cache=handle.cache)
    ok = solved(spec, plain, prompts, answers).float().mean()
    # the bar separates the shipped model (1.000 here) from its un-fine-tuned R = 8 stage-1 start
    # (0.844 on this slice at 32 steps)
    assert ok >= 0.97 and ok > solved(spec, one_step, prompts, answers).float().mean() + 0.5
    assert torch.equal(cached, plain)
