import math
import statistics

import pytest
import torch
from helpers import assert_close
from wasserstein_meta.potentials import LpNorm, Quadratic, WassersteinBregman, bregman_divergence


def _wb(K=5, n=6, mode="dual", Q=None, seed=0, eps=0.7, lam=0.3, centre=False):
    gen = torch.Generator().manual_seed(seed)
    atoms = torch.randn(K, n, generator=gen)
    if Q is None:
        M = torch.randn(n, n, generator=gen)
        Q = M @ M.T / n + 0.5 * torch.eye(n)
    return WassersteinBregman(atoms, eps=eps, lam=lam, Q=Q, mode=mode, centre=centre)


def _reference_psi(pot, a):
    # Independent: the c-transform form ψ = λ/2‖a‖² + ½‖a‖²_Q − φ^c_ε(a).
    Q, atoms, eps, lam = pot.Q, pot.atoms, pot.eps, pot.lam
    diff = a.unsqueeze(1) - atoms.unsqueeze(0)
    cost = 0.5 * ((diff @ Q) * diff).sum(-1)
    phi_c = -eps * torch.logsumexp(-cost / eps + math.log(1 / len(atoms)), -1)
    return 0.5 * lam * (a * a).sum(-1) + 0.5 * ((a @ Q) * a).sum(-1) - phi_c


def test_value_equals_entropic_c_transform_form():
    pot = _wb()
    a = torch.randn(7, 6)
    assert_close(pot.value(a), _reference_psi(pot, a), atol=1e-12)


@pytest.mark.parametrize("full_Q, centre", [(True, False), (False, False), (True, True)])
def test_grad_and_hessian_match_autograd(full_Q, centre):
    pot = _wb(Q=None if full_Q else 0.8, centre=centre)
    a = torch.randn(4, 6, requires_grad=True)
    g = torch.autograd.grad(pot.value(a).sum(), a)[0]
    assert_close(pot.grad(a), g, atol=1e-12)
    for b in range(4):
        H = torch.autograd.functional.hessian(
            lambda x: pot.value(x.unsqueeze(0)).sum(), a[b].detach()
        )
        assert_close(pot.hessian(a[b : b + 1].detach())[0], H, atol=1e-12)


def test_centred_potential_is_the_uncentred_one_translated_to_the_barycentre():
    plain, centred = _wb(centre=False), _wb(centre=True)
    bar = plain.barycentre()
    a = torch.randn(5, 6)
    # ψ_c(a) = ψ(a + ā) − λāᵀa + const: same Hessian, gradient shifted by λā.
    assert_close(centred.grad(a), plain.grad(a + bar) - plain.lam * bar, atol=1e-12)
    assert_close(centred.hessian(a), plain.hessian(a + bar), atol=1e-12)
    assert_close(centred.attention(a), plain.attention(a + bar), atol=1e-12)
    assert_close(centred.centre_point(), torch.zeros(1, 6), atol=0)
    assert_close(plain.centre_point(), bar.unsqueeze(0), atol=0)


def test_auto_eps_is_a_small_fraction_of_the_pairwise_cost_however_far_the_atoms_sit():
    gen = torch.Generator().manual_seed(0)
    spread = torch.randn(4, 6, generator=gen)
    for offset in (0.0, 700.0):
        pot = WassersteinBregman(spread + offset, Q=1.0)
        diff = spread.unsqueeze(0) - spread.unsqueeze(1)
        cost = 0.5 * (diff**2).sum(-1)
        # Six pairs: the median is the mean of the two middle costs, as numpy and statistics define it.
        median = statistics.median(cost[torch.triu_indices(4, 4, 1).unbind()].tolist())
        assert_close(pot.eps, 0.05 * median, atol=1e-12)
        # The attention is soft between the tasks (not one atom, not uniform) where flights start.
        H = pot.hessian(pot.centre_point())[0]
        eig = torch.linalg.eigvalsh(H)
        assert eig[-1] / eig[0] > 1.5


def test_integer_atoms_are_refused():
    with pytest.raises(ValueError, match="floating-point"):
        WassersteinBregman(torch.ones(3, 4, dtype=torch.int64))


def test_attention_sums_to_one_and_hessian_floor_is_lambda():
    pot = _wb(lam=0.3)
    a = 3 * torch.randn(20, 6)
    assert_close(pot.attention(a).sum(-1), torch.ones(20), atol=1e-14)
    eig = torch.linalg.eigvalsh(pot.hessian(a))
    assert eig.min() >= 0.3 - 1e-12
    assert eig.max() > 0.3 + 1e-3  # the task spread makes it anisotropic


def test_woodbury_solve_equals_dense_solve():
    pot = _wb(K=3, n=8)
    a, g = torch.randn(5, 8), torch.randn(5, 8)
    dense = torch.linalg.solve(pot.hessian(a), g.unsqueeze(-1)).squeeze(-1)
    assert_close(pot.hess_solve(a, g), dense, atol=1e-12)


def test_conjugate_gradient_inverts_gradient():
    pot = _wb(eps=0.2)
    a = 2 * torch.randn(6, 6)
    assert_close(pot.conj_grad(pot.grad(a)), a, atol=1e-10)


def test_one_atom_gives_affine_gradient_and_flat_hessian():
    atom = torch.randn(1, 4)
    Q = torch.diag(torch.tensor([0.5, 1.0, 2.0, 3.0]))
    pot = WassersteinBregman(atom, eps=0.5, lam=0.7, Q=Q)
    a = torch.randn(3, 4)
    assert_close(pot.grad(a), 0.7 * a + atom @ Q, atol=1e-14)
    assert_close(pot.hessian(a), 0.7 * torch.eye(4).expand(3, 4, 4), atol=1e-14)


def test_large_eps_is_euclidean():
    pot = WassersteinBregman(torch.randn(4, 5), eps=1e6, lam=0.5, Q=1.0)
    a, g = torch.randn(3, 5), torch.randn(3, 5)
    assert_close(pot.hess_solve(a, g), g / 0.5, atol=1e-4)


def test_small_eps_is_hard_assignment_to_nearest_atom():
    atoms = torch.tensor([[0.0, 0.0], [4.0, 0.0]])
    pot = WassersteinBregman(atoms, eps=1e-3, lam=1.0, Q=1.0, centre=False)
    pi = pot.attention(torch.tensor([[0.5, 0.3], [3.5, -1.0]]))
    assert_close(pi, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), atol=1e-12)


@pytest.mark.parametrize(
    "make",  # built inside the test, under the float64 fixture
    [
        lambda: Quadratic(torch.tensor([[2.0, 0.3, 0], [0.3, 1, 0], [0, 0, 0.5]])),
        lambda: LpNorm(1.6),
        lambda: LpNorm(3.0),
        lambda: _wb(n=6),
        lambda: _wb(n=6, centre=True),
    ],
)
def test_bregman_divergence_nonnegative_and_zero_on_diagonal(make):
    pot = make()
    a, b = torch.randn(50, 6), torch.randn(50, 6)
    assert (bregman_divergence(pot, a, b) >= -1e-12).all()
    assert_close(bregman_divergence(pot, a, a), torch.zeros(50), atol=1e-12)


def test_quadratic_divergence_closed_form():
    P = torch.tensor([[2.0, 0.3, 0], [0.3, 1, 0], [0, 0, 0.5]])
    pot = Quadratic(P)
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    M = (torch.linalg.inv(P)[:, None, :, None] * torch.eye(2)[None, :, None, :]).reshape(
        6, 6
    )  # row-major vec: (P ⊗ I)⁻¹
    expected = 0.5 * (((a - b) @ M) * (a - b)).sum(-1)
    assert_close(bregman_divergence(pot, a, b), expected, atol=1e-12)


@pytest.mark.parametrize("p", [1.5, 2.0, 3.5])
def test_lp_norm_closed_forms(p):
    pot = LpNorm(p)
    a = torch.randn(3, 5, requires_grad=True)
    g = torch.autograd.grad(pot.value(a).sum(), a)[0]
    assert_close(pot.grad(a), g, atol=1e-12)
    assert_close(pot.conj_grad(pot.grad(a)), a.detach(), atol=1e-10)
    H = torch.autograd.functional.hessian(lambda x: pot.value(x.unsqueeze(0)).sum(), a[0].detach())
    v = torch.randn(5)
    assert_close(
        pot.hess_solve(a[:1].detach(), v.unsqueeze(0))[0], torch.linalg.solve(H, v), atol=1e-9
    )


def test_lp_norm_gradient_at_zero_state_is_finite():
    pot = LpNorm(3.0)
    z = torch.zeros(2, 4, requires_grad=True)
    out = pot.conj_grad(z).sum()
    out.backward()
    assert torch.isfinite(pot.raw.grad) and torch.isfinite(z.grad).all()


def test_attention_equals_sinkhorn_plan_rows():
    """Row i of the entropic OT plan between sources a_i and the atoms, divided by its mass, is
    softmax_k(log v_k − c(a_i, a_k)/ε): our attention over the atoms reweighted by Sinkhorn's target
    scaling v. (With one source point the plan row is ν itself: the target marginal decides.)"""
    ot = pytest.importorskip("ot")
    gen = torch.Generator().manual_seed(1)
    atoms, sources = torch.randn(6, 4, generator=gen), torch.randn(9, 4, generator=gen)
    cost = 0.5 * torch.cdist(sources, atoms) ** 2
    plan, log = ot.sinkhorn(
        torch.full((9,), 1 / 9).numpy(),
        torch.full((6,), 1 / 6).numpy(),
        cost.numpy(),
        reg=0.5,
        log=True,
        stopThr=1e-14,
        numItermax=10000,
    )
    plan = torch.as_tensor(plan)
    v = torch.as_tensor(log["v"])
    pot = WassersteinBregman(atoms, eps=0.5, Q=torch.eye(4), weights=v, centre=False)
    assert_close(pot.attention(sources), plan / plan.sum(-1, keepdim=True), atol=1e-10)


def test_pot_wasserstein_1d_of_gaussians_matches_closed_form():
    ot = pytest.importorskip("ot")
    gen = torch.Generator().manual_seed(0)
    x = 1.0 + 0.5 * torch.randn(20000, generator=gen)
    y = -0.5 + 1.5 * torch.randn(20000, generator=gen)
    w2 = float(ot.wasserstein_1d(x.numpy(), y.numpy(), p=2))
    closed = (1.0 + 0.5) ** 2 + (0.5 - 1.5) ** 2
    assert abs(w2 - closed) < 0.05 * closed


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(eps=0.0), "eps"),
        (dict(eps=-1.0), "eps"),
        (dict(lam=0.0), "lam"),
        (dict(lam=float("nan")), "lam"),
        (dict(mode="sideways"), "mode"),
        (dict(Q=-1.0), "Q"),
    ],
)
def test_bad_geometry_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        WassersteinBregman(torch.randn(3, 4), **kwargs)


def test_bad_atoms_are_refused():
    with pytest.raises(ValueError, match="K >= 1"):
        WassersteinBregman(torch.zeros(0, 4))
    with pytest.raises(ValueError, match="shape"):
        WassersteinBregman(torch.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        WassersteinBregman(torch.tensor([[0.0, float("nan")]]))
    pot = WassersteinBregman(torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"\(K, 4\)"):
        pot.set_atoms(torch.randn(3, 5))
    with pytest.raises(RuntimeError, match="no atoms yet"):
        _ = WassersteinBregman("ensemble").atoms


@pytest.mark.parametrize("p", [1.0, 0.5, float("inf"), float("nan")])
def test_lp_norm_needs_p_above_one(p):
    with pytest.raises(ValueError, match="p must be > 1"):
        LpNorm(p)


def test_given_atoms_are_a_buffer_that_follows_the_module():
    atoms = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    pot = WassersteinBregman(atoms, eps=0.5)
    assert "_atoms" in pot.state_dict() and "_atoms" in dict(pot.named_buffers())
    assert pot.atoms.dtype == torch.float32
    pot.double()
    assert pot.atoms.dtype == torch.float64 and pot.Q.dtype == torch.float64
    fresh = WassersteinBregman(torch.zeros(3, 4), eps=0.5).double()
    fresh.load_state_dict(pot.state_dict())
    assert torch.equal(fresh.atoms, pot.atoms)


@pytest.mark.parametrize("default", [torch.float32, torch.float64])
@pytest.mark.parametrize("atoms_dtype", [torch.float32, torch.float64])
def test_atoms_keep_their_dtype_whatever_the_default(default, atoms_dtype):
    """conftest sets float64 as default; this test sets each default itself."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        atoms = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).to(atoms_dtype)
        pot = WassersteinBregman(atoms, eps=0.5, mode="primal")
        a = torch.randn(2, 4, dtype=atoms_dtype)
        assert pot.grad(a).dtype == atoms_dtype and pot.atoms.dtype == atoms_dtype
        assert torch.equal(pot.atoms, atoms)  # not cast, not copied to another precision
        assert pot.hess_solve(a, a).dtype == atoms_dtype
    finally:
        torch.set_default_dtype(previous)


def test_float32_controller_with_given_atoms_simulates_under_a_float32_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        import wasserstein_meta as wm

        ctrl = wm.AdaptiveController(
            wm.systems.PFAR(),
            wm.MLPFeatures(6, (4, 4), seed=0),
            WassersteinBregman(torch.randn(2, 12), eps=0.5),
        )
        refs = wm.trajectories.random_splines(1, T=1.0, knot_scale=0.3, seed=0)
        traj = wm.simulate(ctrl, ctrl.plant, refs, wind=[1.0], T=0.2, dt=0.1)
        assert torch.isfinite(wm.metrics.rms_tracking_error(traj)).all()
        ctrl.double()
        assert ctrl.potential.atoms.dtype == torch.float64
        wm.simulate(ctrl, ctrl.plant, refs, wind=[1.0], T=0.2, dt=0.1)
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("centre", [True, False])
def test_zero_start_puts_the_dual_estimate_at_zero(centre):
    gen = torch.Generator().manual_seed(3)
    atoms = 5.0 * torch.randn(4, 6, generator=gen) + 20.0  # far from the origin
    plain = WassersteinBregman(atoms, eps=2.0, mode="dual", centre=centre)
    zero = WassersteinBregman(atoms, eps=2.0, mode="dual", centre=centre, zero_start=True)
    like = torch.zeros(3, 2)
    assert float(plain.estimate(plain.initial_state(3, 6, like)).detach().norm()) > 10.0
    z0 = zero.initial_state(3, 6, like)
    assert_close(zero.estimate(z0), torch.zeros(3, 6), atol=1e-10)
    # Same law from there: the state rate is the drive, as without zero_start.
    g = torch.randn(3, 6, generator=gen)
    assert torch.equal(zero.state_rate(z0, g), g)
    with pytest.raises(ValueError, match="zero_start"):
        WassersteinBregman(atoms, mode="primal", zero_start=True)
