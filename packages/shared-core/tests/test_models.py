"""Tests for shared_core.models: tiny Llama, bidirectional attention, cached training."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from shared_core.data import CACHE_ENV_VAR, cache_dir
from shared_core.models import (
    causal_lm_loss,
    is_bidirectional,
    load_model,
    masked_diffusion_loss,
    set_bidirectional,
    tiny_llama,
    tiny_llama_config,
    train_tiny_lm,
)

pytest.importorskip("transformers")

VOCAB = 40
# Small enough for a 40-60 step run in about a second on one thread.
TINY: dict[str, Any] = {"hidden_size": 32, "num_layers": 2, "num_heads": 4}


@pytest.fixture(autouse=True)
def one_thread_and_isolated_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _ids(seed: int = 0, length: int = 12) -> torch.Tensor:
    return torch.randint(VOCAB, (2, length), generator=torch.Generator().manual_seed(seed))


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def _change_at(ids: torch.Tensor, position: int) -> torch.Tensor:
    changed = ids.clone()
    changed[:, position] = (changed[:, position] + 1) % VOCAB
    return changed


# --- config and construction -------------------------------------------------------------


def test_tiny_llama_config_fields_and_overrides() -> None:
    config = tiny_llama_config(VOCAB, hidden_size=48, num_heads=6, rope_theta=500.0)
    assert (config.vocab_size, config.hidden_size, config.num_attention_heads) == (VOCAB, 48, 6)
    assert config.num_key_value_heads == 6 and config.intermediate_size == 4 * 48
    assert config.num_hidden_layers == 2 and config.max_position_embeddings == 256
    with pytest.raises(ValueError, match=r"hidden_size=50.*num_heads=4"):
        tiny_llama_config(VOCAB, hidden_size=50)


def test_tiny_llama_is_seeded_and_leaves_global_rng_alone() -> None:
    state = torch.get_rng_state()
    a = tiny_llama(vocab_size=VOCAB, **TINY, seed=0)
    b = tiny_llama(vocab_size=VOCAB, **TINY, seed=0)
    c = tiny_llama(vocab_size=VOCAB, **TINY, seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    pairs_ab = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs_ab)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_tiny_llama_argument_errors() -> None:
    with pytest.raises(TypeError, match="vocab_size"):
        tiny_llama()
    with pytest.raises(TypeError, match="not both"):
        tiny_llama(tiny_llama_config(VOCAB), hidden_size=32)


# --- attention masks ---------------------------------------------------------------------


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_causal_model_ignores_later_tokens(attn: str) -> None:
    model = tiny_llama(vocab_size=VOCAB, **TINY, attn_implementation=attn).eval()
    ids = _ids()
    before, after = _logits(model, ids), _logits(model, _change_at(ids, 8))
    assert (before[:, :8] - after[:, :8]).abs().max() <= 1e-6
    assert (before[:, 8:] - after[:, 8:]).abs().max() > 1e-3  # the change is visible later on
    assert not is_bidirectional(model)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_bidirectional_model_sees_later_tokens(attn: str) -> None:
    model = tiny_llama(vocab_size=VOCAB, **TINY, bidirectional=True, attn_implementation=attn)
    model.eval()
    ids = _ids()
    before, after = _logits(model, ids), _logits(model, _change_at(ids, 8))
    # Every earlier position must react to the later change.
    per_position = (before[:, :8] - after[:, :8]).abs().amax(dim=(0, 2))
    assert (per_position > 1e-4).all(), per_position
    assert is_bidirectional(model)


def test_set_bidirectional_switches_back_to_causal() -> None:
    model = set_bidirectional(tiny_llama(vocab_size=VOCAB, **TINY, bidirectional=True), False)
    ids = _ids()
    unchanged = _logits(model, ids)[:, :5] - _logits(model, _change_at(ids, 5))[:, :5]
    assert unchanged.abs().max() <= 1e-6
    with pytest.raises(ValueError, match="Linear"):
        set_bidirectional(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_save_load_round_trip(tmp_path: Path, bidirectional: bool) -> None:
    model = tiny_llama(vocab_size=VOCAB, **TINY, bidirectional=bidirectional, seed=3).eval()
    model.save_pretrained(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["is_causal"] is (not bidirectional)

    loaded = load_model(tmp_path / "m").eval()
    ids = _ids(seed=1)
    assert torch.equal(_logits(loaded, ids), _logits(model, ids))
    assert is_bidirectional(loaded) is bidirectional
    earlier_change = (_logits(loaded, ids) - _logits(loaded, _change_at(ids, 9)))[:, :9]
    assert bool(earlier_change.abs().max() > 1e-4) is bidirectional


# --- losses ------------------------------------------------------------------------------


def _uniform_model(vocab: int) -> Callable[..., SimpleNamespace]:
    def forward(input_ids: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, vocab))

    return forward


def test_causal_loss_of_uniform_model_is_log_vocab() -> None:
    loss = causal_lm_loss(_uniform_model(VOCAB), _ids())
    assert loss.item() == pytest.approx(math.log(VOCAB), rel=1e-6)


def test_masked_diffusion_loss_weighting() -> None:
    # With uniform logits every masked token costs log V and E[1{masked} / t] = 1 per token,
    # so the 1/t-weighted loss averages log V; without the weight it would be ~log V / 2.
    ids = torch.randint(VOCAB, (256, 64), generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(0)
    values = [
        masked_diffusion_loss(_uniform_model(VOCAB + 1), ids, VOCAB, gen).item() for _ in range(20)
    ]
    assert sum(values) / len(values) == pytest.approx(math.log(VOCAB + 1), rel=0.1)


def test_masked_diffusion_loss_ignores_unmasked_positions() -> None:
    ids = _ids(length=32)

    def right_on_masked_wrong_elsewhere(input_ids: torch.Tensor) -> SimpleNamespace:
        # Confidently right where the input is masked, confidently wrong where it is visible:
        # the loss is ~0 only if visible positions are left out of it.
        masked = input_ids == VOCAB
        guess = torch.where(masked, ids, (ids + 1) % VOCAB)
        return SimpleNamespace(logits=torch.nn.functional.one_hot(guess, VOCAB + 1).float() * 50)

    loss = masked_diffusion_loss(right_on_masked_wrong_elsewhere, ids, VOCAB, torch.Generator())
    assert loss.item() < 1e-6


# --- training recipe ---------------------------------------------------------------------


def constant_task(generator: torch.Generator, batch_size: int, seq_len: int) -> torch.Tensor:
    """Each sequence repeats one random token: any visible token reveals the masked ones."""
    tokens = torch.randint(VOCAB, (batch_size, 1), generator=generator)
    return tokens.expand(batch_size, seq_len).clone()


STDLIB_RUN: dict[str, Any] = {
    "steps": 40,
    "batch_size": 8,
    "seq_len": 32,
    "vocab_size": 300,
    "corpus_bytes": 40_000,
    "lr": 1e-2,
    "config_overrides": TINY,
}


def test_train_stdlib_loss_falls_and_second_call_is_cached() -> None:
    first = train_tiny_lm("stdlib", **STDLIB_RUN)
    assert not first.from_cache and len(first.losses) == 40
    assert sum(first.losses[-5:]) / 5 < sum(first.losses[:5]) / 5 - 0.5
    assert first.path is not None and first.path.parent == cache_dir("tiny-lm")
    # Only the finished entry is left in the cache: no temporary folders.
    assert [p.name for p in cache_dir("tiny-lm").iterdir()] == [first.path.name]

    second = train_tiny_lm("stdlib", **STDLIB_RUN)
    assert second.from_cache and second.path == first.path
    assert second.losses == first.losses
    pairs = zip(first.model.state_dict().items(), second.model.state_dict().items(), strict=True)
    for (name_a, a), (name_b, b) in pairs:
        assert name_a == name_b and torch.equal(a, b), name_a
    assert first.tokenizer is not None and second.tokenizer is not None
    text = "for i in range(3):\n    print(i)\n"
    assert second.tokenizer.encode(text) == first.tokenizer.encode(text)
    assert second.mask_token_id == first.tokenizer.mask_token_id

    different_seed = train_tiny_lm("stdlib", **{**STDLIB_RUN, "seed": 1})
    assert not different_seed.from_cache and different_seed.path != first.path


def test_train_masked_diffusion_on_generated_task_is_deterministic() -> None:
    kwargs: dict[str, Any] = {
        "objective": "masked_diffusion",
        "vocab_size": VOCAB,
        "steps": 60,
        "batch_size": 16,
        "seq_len": 16,
        "lr": 1e-2,
        "config_overrides": TINY,
    }
    first = train_tiny_lm(constant_task, **kwargs, cache=False)
    again = train_tiny_lm(constant_task, **kwargs, cache=False)
    assert first.path is None and first.losses == again.losses
    assert sum(first.losses[-10:]) / 10 < 0.5 * (sum(first.losses[:10]) / 10)
    assert is_bidirectional(first.model)
    assert first.mask_token_id == VOCAB and first.model.config.vocab_size == VOCAB + 1


def test_train_tiny_lm_argument_errors() -> None:
    with pytest.raises(ValueError, match="bidirectional model cannot use the causal"):
        train_tiny_lm(constant_task, vocab_size=VOCAB, bidirectional=True)
    with pytest.raises(ValueError, match="task_name"):
        train_tiny_lm(lambda g, b, n: constant_task(g, b, n), vocab_size=VOCAB)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tiny_lm(constant_task)
    with pytest.raises(ValueError, match="'wikitext'"):
        train_tiny_lm("wikitext")
    with pytest.raises(ValueError, match="objective"):
        train_tiny_lm(objective="mlm")  # type: ignore[arg-type]


def test_train_tiny_lm_checks_generated_batches() -> None:
    def out_of_range(generator: torch.Generator, batch_size: int, seq_len: int) -> torch.Tensor:
        return torch.full((batch_size, seq_len), VOCAB)

    with pytest.raises(ValueError, match=r"outside \[0, 40\)"):
        train_tiny_lm(out_of_range, vocab_size=VOCAB, steps=1, cache=False)
