import numpy as np
import pytest
import torch
from afrnet.data import geometric_sc
from afrnet.functional import effective_resistance, flow_energy, null_projector, task_laplacian
from afrnet.preprocess import preprocess_sc
from afrnet_testdata import (
    components_projector,
    edges,
    official_energy,
    random_fc,
    random_sc,
    signed_fc,
)

KAPPA = 100.0


@pytest.fixture
def subject():
    sc, fc = random_sc(14, seed=3), random_fc(14, seed=3)
    g = torch.tensor(np.random.default_rng(1).uniform(0.3, 3.0, edges(sc).shape[1]))
    return sc, fc, g


@pytest.mark.parametrize("solver", ["solve", "pinv", "auto"])
def test_equals_the_official_double_solve(subject, solver):
    sc, fc, g = subject
    ours = flow_energy(sc, fc, g, solver=solver).numpy()
    np.testing.assert_allclose(ours, official_energy(sc, fc, g), rtol=1e-8)


def test_equals_the_pseudo_inverse_p_matrix_form(subject):
    sc, fc, g = subject
    e = edges(sc).numpy()
    n = sc.shape[0]
    w = np.zeros((n, n))
    w[e[0], e[1]] = g.numpy()
    w = w + w.T
    m = np.linalg.pinv(np.diag(w.sum(1)) - w)
    lap_t = task_laplacian(fc, 0.0).numpy()
    p = m @ lap_t @ m
    expected = 2 * KAPPA * g.numpy() * (p[e[0], e[0]] + p[e[1], e[1]] - 2 * p[e[0], e[1]])
    ours = flow_energy(sc, fc, g, solver="pinv", delta=0.0, ridge=0.0).numpy()
    np.testing.assert_allclose(ours, expected, rtol=1e-8)


def test_trace_identity(subject):
    sc, fc, g = subject
    delta = 1e-6
    e = edges(sc).numpy()
    n = sc.shape[0]
    w = np.zeros((n, n))
    w[e[0], e[1]] = g.numpy()
    w = w + w.T
    inv = np.linalg.inv(np.diag(w.sum(1)) - w + delta * np.eye(n))
    lap_t = task_laplacian(fc, 1e-6).numpy()
    expected = 2 * KAPPA * (np.trace(lap_t @ inv) - delta * np.trace(lap_t @ inv @ inv))
    np.testing.assert_allclose(float(flow_energy(sc, fc, g).sum()), expected, rtol=1e-8)


def test_total_energy_is_fc_weighted_effective_resistance(subject):
    sc, fc, g = subject
    e = edges(sc).numpy()
    n = sc.shape[0]
    w = np.zeros((n, n))
    w[e[0], e[1]] = g.numpy()
    w = w + w.T
    m = np.linalg.pinv(np.diag(w.sum(1)) - w)
    d = np.diag(m)
    r = d[:, None] + d[None] - 2 * m
    t = np.abs(fc.numpy())
    iu = np.triu_indices(n, 1)
    total = flow_energy(sc, fc, g, delta=0.0, ridge=0.0).sum() / (2 * KAPPA)
    np.testing.assert_allclose(float(total), (t[iu] * r[iu]).sum(), rtol=1e-8)
    np.testing.assert_allclose(effective_resistance(torch.tensor(w)).numpy(), r, atol=1e-10)


def test_path_graph_carries_unit_current_on_both_edges():
    sc = torch.tensor([[0, 1, 0], [1, 0, 1], [0, 1, 0.0]], dtype=torch.float64)
    fc = torch.zeros(3, 3, dtype=torch.float64)
    fc[0, 2] = fc[2, 0] = 1.0
    energy = flow_energy(sc, fc, torch.ones(2, dtype=torch.float64), delta=1e-12, ridge=1e-12)
    np.testing.assert_allclose(energy.numpy(), [2 * KAPPA, 2 * KAPPA], rtol=1e-9)


def test_triangle_splits_the_current_two_to_one():
    sc = torch.ones(3, 3, dtype=torch.float64) - torch.eye(3, dtype=torch.float64)
    fc = torch.zeros(3, 3, dtype=torch.float64)
    fc[0, 1] = fc[1, 0] = 1.0
    energy = flow_energy(sc, fc, torch.ones(3, dtype=torch.float64), delta=1e-12, ridge=1e-12)
    np.testing.assert_allclose(energy.numpy() / (2 * KAPPA), [4 / 9, 1 / 9, 1 / 9], rtol=1e-9)


def test_nonnegative_and_scaling_laws(subject):
    sc, fc, g = subject
    base = flow_energy(sc, fc, g, delta=0.0, ridge=0.0)
    assert (base >= -1e-12).all()
    half_t = flow_energy(sc, 0.5 * fc, g, delta=0.0, ridge=0.0)
    np.testing.assert_allclose(half_t.numpy(), 0.5 * base.numpy(), rtol=1e-9)
    triple_g = flow_energy(sc, fc, 3.0 * g, delta=0.0, ridge=0.0)
    np.testing.assert_allclose(triple_g.numpy(), base.numpy() / 3.0, rtol=1e-9)


def test_gradcheck_in_conductance_and_fc():
    sc, fc = random_sc(4, density=0.3, seed=5), random_fc(4, seed=5)
    g = torch.tensor(
        np.random.default_rng(2).uniform(0.5, 2.0, edges(sc).shape[1]), requires_grad=True
    )
    f = fc.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: flow_energy(sc, b, a, solver="pinv"), (g, f))
    assert torch.autograd.gradcheck(lambda a: flow_energy(sc, fc, a, solver="solve"), (g,))


def test_energy_is_the_conductance_derivative_of_the_trace(subject):
    sc, fc, g = subject
    g = g.clone().requires_grad_(True)
    e = edges(sc)
    n = sc.shape[0]
    w = torch.zeros(n, n, dtype=torch.float64).index_put((e[0], e[1]), g)
    w = w + w.T
    lap = torch.diag(w.sum(1)) - w + 1e-6 * torch.eye(n, dtype=torch.float64)
    trace = torch.trace(task_laplacian(fc, 1e-6) @ torch.linalg.inv(lap))
    (grad,) = torch.autograd.grad(trace, g)
    expected = -2 * KAPPA * g.detach() * grad
    np.testing.assert_allclose(flow_energy(sc, fc, g.detach()).numpy(), expected.numpy(), rtol=1e-7)


def test_float32_grounded_form_is_safe_where_the_explicit_inverse_is_not():
    s = torch.tensor(preprocess_sc(geometric_sc(60, 1, seed=4)[0]))
    f = random_fc(60, seed=4)
    e = edges(s)
    g = torch.tensor(np.random.default_rng(0).uniform(0.5, 2.0, e.shape[1]))
    exact = flow_energy(s, f, g, solver="solve")
    grounded = flow_energy(s.float(), f.float(), g.float(), solver="pinv")
    rel = float((grounded.double() - exact).abs().max() / exact.abs().max())
    assert rel < 1e-4
    # The trap: an explicit (L + δI)^-1 in float32 (spec section 2.8).
    n = s.shape[0]
    w = torch.zeros(n, n).index_put((e[0], e[1]), g.float())
    w = w + w.T
    m = torch.linalg.inv(torch.diag(w.sum(1)) - w + 1e-6 * torch.eye(n))
    p = m @ task_laplacian(f.float(), 1e-6) @ m
    explicit = 200.0 * g.float() * (p[e[0], e[0]] + p[e[1], e[1]] - 2 * p[e[0], e[1]])
    rel_explicit = float((explicit.double() - exact).abs().max() / exact.abs().max())
    assert rel_explicit > 100 * rel


def test_dense_batch_equals_each_subject():
    scs = [random_sc(10, seed=s) for s in range(3)]
    fcs = [random_fc(10, seed=s) for s in range(3)]
    dense, singles = [], []
    for i, (s, f) in enumerate(zip(scs, fcs, strict=False)):
        e = edges(s)
        g = torch.tensor(np.random.default_rng(i).uniform(0.5, 2.0, e.shape[1]))
        w = torch.zeros(10, 10, dtype=torch.float64).index_put((e[0], e[1]), g)
        dense.append(w + w.T)
        singles.append((e, flow_energy(s, f, g)))
    for solver in ("solve", "pinv"):
        out = flow_energy(torch.stack(scs), torch.stack(fcs), torch.stack(dense), solver=solver)
        for b, (e, single) in enumerate(singles):
            np.testing.assert_allclose(out[b, e[0], e[1]].numpy(), single.numpy(), rtol=1e-8)
            torch.testing.assert_close(out[b], out[b].T)


def test_disconnected_graph_raises_or_grounds_each_component():
    a, b = random_sc(5, seed=1), random_sc(4, seed=2)
    sc = torch.block_diag(a, b)
    fc = torch.block_diag(random_fc(5, seed=1), random_fc(4, seed=2))
    g = torch.ones(edges(sc).shape[1], dtype=torch.float64)
    with pytest.raises(
        ValueError, match=r"disconnected \(2 components \[\[0, 1, 2, 3, 4\], \[5, 6, 7, 8\]\]"
    ):
        flow_energy(sc, fc, g)
    both = flow_energy(sc, fc, g, allow_disconnected=True)
    first = flow_energy(a, fc[:5, :5], torch.ones(edges(a).shape[1], dtype=torch.float64))
    np.testing.assert_allclose(both[: first.numel()].numpy(), first.numpy(), rtol=1e-8)


@pytest.mark.parametrize("solver", ["solve", "pinv"])
def test_signed_fc_couples_through_its_magnitude(solver):
    # Filtered FC is signed: T = |(F + Fᵀ)/2|, so anticorrelated pairs draw current too.
    sc, fc = random_sc(12, seed=9), signed_fc(12, seed=9)
    assert (fc < -0.1).any() and (fc > 0.1).any()
    g = torch.tensor(np.random.default_rng(5).uniform(0.3, 3.0, edges(sc).shape[1]))
    ours = flow_energy(sc, fc, g, solver=solver)
    np.testing.assert_allclose(ours.numpy(), official_energy(sc, fc, g), rtol=1e-8)
    torch.testing.assert_close(flow_energy(sc, -fc, g, solver=solver), ours, rtol=1e-10, atol=0)
    t = task_laplacian(fc, 0.0)
    assert (t - torch.diag(torch.diagonal(t)) <= 0).all()  # a Laplacian: -|T| off the diagonal


def test_null_projector_equals_the_component_oracle():
    n = 12
    path = torch.diag(torch.ones(n - 1, dtype=torch.float64), 1)  # diameter n - 1: many squarings
    split = torch.block_diag(random_sc(5, seed=1), random_sc(7, seed=2))
    padded = torch.zeros(n, n, dtype=torch.float64)
    padded[:8, :8] = random_sc(8, seed=3)
    adj = torch.stack([path + path.T, split, padded])
    mask = torch.ones(3, n, dtype=torch.bool)
    mask[2, 8:] = False
    proj = null_projector(adj, node_mask=mask, allow_disconnected=True)
    for b in range(3):
        np.testing.assert_allclose(proj[b].numpy(), components_projector(adj[b].numpy()), atol=0)
    with pytest.raises(ValueError, match=r"subject 1 is disconnected \(2 components"):
        null_projector(adj, node_mask=mask)
    torch.testing.assert_close(null_projector(adj[0]), proj[0])
