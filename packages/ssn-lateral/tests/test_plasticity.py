import numpy as np
import pytest
import torch
from ssn_lateral import SSNDivergenceError
from ssn_lateral import plasticity as P
from ssn_lateral.training import init_network, train_local
from ssn_testnets import random_net

RULES = [
    P.OjaFeedforward(0.1),
    P.OjaEI(0.1),
    P.AntiHebbianIE(0.1, 0.5, 0.7),
    P.AntiHebbianII(0.1, 0.7),
    P.CovarianceEE(0.1),
    P.HomeostaticThreshold(0.1, 0.5, 0.7),
]


def _rates(net, n=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    pre = torch.rand(n, net.n_channels, generator=g, dtype=torch.float64)
    r = torch.rand(n, net.n, generator=g, dtype=torch.float64) * 3
    return pre, r


def test_rule_deltas_match_their_formulas():
    net = random_net()
    pre, r = _rates(net)
    r_e, r_i = r[:, :6], r[:, 6:]
    d = P.OjaFeedforward(1.0)(net, pre, r)
    expected = np.mean(
        [
            np.outer(re, p) - (re**2)[:, None] * net.Q_e.numpy()
            for re, p in zip(r_e.numpy(), pre.numpy(), strict=True)
        ],
        axis=0,
    )
    np.testing.assert_allclose(d["Q_e"].numpy(), expected, rtol=1e-12)
    d = P.AntiHebbianIE(1.0, 0.5, 0.7)(net, pre, r)
    np.testing.assert_allclose(d["W_ei"].numpy(), (r_e.T @ r_i / 7 - 0.35).numpy(), rtol=1e-12)
    d = P.CovarianceEE(1.0)(net, pre, r)
    np.testing.assert_allclose(
        d["W_ee"].numpy(), np.cov(r_e.numpy().T, bias=True), rtol=1e-10, atol=1e-12
    )
    d = P.HomeostaticThreshold(1.0, 0.5, 0.7)(net, pre, r)
    np.testing.assert_allclose(d["b"].numpy()[:6], -(r_e.mean(0).numpy() - 0.5), rtol=1e-12)
    d = P.FixedLikeToLike(1.0)(net, pre, r)
    target = np.maximum(net.Q_e.numpy() @ net.Q_e.numpy().T, 0)
    np.testing.assert_allclose((net.W_ee + d["W_ee"]).numpy(), target, rtol=1e-12)


@pytest.mark.parametrize("rule", [*RULES, P.FixedLikeToLike(1.0)], ids=lambda r: type(r).__name__)
def test_rules_are_local(rule):
    """The delta of synapse (i, j) is unchanged when a unit other than i and j changes its rate."""
    net = random_net()
    pre, r = _rates(net)
    base = rule(net, pre, r)
    for name, delta in base.items():
        if name == "b":
            post, other = 0, 1  # a bias is local to its own unit
            r2 = r.clone()
            r2[:, other] += 1.0
            assert rule(net, pre, r2)[name][post] == delta[post]
            continue
        i, j = 0, 1 if name in ("W_ee", "W_ii") else 0
        post_offset = 0 if name in ("W_ee", "W_ei", "Q_e") else net.n_e
        pre_offset = {"W_ee": 0, "W_ie": 0, "W_ei": net.n_e, "W_ii": net.n_e}.get(name)
        # perturb a unit that is neither the post-synaptic i nor the pre-synaptic j of (i, j)
        untouched = {post_offset + i} | ({pre_offset + j} if pre_offset is not None else set())
        other = next(u for u in range(net.n) if u not in untouched)
        r2 = r.clone()
        r2[:, other] += 1.0
        pre2 = pre.clone()
        if pre_offset is None:  # feed-forward: also perturb a channel other than j
            pre2[:, j + 1] += 1.0
        assert rule(net, pre2, r2)[name][i, j] == delta[i, j]
        # and the delta does move when its own post-synaptic unit moves (the test can fail)
        r3 = r.clone()
        r3[:, post_offset + i] += 1.0
        if not isinstance(rule, P.FixedLikeToLike):
            assert rule(net, pre, r3)[name][i, j] != delta[i, j]


def test_projection_enforces_dale_no_autapses_and_row_sums():
    net = random_net()
    for name in ("W_ee", "W_ei", "W_ie", "W_ii"):
        getattr(net, name).data.normal_()
    net.Q_e.data.normal_()
    targets = P.RowSums(ee=0.9, ei=0.4, ie=1.1, ii=0.3, q_norm=2.0)
    P.project_(net, targets)
    for name, target in targets.as_dict().items():
        block = getattr(net, name)
        assert float(block.min()) >= 0
        np.testing.assert_allclose(block.sum(1).numpy(), target, rtol=1e-12)
    assert torch.all(torch.diagonal(net.W_ee) == 0)
    assert float(net.Q_e.min()) >= 0
    np.testing.assert_allclose(net.Q_e.norm(dim=1).numpy(), 2.0, rtol=1e-12)


def test_dale_and_row_sums_after_every_training_step():
    net = random_net(n_e=8, n_i=2, n_in=4)
    X = torch.randn(64, 4, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    targets = P.RowSums()
    seen = []

    def check(step):
        for name, target in targets.as_dict().items():
            block = getattr(net, name)
            assert float(block.min()) >= 0
            np.testing.assert_allclose(block.sum(1).numpy(), target, rtol=1e-10)
        assert torch.all(torch.diagonal(net.W_ee) == 0)
        assert float(net.Q_e.min()) >= 0 and float(net.Q_i.min()) >= 0
        seen.append(step)

    g = torch.Generator().manual_seed(0)
    init_network(net, X, g)
    before = net.Q_e.clone()
    log = train_local(
        net,
        X * 3,
        P.default_rules(0.5, 1.0, 0.05),
        n_iter=12,
        batch_size=8,
        generator=g,
        monitor_every=6,
        callback=check,
    )
    assert seen == list(range(12))
    assert not torch.allclose(before, net.Q_e)  # it learned something
    assert log.abscissa and all(a < 0 for a in log.abscissa)


def test_oja_converges_to_the_leading_principal_component():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    cov = A @ A.T + np.diag([6.0, 0, 0, 0, 0])
    X = torch.as_tensor(rng.multivariate_normal(np.zeros(5), cov, size=4000))
    w = torch.as_tensor(rng.normal(size=(1, 5))) * 0.1
    for _ in range(3):
        for start in range(0, 4000, 20):
            xb = X[start : start + 20]
            y = xb @ w.T  # one linear unit, no lateral connections
            w = w + 0.01 * P.oja_delta(y, xb, w)
    _, U = np.linalg.eigh(cov)
    cosine = abs(float(w[0] @ torch.as_tensor(U[:, -1]))) / float(w.norm())
    assert cosine > 0.99
    assert float(w.norm()) == pytest.approx(1.0, abs=0.05)


def test_monitor_backs_off_an_unstable_learning_rate():
    net = random_net(n_e=4, n_i=1, n_in=3)
    X = torch.rand(32, 3, dtype=torch.float64) * 40
    g = torch.Generator().manual_seed(0)

    class Excite:
        # a deliberately destabilising rule: it grows E->E and shrinks inhibition
        def __call__(self, net, pre, r):
            return {"W_ei": -0.5 * net.W_ei, "W_ii": -0.5 * net.W_ii}

    with pytest.raises(SSNDivergenceError, match=r"destabilising|diverged"):
        train_local(
            net,
            X,
            [Excite()],
            n_iter=40,
            batch_size=4,
            generator=g,
            targets=P.RowSums(ei=0.0, ii=0.0),
            monitor_every=2,
            min_lr_scale=0.1,
        )
