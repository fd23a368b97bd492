import math

import pytest
import torch
from lora_recycle import LoraExpert, LoraPool, closeness, reinit_experts, select_experts
from lora_recycle.selection import frobenius_inner
from lora_testmodels import make_mlp


def _expert(name, seed, rank=3, scaling=1.0, sign=1.0):
    g = torch.Generator().manual_seed(seed)
    factors = {
        "0": (
            torch.randn(rank, 8, generator=g, dtype=torch.float64),
            sign * torch.randn(12, rank, generator=g, dtype=torch.float64),
        ),
        "2": (
            torch.randn(rank, 12, generator=g, dtype=torch.float64),
            sign * torch.randn(4, rank, generator=g, dtype=torch.float64),
        ),
    }
    return LoraExpert(name, factors, scaling)


def test_trace_identities():
    g = torch.Generator().manual_seed(0)
    a1, b1 = torch.randn(3, 20, generator=g), torch.randn(15, 3, generator=g)
    a2, b2 = torch.randn(5, 20, generator=g), torch.randn(15, 5, generator=g)
    torch.testing.assert_close(
        frobenius_inner(a1, b1, a2, b2), ((b1 @ a1) * (b2 @ a2)).sum(), rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(
        frobenius_inner(a1, b1, a1, b1), (b1 @ a1).square().sum(), rtol=1e-5, atol=1e-5
    )


def _explicit(c, t, method, aggregate):
    nums, ncs, nts = [], [], []
    for m in c.factors:
        dc, dt = c.delta(m), t.delta(m)
        if method == "quasi_fim":
            dc, dt = dc.square(), dt.square()
        prod = dc * dt
        num = {
            "cosine": prod.sum(),
            "quasi_fim": prod.sum(),
            "clamp": prod.clamp_min(0).sum(),
            "abs": prod.abs().sum(),
            "clamp_pm": prod.sum().clamp_min(0),
        }[method]
        nums.append(float(num))
        ncs.append(float(dc.square().sum()))
        nts.append(float(dt.square().sum()))
    if aggregate == "micro":
        score = sum(n / math.sqrt(a * b) for n, a, b in zip(nums, ncs, nts, strict=False)) / len(
            nums
        )
    else:
        score = sum(nums) / math.sqrt(sum(ncs) * sum(nts))
    return math.sqrt(max(score, 0)) if method == "quasi_fim" else score


@pytest.mark.parametrize("method", ["cosine", "clamp", "clamp_pm", "abs", "quasi_fim"])
@pytest.mark.parametrize("aggregate", ["micro", "macro"])
def test_closeness_matches_explicit_delta_w(method, aggregate):
    c, t = _expert("c", 1, rank=2, scaling=0.7), _expert("t", 2, rank=4, scaling=1.3)
    assert closeness(c, t, method, aggregate) == pytest.approx(
        _explicit(c, t, method, aggregate), rel=1e-9
    )


def test_cosine_with_self_and_negation_and_l2():
    e = _expert("e", 3, scaling=2.0)
    assert closeness(e, e, "cosine") == pytest.approx(1.0, abs=1e-12)
    assert closeness(_expert("n", 3, scaling=2.0, sign=-1.0), e, "cosine") == pytest.approx(
        -1.0, abs=1e-12
    )
    assert closeness(e, e, "l2") == pytest.approx(0.0, abs=1e-9)
    other = _expert("o", 4)
    dist = sum(float((e.delta(m) - other.delta(m)).square().sum()) for m in e.factors)
    assert closeness(e, other, "l2") == pytest.approx(-math.log1p(dist), rel=1e-9)
    half = LoraExpert("h", {"0": e.factors["0"]}, e.scaling)  # module "2" missing: contributes 0
    assert closeness(half, e, "cosine", "micro") == pytest.approx(0.5, abs=1e-12)


def test_select_experts_orders_and_places_target_first():
    base = make_mlp()
    target = _expert("target", 10)
    near = LoraExpert("near", {m: (a, b + 0.01) for m, (a, b) in target.factors.items()}, 1.0)
    pool = LoraPool.from_experts([_expert(f"x{i}", 20 + i) for i in range(5)] + [near], base)
    chosen = select_experts(pool, k=3, method="cosine", target_lora=target)
    assert chosen.ids[:2] == ["target", "near"] and len(chosen) == 3
    assert (
        select_experts(pool, k=2, method="cosine", target_lora=target, include_target=False).ids[0]
        == "near"
    )
    r1 = select_experts(pool, k=4, method="random", seed=5).ids
    assert r1 == select_experts(pool, k=4, method="random", seed=5).ids and len(set(r1)) == 4
    scores = {e: float(i) for i, e in enumerate(pool.ids)}
    assert select_experts(pool, k=2, method="evaluation", scores=scores).ids == ["near", "x4"]
    ranked = LoraPool.from_experts([_expert("r2", 1, rank=2), _expert("r5", 2, rank=5)], base)
    assert select_experts(ranked, k=1, method="rank").ids == ["r5"]


def test_select_experts_bad_input():
    pool = LoraPool.from_experts([_expert("a", 1), _expert("b", 2)], make_mlp())
    with pytest.raises(ValueError, match="k must be"):
        select_experts(pool, k=3)
    with pytest.raises(ValueError, match="empty pool"):
        select_experts(pool.subset([]), k=1)
    with pytest.raises(ValueError, match="target_lora"):
        select_experts(pool, k=1, method="cosine")
    with pytest.raises(ValueError, match="scores"):
        select_experts(pool, k=1, method="evaluation")


def test_reinit_control_std_and_shapes():
    experts = [_expert("t", 0, rank=4)] + [
        _expert(f"e{i}", i + 1, rank=4, scaling=3.0) for i in range(40)
    ]
    target_a = torch.cat([a.reshape(-1) for a, _ in experts[0].factors.values()]).std()
    target_b = torch.cat([b.reshape(-1) for _, b in experts[0].factors.values()]).std()
    fresh = reinit_experts(experts, "non_target", seed=1)
    assert fresh[0] is experts[0]
    drawn_a = torch.cat([a.reshape(-1) for e in fresh[1:] for a, _ in e.factors.values()]).std()
    drawn_b = torch.cat([b.reshape(-1) for e in fresh[1:] for _, b in e.factors.values()]).std()
    assert abs(drawn_a / target_a - 1) < 0.05 and abs(drawn_b / target_b - 1) < 0.05
    for old, new in zip(experts[1:], fresh[1:], strict=False):
        assert new.scaling == old.scaling
        assert all(
            new.factors[m][0].shape == a.shape and not torch.equal(new.factors[m][0], a)
            for m, (a, _) in old.factors.items()
        )
    every = reinit_experts(experts, "all", seed=2)
    all_a = torch.cat([a.reshape(-1) for e in experts for a, _ in e.factors.values()]).std()
    new_a = torch.cat([a.reshape(-1) for e in every for a, _ in e.factors.values()]).std()
    assert abs(new_a / all_a - 1) < 0.05
    with pytest.raises(ValueError, match="reinit"):
        reinit_experts(experts, "some")
