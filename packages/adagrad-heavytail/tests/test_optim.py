"""The torch optimizers against torch.optim.Adagrad, the hand checks and the functional steps."""

import copy

import numpy as np
import pytest
import torch
from adagrad_heavytail import functional as F
from adagrad_heavytail.optim import NSGDM, AdaGrad, AdaGradNorm, ClippedSGD

SHAPES = [(7, 5), (11,), (3, 2, 4)]


def make_params(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=dtype)) for s in SHAPES]


def run(opt_cls, params, steps, seed=1, **kw):
    opt = opt_cls(params, **kw)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)
        opt.step()
    return opt


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize(
    "kw",
    [
        {"lr": 0.1, "eps": 1e-10},
        {"lr": 0.05, "eps": 1e-3, "initial_accumulator_value": 0.1, "weight_decay": 0.01},
        {"lr": 0.05, "lr_decay": 0.01, "maximize": True},
    ],
)
def test_adagrad_equals_torch_adagrad_over_100_steps(foreach, kw):
    ours, theirs = make_params(), make_params()
    run(AdaGrad, ours, 100, foreach=foreach, **kw)
    run(torch.optim.Adagrad, theirs, 100, foreach=foreach, **kw)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=0)


def test_adagrad_foreach_equals_loop_in_float32():
    a, b = make_params(dtype=torch.float32), make_params(dtype=torch.float32)
    run(AdaGrad, a, 50, foreach=True, lr=0.1)
    run(AdaGrad, b, 50, foreach=False, lr=0.1)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, atol=1e-7, rtol=0)


def test_adagrad_state_dict_moves_to_torch_and_back():
    ours, theirs = make_params(), make_params()
    opt = run(AdaGrad, ours, 10, lr=0.1)
    ref = run(torch.optim.Adagrad, theirs, 10, lr=0.1)
    # ours -> torch: a torch Adagrad resumed from our state continues exactly like ref
    resumed = torch.optim.Adagrad([torch.nn.Parameter(p.detach().clone()) for p in ours], lr=0.1)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))  # torch aliases same-dtype state
    back = AdaGrad([torch.nn.Parameter(p.detach().clone()) for p in theirs], lr=0.1)
    back.load_state_dict(copy.deepcopy(ref.state_dict()))
    g = torch.Generator().manual_seed(5)
    grads = [torch.randn(s, generator=g, dtype=torch.float64) for s in SHAPES]
    for o in (resumed, back, ref):
        for p, gr in zip(o.param_groups[0]["params"], grads, strict=True):
            p.grad = gr.clone()
        o.step()
    for a, b, c in zip(
        resumed.param_groups[0]["params"], back.param_groups[0]["params"], theirs, strict=True
    ):
        torch.testing.assert_close(a, c, atol=1e-12, rtol=0)
        torch.testing.assert_close(b, c, atol=1e-12, rtol=0)


def test_adagrad_resume_gives_identical_results():
    a = make_params()
    opt = run(AdaGrad, a, 5, lr=0.1)
    saved = copy.deepcopy(opt.state_dict())
    snapshot = [p.detach().clone() for p in a]

    def run_more(o, ps):
        for p in ps:
            p.grad = torch.full_like(p, 0.3)
        o.step()

    run_more(opt, a)
    b = [torch.nn.Parameter(s.clone()) for s in snapshot]
    opt2 = AdaGrad(b, lr=0.1)
    opt2.load_state_dict(saved)
    run_more(opt2, b)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def test_adagrad_scalar_hand_check():
    x = torch.nn.Parameter(torch.tensor([2.0], dtype=torch.float64))
    opt = AdaGrad([x], lr=0.5, eps=0.1)
    x.grad = torch.tensor([3.0], dtype=torch.float64)
    opt.step()
    assert opt.state[x]["sum"].item() == 9.0
    assert x.item() == pytest.approx(2.0 - 0.5 * 3 / (0.1 + 3))


def test_adagrad_norm_vector_hand_check():
    x = torch.nn.Parameter(torch.tensor([1.0, -1.0], dtype=torch.float64))
    opt = AdaGradNorm([x], lr=0.5, eps=0.1)
    x.grad = torch.tensor([3.0, 4.0], dtype=torch.float64)
    opt.step()
    assert opt.scope_sums[0].item() == 25.0
    torch.testing.assert_close(
        x.detach(), torch.tensor([1.0 - 0.5 * 3 / 5.1, -1.0 - 0.5 * 4 / 5.1], dtype=torch.float64)
    )


def test_adagrad_norm_global_over_two_tensors_equals_one_flat_tensor():
    a = [
        torch.nn.Parameter(torch.randn(4, 3, dtype=torch.float64)),
        torch.nn.Parameter(torch.randn(5, dtype=torch.float64)),
    ]
    flat = torch.nn.Parameter(torch.cat([p.detach().reshape(-1) for p in a]))
    opt_a = AdaGradNorm([{"params": [a[0]]}, {"params": [a[1]]}], lr=0.2, eps=0.0, scope="global")
    opt_f = AdaGradNorm([flat], lr=0.2, eps=0.0)
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in a]
        for p, gr in zip(a, grads, strict=True):
            p.grad = gr
        flat.grad = torch.cat([gr.reshape(-1) for gr in grads])
        opt_a.step()
        opt_f.step()
    torch.testing.assert_close(
        torch.cat([p.detach().reshape(-1) for p in a]), flat.detach(), atol=1e-12, rtol=0
    )


def test_adagrad_norm_scopes_differ_as_they_should():
    # param scope on two tensors = two independent AdaGrad-Norms; group scope = global with one group
    def go(scope, groups):
        ps = make_params()[:2]
        opt = AdaGradNorm(
            [{"params": [ps[0]]}, {"params": [ps[1]]}] if groups else ps, lr=0.1, scope=scope
        )
        g = torch.Generator().manual_seed(9)
        for _ in range(5):
            for p in ps:
                p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)
            opt.step()
        return ps

    single = []
    g = torch.Generator().manual_seed(9)
    ps = make_params()[:2]
    opts = [AdaGradNorm([p], lr=0.1) for p in ps]
    for _ in range(5):
        for p in ps:
            p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)
        for o in opts:
            o.step()
    for x, y in zip(go("param", False), ps, strict=True):
        torch.testing.assert_close(x, y)
    for x, y in zip(go("group", True), ps, strict=True):
        torch.testing.assert_close(x, y)
    for x, y in zip(go("group", False), go("global", False), strict=True):
        torch.testing.assert_close(x, y)
    assert not torch.allclose(go("global", False)[0], ps[0])
    del single


def test_adagrad_norm_state_dict_round_trip_and_scope_guard():
    a = make_params()
    opt = run(AdaGradNorm, a, 5, lr=0.1, scope="group")
    state = copy.deepcopy(opt.state_dict())
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    opt2 = AdaGradNorm(b, lr=0.1, scope="group")
    opt2.load_state_dict(state)
    for o, ps in ((opt, a), (opt2, b)):
        for p in ps:
            p.grad = torch.ones_like(p)
        o.step()
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    with pytest.raises(ValueError, match="scope"):
        AdaGradNorm(b, lr=0.1, scope="param").load_state_dict(state)


def _numpy_norm_reference(init, seq, lr, eps, keys):
    """AdaGrad-Norm in numpy, one v per scope key; a None gradient adds nothing and moves nothing."""
    xs, v = [x.copy() for x in init], {}
    for grads in seq:
        for k in sorted(set(keys)):
            present = [g for g, kk in zip(grads, keys, strict=True) if kk == k and g is not None]
            if present:
                total = np.sum(np.stack([np.sum(g * g) for g in present]))
                v[k] = v.get(k, 0.0) + total
        for i, g in enumerate(grads):
            if g is not None:
                xs[i] = xs[i] + (-lr / (eps + np.sqrt(v[keys[i]]))) * g
    return xs, v


@pytest.mark.parametrize(
    ("scope", "keys"), [("global", [0, 0, 0]), ("group", [0, 0, 1]), ("param", [0, 1, 2])]
)
def test_adagrad_norm_with_missing_gradients_equals_numpy_reference(scope, keys):
    # parameter 0 has no gradient on its first 3 steps, parameter 2 only on steps 0 and 5
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s) for s in SHAPES]
    seq = [
        [
            None if t < 3 else rng.standard_normal(SHAPES[0]),
            rng.standard_normal(SHAPES[1]),
            rng.standard_normal(SHAPES[2]) if t in (0, 5) else None,
        ]
        for t in range(6)
    ]
    ps = [torch.nn.Parameter(torch.from_numpy(x.copy())) for x in init]
    opt = AdaGradNorm([{"params": ps[:2]}, {"params": ps[2:]}], lr=0.7, eps=1e-3, scope=scope)
    for grads in seq:
        for p, g in zip(ps, grads, strict=True):
            p.grad = None if g is None else torch.from_numpy(g.copy())
        opt.step()
    ref, v = _numpy_norm_reference(init, seq, 0.7, 1e-3, keys)
    for p, x in zip(ps, ref, strict=True):
        # equal up to the reductions' summation order (torch and numpy differ by an ulp);
        # reading v from a stale parameter's state is off by 0.3
        np.testing.assert_allclose(p.detach().numpy(), x, rtol=0, atol=1e-13)
    if scope == "param":
        stored = {k: opt.state[p]["sum"].item() for k, p in zip(keys, ps, strict=True)}
    else:
        stored = {k: t.item() for k, t in opt.scope_sums.items()}
    assert stored == pytest.approx(v, rel=1e-14)


@pytest.mark.parametrize("scope", ["global", "group"])
def test_adagrad_norm_resume_with_missing_gradients_is_identical(scope):
    def grads_at(t, ps, g):
        return [
            None if (i == 0 and t % 3) else torch.randn(p.shape, generator=g, dtype=p.dtype)
            for i, p in enumerate(ps)
        ]

    a = make_params()
    opt = AdaGradNorm([{"params": a[:2]}, {"params": a[2:]}], lr=0.2, scope=scope)
    g = torch.Generator().manual_seed(4)
    for t in range(4):
        for p, gr in zip(a, grads_at(t, a, g), strict=True):
            p.grad = gr
        opt.step()
    saved = copy.deepcopy(opt.state_dict())
    assert set(saved["scope_sums"]) == ({0} if scope == "global" else {0, 1})
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    opt2 = AdaGradNorm([{"params": b[:2]}, {"params": b[2:]}], lr=0.2, scope=scope)
    opt2.load_state_dict(saved)
    for k in opt.scope_sums:
        assert torch.equal(opt.scope_sums[k], opt2.scope_sums[k])
    g2 = copy.deepcopy(g)
    for t in range(4, 8):
        for o, ps, gen in ((opt, a, g), (opt2, b, g2)):
            for p, gr in zip(ps, grads_at(t, ps, gen), strict=True):
                p.grad = gr
            o.step()
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)


def test_adagrad_norm_loads_a_state_dict_with_per_parameter_sums():
    # 0.1.0 stored v in every parameter's "sum": the largest (latest) becomes the scope's v
    a = make_params()
    opt = AdaGradNorm(a, lr=0.1)
    old = {
        "state": {
            i: {"step": torch.tensor(3.0), "sum": torch.tensor(s, dtype=torch.float64)}
            for i, s in enumerate([5.0, 9.0, 7.0])
        },
        "param_groups": opt.state_dict()["param_groups"],
    }
    opt.load_state_dict(old)
    assert opt.scope_sums[0].item() == 9.0
    assert all("sum" not in opt.state[p] for p in a)


def test_one_dimension_makes_adagrad_and_adagrad_norm_equal():
    x1 = torch.nn.Parameter(torch.tensor([0.7], dtype=torch.float64))
    x2 = torch.nn.Parameter(torch.tensor([0.7], dtype=torch.float64))
    o1, o2 = AdaGrad([x1], lr=0.3, eps=1e-3), AdaGradNorm([x2], lr=0.3, eps=1e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        grad = torch.randn(1, generator=g, dtype=torch.float64)
        x1.grad, x2.grad = grad.clone(), grad.clone()
        o1.step()
        o2.step()
    torch.testing.assert_close(x1, x2, atol=1e-14, rtol=0)


@pytest.mark.parametrize("cls", [AdaGrad, AdaGradNorm])
def test_zero_gradient_coordinate_with_eps_zero_steps_zero_not_nan(cls):
    x = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = cls([x], lr=0.1, eps=0.0)
    for _ in range(3):
        x.grad = torch.tensor([0.0, 1.0]) if cls is AdaGrad else torch.zeros(2)
        opt.step()
    assert torch.isfinite(x).all()
    assert x[0].item() == 1.0
    # torch's Adagrad gives NaN here: the masked step is our documented departure
    y = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    ref = torch.optim.Adagrad([y], lr=0.1, eps=0.0)
    y.grad = torch.tensor([0.0, 1.0])
    ref.step()
    assert torch.isnan(y[0])


def test_sparse_gradients_match_torch():
    emb_a = torch.nn.Embedding(10, 3, sparse=True)
    emb_b = copy.deepcopy(emb_a)
    oa, ob = AdaGrad(emb_a.parameters(), lr=0.1), torch.optim.Adagrad(emb_b.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    for _ in range(10):
        idx = torch.randint(0, 10, (6,), generator=g)
        for emb, opt in ((emb_a, oa), (emb_b, ob)):
            opt.zero_grad()
            emb(idx).pow(2).sum().backward()
            opt.step()
    torch.testing.assert_close(emb_a.weight, emb_b.weight, atol=1e-7, rtol=0)
    with pytest.raises(RuntimeError, match="sparse"):
        o = AdaGrad(emb_a.parameters(), lr=0.1, weight_decay=0.1)
        o.zero_grad()
        emb_a(torch.tensor([1])).sum().backward()
        o.step()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_scale_invariance_holds_at_lambda_zero_only(eps):
    def final(c):
        x = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
        opt = AdaGrad([x], lr=0.1, eps=eps)
        g = torch.Generator().manual_seed(4)
        for _ in range(30):
            x.grad = c * (x.detach() + torch.randn(3, generator=g, dtype=torch.float64))
            opt.step()
        return x.detach()

    same = torch.allclose(final(1.0), final(7.0), atol=1e-12, rtol=0)
    assert same == (eps == 0.0)


def test_optimizers_equal_the_functional_steps():
    rng = np.random.default_rng(0)
    grads = rng.standard_normal((30, 6))
    cases = [
        (
            AdaGrad,
            {"lr": 0.2, "eps": 1e-3},
            lambda x, g, s: F.adagrad_step(x, g, s, 0.2, 1e-3),
            np.zeros(6),
        ),
        (
            AdaGradNorm,
            {"lr": 0.2, "eps": 1e-3},
            lambda x, g, s: F.adagrad_norm_step(x, g, s, 0.2, 1e-3),
            np.zeros(()),
        ),
        (
            ClippedSGD,
            {"lr": 0.1, "clip": 1.5, "momentum": 0.5},
            lambda x, g, s: F.clipped_sgd_step(x, g, s, 0.1, 1.5, 0.5),
            np.zeros(6),
        ),
        (
            NSGDM,
            {"lr": 0.1, "beta": 0.8},
            lambda x, g, s: F.nsgdm_step(x, g, s, 0.1, 0.8),
            np.zeros(6),
        ),
    ]
    for cls, kw, step, state in cases:
        x = np.ones(6)
        p = torch.nn.Parameter(torch.ones(6, dtype=torch.float64))
        opt = cls([p], **kw)
        for g in grads:
            x, state = step(x, g, state)
            p.grad = torch.from_numpy(g.copy())
            opt.step()
        np.testing.assert_allclose(p.detach().numpy(), x, atol=1e-12, err_msg=cls.__name__)


def test_functional_steps_run_on_torch_tensors_too():
    x, g = torch.ones(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    xn, v = F.adagrad_norm_step(x, g, torch.zeros(4, dtype=torch.float64), 0.1, 0.0)
    xa, va = F.adagrad_norm_step(x.numpy(), g.numpy(), np.zeros(4), 0.1, 0.0)
    np.testing.assert_allclose(xn.numpy(), xa)
    np.testing.assert_allclose(v.numpy(), va)


def test_clip_by_norm_closed_form():
    g = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    np.testing.assert_allclose(F.clip_by_norm(g, 1.0), [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]])


def test_clipped_sgd_and_nsgdm_move_the_expected_distance():
    p = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    opt = ClippedSGD([p], lr=0.5, clip=1.0)
    p.grad = torch.tensor([30.0, 40.0], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(p.detach(), torch.tensor([-0.3, -0.4], dtype=torch.float64))
    q = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    opt = NSGDM([q], lr=0.5, beta=0.9)
    q.grad = torch.tensor([300.0, 400.0], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(q.detach(), torch.tensor([-0.3, -0.4], dtype=torch.float64))
