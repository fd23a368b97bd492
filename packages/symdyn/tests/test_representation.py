import numpy as np
import pytest
from symdyn_id import Representation
from symdyn_id.groups import GroupTooLarge

R = Representation


def burnside_orbitals(rep):
    # number of G-orbits on pairs = |G|^-1 sum_g fix(g)^2, by enumeration
    elems = rep.elements()
    fixed = np.einsum("gii->g", elems)
    return round(float((fixed**2).mean()))


SMALL = [
    R.cyclic(7),
    R.cyclic(8),
    R.dihedral(8),
    R.dihedral(9),
    R.symmetric(5),
    R.trivial(4),
    R.torus(3, 4),
    R.block(R.cyclic(4), 3),
    R.block(R.dihedral(5), 2),
    R.product(R.dihedral(4), R.dihedral(3)),
]


@pytest.mark.parametrize("rep", SMALL, ids=lambda r: r.name)
def test_basis_commutes_and_dimension_matches_burnside_and_isotypic(rep):
    basis = rep.commutant_basis()
    for g in rep.generator_matrices():
        assert np.abs(basis @ g - g @ basis).max() < 1e-12
    assert basis.shape[0] == burnside_orbitals(rep)
    blocks = rep.isotypic_decomposition()
    assert sum(b.division_dim * b.multiplicity**2 for b in blocks) == rep.commutant_dim
    assert sum(b.dim * b.multiplicity for b in blocks) == rep.d
    # the blocks' bases are orthonormal and together span R^d
    q = np.hstack([b.basis for b in blocks])
    assert np.allclose(q.T @ q, np.eye(rep.d), atol=1e-10)


@pytest.mark.parametrize("d", [3, 6, 7, 12])
def test_family_dimensions(d):
    assert R.cyclic(d).commutant_dim == d
    assert R.dihedral(d).commutant_dim == d // 2 + 1
    assert R.symmetric(d).commutant_dim == 2
    assert R.trivial(d).commutant_dim == d * d


def test_min_trajectory_length_per_family():
    assert R.cyclic(12).min_trajectory_length() == 1
    assert R.dihedral(12).min_trajectory_length() == 1
    assert R.symmetric(9).min_trajectory_length() == 1
    assert R.trivial(6).min_trajectory_length() == 6
    for k in range(1, 5):
        rep = R.block(R.cyclic(5), k)
        assert rep.min_trajectory_length() == k
        # the general (isotypic) route agrees with the grid shortcut
        rep.grid = None
        assert rep.min_trajectory_length() == k
    # D_6 has 1-dim irreps (multiplicity 3 -> 3 transitions) and 2-dim ones (ceil(3 / 2) = 2)
    assert R.block(R.dihedral(6), 3).min_trajectory_length() == 3


def test_quaternion_group_has_quaternionic_irrep():
    i = np.array([[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 0, -1], [0, 0, 1, 0]], float)
    j = np.array([[0, 0, -1, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, -1, 0, 0]], float)
    rep = R.from_matrices([i, j])
    assert rep.order() == 8
    assert rep.commutant_dim == 4
    (block,) = rep.isotypic_decomposition()
    assert (block.dim, block.multiplicity, block.division_dim) == (4, 1, 4)
    assert rep.min_trajectory_length() == 1


def test_rotation_matrices_match_permutation_version():
    # C_6 by the permutation matrix, given as a matrix action, and conjugated by a rotation
    perm = R.cyclic(6)
    (shift,) = perm.generator_matrices()
    q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 6)))
    rep = R.from_matrices([q @ shift @ q.T])
    assert rep.commutant_dim == 6
    basis = rep.commutant_basis()
    assert np.allclose(np.einsum("kij,klm->ijlm", basis, basis).trace(axis1=0, axis2=2), np.eye(6))
    assert rep.min_trajectory_length() == 1


@pytest.mark.slow  # imports a peer library (tens of seconds under load)
def test_sympy_group_and_graph_automorphisms():
    sympy = pytest.importorskip("sympy.combinatorics")
    group = sympy.PermutationGroup([sympy.Permutation([1, 2, 3, 4, 5, 0])])
    rep = R.from_permutations(group)
    assert rep.d == 6 and rep.commutant_dim == 6
    nx = pytest.importorskip("networkx")
    cycle = R.from_graph(nx.cycle_graph(8))
    assert cycle.commutant_dim == R.dihedral(8).commutant_dim
    assert np.array_equal(cycle.commutant().labels, R.dihedral(8).commutant().labels)
    grid = R.from_graph(nx.grid_2d_graph(3, 4, periodic=True))
    assert grid.order() == R.torus(3, 4).order() * 4  # shifts and the two reflections


@pytest.mark.parametrize("rep", [R.dihedral(6), R.torus(2, 3), R.block(R.cyclic(3), 2)])
def test_reynolds_is_the_orthogonal_projection_onto_the_commutant(rep):
    rng = np.random.default_rng(1)
    m1, m2 = rng.standard_normal((2, rep.d, rep.d))
    p1 = rep.reynolds(m1)
    assert np.allclose(rep.reynolds(p1), p1, atol=1e-12)  # idempotent
    assert np.isclose((rep.reynolds(m1) * m2).sum(), (m1 * rep.reynolds(m2)).sum())  # self-adjoint
    for g in rep.generator_matrices():
        assert np.abs(p1 @ g - g @ p1).max() < 1e-12  # onto the commutant
    basis = rep.commutant_basis()
    inside = np.tensordot(rng.standard_normal(basis.shape[0]), basis, axes=1)
    assert np.allclose(rep.reynolds(inside), inside, atol=1e-12)  # identity on C
    exact = rep.reynolds(m1, method="enumerate")
    assert np.allclose(exact, p1, atol=1e-12)
    walk, info = rep.reynolds_walk(m1, tol=1e-11)
    assert info.converged and 0 < info.contraction < 1
    assert np.abs(walk - exact).max() < 1e-8


def test_walk_contraction_tracks_the_spectral_gap():
    # C_n with one shift: the lazy walk's slowest mode is cos(2 pi / n) on rho (x) rho, so the
    # contraction is 1/2 + cos(2 pi / n) / 2 -> 1 as n grows (a cycle is no expander)
    rng = np.random.default_rng(2)
    for n in (6, 12):
        _, info = R.cyclic(n).reynolds_walk(rng.standard_normal((n, n)), tol=1e-12)
        assert info.contraction == pytest.approx(0.5 + 0.5 * np.cos(2 * np.pi / n), abs=1e-3)


def test_dense_matrix_reynolds_paths_agree():
    rep = R.from_matrices(R.dihedral(5).generator_matrices())
    m = np.random.default_rng(3).standard_normal((5, 5))
    assert np.allclose(rep.reynolds(m, method="basis"), rep.reynolds(m, method="enumerate"))
    assert np.allclose(rep.reynolds(m), R.dihedral(5).reynolds(m))


def test_enumeration_refuses_large_groups():
    with pytest.raises(GroupTooLarge):
        R.symmetric(9).order(max_order=1000)


def test_conjugate_relabels_the_commutant():
    rep = R.cyclic(6)
    sigma = np.array([3, 0, 4, 1, 5, 2])
    conj = rep.conjugate(sigma)
    s = np.eye(6)[:, sigma]  # s e_i = e_{sigma[i]}
    basis = rep.commutant_basis()
    moved = s @ basis @ s.T
    for b in moved:
        assert np.allclose(conj.reynolds(b), b)
