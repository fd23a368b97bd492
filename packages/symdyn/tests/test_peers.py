"""Round trips with the peers: PyDMD (PiDMD, DMD) and pysindy (ConstrainedSR3)."""

import warnings

import numpy as np
import pytest
from symdyn_id import EquivariantLinearSystem, Representation, random_equivariant_matrix, simulate
from symdyn_id.integrations import (
    commutant_constraints,
    constrained_sr3,
    least_squares_dmd,
    pidmd_matrix,
    pydmd_matrix,
)

R = Representation


def trajectory(rep, n_transitions, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    a = random_equivariant_matrix(rep, rng)
    return a, simulate(a, rng.standard_normal(rep.d), n_transitions, noise, rng)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@pytest.mark.slow  # imports a peer library (tens of seconds under load)
def test_circulant_equals_pidmd_circulant_once_pidmd_has_rank_d():
    pytest.importorskip("pydmd")
    rep = R.cyclic(10)
    _, x = trajectory(rep, 13, noise=1e-2)
    ours = EquivariantLinearSystem(rep).fit(x).A_
    assert np.abs(pidmd_matrix(x, "circulant") - ours).max() < 1e-10
    # below T = d PiDMD keeps only rank(X) <= T eigenvalues: it cannot use the structure
    a, short = trajectory(rep, 1, seed=1)
    assert np.abs(EquivariantLinearSystem(rep).fit(short).A_ - a).max() < 1e-12
    assert np.abs(pidmd_matrix(short, "circulant") - a).max() > 1e-2


@pytest.mark.slow  # imports a peer library (tens of seconds under load)
def test_torus_equals_pidmd_bccb_with_column_major_blocks():
    pytest.importorskip("pydmd")
    rep = R.torus(3, 4)
    _, x = trajectory(rep, 14, noise=1e-2)
    ours = EquivariantLinearSystem(rep).fit(x).A_
    assert np.abs(pidmd_matrix(x, "BCCB", (4, 3)) - ours).max() < 1e-10


@pytest.mark.slow  # imports a peer library (tens of seconds under load)
def test_pydmd_dmd_equals_least_squares_at_full_rank():
    pytest.importorskip("pydmd")
    rng = np.random.default_rng(2)
    a = rng.standard_normal((6, 6))
    a *= 0.9 / np.abs(np.linalg.eigvals(a)).max()
    x = simulate(a, rng.standard_normal(6), 9)
    assert np.abs(pydmd_matrix(x) - least_squares_dmd(x)).max() < 1e-8
    assert np.abs(least_squares_dmd(x) - a).max() < 1e-9


def test_constraints_describe_the_commutant():
    rep = R.block(R.dihedral(4), 2)
    lhs, rhs = commutant_constraints(rep)
    p, d = rep.commutant_dim, rep.d
    assert lhs.shape == (d * d - p, d * d) and np.all(rhs == 0)
    assert np.linalg.matrix_rank(lhs) == d * d - p
    basis = rep.commutant_basis().reshape(p, -1)
    assert np.abs(lhs @ basis.T).max() == 0.0


@pytest.mark.slow  # imports a peer library (tens of seconds under load)
def test_constrained_sr3_without_sparsity_equals_commutant_least_squares():
    ps = pytest.importorskip("pysindy")
    pytest.importorskip("cvxpy")
    rep = R.cyclic(6)
    _, x = trajectory(rep, 4, noise=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = constrained_sr3(rep, max_iter=1000, tol=1e-14)
        model = ps.DiscreteSINDy(
            optimizer=opt, feature_library=ps.PolynomialLibrary(degree=1, include_bias=False)
        )
        model.fit(x, t=1)
    ours = EquivariantLinearSystem(rep).fit(x).A_
    assert np.abs(model.coefficients() - ours).max() < 1e-5
    assert np.abs(rep.reynolds(model.coefficients()) - model.coefficients()).max() < 1e-12
