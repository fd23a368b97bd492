"""AdaS against its oracles: torch's AdamW at λ = 1, the closed form at t = 1, the mixing identity,
a line-by-line reference of the official code, and the state_dict / foreach / per-group contracts."""

import copy
import math

import numpy as np
import pytest
import torch
from adas_optim import AdaS, excess_energy, mixing_lambda
from adas_optim.mixing import reference_step

SHAPES = [(16, 12), (5,), (3, 4, 2)]


def make_params(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=dtype)) for s in SHAPES]


def set_grads(params, step, scale=0.01):
    g = torch.Generator().manual_seed(1000 + step)
    for p in params:
        p.grad = scale * torch.randn(p.shape, generator=g, dtype=p.dtype)


def run(opt_factory, steps=50, seed=0, **kw):
    params = make_params(seed)
    opt = opt_factory(params, **kw)
    for t in range(steps):
        set_grads(params, t)
        opt.step()
    return params, opt


@pytest.mark.parametrize("foreach", [False, True])
def test_huge_gamma_is_torch_adamw(foreach):
    hyper = dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, foreach=foreach)
    ours, opt = run(AdaS, gamma=1e30, **hyper)
    theirs, _ = run(torch.optim.AdamW, amsgrad=False, **hyper)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert all(float(lam) == 1.0 for lam in opt.last_lambda.values())


def test_huge_gamma_without_bias_correction_is_plain_adamw_formula():
    # torch's AdamW always corrects bias: the oracle is the AdamW formula written out in numpy.
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.05
    ours, _ = run(
        AdaS, lr=lr, gamma=1e30, betas=(b1, b2), eps=eps, weight_decay=wd, correct_bias=False
    )
    for k, shape in enumerate(SHAPES):
        theta = make_params(0)[k].detach().double().numpy()
        m = np.zeros(shape)
        v = np.zeros(shape)
        for t in range(50):
            params = make_params(0)
            set_grads(params, t)
            g = params[k].grad.double().numpy()
            theta = theta * (1 - lr * wd)
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            theta = theta - lr * m / (np.sqrt(v) + eps)
        np.testing.assert_allclose(ours[k].detach().double().numpy(), theta, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("gamma", [0.0, 1e-2, 10.0])
def test_closed_form_at_first_step(gamma):
    lr, b1, eps = 1e-2, 0.9, 1e-8
    g = torch.randn(40, 30, dtype=torch.float64) * 0.01
    theta0 = torch.randn(40, 30, dtype=torch.float64)
    p = torch.nn.Parameter(theta0.clone())
    p.grad = g.clone()
    opt = AdaS([p], lr=lr, gamma=gamma, eps=eps, weight_decay=0.0)
    opt.step()
    gn, th = g.numpy(), theta0.numpy()
    eta = lr / (1 - b1)
    m = (1 - b1) * gn
    a = m / (np.abs(gn) + eps)
    lam = min(
        1.0,
        math.sqrt((1 - b1) ** 2 * (gn**2).sum() + 2 * gamma * (1 - b1) / lr)
        / np.linalg.norm((1 - b1) * (gn / (np.abs(gn) + eps) - gn)),
    )
    expected = th - eta * lam * a - eta * (1 - lam) * m
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    assert float(opt.last_lambda[p]) == pytest.approx(lam, rel=1e-10)
    if gamma == 10.0:
        assert lam == 1.0  # clipped: the test covers both sides of the clip
    else:
        assert lam < 1.0


def test_mixing_identity_for_unclipped_lambda():
    # (η/2)‖d − m‖² − (η/2)‖m‖² = γ whenever λ < 1.
    torch.manual_seed(3)
    p = torch.nn.Parameter(torch.randn(64, 64, dtype=torch.float64))
    gamma, lr = 1e-3, 1e-2
    opt = AdaS([p], lr=lr, gamma=gamma, weight_decay=0.0)
    hits = 0
    for _ in range(20):
        p.grad = torch.randn_like(p) * 0.01
        state_m = opt.state[p]["exp_avg"].clone() if opt.state[p] else torch.zeros_like(p)
        before = p.detach().clone()
        opt.step()
        stats = opt.mixing_stats()[0]
        if stats["lambda"] >= 1.0:
            continue
        hits += 1
        m = opt.state[p]["exp_avg"]
        eta = stats["step_size"]
        d = (before - p.detach()) / eta
        lhs = eta / 2 * (d - m).square().sum() - eta / 2 * m.square().sum()
        assert float(lhs) == pytest.approx(gamma, rel=1e-8)
        assert stats["excess_energy"] - eta / 2 * float(m.square().sum()) == pytest.approx(
            gamma, rel=1e-8
        )
        del state_m
    assert hits >= 10, "the fixture must exercise unclipped λ"


def test_matches_line_by_line_official_reference():
    for component in ("momentum", "grad"):
        params = make_params(1, torch.float64)
        ref = [p.detach().clone() for p in params]
        ref_m = [torch.zeros_like(p) for p in ref]
        ref_v = [torch.zeros_like(p) for p in ref]
        hyper = dict(
            lr=5e-3,
            gamma=2e-4 if component == "grad" else 1e-4,
            betas=(0.9, 0.999),
            eps=1e-8,
            weight_decay=0.02,
        )
        opt = AdaS(params, sgd_component=component, **hyper)
        lams = []
        for t in range(30):
            set_grads(params, t, scale=0.05)
            for k, p in enumerate(params):
                ref[k] = reference_step(
                    ref[k],
                    p.grad.clone(),
                    ref_m[k],
                    ref_v[k],
                    t + 1,
                    sgd_component=component,
                    **hyper,
                )
            opt.step()
            lams += [float(v) for v in opt.last_lambda.values()]
        for p, r in zip(params, ref, strict=True):
            torch.testing.assert_close(p.detach(), r, rtol=1e-12, atol=1e-12)
        assert min(lams) < 0.99, "λ must leave 1 somewhere, else the two variants are not tested"


def test_grad_variant_differs_from_momentum_variant():
    a, _ = run(AdaS, steps=10, gamma=1e-4, sgd_component="grad")
    b, _ = run(AdaS, steps=10, gamma=1e-4, sgd_component="momentum")
    assert not torch.allclose(a[0], b[0])


def test_grad_variant_step_is_lambda_adam_plus_one_minus_lambda_grad():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(30, 20, dtype=torch.float64))
    opt = AdaS([p], lr=1e-2, gamma=1e-5, weight_decay=0.0, sgd_component="grad")
    for _ in range(3):
        p.grad = torch.randn_like(p) * 0.01
        before = p.detach().clone()
        opt.step()
        st = opt.state[p]
        t = float(st["step"])
        eta = 1e-2 / (1 - 0.9**t)
        denom = st["exp_avg_sq"].sqrt() / math.sqrt(1 - 0.999**t) + 1e-8
        a = st["exp_avg"] / denom
        lam = float(opt.last_lambda[p])
        expected = before - eta * lam * a - eta * (1 - lam) * p.grad
        torch.testing.assert_close(p.detach(), expected, rtol=1e-12, atol=1e-12)
    assert lam < 1.0


def test_lambda_in_unit_interval_over_random_cases():
    g = torch.Generator().manual_seed(7)
    m_sq = torch.rand(1000, generator=g) * 10 ** torch.randint(-6, 4, (1000,), generator=g)
    diff_sq = torch.rand(1000, generator=g) * 10 ** torch.randint(-6, 4, (1000,), generator=g)
    for gamma in (0.0, 1e-3, 1.0, 1e6):
        for eta in (1e-6, 1e-2, 1.0):
            lam = mixing_lambda(m_sq, diff_sq, gamma, eta)
            assert torch.isfinite(lam).all()
            assert (lam >= 0).all() and (lam <= 1).all()
    assert (mixing_lambda(m_sq, diff_sq, 0.0, 1e-2) < 1).any()


def test_zero_lr_gives_lambda_one_and_no_nan():
    p = torch.nn.Parameter(torch.randn(8, 8))
    before = p.detach().clone()
    opt = AdaS([p], lr=0.0, gamma=1.0)
    p.grad = torch.randn_like(p)
    opt.step()
    assert float(opt.last_lambda[p]) == 1.0
    torch.testing.assert_close(p.detach(), before, rtol=0, atol=0)
    assert mixing_lambda(torch.tensor(1.0), torch.tensor(1.0), 1.0, torch.tensor(0.0)) == 1.0


def test_a_equals_m_gives_lambda_one_without_nan():
    # m = 0 and γ = 0: the official code computes 0/0.
    assert float(mixing_lambda(torch.tensor(0.0), torch.tensor(0.0), 0.0, 0.1)) == 1.0
    p = torch.nn.Parameter(torch.randn(6, 6))
    opt = AdaS([p], lr=1e-2, gamma=0.0, weight_decay=0.0)
    p.grad = torch.zeros_like(p)
    opt.step()
    assert float(opt.last_lambda[p]) == 1.0
    assert torch.isfinite(p).all()


def test_zero_gradient_changes_only_weight_decay():
    p = torch.nn.Parameter(torch.randn(10, 10))
    before = p.detach().clone()
    opt = AdaS([p], lr=0.1, gamma=1.0, weight_decay=0.3)
    for _ in range(3):
        p.grad = torch.zeros_like(p)
        opt.step()
    torch.testing.assert_close(p.detach(), before * (1 - 0.1 * 0.3) ** 3)


@pytest.mark.parametrize("foreach", [False, True])
def test_state_dict_round_trip_mid_training_gives_identical_steps(foreach):
    params, opt = run(AdaS, steps=10, gamma=1e-3, foreach=foreach)
    saved_params = [p.detach().clone() for p in params]
    saved = copy.deepcopy(opt.state_dict())
    for t in range(10, 20):
        set_grads(params, t)
        opt.step()
    expected = [p.detach().clone() for p in params]

    fresh = [torch.nn.Parameter(p.clone()) for p in saved_params]
    opt2 = AdaS(fresh, gamma=1e-3, foreach=foreach)
    opt2.load_state_dict(saved)
    assert opt2.state[fresh[0]]["step"].dtype == torch.float32
    for t in range(10, 20):
        set_grads(fresh, t)
        opt2.step()
    for a, b in zip(fresh, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_adamw_state_dict_loads_into_adas():
    # Same state layout as AdamW: switch optimizer mid-training.
    params, adamw = run(torch.optim.AdamW, steps=5, lr=1e-3)
    opt = AdaS(params, lr=1e-3, gamma=1e30)
    opt.load_state_dict(adamw.state_dict())
    assert float(opt.state[params[0]]["step"]) == 5.0
    ref = copy.deepcopy(adamw)
    ref_params = ref.param_groups[0]["params"]
    set_grads(params, 5)
    for p, q in zip(params, ref_params, strict=True):
        q.grad = p.grad.clone()
    opt.step()
    ref.step()
    for p, q in zip(params, ref_params, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_per_group_gamma_is_honoured():
    params = make_params(0)
    opt = AdaS(
        [{"params": params[:1], "gamma": 1e30}, {"params": params[1:], "gamma": 0.0}], lr=1e-2
    )
    for t in range(3):
        set_grads(params, t)
        opt.step()
    lam = opt.last_lambda
    assert float(lam[params[0]]) == 1.0
    assert float(lam[params[1]]) < 1.0 or float(lam[params[2]]) < 1.0
    assert [g["gamma"] for g in opt.param_groups] == [1e30, 0.0]


def test_foreach_equals_loop():
    a, oa = run(AdaS, steps=20, gamma=1e-3, foreach=True, weight_decay=0.1)
    b, ob = run(AdaS, steps=20, gamma=1e-3, foreach=False, weight_decay=0.1)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)
    lams = [float(v) for v in oa.last_lambda.values()]
    assert min(lams) < 1.0
    assert lams == pytest.approx([float(v) for v in ob.last_lambda.values()], rel=1e-5)


def test_params_at_different_steps_in_one_foreach_bucket():
    params = make_params(0)
    ref = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt, opt_ref = AdaS(params, foreach=True, gamma=1e-3), AdaS(ref, foreach=False, gamma=1e-3)
    for t in range(6):
        set_grads(params, t)
        set_grads(ref, t)
        if t % 2:  # the vector skips every other step: its bias correction lags behind
            params[1].grad = ref[1].grad = None
        opt.step()
        opt_ref.step()
    for x, y in zip(params, ref, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)


def test_maximize_is_descent_on_the_negated_loss():
    a, _ = run(AdaS, steps=5, gamma=1e-3, maximize=True)
    params = make_params(0)
    opt = AdaS(params, gamma=1e-3)
    for t in range(5):
        set_grads(params, t, scale=-0.01)
        opt.step()
    for x, y in zip(a, params, strict=True):
        torch.testing.assert_close(x, y)


def test_closure_is_called_and_its_loss_returned():
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = AdaS([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p**2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss.detach()) == 5.0
    assert (p.detach().abs() < torch.tensor([1.0, 2.0])).all()


def test_capturable_matches_default():
    a, _ = run(AdaS, steps=10, gamma=1e-3, capturable=True)
    b, _ = run(AdaS, steps=10, gamma=1e-3)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


def test_track_update_norms_reports_the_step_norm():
    params = make_params(0, torch.float64)
    opt = AdaS(params, gamma=1e-3, weight_decay=0.0, track_update_norms=True)
    set_grads(params, 0)
    before = [p.detach().clone() for p in params]
    opt.step()
    for row, p, b in zip(opt.mixing_stats(), params, before, strict=True):
        assert row["update_norm"] == pytest.approx(float((p.detach() - b).norm()), rel=1e-5)


def test_excess_energy_formula():
    lam, diff_sq = torch.tensor([0.5, 1.0]), torch.tensor([4.0, 2.0])
    torch.testing.assert_close(excess_energy(lam, diff_sq, 0.1), torch.tensor([0.05, 0.1]))


def test_bf16_parameters_step_in_their_dtype():
    p = torch.nn.Parameter(torch.randn(8, 8, dtype=torch.bfloat16))
    opt = AdaS([p], lr=1e-2, gamma=1e-3)
    p.grad = torch.randn_like(p)
    opt.step()
    assert p.dtype == torch.bfloat16 and opt.state[p]["exp_avg"].dtype == torch.bfloat16
    assert torch.isfinite(p.float()).all()


@pytest.mark.parametrize("foreach", [False, True])
def test_lambda_of_a_large_float32_tensor_matches_float64(foreach):
    # The loop path's dot-product norms against a float64 computation of the same step.
    g = torch.Generator().manual_seed(5)
    theta = torch.randn(600, 500, generator=g)
    grads = [
        torch.randn(600, 500, generator=g)
        * 10 ** torch.empty(600, 500).uniform_(-4, -1, generator=g)
        for _ in range(3)
    ]
    lams = {}
    for dtype in (torch.float32, torch.float64):
        p = torch.nn.Parameter(theta.to(dtype))
        opt = AdaS([p], lr=1e-2, gamma=1e-3, foreach=foreach)
        for grad in grads:
            p.grad = grad.to(dtype)
            opt.step()
        lams[dtype] = float(opt.last_lambda[p])
    assert lams[torch.float64] < 0.9
    assert lams[torch.float32] == pytest.approx(lams[torch.float64], rel=1e-5)
