"""Device and dtype placement: every tensor the package creates follows the controller (or an
explicit ``device=``), and mixing devices is refused at the boundary.

No GPU here, so the device tests move torch's *default* device to ``meta`` while the controller
stays on the CPU: a tensor created without following the controller lands on ``meta`` and the
first operation mixing it with the CPU state raises (``meta`` tensors also refuse to be read on
the host). On a GPU box the same slip would put a tensor on the CPU next to a CUDA state.
"""

import dataclasses

import numpy as np
import pytest
import torch
import wasserstein_meta as wm
from helpers import assert_close
from torch.overrides import TorchFunctionMode
from wasserstein_meta.baselines import meta_ridge_regression, select_gains
from wasserstein_meta.potentials import WassersteinBregman
from wasserstein_meta.simulate import closed_loop, reference_stages
from wasserstein_meta.training import _pairs, reference_states, task_atoms

META = torch.device("meta")


def _setup(potential=None):
    plant = wm.systems.PFAR()
    refs = wm.trajectories.random_splines(3, T=1.0, knot_scale=0.3, seed=0)
    ens = wm.OracleEnsemble(plant, [1.0, 3.0, 5.0])
    pot = potential if potential is not None else WassersteinBregman("ensemble", mode="primal")
    feats = wm.MLPFeatures(6, (4, 4), seed=0)
    ctrl = wm.AdaptiveController(plant, feats, pot, wm.PDGains(3, 1.0, 5.0, 5.0))
    return plant, refs, ens, ctrl


@pytest.fixture
def default_device_meta():
    torch.set_default_device(META)
    try:
        yield
    finally:
        torch.set_default_device(None)


def _fly_and_train(plant, refs, ens, ctrl, data):
    """What a user does after building things on their device: meta-train, simulate, fit."""
    history = wm.meta_train(ctrl, ens, refs, steps=2, T=0.4, dt=0.1, integrator="heun", seed=0)
    traj = wm.simulate(ctrl, plant, refs, wind=[2.0, 4.0, 6.0], T=0.4, dt=0.1, integrator="heun")
    fitted = wm.fit_ensemble(plant, data, hidden=(4,), epochs=2, seed=0, device="cpu")
    return history, traj, fitted


def test_nothing_lands_on_the_default_device(default_device_meta):
    """With the default device elsewhere, data.generate (host-side), simulate / meta_train /
    fit_ensemble (device="cpu") run where the controller is and give the same numbers as with the
    default on the CPU."""
    torch.set_default_device(None)
    data = wm.data.generate(wm.systems.PFAR(), wm.tasks.BetaWind(), 2, T=0.3, dt=0.1)
    expected = _fly_and_train(*_setup(), data)
    built = _setup()  # built on the CPU, then the default device moves away
    torch.set_default_device(META)
    moved = wm.data.generate(wm.systems.PFAR(), wm.tasks.BetaWind(), 2, T=0.3, dt=0.1)
    np.testing.assert_array_equal(moved.q, data.q)
    history, traj, fitted = _fly_and_train(*built, data)
    torch.set_default_device(None)  # the comparisons below create tensors of their own
    for field in dataclasses.fields(traj):
        value = getattr(traj, field.name)
        assert value.device.type == "cpu", field.name
        assert_close(value, getattr(expected[1], field.name))
    assert history.train_loss == expected[0].train_loss
    for (name, p), q in zip(fitted.named_parameters(), expected[2].parameters(), strict=True):
        assert p.device.type == "cpu", name
        assert_close(p, q)


def test_device_argument_reaches_what_the_package_creates():
    plant, refs, _, _ = _setup()
    assert wm.OracleEnsemble(plant, [1.0, 2.0], device=META).device == META
    assert wm.OracleEnsemble(plant, np.array([1.0]), device="cpu").device.type == "cpu"
    stages = reference_stages(refs, 0.4, 0.1, "rk4", torch.float32, device=META)
    assert {st.device for st in stages.values()} == {META}
    assert {st.dtype for st in stages.values()} == {torch.float32}
    assert wm.trajectories.evaluate(refs, np.zeros(2), device=META).device == META
    assert reference_states(refs, 0.4, n_points=3, device=META).device == META
    for index in _pairs(2, 3, META):
        assert index.device == META


def test_mixing_devices_names_both():
    plant, refs, ens, ctrl = _setup()
    ri, mi = _pairs(len(refs), ens.n_models)
    elsewhere = wm.OracleEnsemble(plant, [1.0, 3.0, 5.0], device=META)
    with pytest.raises(ValueError, match=r"mismatch: the ensemble on meta, the controller on cpu"):
        closed_loop(ctrl, elsewhere, refs, ri, mi, 0.4, 0.1, "heun")
    stages = reference_stages(refs, 0.4, 0.1, "heun", torch.float64, device=META)
    with pytest.raises(
        ValueError, match=r"mismatch: the reference stages on meta, the controller on cpu"
    ):
        closed_loop(ctrl, ens, refs, ri, mi, 0.4, 0.1, "heun", stages=stages)
    states = reference_states(refs, 0.4, n_points=3, device=META)
    with pytest.raises(ValueError, match=r"mismatch: the states on meta, the controller on cpu"):
        task_atoms(ctrl, ens, states)
    with pytest.raises(ValueError, match=r"mismatch: atoms on meta, the potential on cpu"):
        ctrl.potential.set_atoms(torch.zeros(3, ctrl.n_params, device=META))


class _DtypeSpy(TorchFunctionMode):
    """Records the dtype of every floating tensor a torch function returns."""

    def __init__(self):
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                self.dtypes.add(t.dtype)
        return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_tensor_of_a_flight_has_the_controllers_dtype(dtype):
    """float32 in, float32 everywhere (and float64): no silent promotion inside the loop."""
    plant, refs, ens, ctrl = _setup()
    ctrl.to(dtype)
    with torch.no_grad():
        states = reference_states(refs, 1.0, ctrl=ctrl)
        ctrl.potential.set_atoms(task_atoms(ctrl, ens, states))
    stages = reference_stages(refs, 0.4, 0.1, "rk4", dtype)
    ri, mi = _pairs(len(refs), ens.n_models)
    spy = _DtypeSpy()
    with spy:
        cost = closed_loop(ctrl, ens, refs, ri, mi, 0.4, 0.1, "rk4", stages=stages)
    assert spy.dtypes == {dtype}
    assert cost.dtype == dtype
    traj = wm.simulate(ctrl, plant, refs[0], wind=3.0, T=0.4, dt=0.1)
    assert {getattr(traj, f.name).dtype for f in dataclasses.fields(traj)} == {dtype}


# torch warns that copying into meta parameters is a no-op: the atoms' placement is the point.
@pytest.mark.filterwarnings("ignore:.*copying from a non-meta parameter:UserWarning")
@pytest.mark.parametrize("learnable", [False, True])
def test_atoms_from_a_state_dict_move_to_the_module(learnable):
    """Loaded atoms land on the potential's device, as its parameters do: a CPU checkpoint into a
    potential on ``meta`` (the only other device here; a GPU checkpoint into a CPU model is the
    same path) gives ``meta`` atoms, not CPU atoms that no device check would see."""
    _, refs, ens, ctrl = _setup(WassersteinBregman("ensemble", learnable_atoms=learnable))
    with torch.no_grad():
        ctrl.potential.set_atoms(task_atoms(ctrl, ens, reference_states(refs, 1.0)))
    saved = ctrl.potential.state_dict()
    fresh = WassersteinBregman("ensemble", learnable_atoms=learnable)
    fresh.bind(ctrl.n_params)
    fresh.to(META).load_state_dict(saved)
    assert fresh.atoms.device == META and fresh.atoms.shape == saved["_atoms"].shape
    assert isinstance(fresh.atoms, torch.nn.Parameter) == learnable


def _baselines(plant, refs, ens, ctrl):
    """MRR features, then the grid gain selection with a weighted Wasserstein law."""
    states = reference_states(refs, 1.0, n_points=5, device="cpu")
    losses = meta_ridge_regression(ctrl.features, ens, states, steps=2, seed=0)
    chosen = select_gains(ctrl, ens, refs, 0.4, 0.1, "heun", K=(1.0, 10.0), P=(2.0,), states=states)
    return losses, chosen, [p.detach().clone() for p in ctrl.parameters()]


def test_baselines_and_weights_follow_the_controller(default_device_meta):
    """meta_ridge_regression's ridge, select_gains' pairs and gains, and the potential's atom
    weights are made where the controller is, not on the default device: the same numbers as
    with the default on the CPU."""
    torch.set_default_device(None)
    weighted = lambda: WassersteinBregman("ensemble", mode="primal", weights=[1.0, 2.0, 3.0])  # noqa: E731
    expected = _baselines(*_setup(weighted()))
    built = _setup(weighted())
    torch.set_default_device(META)
    losses, chosen, params = _baselines(*built)
    torch.set_default_device(None)
    assert losses == expected[0] and chosen == expected[1] == {"Lambda": 1.0, "K": 1.0, "P": 2.0}
    for p, q in zip(params, expected[2], strict=True):
        assert p.device.type == "cpu"
        assert_close(p, q)


class _Moved(Exception):
    pass


def test_fit_ensemble_fits_on_torchs_default_device(default_device_meta, monkeypatch):
    """``device=None`` means torch's default device, as the docstring and OracleEnsemble say (it
    stayed on the CPU). A meta ensemble cannot be fitted (the scales are read on the host), so
    the move itself is caught."""
    torch.set_default_device(None)
    data = wm.data.generate(wm.systems.PFAR(), wm.tasks.BetaWind(), 2, T=0.3, dt=0.1)
    torch.set_default_device(META)

    def to(self, device):
        raise _Moved(device)

    monkeypatch.setattr(wm.LearnedEnsemble, "to", to)
    with pytest.raises(_Moved) as moved:
        wm.fit_ensemble(wm.systems.PFAR(), data, hidden=(4,), epochs=1)
    assert moved.value.args[0] == META
