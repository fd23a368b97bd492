"""``closed_loop(compile=True)``: one integration step under torch.compile equals eager; the
PVTOL's law (a double backward) refuses a differentiated compiled step at the boundary."""

import pytest
import torch
import wasserstein_meta as wm
from helpers import assert_close
from torch._dynamo.utils import counters
from wasserstein_meta.potentials import Quadratic, WassersteinBregman
from wasserstein_meta.simulate import closed_loop
from wasserstein_meta.training import _pairs, reference_states, refresh_atoms


def _loop():
    plant = wm.systems.PFAR()
    refs = wm.trajectories.random_splines(2, T=1.0, knot_scale=0.5, seed=0)
    ens = wm.OracleEnsemble(plant, [1.0, 4.0])
    pot = WassersteinBregman("ensemble", mode="primal")
    feats = wm.MLPFeatures(6, (4, 4), seed=0)
    ctrl = wm.AdaptiveController(plant, feats, pot, wm.PDGains(3, 1.0, 5.0, 5.0))
    with torch.no_grad():
        refresh_atoms(ctrl, ens, reference_states(refs, 1.0))
    ri, mi = _pairs(2, 2)

    def cost_and_grads(compile: bool):
        cost = closed_loop(ctrl, ens, refs, ri, mi, 0.5, 0.05, "rk4", compile=compile)
        cost[:, 0].sum().backward()
        grads = [p.grad.clone() for p in ctrl.parameters() if p.grad is not None]
        ctrl.zero_grad()
        return cost.detach(), grads

    return ctrl, ens, refs, cost_and_grads


def test_compile_does_not_record():
    ctrl, ens, refs, _ = _loop()
    ri, mi = _pairs(2, 2)
    with pytest.raises(ValueError, match="compile=True integrates without recording"):
        closed_loop(ctrl, ens, refs, ri, mi, 0.5, 0.05, store=True, compile=True)


@pytest.mark.slow
def test_compiled_step_equals_eager():
    """Costs and gradients of a 10-step RK4 loop (float64), compiled step against eager, agree to
    1e-12 relative: the same arithmetic, fused (measured: ~1e-15)."""
    *_, cost_and_grads = _loop()
    eager_cost, eager_grads = cost_and_grads(False)
    torch.compiler.reset()
    counters.clear()
    cost, grads = cost_and_grads(True)
    # Dynamo really compiled the step, without a graph break (measured: 2 graphs, the step
    # recompiled once for the later steps' inputs): equal numbers alone would also hold if
    # compile=True ran the eager step.
    assert 1 <= counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert_close(cost, eager_cost, atol=1e-12 * float(eager_cost.abs().max()))
    for g, e in zip(grads, eager_grads, strict=True):
        assert_close(g, e, atol=1e-12 * max(float(e.abs().max()), 1e-12))


def _pvtol_loop():
    plant = wm.systems.PVTOL()
    refs = wm.trajectories.random_flat_splines(2, T=5.0, knot_scale=0.7, seed=1)
    ens = wm.OracleEnsemble(plant, [1.0, 4.0])
    feats = wm.MLPFeatures(6, (4, 4), seed=0)
    ctrl = wm.PVTOLController(plant, feats, Quadratic(P=1.0, dim=2), wm.PVTOLGains()).double()
    return ctrl, ens, refs


def test_pvtol_refuses_a_differentiated_compiled_step():
    """The PVTOL law takes ∇V with create_graph: aot_autograd cannot back-propagate through that,
    and the backward failed after a minute's compile. Refused up front, naming the plant and why;
    meta_train refuses before flying."""
    ctrl, ens, refs = _pvtol_loop()
    ri, mi = _pairs(2, 2)
    why = r"PVTOLController on PVTOL: .*create_graph=True.*double backward"
    with pytest.raises(ValueError, match=r"closed_loop\(compile=True\) with gradients.*" + why):
        closed_loop(ctrl, ens, refs, ri, mi, 0.2, 0.05, "rk4", compile=True)
    with pytest.raises(ValueError, match=r"meta_train\(compile=True\) .*" + why):
        wm.meta_train(ctrl, ens, refs, steps=1, T=0.2, dt=0.05, compile=True)


@pytest.mark.slow
def test_pvtol_compiled_flight_without_gradients_equals_eager():
    """Under no_grad the PVTOL step compiles (in several graphs: the inner autograd.grad breaks
    it) and flies as the eager step does."""
    ctrl, ens, refs = _pvtol_loop()
    ri, mi = _pairs(2, 2)
    with torch.no_grad():
        eager = closed_loop(ctrl, ens, refs, ri, mi, 0.2, 0.05, "rk4")
        torch.compiler.reset()
        counters.clear()
        compiled = closed_loop(ctrl, ens, refs, ri, mi, 0.2, 0.05, "rk4", compile=True)
    assert counters["stats"]["unique_graphs"] >= 1 and counters["graph_break"]
    assert_close(compiled, eager, atol=1e-12 * float(eager.abs().max()))
