import pytest
import torch
from afrnet.baselines import (
    DenseGATConv,
    DenseGCNConv,
    DenseGINConv,
    DenseSAGEConv,
    DualStreamGNN,
    DualStreamMLP,
    GraphormerBaseline,
    graph_adjacency,
)
from afrnet_testdata import random_fc, random_sc

N = 9


@pytest.fixture
def graph():
    fc = random_fc(N, seed=1).float()
    adj = graph_adjacency(fc[None])
    idx = torch.stack(torch.where(adj[0] != 0))
    return fc, adj, idx, adj[0][idx[0], idx[1]]


def test_dense_convolutions_equal_torch_geometric(graph):
    tg = pytest.importorskip("torch_geometric.nn")
    fc, adj, idx, weight = graph
    x = fc
    torch.manual_seed(0)
    ref = tg.GCNConv(N, 5, normalize=False, add_self_loops=False)
    ours = DenseGCNConv(N, 5)
    ours.lin.weight.data.copy_(ref.lin.weight.data)
    ours.bias.data.copy_(ref.bias.data)
    torch.testing.assert_close(ours(x[None], adj)[0], ref(x, idx, weight), rtol=1e-5, atol=1e-5)
    ref = tg.SAGEConv(N, 5)
    ours = DenseSAGEConv(N, 5)
    ours.lin_l.load_state_dict(ref.lin_l.state_dict())
    ours.lin_r.load_state_dict(ref.lin_r.state_dict())
    torch.testing.assert_close(ours(x[None], adj)[0], ref(x, idx), rtol=1e-5, atol=1e-5)
    mlp = torch.nn.Linear(N, 5)
    ref = tg.GINConv(mlp, train_eps=True)
    ref.eps.data.fill_(0.3)
    ours = DenseGINConv(mlp)
    ours.eps.data.fill_(0.3)
    torch.testing.assert_close(ours(x[None], adj)[0], ref(x, idx), rtol=1e-5, atol=1e-5)
    ref = tg.GATConv(N, 4, heads=2, concat=True)
    ours = DenseGATConv(N, 4, 2, True, 0.0)
    ours.lin.weight.data.copy_(ref.lin.weight.data)
    ours.att_src.data.copy_(ref.att_src.data[None])
    ours.att_dst.data.copy_(ref.att_dst.data[None])
    ours.bias.data.copy_(ref.bias.data)
    torch.testing.assert_close(ours(x[None], adj)[0], ref(x, idx), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gcn", "gat", "gin", "sage"])
@pytest.mark.parametrize("backend", ["dense", "pyg"])
def test_dual_stream_models_run(kind, backend):
    if backend == "pyg":
        pytest.importorskip("torch_geometric")
    sc = torch.stack([random_sc(N, seed=s) for s in range(3)]).float()
    fc = torch.stack([random_fc(N, seed=s) for s in range(3)]).float()
    model = DualStreamGNN(N, kind, backend=backend)
    out = model(sc, fc)
    assert out.shape == (3, 2) and torch.isfinite(out).all()
    out.sum().backward()


def test_mlp_and_graphormer_baselines_run():
    sc = torch.stack([random_sc(N, seed=s) for s in range(2)]).float()
    fc = torch.stack([random_fc(N, seed=s) for s in range(2)]).float()
    assert DualStreamMLP(N)(sc, fc).shape == (2, 2)
    assert GraphormerBaseline(N, d_model=16, nhead=2)(sc, fc).shape == (2, 2)
    with pytest.raises(ValueError, match=r"\[B, 9, 9\]"):
        DualStreamMLP(N)(sc[:, :5, :5], fc[:, :5, :5])
