"""Spec §6 oracles: identity configurations, static input, selection, accounting, batching."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from dllm_cache import (
    DLLMCacheConfig,
    apply_dllm_cache,
    case_rows,
    generate,
    generation_flops,
    schedule,
)

MASK = 3
GEN = dict(mask_id=MASK, gen_length=16, block_length=8, steps=16)


@pytest.fixture
def masked_input(prompts):
    def make(batch=2, P=24, R=16, seed=0):
        return torch.cat([prompts(batch, P, seed), torch.full((batch, R), MASK)], 1)

    return make


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("rho", [0.0, 0.25, 1.0])
def test_interval_one_is_bit_identical_to_no_cache(model, rho, first, prompts, masked_input):
    x = prompts(2, 24)
    plain = generate(model, x, **GEN)
    with apply_dllm_cache(model, DLLMCacheConfig(1, 1, rho, refresh_first_layer=first)) as handle:
        cached = generate(model, x, **GEN, cache=handle.cache)
        assert handle.cache.stats.flops == handle.cache.stats.full_flops
        # the logits of a whole denoising run, call by call
        xs = masked_input()
        handle.cache.reset(24)
        for _ in range(3):
            torch.testing.assert_close(
                model(xs).logits, _plain_logits(model, handle, xs), rtol=0, atol=0
            )
            xs[:, 24 + _] = 7
    assert torch.equal(plain, cached)


def _snapshot(layer_cache):
    """A copy of a full_block LayerCache (cached_block writes rows of its input in place)."""
    return dataclasses.replace(
        layer_cache, **{n: getattr(layer_cache, n).clone() for n in ("k", "v", "a", "f")}
    )


def _plain_logits(model, handle, x):
    prompt_length = handle.cache.prompt_length
    handle.cache.prompt_length = None  # pass-through for one call
    try:
        return model(x).logits
    finally:
        handle.cache.prompt_length = prompt_length


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("Kr", [1, 3, 100])
def test_prompt_interval_one_full_ratio_matches_to_round_off(model, Kr, first, masked_input):
    x = masked_input()
    with apply_dllm_cache(model, DLLMCacheConfig(1, Kr, 1.0, refresh_first_layer=first)) as handle:
        handle.cache.reset(24)
        for t in range(5):
            x[:, 24 + 2 * t] = 5 + t  # the input changes every step
            expected = _plain_logits(model, handle, x)
            torch.testing.assert_close(model(x).logits, expected, rtol=0, atol=1e-5)


SETTINGS = [
    (100, 7, 0.25, "value"),
    (100, 7, 0.0, "value"),
    (1, 100, 0.25, "value"),  # case C
    (100, 1, 0.25, "value"),  # case B
    (100, 100, 0.5, "key"),
    (100, 100, 0.5, "attn_out"),
    (100, 100, 0.5, "random"),
]


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize(("Kp", "Kr", "rho", "sel"), SETTINGS)
def test_static_input_gives_the_full_forward(model, Kp, Kr, rho, sel, first, masked_input):
    x = masked_input()
    config = DLLMCacheConfig(Kp, Kr, rho, selection=sel, refresh_first_layer=first)
    with apply_dllm_cache(model, config) as handle:
        handle.cache.reset(24)
        expected = _plain_logits(model, handle, x)
        for _ in range(3):
            torch.testing.assert_close(model(x).logits, expected, rtol=0, atol=1e-5)
        assert handle.cache.stats.flops < handle.cache.stats.full_flops


def test_cache_actually_reuses_stale_features(model, masked_input):
    # the cached path must not be the full forward in disguise: after the input changes, a
    # step without refresh and without adaptive update differs from the full forward.
    x = masked_input()
    with apply_dllm_cache(model, DLLMCacheConfig(100, 100, 0.0)) as handle:
        handle.cache.reset(24)
        model(x)
        x[:, 24:30] = 9
        assert not torch.allclose(model(x).logits, _plain_logits(model, handle, x), atol=1e-3)


@pytest.mark.parametrize("rho", [0.25, 0.5, 0.3])
def test_selection_is_argmin_k_of_value_cosine_and_only_those_rows_change(
    rho, make_model, masked_input
):
    model = make_model(n_layers=3)
    P, R = 24, 16
    x = masked_input(P=P, R=R)
    k = math.floor(R * rho)
    with apply_dllm_cache(model, DLLMCacheConfig(100, 100, rho)) as handle:
        c = handle.cache
        c.reset(P)
        model(x)
        before = {layer: c.layer_cache(layer) for layer in (1, 2)}  # snapshots by default
        x[:, P : P + 5] = torch.tensor([5, 6, 7, 8, 9])
        model(x)
        for layer in (1, 2):
            old, new = before[layer], c.layer_cache(layer)
            assert new.selected.shape == (2, k)
            sim = F.cosine_similarity(new.v[:, P:].double(), old.v[:, P:].double(), dim=-1)
            naive = torch.sort(sim, dim=-1, stable=True).indices[:, :k]
            assert torch.equal(new.selected.sort(-1).values, naive.sort(-1).values)
            for b in range(2):
                chosen = torch.zeros(R, dtype=torch.bool)
                chosen[new.selected[b]] = True
                # non-selected rows keep their cached attention/FFN outputs bit for bit
                assert torch.equal(new.a[b, P:][~chosen], old.a[b, P:][~chosen])
                assert torch.equal(new.f[b, P:][~chosen], old.f[b, P:][~chosen])
                assert not torch.equal(new.f[b, P:][chosen], old.f[b, P:][chosen])
                # V is refreshed for every response row, K only for the selected ones
                assert torch.equal(new.k[b, P:][~chosen], old.k[b, P:][~chosen])
        assert {r.rows.ffn for r in c.stats.records if r.step == 2 and r.layer > 0} == {k}


@pytest.mark.parametrize("sel", ["value", "key", "attn_out", "random"])
@pytest.mark.parametrize(
    ("Kp", "Kr", "rho", "first"), [(5, 3, 0.25, True), (4, 2, 0.5, False), (7, 7, 0.0, True)]
)
def test_counts_match_closed_form_schedule_and_flops_model(
    Kp, Kr, rho, first, sel, make_model, prompts
):
    model = make_model()
    config = DLLMCacheConfig(Kp, Kr, rho, selection=sel, refresh_first_layer=first)
    x = prompts(2, 24)
    with apply_dllm_cache(model, config) as handle:
        generate(model, x, **GEN, cache=handle.cache)
        stats = handle.cache.stats
    L = model.config.n_layers
    assert stats.cases() == schedule(16, L, config)
    for r in stats.records:
        assert r.rows == case_rows(r.case, 24, 16, config)
    dims = handle.adapter.parts(model, handle.adapter.blocks(model)[0]).dims
    assert stats.flops == 2 * generation_flops(dims, L, 24, 16, 16, config)
    assert stats.full_flops == 2 * generation_flops(dims, L, 24, 16, 16, None)


@pytest.mark.parametrize("config", [None, DLLMCacheConfig(6, 3, 0.25)])
def test_left_padded_batch_equals_rows_one_by_one(config, make_model, prompts):
    model = make_model(seed=1)
    lengths = [20, 13, 24]
    rows = [prompts(1, n, seed=i) for i, n in enumerate(lengths)]
    P = max(lengths)
    batch = torch.zeros(len(rows), P, dtype=torch.long)
    mask = torch.zeros(len(rows), P, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, P - r.shape[1] :] = r
        mask[i, P - r.shape[1] :] = 1

    def run(ids, attention_mask=None):
        if config is None:
            return generate(model, ids, attention_mask, **GEN)
        with apply_dllm_cache(model, config) as handle:
            return generate(model, ids, attention_mask, **GEN, cache=handle.cache)

    together = run(batch, mask)
    for i, r in enumerate(rows):
        assert torch.equal(together[i], run(r)[0]), f"row {i}"
    # the mask matters: without it the padded rows come out differently
    assert not torch.equal(run(batch), together)


def _manual_adaptive_step(parts, h, cos, sin, old, P, k, refresh_prompt, refresh_response=False):
    """Spec §2.2 cases B/C/D (V-cosine selection in C/D), re-derived row by row with explicit softmax.

    Independent of ``cached_block``: per-row loops, per-position rotary tables and
    ``softmax(q·K/sqrt(hd)) V`` written out (multi-head attention without key/value groups).
    """
    B, T, _ = h.shape
    H, hd = parts.dims.n_heads, parts.dims.head_dim

    def rope(x, pos):  # x: (H*hd,) one row at position pos
        x = x.view(H, hd)
        rot = torch.cat([-x[:, hd // 2 :], x[:, : hd // 2]], -1)
        return (x * cos[0, pos] + rot * sin[0, pos]).reshape(-1)

    def attend_row(q, K, V):  # q (H*hd,), K/V (T, H*hd)
        qh, Kh, Vh = q.view(H, hd), K.view(T, H, hd), V.view(T, H, hd)
        w = torch.softmax(torch.einsum("hd,thd->ht", qh, Kh) / hd**0.5, -1)
        return parts.o_proj(torch.einsum("ht,thd->hd", w, Vh).reshape(-1))

    n = parts.attn_norm(h)
    K, V, A, Fc = old.k.clone(), old.v.clone(), old.a.clone(), old.f.clone()
    out = torch.empty_like(h)
    chosen = []
    for b in range(B):
        v_new = parts.v_proj(n[b, P:])
        if refresh_response:  # case B: every response row, no probe
            rows = list(range(T - P))
        else:
            sim = F.cosine_similarity(v_new.double(), old.v[b, P:].double(), dim=-1)
            rows = torch.sort(sim, stable=True).indices[:k].tolist()
            chosen.append(sorted(rows))
        V[b, P:] = v_new
        recompute = [P + i for i in rows]
        if refresh_prompt:
            recompute = list(range(P)) + recompute
            V[b, :P] = parts.v_proj(n[b, :P])
        for t in recompute:
            K[b, t] = rope(parts.k_proj(n[b, t]), t)
        for t in recompute:
            A[b, t] = attend_row(rope(parts.q_proj(n[b, t]), t), K[b], V[b])
        h1 = h[b] + A[b]
        for t in recompute:
            Fc[b, t] = parts.mlp(parts.ff_norm(h1[t]))
        out[b] = h1 + Fc[b]
    return out, K, V, A, Fc, chosen


def _moved_inputs(model, seed: int, P: int, R: int):
    """Layer 1's parts, an input ``h0``, an input ``h1`` where every row moved (prompt included),
    and the rotary tables for ``P + R`` positions: one cached step's worth of inputs."""
    block = model.model.transformer["blocks"][1]
    g = torch.Generator().manual_seed(seed)
    h0 = torch.randn(2, P + R, 32, generator=g)
    h1 = h0 + 0.5 * torch.randn(h0.shape, generator=g)
    sin, cos = block.rotary_emb.get_rotary_embedding(P + R, h0.device)
    return block.parts(), h0, h1, cos[:, 0], sin[:, 0]


@pytest.mark.parametrize("refresh_prompt", [False, True], ids=["case D", "case C"])
def test_adaptive_update_matches_a_row_by_row_rederivation(refresh_prompt, model):
    from dllm_cache import cached_block, full_block

    P, R, rho = 10, 12, 0.25
    parts, h0, h1, cos, sin = _moved_inputs(model, 3, P, R)
    with torch.no_grad():
        _, old = full_block(parts, h0, cos, sin, None)
        got, new, _ = cached_block(parts, h1, cos, sin, None, _snapshot(old), P, refresh_prompt, False,
                                   DLLMCacheConfig(100, 100, rho))  # fmt: skip
        out, K, V, A, Fc, chosen = _manual_adaptive_step(
            parts, h1, cos, sin, old, P, int(R * rho), refresh_prompt
        )
        full, _ = full_block(parts, h1, cos, sin, None)
    assert new.selected.sort(-1).values.tolist() == chosen
    for mine, theirs in ((got, out), (new.k, K), (new.v, V), (new.a, A), (new.f, Fc)):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)
    assert not torch.allclose(got, full, atol=1e-3)  # stale rows really are reused


@pytest.mark.parametrize("rho", [0.0, 0.25])
def test_response_refresh_matches_a_row_by_row_rederivation(rho, model):
    """Case B (response rows refreshed, prompt stale): every response row's K, V, attention and
    FFN are recomputed against the stale prompt K/V, the prompt rows reuse their cached A/F."""
    from dllm_cache import cached_block, full_block

    P, R = 10, 12
    parts, h0, h1, cos, sin = _moved_inputs(model, 4, P, R)
    with torch.no_grad():
        _, old = full_block(parts, h0, cos, sin, None)
        got, new, _ = cached_block(parts, h1, cos, sin, None, _snapshot(old), P, False, True,
                                   DLLMCacheConfig(100, 1, rho))  # fmt: skip
        out, K, V, A, Fc, _ = _manual_adaptive_step(
            parts, h1, cos, sin, old, P, 0, refresh_prompt=False, refresh_response=True
        )
        full, _ = full_block(parts, h1, cos, sin, None)
    assert new.selected is None
    for mine, theirs in ((got, out), (new.k, K), (new.v, V), (new.a, A), (new.f, Fc)):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)
    # the refresh really changed every response feature, and the prompt rows really are stale
    for name in ("k", "v", "a", "f"):
        moved = (getattr(new, name)[:, P:] - getattr(old, name)[:, P:]).abs().amax(-1)
        assert bool((moved > 1e-3).all()), name
    torch.testing.assert_close(new.a[:, :P], old.a[:, :P], rtol=0, atol=0)
    assert not torch.allclose(got, full, atol=1e-3)


@pytest.mark.parametrize("config", [DLLMCacheConfig(1, 1, 0.0), DLLMCacheConfig(100, 100, 0.5)])
def test_layer_cache_returns_a_snapshot_that_later_calls_leave_alone(
    config, make_model, masked_input
):
    """Case A (Kp=Kr=1) used to hand back a fresh object, cases B-D the live buffers: a kept
    result silently followed (or not) the next step. Now both are snapshots; copy=False is live."""
    model = make_model(n_layers=3)
    P = 24
    x = masked_input(P=P, R=16)
    with apply_dllm_cache(model, config) as handle:
        c = handle.cache
        c.reset(P)
        model(x)
        kept = c.layer_cache(1)
        live = c.layer_cache(1, copy=False)
        frozen = {n: getattr(live, n).clone() for n in ("k", "v", "a", "f")}
        x[:, P : P + 5] = torch.tensor([5, 6, 7, 8, 9])
        model(x)
        now = c.layer_cache(1, copy=False)
        for n in ("k", "v", "a", "f"):
            assert torch.equal(getattr(kept, n), frozen[n])
            assert getattr(kept, n).data_ptr() != getattr(now, n).data_ptr()
        assert not torch.equal(now.v[:, P:], frozen["v"][:, P:])


def test_attention_output_probe_with_prompt_refresh_matches_the_full_block(model):
    """Case C with the attention-output probe: every K/V row is fresh (prompt refreshed, the probe
    refreshes all response K/V), so every attention output is the full block's on ``h1``; the
    prompt rows and the rows ``I`` get the full block's FFN on ``h1 + a``, the rest keep ``h0``'s."""
    from dllm_cache import cached_block, full_block

    P, R, rho = 10, 12, 0.25
    parts, h0, h1, cos, sin = _moved_inputs(model, 5, P, R)
    config = DLLMCacheConfig(100, 100, rho, selection="attn_out")
    with torch.no_grad():
        _, old = full_block(parts, h0, cos, sin, None)
        got, new, _ = cached_block(
            parts, h1, cos, sin, None, _snapshot(old), P, True, False, config
        )
        _, full = full_block(parts, h1, cos, sin, None)
    sim = F.cosine_similarity(full.a[:, P:].double(), old.a[:, P:].double(), dim=-1)
    chosen = torch.sort(sim, stable=True).indices[:, : int(R * rho)]
    assert new.selected.sort(-1).values.tolist() == chosen.sort(-1).values.tolist()
    fresh = torch.zeros(2, P + R, 1, dtype=torch.bool)
    fresh[:, :P] = True
    fresh[:, P:].scatter_(1, chosen.unsqueeze(-1), True)
    want_f = torch.where(fresh, full.f, old.f)
    torch.testing.assert_close(new.a, full.a, rtol=0, atol=1e-5)
    torch.testing.assert_close(new.f, want_f, rtol=0, atol=1e-5)
    torch.testing.assert_close(got, h1 + full.a + want_f, rtol=0, atol=1e-5)
    assert not torch.allclose(want_f, full.f, atol=1e-3)  # stale FFN rows really are reused
