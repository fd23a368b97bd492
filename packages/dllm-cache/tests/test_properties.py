"""Property tests: selection against a naive sort, and the cached block on a static input."""

import torch
import torch.nn.functional as F
from dllm_cache import (
    DLLMCacheConfig,
    TinyLLaDA,
    TinyLLaDAConfig,
    cached_block,
    case_rows,
    full_block,
    select_rows,
)
from dllm_cache.flops import case_of
from hypothesis import given, settings
from hypothesis import strategies as st

_MODEL = None


def _model() -> TinyLLaDA:
    global _MODEL
    if _MODEL is None:
        torch.manual_seed(0)
        _MODEL = TinyLLaDA(TinyLLaDAConfig(vocab_size=16, d_model=32, n_heads=4, n_kv_heads=2, n_layers=1,
                                           mlp_hidden_size=48, init_std=0.1)).eval()  # fmt: skip
    return _MODEL


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 3), n=st.integers(1, 24), d=st.integers(1, 9), frac=st.floats(0, 1),
    seed=st.integers(0, 10_000),
)  # fmt: skip
def test_select_rows_is_argmin_k_of_cosine(batch, n, d, frac, seed):
    g = torch.Generator().manual_seed(seed)
    new, old = torch.randn(batch, n, d, generator=g), torch.randn(batch, n, d, generator=g)
    k = int(n * frac)
    picked = select_rows(new, old, k)
    sim = F.cosine_similarity(new.double(), old.double(), dim=-1)
    kth = sim.sort(-1).values[:, k - 1 : k] if k else None
    assert picked.shape == (batch, k)
    for b in range(batch):
        assert len(set(picked[b].tolist())) == k
        if k:
            # every picked row is among the k smallest (up to float32 round-off at the boundary)
            assert (sim[b, picked[b]] <= kth[b] + 1e-6).all()
    assert torch.equal(picked, select_rows(new, old, k))  # deterministic, ties included


@settings(max_examples=25, deadline=None)
@given(
    P=st.integers(1, 12), R=st.integers(1, 12), refresh_prompt=st.booleans(), refresh_response=st.booleans(),
    rho=st.sampled_from([0.0, 0.25, 0.5, 1.0]), selection=st.sampled_from(["value", "key", "attn_out", "random"]),
    seed=st.integers(0, 1000),
)  # fmt: skip
def test_cached_block_on_a_static_input_is_the_full_block(
    P, R, refresh_prompt, refresh_response, rho, selection, seed
):
    block = _model().model.transformer["blocks"][0]
    parts = block.parts()
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(2, P + R, 32, generator=g)
    sin, cos = block.rotary_emb.get_rotary_embedding(P + R, h.device)
    cos, sin = cos[:, 0], sin[:, 0]
    with torch.no_grad():
        expected, state = full_block(parts, h, cos, sin, None)
        config = DLLMCacheConfig(transfer_ratio=rho, selection=selection)
        out, new_state, rows = cached_block(
            parts,
            h,
            cos,
            sin,
            None,
            state,
            P,
            refresh_prompt,
            refresh_response,
            config,
            torch.Generator(),
        )
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
    for name in ("k", "v", "a", "f"):
        torch.testing.assert_close(
            getattr(new_state, name), getattr(state, name), rtol=0, atol=1e-5
        )
    assert rows == case_rows(case_of(refresh_prompt, refresh_response), P, R, config)
