import pytest
from dllm_cache import (
    LLADA_8B,
    DLLMCacheConfig,
    RowCounts,
    block_flops,
    case_rows,
    generation_flops,
    schedule,
)
from dllm_cache.flops import LLADA_8B_LAYERS, LLADA_8B_VOCAB, refresh_flags


def test_full_layer_flops_is_the_textbook_count():
    d, dff, T = 64, 96, 50
    from dllm_cache import BlockDims

    dims = BlockDims(d, 4, 4, 16, dff)
    assert (
        block_flops(dims, RowCounts(T, T, T, T, T), T)
        == 8 * T * d * d + 4 * T * T * d + 6 * T * d * dff
    )


@pytest.mark.parametrize(
    ("P", "R", "S", "Kp", "Kr", "with_head", "without_head"),
    [
        (893, 256, 256, 50, 7, 5.2, 7.3),
        (893, 256, 256, 100, 6, 5.3, 7.6),
        (8000, 32, 32, 100, 8, 8.8, 15.9),
        (12000, 32, 32, 100, 8, 9.3, 16.0),
    ],
)
def test_llada_8b_ratios_match_the_spec_table(P, R, S, Kp, Kr, with_head, without_head):
    config = DLLMCacheConfig(Kp, Kr, 0.25)
    for head, expected in (("full", with_head), ("none", without_head)):
        args = (LLADA_8B, LLADA_8B_LAYERS, P, R, S)
        kw = dict(vocab_size=LLADA_8B_VOCAB, lm_head=head)
        ratio = generation_flops(*args, None, **kw) / generation_flops(*args, config, **kw)
        assert ratio == pytest.approx(expected, abs=0.05)


def test_long_prompt_rows_bracket_the_papers_hotpotqa_9_1x():
    config = DLLMCacheConfig(100, 8, 0.25)
    kw = dict(vocab_size=LLADA_8B_VOCAB, lm_head="full")
    ratios = [
        generation_flops(LLADA_8B, 32, P, 32, 32, None, **kw)
        / generation_flops(LLADA_8B, 32, P, 32, 32, config, **kw)
        for P in (8000, 12000)
    ]
    assert ratios[0] < 9.1 < ratios[1]


def test_schedule_cases_by_hand():
    config = DLLMCacheConfig(prompt_interval=3, response_interval=2, transfer_ratio=0.5)
    cases = schedule(6, 2, config)
    # layer 0 always refreshed; layer 1: t=1 A, t=2 D, t=3 B, t=4 C, t=5 B, t=6 D
    assert [c[0] for c in cases] == ["A"] * 6
    assert [c[1] for c in cases] == ["A", "D", "B", "C", "B", "D"]
    paper = DLLMCacheConfig(3, 2, 0.5, refresh_first_layer=False)
    assert schedule(6, 2, paper)[1] == ["D", "D"]
    assert refresh_flags(1, 5, paper) == (True, True)


def test_case_rows_per_selection():
    P, R = 10, 8
    base = dict(prompt_interval=5, response_interval=5, transfer_ratio=0.25)
    assert case_rows("C", P, R, DLLMCacheConfig(**base)) == RowCounts(
        P + 2, P + 2, P + R, P + 2, P + 2
    )
    assert case_rows("D", P, R, DLLMCacheConfig(**base, selection="key")) == RowCounts(
        2, R, 2, 2, 2
    )
    assert case_rows("D", P, R, DLLMCacheConfig(**base, selection="attn_out")) == RowCounts(
        R, R, R, R, 2
    )
    assert case_rows("D", P, R, DLLMCacheConfig(5, 5, 0.0)) == RowCounts()


def test_lm_head_choice_is_validated():
    with pytest.raises(ValueError, match="lm_head"):
        generation_flops(LLADA_8B, 1, 4, 4, 1, None, lm_head="some")
