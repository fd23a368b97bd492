"""Cholesky gains, splines, wind laws, data generation and the learned ensemble."""

import math

import numpy as np
import pytest
import torch
import wasserstein_meta as wm
from helpers import assert_close
from wasserstein_meta.spd import PDGains, SPDParameter, spd_from_params, tril_size
from wasserstein_meta.trajectories import spline


def test_cholesky_parameters_give_spd_with_expected_eigenvalues():
    d = torch.tensor([0.1, -0.4, 0.7])
    M = spd_from_params(torch.cat([d, torch.zeros(3)]), 3)
    assert_close(torch.linalg.eigvalsh(M), torch.sort(torch.exp(2 * d)).values, atol=1e-14)
    M = spd_from_params(torch.randn(tril_size(4)), 4)
    assert_close(M, M.T, atol=0)
    assert float(torch.linalg.eigvalsh(M).min()) > 0


def test_gains_round_trip_an_spd_matrix():
    G = torch.tensor([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
    assert_close(PDGains(3, Gamma=G).Gamma, G, atol=1e-14)
    assert_close(SPDParameter(3, 4.0)(), 4.0 * torch.eye(3), atol=1e-14)


@pytest.mark.parametrize("name", ["Lambda", "K", "Gamma"])
def test_non_spd_gain_is_refused_by_name(name):
    symbol = {"Lambda": "Λ", "K": "K", "Gamma": "Γ"}[name]
    with pytest.raises(ValueError, match=f"{symbol} must be symmetric positive definite"):
        PDGains(3, **{name: torch.tensor([[1.0, 2.0, 0], [2.0, 1.0, 0], [0, 0, 1.0]])})
    with pytest.raises(ValueError, match=f"{symbol} must be symmetric positive definite"):
        PDGains(3, **{name: torch.tensor([[1.0, 0.5, 0], [0.0, 1.0, 0], [0, 0, 1.0]])})
    with pytest.raises(ValueError, match=f"{symbol} must be positive"):
        PDGains(3, **{name: -1.0})


def test_spline_interpolates_knots_rests_at_ends_and_is_smooth():
    knots = np.array([[0, 0, 0], [1.0, -1.0, 0.3], [2.5, 0.5, -0.2], [1.0, 1.0, 0.1]])
    ref = spline([0.0, 1.0, 2.0, 3.0], knots)
    out = ref(np.array([0.0, 1.0, 2.0, 3.0]), 3)
    assert_close(out[0], knots, atol=1e-9)
    assert_close(out[1][[0, -1]], np.zeros((2, 3)), atol=1e-9)
    # C² (x, y are C⁶, φ C²) across the interior knots.
    for t in (1.0, 2.0):
        left, right = ref(np.array([t - 1e-7]), 2), ref(np.array([t + 1e-7]), 2)
        assert_close(left, right, atol=1e-4)


def test_two_knot_min_snap_is_the_septic_rest_to_rest_polynomial():
    # Minimum snap from rest to rest on [0, 1]: x(τ) = x₀ + Δ (35τ⁴ − 84τ⁵ + 70τ⁶ − 20τ⁷).
    ref = spline([0.0, 2.0], np.array([[0.0, 1.0, 0.0], [3.0, -1.0, 0.0]]))
    t = np.linspace(0.0, 2.0, 41)
    tau = t / 2.0
    shape = 35 * tau**4 - 84 * tau**5 + 70 * tau**6 - 20 * tau**7
    assert_close(ref(t, 0)[0, :, 0], 3.0 * shape, atol=1e-9)
    assert_close(ref(t, 0)[0, :, 1], 1.0 - 2.0 * shape, atol=1e-9)


def test_random_splines_respect_attitude_and_are_reproducible():
    refs = wm.trajectories.random_splines(5, T=5.0, seed=1)
    again = wm.trajectories.random_splines(5, T=5.0, seed=1)
    t = np.linspace(0, 5, 201)
    for a, b in zip(refs, again, strict=False):
        assert_close(a(t), b(t), atol=0)
        assert np.abs(a(t, 0)[0, :, 2]).max() < math.pi / 2


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: spline([0.0], np.zeros((1, 3))), "at least 2 knots"),
        (lambda: spline([0.0, 0.0], np.zeros((2, 3))), "strictly increasing"),
        (lambda: spline([0.0, 1.0], np.zeros((3, 3))), "shape"),
        (lambda: wm.trajectories.random_splines(1, num_knots=1), "num_knots"),
        (lambda: wm.trajectories.random_splines(1, T=0.0), "T must be"),
        (lambda: wm.trajectories.random_splines(0), "n must be"),
    ],
)
def test_bad_splines_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(a=0.0), "shape parameters"),
        (dict(b=-1.0), "shape parameters"),
        (dict(low=3.0, high=3.0), "low < high"),
        (dict(high=float("nan")), "finite"),
    ],
)
def test_bad_wind_laws_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        wm.tasks.BetaWind(**kwargs)


def test_wind_law_samples_match_its_mean():
    law = wm.tasks.BetaWind(0.0, 9.0, 5.0, 7.0)
    assert abs(law.sample(20000, 0).mean() - law.mean) < 0.03
    mix = wm.tasks.MixtureWind(
        (wm.tasks.BetaWind(0, 3, 5, 5), wm.tasks.BetaWind(6, 9, 5, 5)), (0.5, 0.5)
    )
    draws = mix.sample(4000, 0)
    assert ((draws < 3) | (draws > 6)).all() and abs(draws.mean() - 4.5) < 0.1


def _force_error(ens, plant, data):
    q, dq = torch.as_tensor(data.q), torch.as_tensor(data.dq)
    idx = torch.arange(data.n_traj).repeat_interleave(q.shape[1])
    q, dq = q.reshape(-1, 3), dq.reshape(-1, 3)
    truth = plant.wind_force(q, dq, torch.as_tensor(data.wind)[idx])
    with torch.no_grad():
        return float((ens.force(idx, q, dq) - truth).pow(2).sum(-1).mean())


@pytest.mark.slow
def test_fit_ensemble_improves_on_its_initialisation():
    plant = wm.systems.PFAR()
    data = wm.data.generate(plant, wm.tasks.BetaWind(), n_traj=2, T=1.0, dt=0.05, seed=0)
    init = wm.LearnedEnsemble(plant, 2, (8, 8), seed=0)
    ens = wm.fit_ensemble(plant, data, hidden=(8, 8), epochs=10, lr=1e-2, seed=0)
    assert _force_error(ens, plant, data) < 0.9 * _force_error(init, plant, data)


def test_learned_ensemble_state_dict_keeps_the_data_scales():
    plant = wm.systems.PFAR()
    data = wm.data.generate(plant, wm.tasks.BetaWind(), n_traj=2, T=0.4, dt=0.05, seed=0)
    ens = wm.fit_ensemble(plant, data, hidden=(4, 4), epochs=1, seed=0)
    assert not torch.equal(ens.in_scale, torch.ones(6)) and float(ens.out_scale) != 1.0
    fresh = wm.LearnedEnsemble(plant, 2, (4, 4), seed=1)
    fresh.load_state_dict(ens.state_dict())
    q, dq = torch.as_tensor(data.q[:, 3]), torch.as_tensor(data.dq[:, 3])
    idx = torch.arange(2)
    assert torch.equal(fresh.force(idx, q, dq), ens.force(idx, q, dq))


@pytest.mark.slow
def test_fit_ensemble_learns_the_wind_force():
    """Held-out oracle: the same flights simulated at dt/2 visit states between the training grid's;
    there the fitted force must beat the best constant per wind (the training states' mean force)
    and zero by 10x. Unscaled inputs and outputs gave 0.15x the constant at these settings."""
    plant = wm.systems.PFAR()
    law = wm.tasks.BetaWind()
    data = wm.data.generate(plant, law, n_traj=2, T=2.0, dt=0.02, seed=0)
    fine = wm.data.generate(plant, law, n_traj=2, T=2.0, dt=0.01, seed=0)
    np.testing.assert_array_equal(fine.wind, data.wind)
    ens = wm.fit_ensemble(plant, data, hidden=(8, 8), epochs=60, lr=3e-2)
    q, dq = torch.as_tensor(fine.q[:, 1::2]), torch.as_tensor(fine.dq[:, 1::2])
    idx = torch.arange(2).repeat_interleave(q.shape[1])
    q, dq = q.reshape(-1, 3), dq.reshape(-1, 3)
    truth = plant.wind_force(q, dq, torch.as_tensor(fine.wind)[idx])
    q_tr, dq_tr = torch.as_tensor(data.q).reshape(-1, 3), torch.as_tensor(data.dq).reshape(-1, 3)
    i_tr = torch.arange(2).repeat_interleave(data.q.shape[1])
    mean = plant.wind_force(q_tr, dq_tr, torch.as_tensor(data.wind)[i_tr]).view(2, -1, 3).mean(1)
    with torch.no_grad():
        err = float((ens.force(idx, q, dq) - truth).pow(2).sum(-1).mean())
    zero_err = float(truth.pow(2).sum(-1).mean())
    mean_err = float((truth - mean[idx]).pow(2).sum(-1).mean())
    assert err < 0.1 * min(zero_err, mean_err), (err, zero_err, mean_err)


def test_learned_ensemble_output_is_scaled_by_out_scale():
    plant = wm.systems.PFAR()
    ens = wm.LearnedEnsemble(plant, 2, (4, 4), seed=0)
    q, dq = torch.randn(2, 3), torch.randn(2, 3)
    idx = torch.arange(2)
    unit = ens.force(idx, q, dq)
    with torch.no_grad():
        ens.out_scale.fill_(3.0)
    assert_close(ens.force(idx, q, dq), 3.0 * unit, atol=1e-14)


def test_mlp_features_refuse_bad_sizes_by_name():
    with pytest.raises(ValueError, match="in_dim must be a positive integer"):
        wm.MLPFeatures(0, (4, 4))
    feats = wm.MLPFeatures(6, (4, 4))
    with pytest.raises(ValueError, match=r"in_dim=6\) got states with 5 entries"):
        feats(torch.zeros(2, 5))
