import pytest
import torch
from lora_recycle import LoraExpert, LoraPool, apply_task_vector, merge_task_vectors, task_vectors
from lora_testmodels import make_mlp


def _expert(name, seed, rank=2, scaling=1.0, modules=("0", "2")):
    g = torch.Generator().manual_seed(seed)
    shapes = {"0": (12, 8), "2": (4, 12)}
    factors = {
        m: (
            torch.randn(rank, shapes[m][1], generator=g),
            torch.randn(shapes[m][0], rank, generator=g),
        )
        for m in modules
    }
    return LoraExpert(name, factors, scaling)


def test_ties_hand_computed_three_experts():
    d1 = torch.tensor([[3.0, -1.0, 0.5, 2.0]])
    d2 = torch.tensor([[-2.0, -4.0, 0.1, 1.0]])
    d3 = torch.tensor([[1.0, 2.0, -3.0, -0.2]])
    merged = merge_task_vectors([{"m": d1}, {"m": d2}, {"m": d3}], "ties", density=0.5)["m"]
    # top-2 by |.|: d1 keeps (3, 2) at cols 0,3; d2 keeps (-2, -4) at 0,1; d3 keeps (2, -3) at 1,2.
    # sums: col0 3-2=1 (+), col1 -4+2=-2 (-), col2 -3 (-), col3 2 (+)
    # kept: col0 {3} ->3; col1 {-4} -> -4; col2 {-3} -> -3; col3 {2} -> 2
    assert torch.equal(merged, torch.tensor([[3.0, -4.0, -3.0, 2.0]]))
    freq = merge_task_vectors(
        [{"m": d1}, {"m": d2}, {"m": d3}], "ties", density=1.0, majority_sign="frequency"
    )["m"]
    # density 1: col0 signs (+,-,+) -> + : mean(3, 1) = 2; col1 (-,-,+) -> - : mean(-1,-4); col2 (+,+,-) -> +: mean(.5,.1)
    # col3 (+,+,-) -> + : mean(2, 1)
    torch.testing.assert_close(freq, torch.tensor([[2.0, -2.5, 0.3, 1.5]]))


def test_ties_density_one_same_sign_is_the_mean():
    deltas = [
        {"m": torch.rand(3, 5, generator=torch.Generator().manual_seed(i)) + 0.1} for i in range(4)
    ]
    merged = merge_task_vectors(deltas, "ties", density=1.0)["m"]
    torch.testing.assert_close(merged, torch.stack([d["m"] for d in deltas]).mean(0))


def test_tsv_single_expert_is_exact_and_orthogonal_experts_sum():
    e = _expert("e", 0, rank=3)
    (tv,) = task_vectors([e])
    merged = merge_task_vectors([e], "tsv", tsv_rank=12)
    for m in tv:
        torch.testing.assert_close(merged[m], tv[m], atol=1e-5, rtol=0)
    # orthogonal subspaces: disjoint row and column supports
    d1 = torch.zeros(6, 6)
    d1[:2, :2] = torch.tensor([[1.0, 2.0], [0.5, -1.0]])
    d2 = torch.zeros(6, 6)
    d2[3:5, 3:6] = torch.tensor([[2.0, 0.0, 1.0], [-1.0, 1.0, 0.0]])
    out = merge_task_vectors([{"m": d1}, {"m": d2}], "tsv", tsv_rank=2)["m"]
    torch.testing.assert_close(out, d1 + d2, atol=1e-6, rtol=0)


def _rank4_experts(noise=0.0):
    g = torch.Generator().manual_seed(3)
    experts = []
    for i in range(5):
        a = torch.randn(4, 64, generator=g, dtype=torch.float64)
        b = torch.randn(64, 4, generator=g, dtype=torch.float64)
        a = a + noise * torch.randn(a.shape, generator=g, dtype=torch.float64)
        b = b + noise * torch.randn(b.shape, generator=g, dtype=torch.float64)
        experts.append(LoraExpert(f"e{i}", {"m": (a, b)}, 1.0))
    return experts


@pytest.mark.parametrize("tsv_rank", [8, 16])
def test_tsv_rank_past_the_lora_rank_is_the_lora_rank_and_stable(tsv_rank):
    # Past an expert's rank its singular vectors are arbitrary null directions: without the cap a
    # 1e-12 perturbation changed the merge by O(1) and tsv_rank 8 differed from 4 (review o3).
    ref = merge_task_vectors(_rank4_experts(), "tsv", tsv_rank=4)["m"]
    merged = merge_task_vectors(_rank4_experts(), "tsv", tsv_rank=tsv_rank)["m"]
    noisy = merge_task_vectors(_rank4_experts(1e-12), "tsv", tsv_rank=tsv_rank)["m"]
    assert float((merged - ref).norm() / ref.norm()) < 1e-12
    assert float((noisy - merged).norm() / merged.norm()) < 1e-8
    # ΔW dicts carry no LoRA rank: the numerical rank (s > eps·max(shape)·s_max) caps instead
    deltas = [{"m": d["m"]} for d in task_vectors(_rank4_experts())]
    from_deltas = merge_task_vectors(deltas, "tsv", tsv_rank=tsv_rank)["m"]
    assert float((from_deltas - ref).norm() / ref.norm()) < 1e-8


def test_avg_sum_identical_and_missing_modules():
    e = _expert("e", 1)
    avg = merge_task_vectors([e, e, e], "avg")
    total = merge_task_vectors([e, e, e], "sum")
    (tv,) = task_vectors([e])
    for m in tv:
        torch.testing.assert_close(avg[m], tv[m])
        torch.testing.assert_close(total[m], 3 * tv[m])
    partial = _expert("p", 2, modules=("0",))
    mixed = merge_task_vectors([e, partial], "avg")
    torch.testing.assert_close(mixed["2"], tv["2"] / 2)  # the missing expert counts as ΔW = 0


def test_scaling_folded_once_and_apply():
    e = _expert("e", 3, scaling=2.5)
    tv = merge_task_vectors([e], "sum")
    a, b = e.factors["0"]
    torch.testing.assert_close(tv["0"], 2.5 * b @ a)
    base = make_mlp()
    weight = base[0].weight.detach().clone()
    apply_task_vector(base, tv, scale=-1.0)
    torch.testing.assert_close(base[0].weight, weight - tv["0"])


def test_dare_ties_rescales_and_is_seeded():
    deltas = [{"m": torch.ones(40, 50)}]
    out = merge_task_vectors(deltas, "dare_ties", density=0.5, seed=1)["m"]
    assert set(out.unique().tolist()) <= {0.0, 2.0}
    assert abs(out.mean().item() - 1.0) < 0.1
    assert torch.equal(out, merge_task_vectors(deltas, "dare_ties", density=0.5, seed=1)["m"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "ties", "density": 0.0}, "density"),
        ({"method": "ties", "density": 1.5}, "density"),
        ({"method": "tsv", "tsv_rank": 0}, "tsv_rank"),
        ({"method": "mean"}, "method"),
        ({"method": "ties", "majority_sign": "vote"}, "majority_sign"),
    ],
)
def test_bad_merge_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        merge_task_vectors([_expert("e", 0)], **kwargs)
    with pytest.raises(ValueError, match="no experts"):
        merge_task_vectors([], "avg")


def test_sum_equals_peft_cat_and_ties_agrees_only_for_one_expert():
    pytest.importorskip("peft")
    from lora_recycle import peft_weighted_adapter

    experts = [_expert("a", 4, scaling=0.5), _expert("b", 5, rank=3, scaling=2.0)]
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    ours = apply_task_vector(make_mlp(), merge_task_vectors(experts, "sum"))
    cat = peft_weighted_adapter(make_mlp(), experts, [1.0, 1.0], "cat")
    with torch.no_grad():
        torch.testing.assert_close(cat(x), ours(x), atol=1e-5, rtol=1e-5)
    # one expert, density 1: peft's A/B-separate TIES is exact, like ours
    one = apply_task_vector(make_mlp(), merge_task_vectors(experts[:1], "ties", density=1.0))
    peft_one = peft_weighted_adapter(make_mlp(), experts[:1], [1.0], "ties", density=1.0)
    with torch.no_grad():
        torch.testing.assert_close(peft_one(x), one(x), atol=1e-5, rtol=1e-5)
    # two equal-rank experts: peft combines A and B separately (cross terms B_a A_b), ours works on ΔW
    same_rank = [_expert("a", 4), _expert("b", 5)]
    ours2 = apply_task_vector(make_mlp(), merge_task_vectors(same_rank, "ties", density=1.0))
    peft2 = peft_weighted_adapter(make_mlp(), same_rank, [1.0, 1.0], "ties", density=1.0)
    with torch.no_grad():
        assert (peft2(x) - ours2(x)).abs().max() > 1e-2


def test_pool_input_equals_expert_list():
    experts = [_expert("a", 6), _expert("b", 7)]
    pool = LoraPool.from_experts(experts, make_mlp())
    for m, d in merge_task_vectors(pool, "ties").items():
        assert torch.equal(d, merge_task_vectors(experts, "ties")[m])


def test_ties_keeps_exactly_the_density_share_when_magnitudes_tie():
    # 4 equal magnitudes, density 0.5: keep 2, as peft's topk does (a >= threshold kept all 4)
    delta = torch.tensor([[1.0, -1.0, 1.0, 1.0]])
    merged = merge_task_vectors([{"m": delta}], "ties", density=0.5)["m"]
    assert int(torch.count_nonzero(merged)) == 2
