import pytest

torch = pytest.importorskip("torch")

from duetserve import LookaheadReducedWarning, ModelShape  # noqa: E402
from duetserve.executor import ReferenceExecutor, TinyQwen3  # noqa: E402

SHAPE = ModelShape(
    n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, d_head=8, d_ff=64, vocab=50, name="tiny-qwen3"
)


@pytest.fixture
def ex():
    return ReferenceExecutor(TinyQwen3(SHAPE, seed=0), max_seqs=4, max_len=40)


def greedy_reference(model, prompt, n):
    """Recompute the whole sequence each step (no cache reuse): the oracle for cached decoding."""
    seq = list(prompt)
    for _ in range(n):
        fresh = ReferenceExecutor(model, max_seqs=1, max_len=40)
        seq.append(int(fresh.prefill(0, seq).argmax()))
    return seq[len(prompt) :]


def test_chunked_prefill_equals_one_prefill(ex):
    prompt = [3, 14, 15, 9, 2, 6, 5, 35, 8, 9]
    whole = ex.prefill(0, prompt)
    ex.prefill(1, prompt[:4])
    ex.prefill(1, prompt[4:7], start=4)
    chunked = ex.prefill(1, prompt[7:], start=7)
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=1e-5)


def test_a_window_of_k_equals_k_single_steps_and_full_recompute(ex):
    prompts = [[1, 2, 3, 4, 5], [7, 7, 8]]
    firsts = [int(ex.prefill(i, p).argmax()) for i, p in enumerate(prompts)]
    res = ex.decode_window([0, 1], firsts, [len(p) for p in prompts], k=5)
    assert res.tokens.shape == (2, 5) and res.wasted == 0
    other = ReferenceExecutor(ex.model, max_seqs=4, max_len=40)
    for i, p in enumerate(prompts):
        other.prefill(i, p)
    toks, pos = firsts, [len(p) for p in prompts]
    steps = []
    for _ in range(5):
        r = other.decode_window([0, 1], toks, pos, k=1)
        toks = r.tokens[:, 0].tolist()
        pos = [q + 1 for q in pos]
        steps.append(toks)
    assert res.tokens.T.tolist() == steps
    for i, p in enumerate(prompts):
        assert [firsts[i], *res.tokens[i, :4].tolist()] == greedy_reference(ex.model, p, 5)


def test_stop_checks_are_deferred_and_waste_is_counted(ex):
    first = int(ex.prefill(0, [4, 5, 6]).argmax())
    free = ex.decode_window([0], [first], [3], k=6)
    stop = int(free.tokens[0, 2])
    ex2 = ReferenceExecutor(ex.model, max_seqs=4, max_len=40)
    ex2.prefill(0, [4, 5, 6])
    res = ex2.decode_window([0], [first], [3], k=6, stop_token=stop)
    first_hit = free.tokens[0].tolist().index(stop)
    assert res.useful == [first_hit + 1] and res.wasted == 6 - first_hit - 1
    capped = ex2.decode_window([1], [first], [3], k=6, remaining=[2])
    assert capped.useful == [2] and capped.wasted == 4


def test_short_kv_room_reduces_the_lookahead(ex):
    ex.prefill(0, list(range(1, 38)))
    with pytest.warns(LookaheadReducedWarning, match="reduced to 3"):
        res = ex.decode_window([0], [1], [37], k=8)
    assert res.lookahead == 3 and res.tokens.shape == (1, 3)


def test_spatial_step_without_partitions_runs_both(ex):
    first = int(ex.prefill(0, [1, 2, 3]).argmax())
    res, logits = ex.spatial_step(
        {"slots": [0], "last_tokens": [first], "positions": [3], "k": 2},
        {"slot": 1, "tokens": [9, 8, 7]},
    )
    assert res.tokens.shape == (1, 2) and logits.shape == (SHAPE.vocab,)


def test_bad_inputs(ex):
    with pytest.raises(ValueError, match="exceed max_len"):
        ex.prefill(0, list(range(41)))
    with pytest.raises(ValueError, match="k must be >= 1"):
        ex.decode_window([0], [1], [0], k=0)
    with pytest.raises(ValueError, match="equally long"):
        ex.decode_window([0, 1], [1], [0], k=1)
    with pytest.raises(ValueError, match="use_cuda_graphs needs a CUDA device"):
        ReferenceExecutor(ex.model, 1, 4, use_cuda_graphs=True)
    with pytest.raises(ValueError, match="tp must be 1"):
        TinyQwen3(SHAPE.with_tp(2))


def test_importing_the_executor_without_torch_names_what_to_install(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "duetserve.executor", raising=False)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'duetserve\[test\]'"):
        importlib.import_module("duetserve.executor")
