"""The exponent table, the step rules, the problems' gradients (finite differences)."""

import numpy as np
import pytest
from adagrad_heavytail import problems as P
from adagrad_heavytail import schedules, theory
from adagrad_heavytail.noise import Gaussian, StudentT


@pytest.mark.parametrize("method", sorted(theory.RATES))
def test_every_method_has_exponent_one_quarter_at_p_2(method):
    expected = 0.25
    assert theory.exponent(method, 2.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    "method,p,value",
    [
        ("adagrad", 1.5, 1 / 12),
        ("adagrad", 1.8, 0.194),
        ("adagrad_norm_bounded", 1.2, 1 / 12),
        ("adagrad_norm_bounded", 1.8, 0.222),
        ("adagrad_norm_bounded", 1.5, 1 / 6),
        ("minimax", 1.2, 1 / 8),
        ("minimax", 1.5, 0.2),
        ("minimax", 1.8, 0.235),
        ("nsgdm", 1.5, 1 / 6),
        ("adagrad_classic", 1.8, 0.6 / 3.6),
    ],
)
def test_exponent_table_values(method, p, value):
    assert theory.exponent(method, p) == pytest.approx(value, abs=1e-3)


@pytest.mark.parametrize("p", [1.0, 0.5, 2.5, float("nan")])
def test_exponent_rejects_p_outside_1_2(p):
    with pytest.raises(ValueError, match=r"\(1, 2\]"):
        theory.exponent("minimax", p)


def test_adagrad_bound_is_trivial_below_four_thirds():
    with pytest.raises(ValueError, match="bound is trivial for p <= 4/3"):
        theory.exponent("adagrad", 1.3)
    with pytest.raises(ValueError, match="bound is trivial"):
        theory.exponent("adagrad", 4 / 3)
    with pytest.raises(ValueError, match="unknown method"):
        theory.exponent("adam", 2.0)


def test_theory_params_rules():
    T = 4096
    assert schedules.theory_params("adagrad_norm", T, L=2, Delta=8) == {"lr": 2.0, "eps": 0.0}
    assert schedules.theory_params("adagrad", T, L=2, Delta=8, d=4)["lr"] == pytest.approx(1.0)
    clip = schedules.theory_params("clipped_sgd", T, p=1.5, sigma=2.0)
    assert clip["clip"] == pytest.approx(2.0 * T ** (1 / 2.5))
    assert clip["lr"] == pytest.approx(0.5 * T ** (-2 / 2.5))
    assert schedules.theory_params("clipped_sgd", T) == schedules.theory_params(
        "clipped_sgd", T, p=2
    )
    n = schedules.theory_params("nsgdm", T)
    assert n["beta"] == pytest.approx(1 - T**-0.5) and n["lr"] == pytest.approx(T**-0.75)
    assert schedules.theory_params("nsgdm", T, p=2) == pytest.approx(n)
    assert schedules.theory_params("sgd", T, L=0.5)["lr"] == pytest.approx(1 / np.sqrt(0.5 * T))
    for bad in [
        lambda: schedules.theory_params("adam", T),
        lambda: schedules.theory_params("sgd", 0),
        lambda: schedules.theory_params("sgd", T, L=-1),
        lambda: schedules.theory_params("nsgdm", T, p=2.5),
    ]:
        with pytest.raises(ValueError):
            bad()


def finite_difference(problem, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (problem.value(x + e) - problem.value(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize(
    "problem",
    [
        P.Quadratic(5, L=3.0),
        P.BoundedNonconvex(5),
        P.Rosenbrock(4),
        P.LogisticRegression(
            np.random.default_rng(0).standard_normal((40, 3)), np.arange(40) % 2, l2=0.1
        ),
    ],
)
def test_gradients_match_finite_differences_and_batch(problem):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((3, problem.d)) * 0.7
    batch = problem.grad(xs)
    for x, g in zip(xs, batch, strict=True):
        np.testing.assert_allclose(g, finite_difference(problem, x), rtol=1e-5, atol=1e-6)
    assert problem.value(xs).shape == (3,)
    assert problem.Delta >= 0


def test_smoothness_constants():
    assert P.BoundedNonconvex(3).L == 2.0
    q = P.Quadratic(4, L=2.0)
    assert q.h.max() == 2.0
    r = P.Rosenbrock(2)
    assert pytest.approx(np.linalg.eigvalsh([[802.0, -400.0], [-400.0, 200.0]]).max()) == r.L
    assert r.value(np.ones(2)) == 0.0


@pytest.mark.slow  # importing scikit-learn alone takes seconds
def test_breast_cancer_logistic_regression():
    pytest.importorskip("sklearn")
    lr = P.LogisticRegression.breast_cancer()
    assert lr.d == 31 and lr.Delta == pytest.approx(np.log(2))
    assert 0 < lr.L < 20


def test_noisy_oracle_is_unbiased_and_radial_mode_has_the_laws_norm():
    prob = P.Quadratic(3)
    oracle = P.NoisyOracle(prob, Gaussian(2.0))
    x = np.ones((200_000, 3))
    g = oracle(x, np.random.default_rng(0))
    np.testing.assert_allclose(g.mean(0), prob.grad(np.ones(3)), atol=0.02)
    radial = P.NoisyOracle(prob, StudentT(3.0), coordinatewise=False)
    xi = radial.draw((50_000,), np.random.default_rng(1))
    norms = np.linalg.norm(xi, axis=-1)
    assert np.mean(norms) == pytest.approx(StudentT(3.0).pth_moment(1), rel=0.03)


def test_bad_problem_input():
    with pytest.raises(ValueError, match="dimension"):
        P.Quadratic(0)
    with pytest.raises(ValueError, match="labels"):
        P.LogisticRegression(np.ones((3, 2)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="shape"):
        P.LogisticRegression(np.ones((3, 2)), np.array([0, 1]))
    with pytest.raises(ValueError, match="NaN"):
        P.LogisticRegression(np.array([[np.nan, 1.0]]), np.array([1]))
    with pytest.raises(TypeError, match="noise"):
        P.NoisyOracle(P.Quadratic(2), "gaussian")
