import warnings

import numpy as np
import pytest
from symdyn_id import (
    EquivariantLinearSystem,
    NotExcitingWarning,
    Representation,
    random_equivariant_matrix,
    relative_error,
    simulate,
)
from symdyn_id.integrations import least_squares_dmd

R = Representation


def trajectory(rep, n_transitions, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    a = random_equivariant_matrix(rep, rng)
    return a, simulate(a, rng.standard_normal(rep.d), n_transitions, noise, rng)


def test_circulant_fit_equals_fft_closed_form():
    rep = R.cyclic(16)
    a, x = trajectory(rep, 1)
    est = EquivariantLinearSystem(rep, solver="basis").fit(x)
    # T = 1: the eigenvalue of frequency w is fft(x_1)[w] / fft(x_0)[w]
    eig = np.fft.fft(x[1]) / np.fft.fft(x[0])
    closed = np.real(np.fft.ifft(eig[:, None] * np.fft.fft(np.eye(16), axis=0), axis=0))
    assert np.abs(est.A_ - closed).max() < 1e-12
    assert relative_error(est.A_, a) < 1e-12


@pytest.mark.parametrize(
    "rep", [R.cyclic(9), R.torus(3, 4), R.block(R.cyclic(4), 3), R.block(R.torus(2, 3), 2)]
)
@pytest.mark.parametrize("ridge", [0.0, 0.3])
def test_fft_path_equals_orbital_least_squares(rep, ridge):
    _, x = trajectory(rep, rep.min_trajectory_length() + 2, noise=0.05)
    fft = EquivariantLinearSystem(rep, ridge=ridge, solver="fft").fit(x)
    basis = EquivariantLinearSystem(rep, ridge=ridge, solver="basis").fit(x)
    assert fft.solver_ == "fft" and basis.solver_ == "orbital"
    assert np.abs(fft.A_ - basis.A_).max() < 1e-10
    assert fft.design_rank_ == basis.design_rank_ == basis.n_params_


def test_ridge_is_a_frobenius_penalty():
    # closed form: vec(A) = (D^T D + lam W)^-1 D^T y with W the Gram of the orbital basis
    rep = R.dihedral(7)
    _, x = trajectory(rep, 2, noise=0.1)
    lam = 0.7
    est = EquivariantLinearSystem(rep, ridge=lam).fit(x)
    basis = rep.commutant_basis()
    design = np.stack([(x[:-1] @ b.T).ravel() for b in basis], axis=1)
    gram = np.einsum("kij,lij->kl", basis, basis)
    theta = np.linalg.solve(design.T @ design + lam * gram, design.T @ x[1:].ravel())
    assert np.allclose(est.A_, np.tensordot(theta, basis, axes=1), atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_design_rank_reaches_p_exactly_at_t_star_for_block_circulant(k):
    rep = R.block(R.cyclic(5), k)
    assert rep.min_trajectory_length() == k
    _, x = trajectory(rep, k, seed=k)
    ranks = []
    for t in range(1, k + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotExcitingWarning)
            est = EquivariantLinearSystem(rep, solver="basis").fit(x[: t + 1])
        ranks.append(est.design_rank_)
    p = rep.commutant_dim
    assert ranks == [min(5 * k * t, p) for t in range(1, k + 1)]
    assert ranks[-1] == p and (k == 1 or ranks[-2] < p)


FAMILIES = [
    R.cyclic(12),
    R.dihedral(12),
    R.symmetric(10),
    R.block(R.cyclic(6), 3),
    R.torus(4, 5),
    R.block(R.dihedral(5), 2),
    R.trivial(6),
]


@pytest.mark.parametrize("rep", FAMILIES, ids=lambda r: r.name)
def test_noise_free_recovery_at_t_star_and_equivariance(rep):
    t_star = rep.min_trajectory_length()
    a, x = trajectory(rep, t_star, seed=3)
    est = EquivariantLinearSystem(rep).fit(x)
    assert est.identifiable_ and est.n_transitions_ == t_star
    assert relative_error(est.A_, a) < 1e-10
    assert est.residual_ < 1e-12
    x0 = np.random.default_rng(4).standard_normal(rep.d)
    for g in rep.generator_matrices():
        assert np.abs(est.A_ @ g - g @ est.A_).max() < 1e-12
        assert np.allclose(est.predict(g @ x0, 5), est.predict(x0, 5) @ g.T)


def test_one_transition_short_of_t_star_is_not_identifiable_and_warns():
    rep = R.block(R.cyclic(6), 3)
    _, x = trajectory(rep, 2)
    with pytest.warns(NotExcitingWarning, match="2 transitions < T\\* = 3"):
        est = EquivariantLinearSystem(rep).fit(x)
    assert not est.identifiable_ and est.design_rank_ == 36 < est.n_params_ == 54


def test_dmd_never_identifies_a_dihedral_system_but_commutant_ls_does_at_t1():
    # D_d has 2-dim irreps of multiplicity 1 (d_i / e_i = 2 > m_i): repeated eigenvalues, so one
    # trajectory's Krylov space is a proper subspace whatever T
    rep = R.dihedral(8)
    a, x = trajectory(rep, 24, seed=5)
    for t in (8, 16, 24):
        assert relative_error(least_squares_dmd(x[: t + 1]), a) > 0.1
    assert np.linalg.matrix_rank(x[:-1]) < 8
    est = EquivariantLinearSystem(rep).fit(x[:2])
    assert relative_error(est.A_, a) < 1e-12


def test_wrong_larger_group_leaves_a_residual():
    _, x = trajectory(R.cyclic(10), 3, seed=6)
    for wrong in (R.dihedral(10), R.symmetric(10)):
        assert EquivariantLinearSystem(wrong).fit(x).residual_ > 1e-3


def test_snapshots_axis_and_several_trajectories():
    rep = R.dihedral(6)
    a, x = trajectory(rep, 3)
    rows = EquivariantLinearSystem(rep).fit(x)
    cols = EquivariantLinearSystem(rep, snapshots_axis=1).fit(x.T)
    assert np.array_equal(rows.A_, cols.A_)
    _, x2 = trajectory(rep, 2, seed=9)
    rng = np.random.default_rng(9)
    x2 = simulate(a, rng.standard_normal(6), 2)
    both = EquivariantLinearSystem(rep).fit([x, x2])
    assert both.n_transitions_ == 5 and relative_error(both.A_, a) < 1e-12


def test_input_is_not_modified_and_float32_is_accepted():
    rep = R.cyclic(6)
    _, x = trajectory(rep, 2)
    x32 = x.astype(np.float32)
    before = x32.copy()
    est = EquivariantLinearSystem(rep).fit(x32)
    assert np.array_equal(x32, before) and est.A_.dtype == np.float64


def test_predict_score_and_shapes():
    rep = R.torus(3, 3)
    _, x = trajectory(rep, 4)
    est = EquivariantLinearSystem(rep).fit(x)
    assert est.predict(x[0], 4).shape == (4, 9)
    assert np.allclose(est.predict(x[0], 4), x[1:])
    assert est.predict(x[:2], 3).shape == (2, 3, 9)
    assert est.score(x) == pytest.approx(1.0)
    assert np.array_equal(est.coefficients(), est.A_)


@pytest.mark.slow  # imports a peer library (tens of seconds under load)
def test_sklearn_clone_and_params():
    base = pytest.importorskip("sklearn.base")
    est = EquivariantLinearSystem(R.cyclic(5), ridge=0.1)
    clone = base.clone(est)
    assert clone.get_params()["ridge"] == 0.1 and clone.representation.name == "C5"
    assert not hasattr(clone, "A_")
    assert est.set_params(ridge=0.2).ridge == 0.2


def test_relabelled_grid_group_keeps_the_fft_path():
    rep = R.block(R.torus(2, 3), 2)
    sigma = np.random.default_rng(11).permutation(rep.d)
    conj = rep.conjugate(sigma).conjugate(np.roll(np.arange(rep.d), 1))
    assert conj.grid is not None and conj.grid.relabel is not None
    _, x = trajectory(conj, 3, seed=11, noise=0.05)
    fft = EquivariantLinearSystem(conj).fit(x)
    basis = EquivariantLinearSystem(conj, solver="basis").fit(x)
    assert fft.solver_ == "fft"
    assert np.abs(fft.A_ - basis.A_).max() < 1e-10
    assert np.abs(conj.reynolds(fft.A_) - fft.A_).max() < 1e-12


def test_products_and_blocks_of_relabelled_grids_fall_back_to_the_basis():
    conj = R.cyclic(4).conjugate([2, 0, 3, 1])
    for rep in (
        R.block(conj, 2),
        R.product(conj, R.cyclic(3)),
        R.product(R.block(R.cyclic(2), 2), R.cyclic(3)),
    ):
        assert rep.grid is None
        _, x = trajectory(rep, rep.min_trajectory_length() + 1, seed=12, noise=0.01)
        est = EquivariantLinearSystem(rep).fit(x)
        assert est.solver_ == "orbital"
        assert np.abs(rep.reynolds(est.A_) - est.A_).max() < 1e-12


@pytest.mark.parametrize(
    "rep",
    [
        Representation.torus(4, 4),
        Representation.product(Representation.dihedral(6), Representation.dihedral(4)),
        Representation.block(Representation.cyclic(4), 3),
        Representation.symmetric(7),
    ],
    ids=lambda r: r.name,
)
def test_orbit_summed_normal_equations_equal_the_dense_svd_solver(rep):
    from symdyn_id import commutant as cm

    rng = np.random.default_rng(3)
    comm = rep.commutant()
    x = rng.standard_normal((4 * rep.d + 1, rep.d))
    states, targets = x[:-1], x[1:]
    design = comm.design(states)
    assert np.allclose(cm.orbital_gram(comm, states), design.T @ design, rtol=1e-13, atol=1e-10)
    fast = cm.commutant_lstsq(comm, states, targets)
    theta, _, rank, _ = np.linalg.lstsq(design, targets.ravel(), rcond=None)
    assert fast.rank == rank == comm.p
    np.testing.assert_allclose(fast.theta, theta, rtol=0, atol=1e-10 * np.abs(theta).max())
    resid = targets.ravel() - design @ theta
    assert fast.rss == pytest.approx(float(resid @ resid), rel=1e-10)


def test_ill_conditioned_tall_orbital_design_keeps_the_svd_rank():
    from symdyn_id import commutant as cm

    rep = Representation.dihedral(8)
    x = np.ones((80, 8))  # invariant states: every B_k x is a multiple of x
    res = cm.commutant_lstsq(rep.commutant(), x[:-1], x[1:])
    rank = np.linalg.matrix_rank(rep.commutant().design(x[:-1]))
    assert res.rank == rank < rep.commutant_dim
