import warnings

import numpy as np
import pytest
from symdyn_id import (
    EquivariantLinearSystem,
    NoConsistentCandidateWarning,
    Representation,
    SymmetryDiscovery,
    default_library,
    random_equivariant_matrix,
    relative_error,
    simulate,
)

R = Representation


def trajectory(rep, n_transitions, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    a = random_equivariant_matrix(rep, rng)
    return a, simulate(a, rng.standard_normal(rep.d), n_transitions, noise, rng)


def needed_length(rep):
    # spare equations: d T > p, so T* when d T* > p, else T* + 1
    t_star = rep.min_trajectory_length()
    return t_star if rep.d * t_star > rep.commutant_dim else t_star + 1


TRUTHS = [
    R.cyclic(12),
    R.dihedral(12),
    R.symmetric(12),
    R.torus(3, 4),
    R.block(R.cyclic(4), 3),
    R.block(R.dihedral(6), 2),
]


@pytest.mark.parametrize("truth", TRUTHS, ids=lambda r: r.name)
def test_noise_free_discovery_selects_the_truth_at_the_predicted_length(truth):
    a, x = trajectory(truth, 12, seed=1)
    disc = SymmetryDiscovery().fit(x)
    assert disc.done_
    assert np.array_equal(disc.representation_.commutant().labels, truth.commutant().labels)
    assert disc.n_transitions_used_ == needed_length(truth)
    assert relative_error(disc.A_, a) < 1e-10


def test_at_t1_a_dimension_d_commutant_fits_any_data_and_is_not_chosen():
    # the spec's rule as worded would pick C_d here: p = d = dT gives a zero residual on generic data
    rng = np.random.default_rng(2)
    generic = rng.standard_normal((12, 12))
    x = simulate(
        generic / np.abs(np.linalg.eigvals(generic)).max() * 0.95, rng.standard_normal(12), 1
    )
    assert EquivariantLinearSystem(R.cyclic(12)).fit(x).residual_ < 1e-12
    with pytest.warns(NoConsistentCandidateWarning):
        disc = SymmetryDiscovery([R.trivial(12), R.cyclic(12), R.dihedral(12)]).fit(x)
    assert disc.representation_.name == "trivial(12)" and not disc.done_


def test_generic_system_gives_the_trivial_group_after_d_plus_one_transitions():
    d = 6
    rng = np.random.default_rng(3)
    a = rng.standard_normal((d, d))
    a *= 0.95 / np.abs(np.linalg.eigvals(a)).max()
    x = simulate(a, rng.standard_normal(d), 2 * d)
    disc = SymmetryDiscovery().fit(x)
    assert disc.representation_.name == "trivial(6)"
    assert disc.n_transitions_used_ == d + 1
    assert relative_error(disc.A_, a) < 1e-9


def test_wrong_larger_groups_are_rejected_by_their_residual():
    _, x = trajectory(R.cyclic(10), 3, seed=4)
    disc = SymmetryDiscovery(adaptive=False).fit(x)
    by_name = {s["name"]: s for s in disc.scores_}
    for wrong in ("D10", "S10", "block(S5,2)"):
        assert by_name[wrong]["residual"] > 1e-3 and not by_name[wrong]["consistent"]
    assert by_name["C10"]["consistent"]


def test_decoys_with_the_same_commutant_dimension_are_rejected():
    truth = R.torus(3, 4)
    rng = np.random.default_rng(5)
    decoys = [truth.conjugate(rng.permutation(12), name=f"decoy{i}") for i in range(20)]
    library = [*default_library(12), *decoys]
    _, x = trajectory(truth, 6, seed=5)
    disc = SymmetryDiscovery(library).fit(x)
    assert disc.representation_.name == "C3xC4" and disc.n_transitions_used_ == 2


@pytest.mark.parametrize("criterion", ["residual", "bic"])
def test_noisy_discovery(criterion):
    sigma = 1e-2
    hits = 0
    for seed in range(10):
        _, x = trajectory(R.dihedral(12), 16, seed=seed, noise=sigma)
        kwargs = {"noise_std": sigma} if criterion == "residual" else {}
        disc = SymmetryDiscovery(criterion=criterion, adaptive=False, **kwargs).fit(x)
        hits += disc.representation_.name == "D12"
    assert hits >= 9


def test_noise_free_default_on_noisy_data_is_an_error():
    _, x = trajectory(R.cyclic(5), 12, seed=6, noise=1e-2)
    with pytest.raises(ValueError, match="noise_std"):
        SymmetryDiscovery(adaptive=False).fit(x)


def test_partial_fit_reaches_the_same_decision_as_fit():
    truth = R.block(R.cyclic(4), 2)
    _, x = trajectory(truth, 8, seed=7)
    online = SymmetryDiscovery()
    for state in x:
        online.partial_fit(state)
        if online.done_:
            break
    batch = SymmetryDiscovery().fit(x)
    assert online.n_transitions_used_ == batch.n_transitions_used_ == needed_length(truth)
    assert online.representation_.name == batch.representation_.name == truth.name
    assert np.allclose(online.A_, batch.A_)


@pytest.mark.slow  # spawns joblib workers that import numpy and symdyn_id
def test_n_jobs_two_chooses_as_one():
    _, x = trajectory(R.dihedral(8), 6, seed=8, noise=1e-3)
    one = SymmetryDiscovery(noise_std=1e-3, n_jobs=1).fit(x)
    two = SymmetryDiscovery(noise_std=1e-3, n_jobs=2).fit(x)
    assert one.representation_.name == two.representation_.name == "D8"
    assert one.n_transitions_used_ == two.n_transitions_used_
    assert [s["residual"] for s in one.scores_] == pytest.approx(
        [s["residual"] for s in two.scores_], nan_ok=True
    )


def test_default_library_has_no_duplicate_commutants():
    library = default_library(12)
    keys = [r.commutant().labels.tobytes() for r in library if r.commutant().labels is not None]
    assert len(keys) == len(set(keys))
    names = {r.name for r in library}
    assert {"trivial(12)", "C12", "D12", "S12", "C3xC4", "block(C4,3)"} <= names


def test_predict_and_score_delegate():
    _, x = trajectory(R.cyclic(6), 4, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        disc = SymmetryDiscovery().fit(x)
    assert np.allclose(disc.predict(x[0], 4), x[1:])
    assert disc.score(x) == pytest.approx(1.0)
    assert disc.min_trajectory_length_ == 1


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_extreme_scales_select_as_at_unit_scale(scale):
    rep = Representation.cyclic(8)
    rng = np.random.default_rng(0)
    a = random_equivariant_matrix(rep, rng)
    x = simulate(a, rng.standard_normal(8), 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow/underflow warning, no fallback warning
        disc = SymmetryDiscovery().fit(x * scale)
        est = EquivariantLinearSystem(rep).fit(x * scale)
    assert disc.representation_.name == "C8"
    assert np.abs(disc.A_ - a).max() < 1e-10 and np.abs(est.A_ - a).max() < 1e-10
    assert all(np.isfinite(s["residual"]) for s in disc.scores_ if s["testable"])
    assert np.isfinite(est.residual_) and est.residual_ < 1e-12
