"""``closed_loop(compile=True)``: one integration step under torch.compile equals eager."""

import pytest
import torch
import wasserstein_meta as wm
from helpers import assert_close
from wasserstein_meta.potentials import WassersteinBregman
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
    cost, grads = cost_and_grads(True)
    assert_close(cost, eager_cost, atol=1e-12 * float(eager_cost.abs().max()))
    for g, e in zip(grads, eager_grads, strict=True):
        assert_close(g, e, atol=1e-12 * max(float(e.abs().max()), 1e-12))
