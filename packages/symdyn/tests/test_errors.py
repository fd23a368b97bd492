"""The spec's bad-input list (section 8) and the obvious ones."""

import numpy as np
import pytest
from symdyn_id import (
    EquivariantLinearSystem,
    NoConsistentCandidateWarning,
    NotExcitingWarning,
    Representation,
    SymmetryDiscovery,
)

R = Representation


def fit(x, rep=None, **kwargs):
    return EquivariantLinearSystem(rep or R.cyclic(5), **kwargs).fit(x)


def test_trajectory_shape():
    with pytest.raises(ValueError, match="2-D"):
        fit(np.ones(5))
    with pytest.raises(ValueError, match="T >= 1"):
        fit(np.ones((1, 5)))
    with pytest.raises(ValueError, match="looks transposed"):
        fit(np.random.default_rng(0).standard_normal((5, 3)))
    with pytest.raises(ValueError, match="d = 5 columns"):
        fit(np.ones((3, 4)))
    with pytest.raises(ValueError, match="snapshots_axis"):
        fit(np.ones((3, 5)), snapshots_axis=2)


def test_non_finite_complex_and_non_numeric():
    x = np.random.default_rng(0).standard_normal((3, 5))
    x[1, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite values \\(first at row 1, column 2\\)"):
        fit(x)
    with pytest.raises(ValueError, match="real"):
        fit(np.ones((3, 5)) * 1j)
    with pytest.raises(ValueError, match="numeric"):
        fit(np.array([["a"] * 5] * 3))


@pytest.mark.filterwarnings("ignore:A is not identifiable")
def test_not_persistently_exciting_warns():
    with pytest.warns(NotExcitingWarning, match="constant"):
        fit(np.ones((4, 5)))
    decaying = np.zeros((3, 5))
    decaying[0] = 1.0
    with pytest.warns(NotExcitingWarning, match="decays to zero"):
        fit(decaying)
    with pytest.warns(NotExcitingWarning, match="zero"):
        fit(np.zeros((3, 5)))


def test_generators():
    with pytest.raises(ValueError, match="not a permutation of range\\(4\\)"):
        R.from_permutations([[0, 1, 1, 3]])
    with pytest.raises(ValueError, match="values \\[3\\] are outside range\\(3\\)"):
        R.from_permutations([[0, 1, 3]])
    with pytest.raises(ValueError, match="values \\[-1\\] are outside range\\(3\\)"):
        R.from_permutations([[0, 1, -1]])
    with pytest.raises(ValueError, match="values \\[1\\] repeat"):
        R.from_permutations([[0, 1, 1, 3]])
    with pytest.raises(ValueError, match="length 4"):
        R.from_permutations([[0, 1, 2]], d=4)
    with pytest.raises(ValueError, match="integers"):
        R.from_permutations([[0.5, 1, 2]])
    with pytest.raises(ValueError, match="not orthogonal"):
        R.from_matrices([np.diag([1.0, 2.0])])
    with pytest.raises(ValueError, match="size 3, expected 2"):
        R.from_matrices([np.eye(2), np.eye(3)])
    with pytest.raises(ValueError, match="square"):
        R.from_matrices([np.ones((2, 3))])
    with pytest.raises(ValueError, match="non-finite"):
        R.from_matrices([np.array([[np.inf, 0], [0, 1]])])
    with pytest.raises(ValueError, match="positive integer"):
        R.cyclic(0)


def test_estimator_parameters():
    x = np.random.default_rng(0).standard_normal((3, 5))
    with pytest.raises(ValueError, match="ridge must be >= 0"):
        fit(x, ridge=-1.0)
    with pytest.raises(ValueError, match="Representation"):
        EquivariantLinearSystem("C5").fit(x)
    with pytest.raises(ValueError, match="solver='fft' needs"):
        fit(x, rep=R.dihedral(5), solver="fft")
    with pytest.raises(ValueError, match="not fitted"):
        EquivariantLinearSystem(R.cyclic(5)).predict(np.ones(5))
    est = fit(x)
    with pytest.raises(ValueError, match="n_steps"):
        est.predict(np.ones(5), 0)
    with pytest.raises(ValueError, match="x0 must have shape"):
        est.predict(np.ones(4))


def test_discovery_parameters_and_library():
    x = np.random.default_rng(0).standard_normal((4, 5))
    with pytest.raises(ValueError, match="library is empty"):
        SymmetryDiscovery([]).fit(x)
    with pytest.raises(ValueError, match="d = 6 columns"):
        SymmetryDiscovery([R.cyclic(6)]).fit(x)
    with pytest.raises(ValueError, match="candidate 1 \\(C6\\) acts on R\\^6"):
        SymmetryDiscovery([R.cyclic(5), R.cyclic(6)]).fit(x)
    with pytest.raises(ValueError, match="criterion"):
        SymmetryDiscovery(criterion="aic").fit(x)
    with pytest.raises(ValueError, match="noise_std must be >= 0"):
        SymmetryDiscovery(noise_std=-1.0).fit(x)
    with pytest.raises(ValueError, match="permutation_default"):
        SymmetryDiscovery("everything").fit(x)


def test_no_consistent_candidate_falls_back_to_trivial_least_squares():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 5)) * 0.3
    x = np.empty((4, 5))
    x[0] = rng.standard_normal(5)
    for t in range(3):
        x[t + 1] = a @ x[t]
    with pytest.warns(NoConsistentCandidateWarning, match="trivial-group least squares"):
        disc = SymmetryDiscovery([R.cyclic(5), R.symmetric(5)]).fit(x)
    assert disc.representation_.name == "trivial(5)"
    assert np.allclose(disc.A_ @ x[:-1].T, x[1:].T)


def test_partial_fit_with_another_d_names_both():
    disc = SymmetryDiscovery().partial_fit(np.ones(6))
    with pytest.raises(ValueError, match=r"expected \(6,\).*started with d = 6"):
        disc.partial_fit(np.ones(5))
