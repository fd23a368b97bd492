import copy

import prism_matfn as pm
import pytest
import torch
from prism_matfn.optim import PrismMuon, PrismShampoo
from torch import nn


def regression_problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(256, 12, generator=g)
    W = torch.randn(12, 6, generator=g)
    Y = torch.tanh(X @ W)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 6))
    return model, X, Y


def train(model, opt, X, Y, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(X), Y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize(
    ("make", "kwargs"),
    [
        (PrismMuon, {"lr": 0.02, "adam_lr": 3e-3}),
        (PrismMuon, {"lr": 0.02, "adam_lr": 3e-3, "nesterov": False, "degree": 3, "fit": "exact"}),
        (PrismMuon, {"lr": 0.02, "adam_lr": 3e-3, "spectral_rescale": True}),
        (PrismShampoo, {"lr": 3e-3, "precondition_frequency": 5}),
        (PrismShampoo, {"lr": 3e-3, "root": 4, "matrix_fn": "eigh", "grafting": None}),
    ],
)
def test_optimizer_reduces_loss(make, kwargs):
    model, X, Y = regression_problem()
    losses = train(model, make(model.parameters(), **kwargs), X, Y, 40)
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("make", [PrismMuon, PrismShampoo])
def test_state_dict_round_trip_continues_identically(make, tmp_path):
    model, X, Y = regression_problem(1)
    opt = make(model.parameters(), weight_decay=0.01)
    train(model, opt, X, Y, 7)
    clone = copy.deepcopy(model)
    path = tmp_path / "opt.pt"
    torch.save(opt.state_dict(), path)
    reloaded = make(clone.parameters(), weight_decay=0.01)
    reloaded.load_state_dict(torch.load(path, weights_only=False))
    a = train(model, opt, X, Y, 5)
    b = train(clone, reloaded, X, Y, 5)
    assert a == b
    for p, q in zip(model.parameters(), clone.parameters(), strict=True):
        assert torch.equal(p, q)


def test_muon_step_is_the_scaled_polar_factor_of_the_nesterov_momentum():
    torch.manual_seed(0)
    # An ill-conditioned gradient: 5 PRISM steps leave its small singular values short of 1, so
    # ‖O‖_F is well below √min(m, n) and a switch of the default update_scale would show.
    g = torch.randn(8, 3) @ torch.randn(3, 20) + 1e-3 * torch.randn(8, 20)
    w = nn.Parameter(torch.randn(8, 20))
    b = nn.Parameter(torch.randn(8))
    opt = PrismMuon([w, b], lr=0.1, momentum=0.9, weight_decay=0.5, adam_lr=0.01)
    w.grad, b.grad = g.clone(), torch.ones(8)
    w0, b0 = w.detach().clone(), b.detach().clone()
    opt.step()
    update = g.lerp(0.1 * g, 0.9)  # buffer = (1 − β) g after one step; Nesterov blend
    O = pm.polar(update, steps=5, sketch=opt.state[w]["sketch"])  # "muon": the raw iterate
    assert O.norm() < 0.8 * 8**0.5  # the Frobenius rescale would have moved it
    # Keller's shape factor is 1 for m < n
    torch.testing.assert_close(w.detach(), w0 * (1 - 0.1 * 0.5) - 0.1 * O)
    # the bias took an AdamW step: first step moves every coordinate by adam_lr (sign of the grad)
    torch.testing.assert_close(b.detach(), b0 * (1 - 0.01 * 0.5) - 0.01, atol=1e-6, rtol=0)
    assert opt.orthogonalize_calls == 1


def test_muon_reshapes_conv_filters_and_honours_use_muon_false():
    conv = nn.Conv2d(3, 4, 3)
    emb = nn.Embedding(10, 4)
    opt = PrismMuon(
        [{"params": list(conv.parameters())}, {"params": list(emb.parameters()), "use_muon": False}]
    )
    torch.manual_seed(0)
    out = (
        emb(torch.tensor([1, 2])).sum()
        + (conv(torch.randn(2, 3, 5, 5)) * torch.randn(2, 4, 3, 3)).sum()
    )
    out.backward()
    before = conv.weight.detach().clone()
    opt.step()
    assert opt.orthogonalize_calls == 1  # the conv weight only
    step = (before - conv.weight.detach()).reshape(4, -1) / 0.02
    torch.testing.assert_close(step @ step.T, torch.eye(4), atol=0.05, rtol=0)
    assert "exp_avg" in opt.state[emb.weight]


def test_shampoo_backends_agree_on_the_preconditioner():
    torch.manual_seed(0)
    G = torch.randn(6, 40)
    A = G @ G.T / 40
    from prism_matfn.optim.shampoo import factor_inv_root

    eigh = factor_inv_root(A, 4, 1e-12, "eigh", 5)
    prism = factor_inv_root(A, 4, 1e-12, "prism", 12)
    torch.testing.assert_close(prism, eigh, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize(
    ("make", "kwargs", "match"),
    [
        (PrismMuon, {"momentum": 1.0}, "momentum"),
        (PrismMuon, {"adjust_lr": "kimi"}, "adjust_lr"),
        (PrismShampoo, {"root": 3}, "root must be 2 or 4"),
        (PrismShampoo, {"matrix_fn": "svd"}, "matrix_fn"),
        (PrismShampoo, {"grafting": "sgd"}, "grafting"),
    ],
)
def test_optimizer_bad_arguments(make, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make([nn.Parameter(torch.zeros(2, 2))], **kwargs)


def test_shampoo_skips_sides_above_max_preconditioner_dim_and_newton_backend_runs():
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(3, 40))
    opt = PrismShampoo([w], matrix_fn="newton", max_preconditioner_dim=10)
    w.grad = torch.randn(3, 40)
    opt.step()
    state = opt.state[w]
    assert "left_factor" in state and "right_factor" not in state
    assert state["left_inv_root"].shape == (3, 3)
    assert torch.isfinite(w).all()


@pytest.mark.parametrize("root", [2, 4])
def test_shampoo_step_is_the_two_sided_preconditioned_gradient(root):
    # Step 1: m̂ = g, L = (1 − β₂) g gᵀ, R = (1 − β₂) gᵀ g, each shifted by ε + 1e-6·mean(diag) before
    # its root; the update is lr · L^{-1/r} g R^{-1/r} (no grafting), and with Adam grafting it keeps
    # that direction at the norm of Adam's first step, ‖g / (|g| + ε)‖ ≈ √(number of entries).
    g = torch.randn(5, 7, generator=torch.Generator().manual_seed(root), dtype=torch.float64)
    beta2, eps = 0.99, 1e-3

    def inv_root(A):
        ridge = eps + 1e-6 * float(A.diagonal().mean())
        w, V = torch.linalg.eigh(A + ridge * torch.eye(len(A), dtype=A.dtype))
        return (V * w ** (-1.0 / root)) @ V.T

    direction = inv_root((1 - beta2) * g @ g.T) @ g @ inv_root((1 - beta2) * g.T @ g)
    for grafting in (None, "adam"):
        w = nn.Parameter(torch.zeros(5, 7))
        opt = PrismShampoo(
            [w], lr=0.1, betas=(0.9, beta2), epsilon=eps, root=root, matrix_fn="eigh",
            grafting=grafting, adam_eps=1e-12,
        )  # fmt: skip
        w.grad = g.float()
        opt.step()
        expected = -0.1 * direction
        if grafting == "adam":
            expected = expected * (35**0.5 / direction.norm())
        torch.testing.assert_close(w.detach().double(), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_resume_of_low_precision_params_is_bit_identical(dtype, tmp_path):
    # Optimizer.load_state_dict casts floating state to the parameter dtype: a rounded sketch
    # would change every later α (the sketch is redrawn from its seed instead).
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(64, 32).to(dtype))
    opt = PrismMuon([w], log_alphas=True, compute_dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    grads = [torch.randn(64, 32, generator=g).to(dtype) for _ in range(3)]
    w.grad = grads[0]
    opt.step()
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    w2 = nn.Parameter(w.detach().clone())
    resumed = PrismMuon([w2], log_alphas=True, compute_dtype=torch.float32)
    resumed.load_state_dict(torch.load(tmp_path / "opt.pt"))
    for grad in grads[1:]:
        w.grad, w2.grad = grad, grad.clone()
        opt.step()
        resumed.step()
    assert opt.alpha_log is not None and resumed.alpha_log is not None
    for a, b in zip(opt.alpha_log[1:], resumed.alpha_log, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(w, w2)


@pytest.mark.parametrize("make", [PrismMuon, PrismShampoo])
def test_non_finite_gradients_propagate_as_documented(make):
    # The optimizer path makes no host-side finiteness check (README: guard the step yourself).
    w = nn.Parameter(torch.randn(6, 4))
    opt = make([w])
    w.grad = torch.full_like(w, float("nan"))
    opt.step()
    assert torch.isnan(w).all()
