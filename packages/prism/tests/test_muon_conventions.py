"""Issue 28: PrismMuon's update scale, per-group hyper-parameters (Keller's MuonWithAuxAdam and
torch.optim.Muon conventions), batching, N-D weights, the Dion drop-in and input scales."""

import math

import prism_matfn as pm
import pytest
import torch
from prism_matfn.matfn import PrismOptions, polar_with
from prism_matfn.optim import PrismMuon
from prism_matfn.optim.orthogonalize import scale_update
from prism_matfn.training import MUON_COEFFICIENTS
from torch import nn


def low_rank_grad(m=64, n=32, rank=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, rank, generator=g) @ torch.randn(rank, n, generator=g)


def one_step(update_scale, grad, lr=0.1):
    w = nn.Parameter(torch.zeros_like(grad))
    opt = PrismMuon([w], lr=lr, update_scale=update_scale, momentum=0.0, nesterov=False)
    w.grad = grad.clone()
    opt.step()
    return -w.detach() / lr, opt


def test_default_update_scale_is_keller_on_the_raw_iterate():
    grad = low_rank_grad()
    step, opt = one_step("muon", grad)
    O = pm.polar(grad, sketch=opt.state[next(iter(opt.state))]["sketch"], check_finite=False)
    torch.testing.assert_close(step, O * math.sqrt(64 / 32))


def test_update_scales_set_the_spectral_norm():
    # 0.1 rescaled every update to ‖O‖_F = √min(m, n): on a rank-2 momentum that multiplied the
    # step's spectral norm by about √(32/2) = 4 against the raw iterate's ≈ 1.
    grad = low_rank_grad()
    keller = math.sqrt(64 / 32)
    norms = {s: float(torch.linalg.matrix_norm(one_step(s, grad)[0], ord=2)) / keller
             for s in ("muon", "frobenius", "spectral")}  # fmt: skip
    assert norms["muon"] < 1.2
    assert norms["frobenius"] > 3.0
    assert norms["spectral"] == pytest.approx(1.0, abs=0.02)
    frob = one_step("frobenius", grad)[0] / keller
    assert float(frob.norm()) == pytest.approx(math.sqrt(32), rel=1e-5)


@pytest.mark.parametrize("shape", [(256, 64), (64, 256), (128, 128)])
def test_spectral_update_scale_lands_on_one_for_near_flat_spectra(shape):
    # Full-rank momenta give 5-step PRISM outputs with σ in about [0.9, 1.1]: plain power iteration
    # from a fixed start stopped 2–5 % short of σ_max there, so "spectral" steps had ‖O‖₂ ≈ 1.02–1.05.
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    O = scale_update(pm.polar(G, steps=5), "spectral")
    assert float(torch.linalg.matrix_norm(O, ord=2)) == pytest.approx(1.0, abs=3e-3)


def test_lambda_lr_at_zero_freezes_every_parameter():
    # 0.1 read adam_lr, never group["lr"]: a scheduler stopped the matrices but not the vectors.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = PrismMuon(model.parameters(), lr=0.02, adam_lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 0.0)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(16, 6)).pow(2).mean().backward()
        opt.step()
        sched.step()
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), q)


def test_groups_without_use_muon_are_split_into_matrices_and_vectors():
    model = nn.Sequential(nn.Linear(6, 8), nn.Linear(8, 3))
    opt = PrismMuon(model.parameters(), lr=0.05, adam_lr=1e-3, weight_decay=0.1)
    assert [g["use_muon"] for g in opt.param_groups] == [True, False]
    assert [len(g["params"]) for g in opt.param_groups] == [2, 2]
    assert opt.param_groups[1]["lr"] == 1e-3 and opt.param_groups[1]["weight_decay"] == 0.1


class KellerReference(torch.optim.Optimizer):
    """Keller's SingleDeviceMuonWithAuxAdam transcribed (KellerJordan/Muon, muon.py), with its
    orthogonaliser taken as torch.optim.Muon's (``max(‖G‖, eps)`` normalisation) in float32."""

    def __init__(self, groups):
        for g in groups:
            if g["use_muon"]:
                g.setdefault("lr", 0.02), g.setdefault("momentum", 0.95)
                g.setdefault("weight_decay", 0)
            else:
                g.setdefault("lr", 3e-4), g.setdefault("betas", (0.9, 0.95))
                g.setdefault("eps", 1e-10), g.setdefault("weight_decay", 0)
        super().__init__(groups, {})

    @staticmethod
    def zeropower(G, steps=5, eps=1e-7):
        a, b, c = MUON_COEFFICIENTS
        X = G.float()
        if G.size(-2) > G.size(-1):
            X = X.mT
        X = X / X.norm().clamp(min=eps)
        for _ in range(steps):
            A = X @ X.mT
            B = torch.addmm(A, A, A, beta=b, alpha=c)
            X = torch.addmm(X, B, X, beta=a)
        return X.mT if G.size(-2) > G.size(-1) else X

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if group["use_muon"]:
                    buf = state.setdefault("momentum_buffer", torch.zeros_like(p))
                    buf.lerp_(p.grad, 1 - group["momentum"])
                    update = p.grad.lerp(buf, group["momentum"])
                    update = self.zeropower(update) * max(1, p.size(-2) / p.size(-1)) ** 0.5
                else:
                    if not state:
                        state.update(step=0, exp_avg=torch.zeros_like(p),
                                     exp_avg_sq=torch.zeros_like(p))  # fmt: skip
                    state["step"] += 1
                    b1, b2 = group["betas"]
                    state["exp_avg"].lerp_(p.grad, 1 - b1)
                    state["exp_avg_sq"].lerp_(p.grad.square(), 1 - b2)
                    m = state["exp_avg"] / (1 - b1 ** state["step"])
                    v = state["exp_avg_sq"] / (1 - b2 ** state["step"])
                    update = m / (v.sqrt() + group["eps"])
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update.reshape(p.shape), alpha=-group["lr"])


def keller_groups(model):
    hidden = [model[0].weight, model[2].weight]
    rest = [model[0].bias, model[2].bias, *model[4].parameters()]
    return [
        {"params": hidden, "use_muon": True, "lr": 0.03, "weight_decay": 0.01},
        {"params": rest, "use_muon": False, "lr": 2e-3, "betas": (0.8, 0.9), "eps": 1e-8,
         "weight_decay": 0.01},
    ]  # fmt: skip


def test_keller_style_groups_train_identically_to_kellers_reference():
    losses = {}
    for name in ("ours", "keller"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                              nn.Linear(16, 4))  # fmt: skip
        if name == "ours":
            opt = PrismMuon(keller_groups(model), ns_coefficients=MUON_COEFFICIENTS, eps=1e-7)
        else:
            opt = KellerReference(keller_groups(model))
        g = torch.Generator().manual_seed(1)
        run = []
        for _ in range(10):
            x = torch.randn(32, 10, generator=g)
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses[name] = (run, [p.detach().clone() for p in model.parameters()])
    assert losses["ours"][0] == pytest.approx(losses["keller"][0], rel=1e-5)
    for p, q in zip(losses["ours"][1], losses["keller"][1], strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


def test_torch_optim_muon_arguments_match_torch_optim_muon():
    for fn in ("original", "match_rms_adamw"):
        results = []
        for make in ("torch", "ours"):
            torch.manual_seed(0)
            ws = [nn.Parameter(torch.randn(12, 8)), nn.Parameter(torch.randn(8, 20))]
            kwargs = dict(lr=1e-3, weight_decay=0.1, momentum=0.9, adjust_lr_fn=fn)
            if make == "torch":
                opt = torch.optim.Muon(ws, **kwargs)
            else:
                opt = PrismMuon(ws, ns_coefficients=MUON_COEFFICIENTS, eps=1e-7,
                                compute_dtype=torch.bfloat16, **kwargs)  # fmt: skip
            g = torch.Generator().manual_seed(2)
            for _ in range(4):
                for w in ws:
                    w.grad = torch.randn(w.shape, generator=g)
                opt.step()
            results.append([w.detach() for w in ws])
        for p, q in zip(*results, strict=True):
            torch.testing.assert_close(p, q, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"degree": 4}, "degree"),
        ({"ns_steps": True}, "ns_steps"),
        ({"ns_steps": 0}, "ns_steps"),
        ({"sketch_dim": 0}, "sketch_dim"),
        ({"fit": "svd"}, "fit"),
        ({"alpha_solver": "bisect"}, "alpha_solver"),
        ({"update_scale": "rms"}, "update_scale"),
        ({"adjust_lr_fn": "kimi"}, "adjust_lr_fn"),
        ({"ns_coefficients": (1.0, 2.0)}, "ns_coefficients"),
        ({"eps": -1.0}, "eps"),
        ({"lr": -1.0}, "lr"),
    ],
)
def test_constructor_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrismMuon([nn.Parameter(torch.zeros(3, 2))], **kwargs)


def test_use_muon_true_on_a_vector_is_an_error_at_construction():
    with pytest.raises(ValueError, match="ndim >= 2"):
        PrismMuon([{"params": [nn.Parameter(torch.zeros(3))], "use_muon": True}])


def test_same_shape_matrices_are_batched_and_equal_one_at_a_time():
    torch.manual_seed(0)
    ws = [nn.Parameter(torch.randn(16, 8)) for _ in range(3)]
    opt = PrismMuon(ws, lr=0.1, momentum=0.0, nesterov=False)
    grads = [torch.randn(16, 8) for _ in ws]
    before = [w.detach().clone() for w in ws]
    calls = []
    original = opt.orthogonalize
    opt.orthogonalize = lambda u, g, s: calls.append(u.shape) or original(u, g, s)
    for w, g in zip(ws, grads, strict=True):
        w.grad = g.clone()
    opt.step()
    assert calls == [torch.Size([3, 16, 8])]  # one batched call
    opts = PrismOptions(check_finite=False)
    for w, w0, g in zip(ws, before, grads, strict=True):
        O = polar_with(g, opts, opt.state[w]["sketch"]) * math.sqrt(2)
        torch.testing.assert_close(w.detach(), w0 - 0.1 * O, atol=1e-6, rtol=1e-5)
    assert opt.orthogonalize_calls == 3


@pytest.mark.parametrize("shape", [(4, 3, 2), (4, 2, 3, 2, 2)])
def test_nd_weights_are_flattened_and_orthogonalised(shape):
    torch.manual_seed(0)
    w = nn.Parameter(torch.zeros(shape))
    opt = PrismMuon([w], lr=1.0, momentum=0.0, nesterov=False, ns_steps=12)
    w.grad = torch.randn(shape)
    opt.step()
    step = -w.detach().reshape(shape[0], -1)
    torch.testing.assert_close(step @ step.T, torch.eye(shape[0]), atol=1e-3, rtol=0)
    assert opt.orthogonalize_calls == 1


def test_a_2d_head_goes_to_muon_unless_its_group_says_use_muon_false():
    head = nn.Linear(4, 3)
    opt = PrismMuon(head.parameters())
    assert opt.param_groups[0]["use_muon"] and head.weight in opt.param_groups[0]["params"]
    opt = PrismMuon([{"params": list(head.parameters()), "use_muon": False}])
    assert opt.param_groups[0]["use_muon"] is False


def test_dion_style_call_with_a_batched_input():
    # microsoft/dion calls newton_schulz_func(X, epsilon=...) on a stacked batch: a stand-in caller.
    def dion_like_orthogonalize(X, newton_schulz_func, epsilon=1e-8):
        return newton_schulz_func(X, epsilon=epsilon)

    X = torch.randn(3, 20, 8)
    out = dion_like_orthogonalize(X, pm.dion_newton_schulz)
    assert out.shape == X.shape and out.dtype == X.dtype
    gram = out.mT @ out
    assert float((gram - torch.eye(8)).abs().max()) < 0.05


@pytest.mark.parametrize("scale", [1e-12, 1e-8, 1e-4, 1.0, 1e3, 1e6])
def test_every_input_scale_gives_an_orthogonal_update(scale):
    # Fixed-coefficient NS with an eps collapses when ‖G‖ < eps (NVIDIA Emerging-Optimizers #229);
    # neither polar nor PrismMuon (PRISM or its fixed-coefficient mode) may.
    G = torch.randn(32, 16, generator=torch.Generator().manual_seed(0)) * scale
    O = pm.polar(G, steps=12)
    assert torch.isfinite(O).all()
    assert float(pm.residual(O)) / 4 < 1e-3
    for extra in ({}, {"ns_coefficients": MUON_COEFFICIENTS}):
        w = nn.Parameter(torch.zeros(32, 16))
        opt = PrismMuon([w], lr=1.0, momentum=0.0, nesterov=False, **extra)
        w.grad = G.clone()
        opt.step()
        step = -w.detach() / math.sqrt(2)
        assert torch.isfinite(step).all()
        s = torch.linalg.svdvals(step)
        assert float(s.min()) > 0.5 and float(s.max()) < 1.3, (extra, s)


def test_torch_eps_semantics_reproduce_the_collapse_they_are_documented_to_have():
    w = nn.Parameter(torch.zeros(8, 4))
    opt = PrismMuon([w], lr=1.0, momentum=0.0, nesterov=False, ns_coefficients=MUON_COEFFICIENTS,
                    eps=1e-7)  # fmt: skip
    w.grad = torch.randn(8, 4) * 1e-12
    opt.step()
    # torch.optim.Muon's behaviour, opt-in only: singular values far below Muon's ≈ 0.7–1.2
    assert float(torch.linalg.svdvals(w.detach()).max()) < 0.1
