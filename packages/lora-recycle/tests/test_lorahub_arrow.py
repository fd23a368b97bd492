import numpy as np
import pytest
import torch
from lora_recycle import (
    LoraExpert,
    LoraPool,
    apply_task_vector,
    get_arrow_model,
    lorahub_optimize,
    merge_task_vectors,
    presets,
)
from lora_recycle.arrow import top_right_singular_vector
from lora_recycle.lorahub import lorahub_factors
from lora_testmodels import make_mlp


def _expert(name, seed, rank=2, scaling=1.0):
    g = torch.Generator().manual_seed(seed)
    return LoraExpert(
        name,
        {
            "0": (torch.randn(rank, 8, generator=g), torch.randn(12, rank, generator=g)),
            "2": (torch.randn(rank, 12, generator=g), torch.randn(4, rank, generator=g)),
        },
        scaling,
    )


def _loss_fn(teacher=None):
    """Cross-entropy on labels from ``teacher`` (random labels without one)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    with torch.no_grad():
        y = torch.randint(0, 4, (64,), generator=g) if teacher is None else teacher(x).argmax(-1)
    return lambda model: float(torch.nn.functional.cross_entropy(model(x), y))


def test_lorahub_budget_one_returns_the_base():
    pytest.importorskip("nevergrad")
    base = make_mlp()
    before = [p.detach().clone() for p in base.parameters()]
    result = presets.lorahub(budget=1).run(base, [_expert("a", 1), _expert("b", 2)], _loss_fn())
    assert result.optimizer == "NGOpt" and result.evaluations == 1
    assert np.array_equal(result.weights, np.zeros(2))
    assert all(torch.count_nonzero(d) == 0 for d in result.task_vector.values())
    assert result.objective == pytest.approx(_loss_fn()(make_mlp()))
    assert all(
        torch.equal(p, q) for p, q in zip(base.parameters(), before, strict=False)
    )  # model restored


def test_lorahub_improves_and_combines_factors_separately():
    pytest.importorskip("nevergrad")
    experts = [_expert("a", 1, scaling=0.5), _expert("b", 2, scaling=2.0)]
    teacher = apply_task_vector(
        make_mlp(), merge_task_vectors(experts[:1], "sum")
    )  # w = (1, 0) is right
    loss_fn = _loss_fn(teacher)
    result = lorahub_optimize(make_mlp(), experts, loss_fn, budget=40, seed=0)
    assert result.objective < loss_fn(make_mlp()) - 0.1
    assert np.all(np.abs(result.weights) <= 1.5)
    w = result.weights
    a = w[0] * 0.5**0.5 * experts[0].factors["0"][0] + w[1] * 2**0.5 * experts[1].factors["0"][0]
    b = w[0] * 0.5**0.5 * experts[0].factors["0"][1] + w[1] * 2**0.5 * experts[1].factors["0"][1]
    torch.testing.assert_close(result.task_vector["0"], b @ a, rtol=1e-5, atol=1e-5)


def test_lorahub_bad_input():
    with pytest.raises(ValueError, match="ranks differ"):
        lorahub_factors([_expert("a", 1, rank=2), _expert("b", 2, rank=3)], [1.0, 1.0])
    with pytest.raises(ValueError, match="budget"):
        lorahub_optimize(make_mlp(), [_expert("a", 1)], _loss_fn(), budget=0)
    with pytest.raises(ValueError, match="empty"):
        lorahub_optimize(make_mlp(), [], _loss_fn())


def test_arrow_routes_to_the_best_aligned_expert():
    e = _expert("a", 3)
    a, b = e.factors["0"]
    v = top_right_singular_vector(a, b)
    _, _, vh = torch.linalg.svd(b @ a)
    assert abs(float(v @ vh[0])) == pytest.approx(1.0, abs=1e-5)
    experts = [e, _expert("b", 4), _expert("c", 5)]
    model = get_arrow_model(
        make_mlp(), LoraPool.from_experts(experts, make_mlp()), top_k=2, temperature=0.5
    )
    x = torch.randn(10, 8, generator=torch.Generator().manual_seed(1))
    gates = model[0].gates(x)
    assert torch.allclose(gates.sum(-1), torch.ones(10)) and ((gates > 0).sum(-1) == 2).all()
    # top-1 over one expert = the plain LoRA forward
    single = get_arrow_model(make_mlp(), LoraPool.from_experts([e], make_mlp()), top_k=1)
    explicit = make_mlp()
    with torch.no_grad():
        explicit[0].weight += e.delta("0")
        explicit[2].weight += e.delta("2")
    torch.testing.assert_close(single(x), explicit(x), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="top_k"):
        get_arrow_model(make_mlp(), LoraPool.from_experts([e], make_mlp()), top_k=0)


def test_lorahub_one_expert_runs_a_grid_on_the_bounds():
    # NGOpt fails on a 1-D array with numpy >= 2.4 (nevergrad 1.0.12): one weight runs a grid search
    # that starts at 0 and otherwise evaluates budget - 1 evenly spaced points on the bounds.
    expert = _expert("a", 1, scaling=0.5)
    teacher = apply_task_vector(make_mlp(), merge_task_vectors([expert], "sum"))
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        target = teacher(x)

    def mse_to_teacher(model):  # zero exactly at w² = 1
        return float(torch.nn.functional.mse_loss(model(x), target))

    result = lorahub_optimize(make_mlp(), [expert], mse_to_teacher, budget=14, l1=0.0)
    assert result.optimizer == "grid" and result.evaluations == 14
    # the grid -1.5, -1.25, ..., 1.5 holds the true weight; A and B both scale by w, so ΔW = w²BA: ±1
    assert np.abs(result.weights).tolist() == [1.0]
    base = lorahub_optimize(make_mlp(), [expert], mse_to_teacher, budget=1)
    assert base.weights.tolist() == [0.0] and base.evaluations == 1


def test_lorahub_ngopt_runs_on_this_numpy():
    pytest.importorskip("nevergrad")
    result = lorahub_optimize(make_mlp(), [_expert("a", 1), _expert("b", 2)], _loss_fn(), budget=6)
    assert result.optimizer == "NGOpt" and result.evaluations == 6
