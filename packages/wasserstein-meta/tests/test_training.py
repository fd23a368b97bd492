"""Meta-training, checkpoints, state dicts, baselines, parallel jobs and bad input at the boundary."""

import math

import numpy as np
import pytest
import torch
import wasserstein_meta as wm
from helpers import assert_close
from wasserstein_meta.baselines import meta_ridge_regression, pid_controller, select_gains
from wasserstein_meta.potentials import WassersteinBregman
from wasserstein_meta.protocol import run_jobs, tiny_training_job
from wasserstein_meta.simulate import closed_loop
from wasserstein_meta.training import _pairs, meta_train, reference_states, task_atoms
from wasserstein_meta.trajectories import spline

PLANT = wm.systems.PFAR()
REFS = wm.trajectories.random_splines(3, T=1.0, knot_scale=0.3, seed=0)
ENS = wm.OracleEnsemble(PLANT, [1.0, 3.0, 5.0])
FAST = dict(T=0.4, dt=0.1, integrator="heun", val_frac=0.34)


def _wb_ctrl(mode="dual", seed=0):
    pot = WassersteinBregman("ensemble", lam=1.0, Q=1.0, mode=mode)
    return wm.AdaptiveController(
        PLANT, wm.MLPFeatures(6, (4, 4), seed=seed), pot, wm.PDGains(3, 1.0, 5.0, 5.0)
    )


def test_meta_training_moves_every_meta_parameter_and_keeps_the_best_step():
    ctrl = _wb_ctrl()
    before = {k: v.detach().clone() for k, v in ctrl.named_parameters()}
    hist = meta_train(ctrl, ENS, REFS, steps=3, lr=1e-2, **FAST)
    assert len(hist.train_loss) == 3 and 0 <= hist.best_step < 3
    assert hist.best_val == min(v for v in hist.val_loss if not math.isnan(v))
    moved = {k for k, v in ctrl.named_parameters() if not torch.equal(v, before[k])}
    for name in (
        "features.layers.0.weight",
        "gains.K_.params",
        "potential.log_eps",
        "potential.log_lam",
        "potential.Q_log_diag",
    ):
        assert name in moved or hist.best_step == 0, name
    assert ctrl.potential.atoms.shape == (2, 12)  # atoms of the training tasks, set after training


def test_resume_from_checkpoint_equals_an_uninterrupted_run(tmp_path):
    straight = _wb_ctrl()
    meta_train(straight, ENS, REFS, steps=4, lr=1e-2, **FAST)
    resumed = _wb_ctrl()
    path = tmp_path / "ckpt.pt"
    meta_train(resumed, ENS, REFS, steps=2, lr=1e-2, checkpoint=path, checkpoint_every=1, **FAST)
    again = _wb_ctrl()
    meta_train(again, ENS, REFS, steps=4, lr=1e-2, checkpoint=path, resume=True, **FAST)
    for (_k, a), b in zip(straight.state_dict().items(), again.state_dict().values(), strict=False):
        assert_close(a, b, atol=0)


def test_state_dict_round_trip_gives_identical_flights():
    ctrl = _wb_ctrl(mode="primal")
    with torch.no_grad():
        ctrl.potential.set_atoms(task_atoms(ctrl, ENS, reference_states(REFS, 1.0)))
    fresh = _wb_ctrl(mode="primal", seed=5)
    fresh.load_state_dict(ctrl.state_dict())
    with torch.no_grad():
        a = wm.simulate(ctrl, PLANT, REFS, wind=[2.0, 4.0, 6.0], T=0.4, dt=0.1)
        b = wm.simulate(fresh, PLANT, REFS, wind=[2.0, 4.0, 6.0], T=0.4, dt=0.1)
    assert_close(a.q, b.q, atol=0)


def test_float32_controller_flies_in_float32():
    with torch.device("cpu"):
        ctrl = wm.AdaptiveController(PLANT, wm.MLPFeatures(6, (4, 4), seed=0)).float()
    traj = wm.simulate(ctrl, PLANT, REFS[0], wind=2.0, T=0.4, dt=0.1)
    assert traj.q.dtype == torch.float32


def test_task_atoms_recover_a_linear_disturbance():
    ctrl = _wb_ctrl()
    A_star = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))

    class Linear:
        n_models = 2

        def force(self, idx, q, dq):
            y = ctrl.features(torch.cat([q, dq], -1))
            return (A_star[idx] @ y.unsqueeze(-1)).squeeze(-1)

    states = reference_states(REFS, 1.0)
    atoms = task_atoms(ctrl, Linear(), states, ridge=1e-10)  # relative ridge: tiny bias
    assert_close(atoms, ctrl.to_potential_coords(A_star), atol=5e-4)
    # The default ridge (1e-3 of the mean Gram eigenvalue) shrinks: smaller atoms, not larger.
    assert task_atoms(ctrl, Linear(), states).norm() < atoms.norm()


def test_baselines_run_and_grid_gains_pick_the_best_point():
    ctrl = wm.AdaptiveController(PLANT, wm.MLPFeatures(6, (4, 4), seed=0))
    states = reference_states(REFS, 1.0)
    losses = meta_ridge_regression(ctrl.features, ENS, states, steps=15, lr=1e-2)
    assert losses[-1] < losses[0]
    choice = select_gains(
        ctrl, ENS, REFS, T=0.4, dt=0.1, integrator="heun", K=(1.0, 10.0), P=(1.0,)
    )
    ref_index, model_index = _pairs(len(REFS), ENS.n_models)
    costs = {}
    for k in (1.0, 10.0):
        probe = wm.AdaptiveController(PLANT, ctrl.features, None, wm.PDGains(3, 1.0, k, 1.0))
        with torch.no_grad():
            cost = closed_loop(probe, ENS, REFS, ref_index, model_index, 0.4, 0.1, "heun")
        costs[k] = float(cost[:, 0].mean())
    assert choice["K"] == min(costs, key=costs.get)
    assert_close(ctrl.gains.K, choice["K"] * torch.eye(3), atol=1e-12)
    assert not pid_controller(PLANT).adapts


@pytest.mark.slow  # two fresh workers import torch: ~40 s of CPU on their own
def test_two_loky_workers_equal_a_sequential_run():
    # The job lives in the package: loky workers cannot import this test module (importlib mode).
    jobs = [{"seed": 0}, {"seed": 1}]
    parallel = run_jobs(tiny_training_job, jobs, n_jobs=2)
    assert parallel == run_jobs(tiny_training_job, jobs, n_jobs=1)
    assert parallel[0] != parallel[1]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dt=0.0), "dt must be a positive"),
        (dict(dt=-0.1), "dt must be a positive"),
        (dict(dt=2.0, T=1.0), "dt must be smaller than T"),
        (dict(T=float("nan")), "T must be"),
        (dict(T=5.0), "shorter than the simulation"),
        (dict(integrator="midpoint"), "integrator must be one of"),
        (dict(dt=0.3), "whole number of steps"),
    ],
)
def test_bad_times_are_refused(kwargs, match):
    ctrl = wm.AdaptiveController(PLANT, wm.ZeroFeatures())
    args = dict(T=1.0, dt=0.1) | kwargs
    with pytest.raises(ValueError, match=match):
        wm.simulate(ctrl, PLANT, REFS[0], wind=1.0, **args)


def test_reference_on_its_side_is_refused():
    ref = spline([0.0, 1.0], np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 1.7]]))
    with pytest.raises(ValueError, match="π/2"):
        wm.simulate(
            wm.AdaptiveController(PLANT, wm.ZeroFeatures()), PLANT, ref, wind=1.0, T=1.0, dt=0.1
        )
    with pytest.raises(ValueError, match="finite"):
        spline([0.0, 1.0], np.array([[0.0, 0.0, 0.0], [np.nan, 0.0, 0.0]]))


def test_divergence_names_time_reference_and_wind():
    ctrl = wm.AdaptiveController(PLANT, wm.ZeroFeatures(), None, wm.PDGains(3, 1.0, 1.0))
    with pytest.raises(wm.SimulationDiverged) as info:
        wm.simulate(ctrl, PLANT, REFS[:2], wind=[1.0, 1e5], T=1.0, dt=0.1)
    err = info.value
    assert err.index == [1] and err.reference == [1] and err.wind == [1e5] and 0 < err.time <= 1.0
    assert "t=" in str(err) and "100000" in str(err)


def test_bad_ensembles_and_plants_are_refused():
    with pytest.raises(ValueError, match="winds"):
        wm.OracleEnsemble(PLANT, [])
    with pytest.raises(ValueError, match="winds"):
        wm.OracleEnsemble(PLANT, [1.0, float("nan")])
    with pytest.raises(ValueError, match="drag"):
        wm.systems.PFAR(drag=(0.1, -1.0))
    with pytest.raises(ValueError, match="pair"):
        wm.simulate(
            wm.AdaptiveController(PLANT, wm.ZeroFeatures()),
            PLANT,
            REFS,
            wind=[1.0, 2.0],
            T=0.4,
            dt=0.1,
        )
    with pytest.raises(ValueError, match="steps"):
        meta_train(_wb_ctrl(), ENS, REFS, steps=-1)
    with pytest.raises(ValueError, match="at least one reference"):
        meta_train(_wb_ctrl(), ENS, [], steps=1)


def test_half_precision_controller_is_refused():
    ctrl = wm.AdaptiveController(PLANT, wm.MLPFeatures(6, (4, 4), seed=0)).to(torch.bfloat16)
    with pytest.raises(ValueError, match="float32 or float64"):
        wm.simulate(ctrl, PLANT, REFS[0], wind=1.0, T=0.4, dt=0.1)


def test_simulate_keeps_no_graph_unless_asked():
    ctrl = wm.AdaptiveController(PLANT, wm.MLPFeatures(6, (4, 4), seed=0))
    assert wm.simulate(ctrl, PLANT, REFS[0], wind=1.0, T=0.4, dt=0.1).q.grad_fn is None
    traj = wm.simulate(ctrl, PLANT, REFS[0], wind=1.0, T=0.4, dt=0.1, grad=True)
    assert traj.q.grad_fn is not None


def test_learnable_atoms_are_trained_and_survive_a_round_trip():
    pot = WassersteinBregman("ensemble", lam=1.0, Q=1.0, learnable_atoms=True)
    ctrl = wm.AdaptiveController(
        PLANT, wm.MLPFeatures(6, (4, 4), seed=0), pot, wm.PDGains(3, 1.0, 5.0, 5.0)
    )
    states = reference_states(REFS[:2], FAST["T"])
    initial = task_atoms(ctrl, ENS.subset([0, 1]), states).detach()
    meta_train(ctrl, ENS, REFS, steps=4, lr=0.1, seed=0, **(FAST | {"val_frac": 0.0}))
    atoms = ctrl.potential.atoms
    assert isinstance(atoms, torch.nn.Parameter)
    assert atoms.shape == initial.shape and not torch.allclose(atoms, initial, atol=1e-3)
    fresh = wm.AdaptiveController(
        PLANT,
        wm.MLPFeatures(6, (4, 4), seed=1),
        WassersteinBregman("ensemble", learnable_atoms=True),
        wm.PDGains(3, 1.0, 5.0, 5.0),
    )
    fresh.load_state_dict(ctrl.state_dict())
    assert isinstance(fresh.potential.atoms, torch.nn.Parameter)
    assert torch.equal(fresh.potential.atoms, atoms)
    assert "potential._atoms" in dict(fresh.named_parameters())


def test_a_diverged_validation_flight_scores_inf_and_is_never_kept(monkeypatch):
    import wasserstein_meta.training as training
    from wasserstein_meta.errors import SimulationDiverged

    real = training.closed_loop
    calls = {"val": 0}

    def diverging_validation(ctrl, ens, *args, **kwargs):
        if not torch.is_grad_enabled():  # validation flies under no_grad
            calls["val"] += 1
            if calls["val"] >= 2:
                raise SimulationDiverged(0.3, [0], [0], [1.0])
        return real(ctrl, ens, *args, **kwargs)

    monkeypatch.setattr(training, "closed_loop", diverging_validation)
    ctrl = _wb_ctrl()
    hist = meta_train(ctrl, ENS, REFS, steps=3, lr=1e-2, **FAST)
    assert math.isfinite(hist.val_loss[0]) and hist.val_loss[1:] == [math.inf, math.inf]
    assert hist.best_step == 0 and hist.best_val == hist.val_loss[0]
    # The returned weights are step 0's (one Adam step from the start), not a diverged step's.
    monkeypatch.setattr(training, "closed_loop", real)
    first = _wb_ctrl()
    meta_train(first, ENS, REFS, steps=1, lr=1e-2, **FAST)
    kept, want = ctrl.state_dict(), first.state_dict()
    assert kept.keys() == want.keys()
    assert all(torch.equal(kept[k], want[k]) for k in want)
    assert not all(torch.equal(kept[k], _wb_ctrl().state_dict()[k]) for k in want)


def test_meta_train_raises_when_every_validation_diverges(monkeypatch):
    import wasserstein_meta.training as training
    from wasserstein_meta.errors import SimulationDiverged

    real = training.closed_loop

    def diverging_validation(ctrl, ens, *args, **kwargs):
        if not torch.is_grad_enabled():
            raise SimulationDiverged(0.3, [0], [0], [1.0])
        return real(ctrl, ens, *args, **kwargs)

    monkeypatch.setattr(training, "closed_loop", diverging_validation)
    with pytest.raises(RuntimeError, match="every validation"):
        meta_train(_wb_ctrl(), ENS, REFS, steps=2, lr=1e-2, **FAST)
