import numpy as np
import pytest
import torch
from afrnet.features import batch_features
from afrnet.functional import flow_energy, routing_mask
from afrnet.model import AFRNet
from afrnet_testdata import edges, random_fc, random_sc


def official_mask(energy, s_edge, tau=8.0, lam=1.0, theta=0.0, eps=1e-6):
    """dial/routing.py mask_from_energy, re-derived in numpy."""

    def minmax(x):
        return (x - x.min()) / (x.max() - x.min() + eps) if x.max() > x.min() else np.zeros_like(x)

    logits = tau * (minmax(np.log(energy + eps)) - lam * minmax(-np.log(s_edge + eps)) - theta)
    return 1 / (1 + np.exp(-logits))


def small_model(n, **kw):
    torch.manual_seed(0)
    return AFRNet(n, d_model=16, nhead=2, dim_feedforward=32, **kw).double()


def test_mask_matches_the_official_formula_per_subject():
    rng = np.random.default_rng(0)
    e1, e2 = rng.uniform(0.1, 50, 30), rng.uniform(0.1, 50, 20)
    s1, s2 = rng.uniform(0.05, 1, 30), rng.uniform(0.05, 1, 20)
    batch = torch.cat([torch.zeros(30), torch.ones(20)]).long()
    ours = routing_mask(torch.tensor(np.r_[e1, e2]), torch.tensor(np.r_[s1, s2]), batch=batch)
    np.testing.assert_allclose(
        ours.numpy(), np.r_[official_mask(e1, s1), official_mask(e2, s2)], rtol=1e-10
    )
    assert ((ours > 0) & (ours < 1)).all()
    ones = routing_mask(torch.tensor(e1), torch.tensor(s1), threshold=-1e4)
    assert torch.equal(ones, torch.ones_like(ones))


def test_constant_energy_gives_zero_energy_term():
    m = routing_mask(torch.full((5,), 3.0), torch.full((5,), 0.5))
    torch.testing.assert_close(m, torch.full((5,), 0.5))
    # With S varying the cost term alone sets the mask: a constant energy min-maxes to 0, not 1.
    s = np.array([0.1, 0.3, 0.5, 0.9, 0.7])
    expected = official_mask(np.full(5, 3.0), s)
    alone = routing_mask(torch.full((5,), 3.0, dtype=torch.float64), torch.tensor(s))
    np.testing.assert_allclose(alone.numpy(), expected, rtol=1e-10)
    both = routing_mask(
        torch.full((10,), 3.0, dtype=torch.float64),
        torch.tensor(np.r_[s, s]),
        batch=torch.arange(10) // 5,
    )
    np.testing.assert_allclose(both.numpy(), np.r_[expected, expected], rtol=1e-10)


def test_threshold_sits_inside_the_temperature():
    rng = np.random.default_rng(3)
    e, s = rng.uniform(0.1, 50, 25), rng.uniform(0.05, 1, 25)
    kw = {"tau": 3.0, "lambda_cost": 0.7}
    ours = routing_mask(torch.tensor(e), torch.tensor(s), threshold=0.4, **kw)
    expected = official_mask(e, s, tau=3.0, lam=0.7, theta=0.4)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-10)
    theta = torch.tensor(0.4, dtype=torch.float64)
    torch.testing.assert_close(
        routing_mask(torch.tensor(e), torch.tensor(s), threshold=theta, **kw), ours
    )


def test_edge_gate_reads_structure_then_function():
    # a_e = MLP([|H_u - H_v|, H_u ⊙ H_v, S_uv, F_uv]) in that order (spec), g_e = exp(a_e).
    n = 8
    sc, fc = random_sc(n, seed=11)[None], random_fc(n, seed=11)[None]
    model = small_model(n).eval()
    out = model(sc, fc)
    h = model.node_encoder(fc, batch_features(sc), None)[0]
    u, v = edges(sc[0])
    phi = torch.cat(
        [(h[u] - h[v]).abs(), h[u] * h[v], sc[0, u, v][:, None], fc[0, u, v][:, None]], dim=1
    )
    torch.testing.assert_close(out.conductance[0], torch.exp(model.edge_gate.mlp(phi)[:, 0]))


def test_relabelling_nodes_permutes_energies_and_masks():
    n = 9
    sc, fc = random_sc(n, seed=2), random_fc(n, seed=2)
    e = edges(sc)
    g = torch.tensor(np.random.default_rng(3).uniform(0.5, 2.0, e.shape[1]))
    w = torch.zeros(n, n, dtype=torch.float64).index_put((e[0], e[1]), g)
    w = w + w.T
    perm = torch.tensor(np.random.default_rng(4).permutation(n))
    p = torch.eye(n, dtype=torch.float64)[perm]
    energy = flow_energy(sc, fc, w)
    energy_p = flow_energy(p @ sc @ p.T, p @ fc @ p.T, p @ w @ p.T)
    torch.testing.assert_close(energy_p, p @ energy @ p.T)
    mask = routing_mask(energy[e[0], e[1]], sc[e[0], e[1]])
    ep = edges(p @ sc @ p.T)
    mask_p = routing_mask(energy_p[ep[0], ep[1]], (p @ sc @ p.T)[ep[0], ep[1]])
    dense = torch.zeros(n, n, dtype=torch.float64).index_put((e[0], e[1]), mask)
    dense_p = torch.zeros(n, n, dtype=torch.float64).index_put((ep[0], ep[1]), mask_p)
    torch.testing.assert_close(dense_p + dense_p.T, p @ (dense + dense.T) @ p.T)


def test_ablation_is_an_adjacency_masked_transformer():
    n = 8
    sc, fc = random_sc(n, seed=1)[None], random_fc(n, seed=1)[None]
    model = small_model(n, routing=False).eval()
    h = model.node_encoder(fc, batch_features(sc), None)
    out = model(sc, fc)
    adjacency = (sc[0] > 0) | torch.eye(n, dtype=torch.bool)
    bias = torch.zeros(n, n, dtype=torch.float64).masked_fill(~adjacency, float("-inf"))
    z = model.graph_transformer(h, mask=bias.repeat(model.nhead, 1, 1))
    expected = model.prediction_head(model.graph_norm(z), None)
    torch.testing.assert_close(out.logits, expected, atol=1e-7, rtol=1e-6)
    assert torch.equal(out.mask[0], torch.ones_like(out.mask[0]))


def test_forward_outputs_and_gradients():
    n = 10
    sc = torch.stack([random_sc(n, seed=s) for s in range(3)])
    fc = torch.stack([random_fc(n, seed=s) for s in range(3)])
    model = small_model(n)
    out = model(sc, fc)
    assert out.logits.shape == (3, 2)
    for b in range(3):
        e = edges(sc[b])
        assert torch.equal(out.edge_index[b], e)
        energy = flow_energy(sc[b], fc[b], out.conductance[b].detach())
        torch.testing.assert_close(out.energy[b].detach(), energy)
    out.logits.sum().backward()
    assert model.threshold.grad is not None and torch.isfinite(model.threshold.grad)
    assert model.edge_gate.mlp[0].weight.grad.abs().sum() > 0


def test_regression_head_and_budget_lambda():
    n = 10
    sc, fc = random_sc(n, seed=4), random_fc(n, seed=4)
    model = small_model(n, task="regression")
    out = model.routing(sc, fc)
    assert out.logits.shape == (1,)
    loose, tight = (
        model.routing(sc, fc, budget_lambda=0.0),
        model.routing(sc, fc, budget_lambda=3.0),
    )
    assert (tight.mask[0] <= loose.mask[0]).all() and (tight.mask[0] < loose.mask[0]).any()
    assert model.training  # routing restores the mode


def test_padding_with_node_mask_keeps_each_subject_exact():
    small, big = 7, 9
    sc = torch.zeros(2, big, big, dtype=torch.float64)
    fc = torch.zeros(2, big, big, dtype=torch.float64)
    sc[0, :small, :small], fc[0, :small, :small] = (
        random_sc(small, seed=6),
        random_fc(small, seed=6),
    )
    sc[1], fc[1] = random_sc(big, seed=7), random_fc(big, seed=7)
    mask = torch.zeros(2, big, dtype=torch.bool)
    mask[0, :small], mask[1] = True, True
    model = small_model(big).eval()
    out = model(sc, fc, node_mask=mask)
    energy = flow_energy(sc[0, :small, :small], fc[0, :small, :small], out.conductance[0])
    torch.testing.assert_close(out.energy[0], energy)
    assert torch.isfinite(out.logits).all()
    with pytest.raises(ValueError, match="disconnected"):
        model(sc, fc)  # without the mask the padded regions are isolated nodes


def test_state_dict_round_trip_and_critical_pathways():
    n = 10
    sc, fc = random_sc(n, seed=8), random_fc(n, seed=8)
    model = small_model(n).eval()
    torch.manual_seed(123)
    clone = AFRNet(n, d_model=16, nhead=2, dim_feedforward=32).double()
    clone.load_state_dict(model.state_dict())
    clone.eval()
    assert torch.equal(model(sc, fc).logits, clone(sc, fc).logits)
    rows = model.critical_pathways(sc, fc, top_k=5)
    assert len(rows) == 5 and all(rows[i][2] >= rows[i + 1][2] for i in range(4))
    graph = model.critical_pathways(sc, fc, top_k=5, as_graph=True)
    assert graph.number_of_edges() == 5
    u, v, m = rows[0]
    assert graph[u][v]["mask"] == pytest.approx(m)


def test_mean_mask_in_chunks_slices_the_given_features():
    """More subjects than ``batch_size`` with precomputed features (as ``group_mask_difference``
    passes them): each chunk gets its own subjects' features; equal to one chunk and to the mean
    of the per-subject masks."""
    n = 8
    sc = torch.stack([random_sc(n, seed=s) for s in range(5)])
    fc = torch.stack([random_fc(n, seed=s) for s in range(5)])
    model = small_model(n)
    feats = batch_features(sc)
    chunked = model.mean_mask(sc, fc, batch_size=2, features=feats)
    whole = model.mean_mask(sc, fc, batch_size=64, features=feats)
    each = torch.stack([model.mean_mask(sc[i], fc[i]) for i in range(5)]).mean(0)
    torch.testing.assert_close(chunked, whole)
    torch.testing.assert_close(chunked, each)


def test_mean_mask_rejects_batches_of_other_lengths():
    n = 8
    sc = torch.stack([random_sc(n, seed=s) for s in range(4)])
    fc = torch.stack([random_fc(n, seed=s) for s in range(4)])
    six = torch.stack([random_sc(n, seed=s) for s in range(6)])
    model = small_model(n)
    with pytest.raises(
        ValueError, match=r"features holds 6 subjects.*\(6, 8, 8\).*sc holds 4.*\(4, 8, 8\)"
    ):
        model.mean_mask(sc, fc, batch_size=2, features=batch_features(six))
    with pytest.raises(ValueError, match=r"node_mask holds 6 subjects.*sc holds 4"):
        model.mean_mask(sc, fc, batch_size=2, node_mask=torch.ones(6, n, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"fc holds 6 subjects.*sc holds 4"):
        model.mean_mask(sc, six, batch_size=2)


def test_mean_mask_in_chunks_slices_the_node_mask():
    """A padded batch split into chunks: each chunk gets its own subjects' node mask (without it
    the padded regions are isolated nodes and the routing refuses them)."""
    big, sizes = 9, (7, 9, 9, 6)
    sc = torch.zeros(len(sizes), big, big, dtype=torch.float64)
    fc = torch.zeros_like(sc)
    mask = torch.zeros(len(sizes), big, dtype=torch.bool)
    for i, k in enumerate(sizes):
        sc[i, :k, :k], fc[i, :k, :k], mask[i, :k] = random_sc(k, seed=i), random_fc(k, seed=i), True
    model = small_model(big).eval()
    chunked = model.mean_mask(sc, fc, batch_size=2, node_mask=mask)
    each = torch.stack(
        [model.mean_mask(sc[i], fc[i], node_mask=mask[i]) for i in range(len(sizes))]
    ).mean(0)
    torch.testing.assert_close(chunked, each)
    assert chunked[7:, :].abs().sum() > 0  # the two full subjects reach the last regions
