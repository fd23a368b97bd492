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


@settings(max_examples=20, deadline=None)
@given(
    batch=st.integers(1, 3), P=st.integers(1, 6), R=st.integers(1, 8), per_row_table=st.booleans(),
    bf16=st.booleans(), seed=st.integers(0, 1000),
)  # fmt: skip
def test_row_tables_rotate_bit_for_bit_like_apply_rope(batch, P, R, per_row_table, bf16, seed):
    """The cached path's sign-folded rotation (whole rows and gathered rows) is ``apply_rope``."""
    from dllm_cache.block import apply_rope, rope_folded, row_tables

    g = torch.Generator().manual_seed(seed)
    hd, T = 8, P + R
    cos, sin = torch.randn(2, batch if per_row_table else 1, T, hd, generator=g).unbind(0)
    x = torch.randn(batch, T, 3 * hd, generator=g).to(torch.bfloat16 if bf16 else torch.float32)
    tables = row_tables(cos, sin, batch, P)
    assert torch.equal(rope_folded(x, tables.cos, tables.sin, hd), apply_rope(x, cos, sin, hd))
    index = torch.stack([torch.randperm(R, generator=g)[: max(1, R // 2)] for _ in range(batch)])
    rows = x[:, P:].gather(1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
    expected = apply_rope(
        rows, *(t[:, P:].expand(batch, -1, -1).gather(1, index.unsqueeze(-1).expand(-1, -1, hd))
                for t in (cos, sin)), hd,
    )  # fmt: skip
    got = rope_folded(rows, *tables.at(index, tables.response_rows(index)), hd)
    assert torch.equal(got, expected)
    assert torch.equal(
        tables.full_rows(index), (index + torch.arange(batch)[:, None] * T + P).flatten()
    )
