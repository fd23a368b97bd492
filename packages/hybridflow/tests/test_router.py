import itertools

import numpy as np
import pytest
from hybridflow import (
    ConstantRouter,
    QueryRouter,
    RandomRouter,
    Subtask,
    SubtaskProfile,
    TaskDAG,
    ThresholdRouter,
    UtilityRouter,
    adaptive_threshold,
    p_cloud,
    router_loss,
    utility_label,
)
from hybridflow.embedders import CallableEmbedder, HashingEmbedder
from hybridflow.router import sigmoid
from hybridflow.training import dq_length

torch = pytest.importorskip("torch")


def test_p_cloud_formula_clip_and_hard_threshold_limit():
    s = np.linspace(0.01, 0.99, 50)
    delta = adaptive_threshold(0.4, 0.6, 0.1, 0.5, 0.5)
    assert delta == pytest.approx(0.6)
    assert np.allclose(p_cloud(s, delta, 0.1), 1 / (1 + np.exp(-(s - 0.6) / 0.1)))
    assert adaptive_threshold(5.0, 5.0, 0.0, 0.5, 0.5) == 1.0
    assert adaptive_threshold(0.0, 0.0, -3.0, 0.5, 0.5) == 0.0
    hard = p_cloud(s, 0.5, 1e-6)
    assert np.array_equal(hard > 0.5, s > 0.5) and np.all((hard < 1e-6) | (hard > 1 - 1e-6))
    # at r_B = r_L = 0 and delta0 = 0, p_cloud > 0.5 iff s > 0
    for value in (-0.3, 0.2):
        assert (p_cloud(value, adaptive_threshold(0, 0, 0.0, 0.5, 0.5), 0.1) > 0.5) == (value > 0)
    with pytest.raises(ValueError, match="tau must be > 0"):
        p_cloud(0.5, 0.5, 0.0)


def test_sigmoid_is_stable():
    assert sigmoid(np.array([-1000.0, 0.0, 1000.0])).tolist() == [0.0, 0.5, 1.0]


def _profiles(n=400, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _i in range(n):
        d = int(rng.integers(1, 10))
        digits = "7" * d
        step = Subtask(
            2, f"What is {digits} * 3?", (1,), int(np.clip(d + rng.normal(0, 2), 1, 9)), 30
        )
        edge_right = float(rng.random() < 1 - 0.1 * d)
        out.append(SubtaskProfile("q", step, False, 40, 30, 0.4, 40, 40, 1.0, edge_right, 1.0))
    return out


def test_fit_learns_the_utility_and_routes_hard_steps_to_the_cloud():
    profiles = _profiles()
    router = UtilityRouter(HashingEmbedder(64), seed=0).fit(profiles, epochs=30, lr=2e-3)
    assert router.history_[-1] < router.history_[0]
    easy = Subtask(2, "What is 7 * 3?", (1,), 1, 30)
    hard = Subtask(2, "What is 777777777 * 3?", (1,), 9, 30)
    assert router.score("q", hard) > router.score("q", easy)
    ps = [
        router.route("q", hard, tokens_used=t, elapsed_s=0.0).p_cloud
        for t in (0, 500, 1000, 2000, 4000)
    ]
    assert (
        all(a >= b for a, b in itertools.pairwise(ps)) and ps[0] > ps[-1]
    )  # falls as the budget is used


def test_a_seed_gives_identical_routes_and_hard_rules_hold():
    router = UtilityRouter(HashingEmbedder(32), seed=7).fit(_profiles(64), epochs=2)
    steps = [Subtask(i, f"task {i} {'9' * i}", (1,) if i > 1 else (), 5) for i in range(1, 7)]

    def routes(r):
        return [
            r.route("q", s, tokens_used=300, elapsed_s=3.0, is_last=s.id == 6).target for s in steps
        ]

    again = UtilityRouter(HashingEmbedder(32), seed=7)
    again.layers_ = router.layers_
    assert routes(router) == routes(again)
    decisions = [router.route("q", s, tokens_used=0, elapsed_s=0, is_last=s.id == 6) for s in steps]
    assert decisions[0].rule == "first" and decisions[-1].rule == "last"
    assert decisions[0].target == decisions[-1].target == "cloud"


def _loss_inputs(seed=0, n=64):
    rng = np.random.default_rng(seed)
    return dict(
        f=rng.normal(0, 3, n), delta_u=rng.normal(0, 3, n), k_cloud=rng.uniform(50, 300, n),
        l_edge=rng.uniform(0.2, 1, n), l_cloud=rng.uniform(1, 3, n), r_b=rng.uniform(0, 1, n), r_l=rng.uniform(0, 1, n),
    )  # fmt: skip


def _torch_loss(a, lambda_b, lambda_l, b_max, l_max, tau=0.1):
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in a.items()}
    f = t["f"].clone().requires_grad_(True)
    reg = torch.nn.HuberLoss(delta=1.0)(f, t["delta_u"])
    delta = torch.clamp(0.5 * t["r_b"] + 0.5 * t["r_l"], 0, 1)
    p = torch.sigmoid((torch.sigmoid(f) - delta) / tau)
    pen_b = torch.relu((p * t["k_cloud"]).mean() - b_max) ** 2
    pen_l = torch.relu((p * t["l_cloud"] + (1 - p) * t["l_edge"]).mean() - l_max) ** 2
    loss = reg + lambda_b * pen_b + lambda_l * pen_l
    loss.backward()
    return float(loss.detach()), f.grad.numpy()


@pytest.mark.parametrize(
    ("lambda_b", "lambda_l", "b_max", "l_max"),
    [(0.0, 0.0, 1.0, 0.1), (1.0, 1.0, 10.0, 0.5), (0.3, 2.0, 1e9, 0.0)],
)
def test_loss_and_gradient_equal_torch(lambda_b, lambda_l, b_max, l_max):
    a = _loss_inputs()
    ours, grad = router_loss(**a, delta0=0.0, alpha_b=0.5, alpha_l=0.5, tau=0.1, b_max=b_max, l_max=l_max,
                             lambda_b=lambda_b, lambda_l=lambda_l)  # fmt: skip
    ref, ref_grad = _torch_loss(a, lambda_b, lambda_l, b_max, l_max)
    assert ours == pytest.approx(ref, rel=1e-9)
    assert np.allclose(grad, ref_grad, rtol=1e-7, atol=1e-12)
    if lambda_b == lambda_l == 0:  # zero penalties: plain Huber regression
        huber = torch.nn.HuberLoss(delta=1.0)(torch.tensor(a["f"]), torch.tensor(a["delta_u"]))
        assert ours == pytest.approx(float(huber), rel=1e-12)


def test_mlp_backward_equals_autograd():
    from hybridflow.router import init_mlp
    from hybridflow.training import _forward_backward

    rng = np.random.default_rng(1)
    layers = [(w.astype(np.float64), b.astype(np.float64)) for w, b in init_mlp(6, 5, 2, rng)]
    x, y = rng.normal(size=(7, 6)), rng.normal(size=7)
    _loss, grads = _forward_backward(
        layers, x, 0.0, rng, lambda f: (float(((f - y) ** 2).mean()), 2 * (f - y) / 7)
    )
    tl = [
        (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
        for w, b in layers
    ]
    h = torch.tensor(x)
    for i, (w, b) in enumerate(tl):
        h = h @ w.T + b
        h = torch.relu(h) if i < len(tl) - 1 else h
    ((h[:, 0] - torch.tensor(y)) ** 2).mean().backward()
    ref = [g for w, b in tl for g in (w.grad.numpy(), b.grad.numpy())]
    assert all(np.allclose(a, b) for a, b in zip(grads, ref, strict=False))


def test_utility_label_and_dq_estimators():
    p = SubtaskProfile("q", Subtask(2, "t", (1,)), False, 10, 50, 0.5, 20, 150, 2.5, 0.0, 1.0)
    assert utility_label(p) == pytest.approx(1.0 - 0.5 * 2.0 - 0.001 * 170)
    assert utility_label(p, dq=dq_length) == pytest.approx(1.0 - 1.0 - 0.17)


def test_save_load_round_trip_and_dimension_mismatch(tmp_path):
    router = UtilityRouter(HashingEmbedder(48)).fit(_profiles(64), epochs=2)
    path = router.save(tmp_path / "router.npz")
    back = UtilityRouter.load(path, HashingEmbedder(48))
    step = Subtask(3, "What is 12 * 34?", (1,), 4)
    assert back.score("q", step) == router.score("q", step)
    assert back.config() == router.config()
    with pytest.raises(ValueError, match=r"48-d embeddings .* gives 384-d"):
        UtilityRouter.load(path, CallableEmbedder(lambda texts: np.zeros((len(texts), 384))))


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"b_max": 0}, "b_max"),
        ({"l_max": -1.0}, "l_max"),
        ({"tau": 0.0}, "tau"),
        ({"b_max": float("nan")}, "b_max"),
    ],
)
def test_bad_budgets_raise(kw, needle):
    with pytest.raises(ValueError, match=needle):
        UtilityRouter(HashingEmbedder(8), **kw)


def test_unfitted_router_says_so():
    with pytest.raises(RuntimeError, match="not fitted"):
        UtilityRouter(HashingEmbedder(8)).score("q", Subtask(2, "t", (1,)))


def test_threshold_router_is_the_official_rule():
    r = ThresholdRouter(5)
    route = [
        r.route("q", Subtask(2, "t", (1,), d), tokens_used=0, elapsed_s=0).target
        for d in range(1, 10)
    ]
    assert route == ["edge"] * 4 + ["cloud"] * 5


def test_query_router_calibrates_to_a_cloud_fraction():
    queries = [f"query {'8' * (i % 9 + 1)} {i}" for i in range(200)]
    labels = [float(i % 9 > 5) for i in range(200)]
    qr = QueryRouter(HashingEmbedder(64)).fit(queries, labels)
    for fraction in (0.1, 0.3, 0.5):
        qr.calibrate(queries, fraction)
        share = np.mean([qr.route_query(q) == "cloud" for q in queries])
        assert share == pytest.approx(fraction, abs=0.03)
    scores = qr.scores(queries)
    assert np.corrcoef(scores, labels)[0, 1] > 0.5


def test_routellm_model_string_threshold():
    routellm = pytest.importorskip("routellm")  # noqa: F841  (heavy; present only with the peers extra)
    qr = QueryRouter(HashingEmbedder(8)).fit(["a", "b"], [0.0, 1.0]).with_threshold(0.11593)
    assert qr.threshold_ == 0.11593


def _steps():
    return TaskDAG.from_plan_xml(
        '<Plan><Step ID="1" Task="first" Difficulty="1"/><Step ID="2" Task="mid" Difficulty="1" Rely="1"/>'
        '<Step ID="3" Task="last" Difficulty="1" Rely="2"/></Plan>'
    ).steps


def test_a_non_finite_embedding_raises_so_the_step_goes_to_the_cloud():
    router = UtilityRouter(HashingEmbedder(16), seed=0).fit(_profiles(32), epochs=1)
    router.embedder = CallableEmbedder(lambda texts: np.full((len(texts), 16), np.nan), 16)
    with pytest.raises(RuntimeError, match="non-finite"):
        router.route("q", _steps()[1], tokens_used=0, elapsed_s=0)


def test_hard_rule_steps_report_p_cloud_one_for_every_router():
    utility = UtilityRouter(HashingEmbedder(16), delta0=0.9, seed=0).fit(_profiles(32), epochs=1)
    first, _, last = _steps()
    for router in (
        utility,
        ThresholdRouter(5),
        RandomRouter(0.2),
        ConstantRouter("edge", force_cloud_first_last=True),
    ):
        for step, is_last in ((first, False), (last, True)):
            decision = router.route("q", step, tokens_used=0, elapsed_s=0, is_last=is_last)
            assert (decision.target, decision.p_cloud) == ("cloud", 1.0), type(router).__name__
            assert decision.rule is not None


def test_random_router_draws_its_probability_and_repeats_under_a_seed():
    steps = [Subtask(2, f"task {i}", (1,), 5) for i in range(1)]
    queries = [f"q{i}" for i in range(2000)]
    for p in (0.0, 0.2, 0.8, 1.0):
        router = RandomRouter(p, seed=3)
        routes = [router.route(q, steps[0], tokens_used=0, elapsed_s=0).target for q in queries]
        share = routes.count("cloud") / len(routes)
        assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / len(routes)) + 1e-12  # binomial, 4 s.d.
        again = [
            RandomRouter(p, seed=3).route(q, steps[0], tokens_used=0, elapsed_s=0).target
            for q in queries
        ]
        assert routes == again
    with pytest.raises(ValueError, match="p must be in"):
        RandomRouter(1.5)


def test_constant_router_sends_everything_to_its_target():
    mid = _steps()[1]
    assert ConstantRouter("edge").route("q", mid, tokens_used=0, elapsed_s=0).target == "edge"
    first = ConstantRouter("edge").route("q", _steps()[0], tokens_used=0, elapsed_s=0)
    assert (first.target, first.p_cloud) == ("edge", 0.0)  # no hard rules by default
    assert ConstantRouter("cloud").route("q", mid, tokens_used=0, elapsed_s=0).p_cloud == 1.0
    with pytest.raises(ValueError, match="'edge' or 'cloud'"):
        ConstantRouter("gpu")


@pytest.mark.parametrize("bad", ["5", 5.0, True, None])
def test_threshold_router_refuses_a_non_integer_at_construction(bad):
    with pytest.raises(TypeError, match="threshold must be an int"):
        ThresholdRouter(bad)
