import numpy as np
import pytest
from adalina import (
    AME,
    ARM,
    GELS,
    MSR,
    OFA,
    Adalina,
    GELSShapley,
    KernelSHAPMV,
    KernelSHAPUnbiased,
    LinearApprox,
    MSRProb,
    PermutationSampling,
    ShapIQ,
    exact_semivalue,
    kernel_size_distribution,
)
from adalina.games import all_coalitions
from adalina_testgames import rel_error, tabulated

N = 8


@pytest.fixture(scope="module")
def game():
    return tabulated(N, seed=6, offset=1.0)


@pytest.mark.parametrize("sv", ["shapley", 0.3, (16, 1), (1, 4)])
def test_shapiq_is_the_linear_estimator_with_kernel_sizes_and_empty_gamma(game, sv):
    # same stream: the closed form 2 H_{n-1} (n-s) w_{s-1} equals c(S)/P(S) under q ∝ 1/(s(n-s))
    ours = ShapIQ(N, sv, random_state=2).approximate(300, game).values
    generic = LinearApprox(
        N, sv, gamma="empty", size_distribution=kernel_size_distribution(N), random_state=2
    ).approximate(300, game)
    np.testing.assert_allclose(ours, generic.values, rtol=1e-10)


def test_unbiased_kernelshap_equals_shapiq_for_shapley(game):
    # Fumagalli et al. (2023): SHAP-IQ of order 1 is unbiased KernelSHAP
    kernel = KernelSHAPUnbiased(N, random_state=8).approximate(250, game).values
    shapiq = ShapIQ(N, random_state=8).approximate(250, game).values
    np.testing.assert_allclose(kernel, shapiq, rtol=1e-9)


def test_msr_prob_is_adalina_all_sampling_with_zero_gamma(game):
    a = MSRProb(N, 0.7, random_state=1).approximate(200, game).values
    b = Adalina(N, 0.7, include_extremes=True, gamma=0.0, random_state=1).approximate(200, game)
    np.testing.assert_allclose(a, b.values, rtol=1e-12)


CASES = [
    (ShapIQ, "shapley", 0.05),
    (ShapIQ, (4, 1), 0.05),
    (KernelSHAPUnbiased, "shapley", 0.05),
    (MSR, 0.3, 0.05),
    (MSR, 0.5, 0.05),
    (MSRProb, (2, 2), 0.08),
    (AME, 0.5, 0.08),
    (AME, (16, 4), 0.08),
    (OFA, "shapley", 0.05),
    (OFA, (1, 16), 0.05),
    (PermutationSampling, "shapley", 0.05),
    (ARM, "shapley", 0.08),
    (ARM, 0.3, 0.08),
    (ARM, (1, 4), 0.08),
    (GELS, (4, 1), 0.08),
    (GELS, 0.5, 0.08),
    (GELSShapley, "shapley", 0.08),
    (KernelSHAPMV, "shapley", 0.05),
]


@pytest.mark.parametrize("sampling", ["geomean", "kernel", "leverage"])
@pytest.mark.parametrize("control", ["diff", "zero"])
def test_kernelshap_mv_variants_converge(game, sampling, control):
    truth = exact_semivalue(game, N)
    est = KernelSHAPMV(N, sampling=sampling, control=control, batch_size=5000, random_state=0)
    assert rel_error(est.approximate(30_000, game).values, truth) < 0.1


def test_kernelshap_mv_kernel_zero_is_unbiased_kernelshap_when_u_empty_is_zero(game):
    from adalina import TabularGame

    zeroed = TabularGame(game.values - game.values[0])  # U(∅) = 0: the two forms coincide
    mv = KernelSHAPMV(N, sampling="kernel", control="zero", random_state=3)
    ref = KernelSHAPUnbiased(N, random_state=3)
    np.testing.assert_allclose(
        mv.approximate(300, zeroed).values, ref.approximate(300, zeroed).values, rtol=1e-9
    )


def test_geomean_sizes_are_adalinas_shapley_sizes():
    from adalina import sampling_distribution

    est = KernelSHAPMV(N)
    est._validate()
    np.testing.assert_allclose(est._size_q, sampling_distribution(N, "shapley"), rtol=1e-12)


def test_new_baselines_check_their_semivalue(game):
    with pytest.raises(ValueError, match="KernelSHAP-MV is defined for the shapley value only"):
        KernelSHAPMV(N, 0.3).approximate(50, game)
    with pytest.raises(ValueError, match="GELS-Shapley is defined for the shapley value only"):
        GELSShapley(N, (4, 1)).approximate(50, game)
    with pytest.raises(ValueError, match="sampling must be one of"):
        KernelSHAPMV(N, sampling="uniform").approximate(50, game)


@pytest.mark.parametrize(("cls", "sv", "tol"), CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_baselines_converge_to_the_exact_value(game, cls, sv, tol):
    truth = exact_semivalue(game, N, sv)
    result = cls(N, sv, random_state=0, batch_size=5000).approximate(30_000, game)
    assert rel_error(result.values, truth) < tol


@pytest.mark.parametrize(
    ("cls", "sv"),
    [
        (ShapIQ, 0.3),
        (KernelSHAPUnbiased, "shapley"),
        (MSR, 0.4),
        (MSRProb, "shapley"),
        (AME, 0.6),
        (OFA, (4, 1)),
        (GELS, (1, 4)),
        (GELSShapley, "shapley"),
        (KernelSHAPMV, "shapley"),
    ],
)
@pytest.mark.parametrize("budget", [10, 123])
def test_baselines_spend_the_budget_exactly(game, cls, sv, budget):
    rows = []
    result = cls(N, sv, random_state=0, batch_size=50).approximate(
        budget, lambda m: rows.append(m.shape[0]) or game(m)
    )
    assert sum(rows) == result.n_queries == budget


def test_permutation_sampling_spends_whole_permutations(game):
    rows = []
    est = PermutationSampling(N, random_state=0, batch_size=10)
    result = est.approximate(100, lambda m: rows.append(m.shape[0]) or game(m))
    # 2 extremes + 14 permutations of n - 1 = 7 queries; the last 0 queries are not enough for one
    assert sum(rows) == result.n_queries == 2 + 14 * 7
    assert est.min_budget == N + 1


def test_permutation_sampling_is_efficient_and_exact_on_additive_games(game):
    phi = PermutationSampling(N, random_state=3).approximate(2 + 5 * (N - 1), game).values
    assert np.isclose(phi.sum(), game.values[-1] - game.values[0], rtol=1e-12)
    v = np.arange(N, dtype=float)
    one = PermutationSampling(N, random_state=3).approximate(N + 1, lambda m: m @ v + 2.0)
    np.testing.assert_allclose(one.values, v, atol=1e-12)


@pytest.mark.parametrize("sv", [0.5, (16, 4)], ids=str)
def test_ame_is_unbiased(game, sv):
    truth = exact_semivalue(game, N, sv)
    runs = np.array([AME(N, sv, random_state=s).approximate(40, game).values for s in range(600)])
    z = (runs.mean(0) - truth) / (runs.std(0, ddof=1) / np.sqrt(len(runs)))
    assert np.max(np.abs(z)) < 4.5


@pytest.mark.parametrize(
    ("est", "match"),
    [
        (MSR(N, "shapley"), "MSR is defined for the banzhaf value only"),
        (PermutationSampling(N, 0.5), "permutation sampling is defined for the shapley value"),
        (KernelSHAPUnbiased(N, (4, 1)), "unbiased KernelSHAP is defined for the shapley value"),
    ],
)
def test_baselines_refuse_other_semivalues(game, est, match):
    with pytest.raises(ValueError, match=match):
        est.approximate(100, game)


def _feed(est, masks, values):
    """Fold ``values`` of ``masks`` into a fresh estimator's state (the hooks ``approximate`` uses)."""
    est._validate()
    est._reset()
    est._update(masks, values)
    est.n_queries_ = masks.shape[0]
    return est.values_


@pytest.mark.parametrize("sv", ["shapley", 0.3, (1, 16)], ids=str)
def test_ofa_on_every_coalition_once_is_exact(game, sv):
    # each (player, size) stratum then holds all of its coalitions: the stratified means are exact
    masks = all_coalitions(N)
    est = OFA(N, sv)
    np.testing.assert_allclose(_feed(est, masks, game(masks)), exact_semivalue(game, N, sv))


def test_msr_on_every_coalition_once_is_the_banzhaf_value(game):
    # half of all coalitions hold player i: the two means are exactly the Banzhaf average
    masks = all_coalitions(N)
    est = MSR(N, 0.5)
    np.testing.assert_allclose(_feed(est, masks, game(masks)), exact_semivalue(game, N, 0.5))


def test_permutation_sampling_on_every_permutation_is_exact():
    from itertools import permutations

    n = 5
    table = tabulated(n, seed=9)
    extremes = np.stack([np.zeros(n, bool), np.ones(n, bool)])
    # each permutation queries its n - 1 proper prefixes, in order
    chains = [
        np.isin(np.arange(n)[None, :], np.asarray(perm)[None, : j + 1].T).any(axis=0)
        for perm in permutations(range(n))
        for j in range(n - 1)
    ]
    masks = np.concatenate([extremes, np.asarray(chains)])
    est = PermutationSampling(n)
    np.testing.assert_allclose(
        _feed(est, masks, table(masks)), exact_semivalue(table, n, "shapley"), rtol=1e-12
    )
