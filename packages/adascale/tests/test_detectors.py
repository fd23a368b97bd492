"""Detectors: AdaSCALE against SCALE/LTS, the baselines against hand oracles, the peer where it imports."""

import importlib
import importlib.util
import math
import sys
import types

import numpy as np
import pytest
import torch
from adascale import ASH, LTS, SCALE, AdaSCALE, Energy, OptFS, ReAct
from adascale import functional as F
from torch import nn


def test_p_min_equal_p_max_is_exactly_scale_and_lts(tiny_net, images):
    p = 80.0
    ada_a = AdaSCALE(tiny_net.features, tiny_net.fc, p_min=p, p_max=p, n_fit=None).fit(images)
    ada_l = AdaSCALE(tiny_net.features, tiny_net.fc, variant="L", p_min=p, p_max=p, n_fit=None).fit(
        images
    )
    x = images[:10] * 1.5
    torch.testing.assert_close(
        ada_a.score(x), SCALE(tiny_net.features, tiny_net.fc, percentile=p).score(x), rtol=0, atol=0
    )
    torch.testing.assert_close(
        ada_l.score(x), LTS(tiny_net.features, tiny_net.fc, percentile=p).score(x), rtol=0, atol=0
    )


def test_adascale_score_by_hand(tiny_net, images):
    det = AdaSCALE(tiny_net.features, tiny_net.fc, p_min=60, p_max=90, n_fit=None).fit(images)
    x = images[:7] + 0.3
    z, zt = det.extract(x)
    fit_q = F.ood_statistic(*det.extract(images))
    q = F.ood_statistic(z, zt)
    frac = np.array([(fit_q.numpy() <= v).mean() for v in q.numpy()])
    p = 60 + (1 - frac) * 30
    d = z.shape[1]
    a = z.clamp(min=0).double().numpy()
    ref = []
    for i in range(len(x)):
        k = d - int(np.round(d * p[i] / 100))
        r = a[i].sum() / np.sort(a[i])[::-1][:k].sum()
        logits = tiny_net.fc(z[i : i + 1] * math.exp(r)).detach().double().numpy()[0]
        ref.append(np.log(np.exp(logits - logits.max()).sum()) + logits.max())
    np.testing.assert_allclose(det.score(x).numpy(), ref, rtol=1e-5)
    np.testing.assert_allclose(det.percentile(x).numpy(), p, atol=1e-9)


def test_variant_l_never_changes_the_argmax_and_a_keeps_it_without_bias(make_net, images):
    torch.manual_seed(0)
    for bias, variant in ((True, "L"), (False, "A")):
        net = make_net(bias=bias).eval()
        det = AdaSCALE(net.features, net.fc, variant=variant, n_fit=None).fit(images)
        x = torch.randn(20, 2, 6, 6)
        with torch.no_grad():
            base = net(x).argmax(1)
        assert torch.equal(det.logits_features(*det.extract(x)).argmax(1), base)


def test_variant_a_can_change_the_argmax_with_a_bias():
    # A mutant check of the test above: with a class-dependent bias, scaling z can flip the argmax.
    head = nn.Linear(2, 2)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.5]]))
        head.bias.copy_(torch.tensor([0.0, 1.0]))
    z = torch.tensor([[1.0, 1.0]])
    assert head(z).argmax().item() == 1
    assert head(F.scale(z, 50.0)).argmax().item() == 0


def test_changing_percentiles_or_lam_never_refits(tiny_net, images):
    det = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    calls = {"n": 0}
    features = det.backbone

    def counting(x):
        calls["n"] += 1
        return features(x)

    det.backbone = counting
    feats = det.extract(images[:4])
    n = calls["n"]
    scores = []
    for p_max, lam in ((85, 10), (95, 10), (95, 1.0)):
        det.p_max, det.lam = p_max, lam
        scores.append(det.score_features(*feats))
    assert calls["n"] == n  # no forward pass for a sweep
    assert not torch.allclose(scores[0], scores[1])


def test_fit_subsamples_a_tensor_with_the_generator(tiny_net, images):
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    with pytest.warns(UserWarning, match="n_fit=10"):
        a = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=10, generator=g1).fit(images)
    with pytest.warns(UserWarning, match="n_fit=10"):
        b = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=10, generator=g2).fit(images)
    assert a.fit_z_.shape[0] == 10
    torch.testing.assert_close(a.fit_statistic_, b.fit_statistic_)


def test_fit_from_a_loader_of_pairs_equals_fit_from_the_tensor(tiny_net, images):
    loader = [(images[i : i + 8], torch.zeros(8)) for i in range(0, 32, 8)]
    a = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(loader)
    b = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    torch.testing.assert_close(a.fit_statistic_, b.fit_statistic_)


def test_energy_ash_react_by_hand(tiny_net, images):
    z = tiny_net.features(images).detach()
    logits = tiny_net.fc(z)
    torch.testing.assert_close(
        Energy(tiny_net.features, tiny_net.fc).score(images), torch.logsumexp(logits, 1)
    )
    for v, shape in (("P", F.ash_p), ("B", F.ash_b), ("S", F.ash_s)):
        det = ASH(tiny_net.features, tiny_net.fc, variant=v, percentile=70)
        torch.testing.assert_close(det.score(images), torch.logsumexp(tiny_net.fc(shape(z, 70)), 1))
    react = ReAct(tiny_net.features, tiny_net.fc, percentile=90, n_fit=None).fit(images)
    c = np.percentile(z.numpy().ravel(), 90)
    assert react.threshold == pytest.approx(float(c), rel=1e-6)
    torch.testing.assert_close(
        react.score(images), torch.logsumexp(tiny_net.fc(z.clamp(max=float(c))), 1)
    )


def test_optfs_follows_the_official_recipe(tiny_net, images):
    det = OptFS(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    z = tiny_net.features(images).detach().double().numpy()
    w = tiny_net.fc.weight.detach().double().numpy()
    pred = (z @ w.T + tiny_net.fc.bias.detach().double().numpy()).argmax(1)
    lo, hi = np.quantile(z, 1e-3), np.quantile(z, 1 - 1e-3)
    width = (hi - lo) / 100
    assert det.left_ == pytest.approx(lo, rel=1e-6) and det.width_ == pytest.approx(width, rel=1e-5)
    lc = w[pred] * z
    ref = np.array(
        [
            ((z >= b) & (z < b + width)).__mul__(lc).sum(1).mean()
            for b in lo + width * np.arange(100)
        ]
    )
    np.testing.assert_allclose(
        det.theta_.numpy(), ref / np.linalg.norm(ref) * 1000, rtol=1e-4, atol=1e-6
    )


def pytorch_ood_detector():
    """pytorch-ood's ``detector`` subpackage, or a skip.

    Its top-level ``__init__`` imports the datasets, hence torchvision, which has no build beside
    the CI torch; the detectors need neither, so the package shell is created without running it.
    """
    spec = importlib.util.find_spec("pytorch_ood")
    if spec is None:
        pytest.skip("pytorch-ood is not installed (the `peers` extra)")
    try:
        import pytorch_ood  # noqa: F401
    except ImportError:
        for name in [m for m in sys.modules if m.startswith("pytorch_ood")]:
            del sys.modules[name]
        shell = types.ModuleType("pytorch_ood")
        shell.__path__ = list(spec.submodule_search_locations)
        sys.modules["pytorch_ood"] = shell
    return importlib.import_module("pytorch_ood.detector")


def test_scale_and_lts_equal_pytorch_ood(tiny_net, images):
    peer = pytorch_ood_detector()
    z = tiny_net.features(images).detach()
    for p in (65, 85, 90):
        theirs = peer.SCALE(None, lambda t: tiny_net.fc(t.flatten(1)), percentile=p / 100)
        ours = SCALE(tiny_net.features, tiny_net.fc, percentile=p)
        torch.testing.assert_close(
            ours.predict_features(z), theirs.predict_feature_maps(z[:, :, None, None])
        )
        lts = peer.LTS(None, tiny_net.fc, p=1 - p / 100)
        torch.testing.assert_close(
            LTS(tiny_net.features, tiny_net.fc, percentile=p).predict_features(z),
            lts.predict_features(z),
        )


def test_big_tensors_are_scored_in_chunks(tiny_net, images, monkeypatch):
    from adascale import base, score_all

    det = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    whole = score_all(det, images)
    monkeypatch.setattr(base, "TENSOR_BATCH", 5)
    assert len(list(base.batches(images))) == 7
    torch.testing.assert_close(score_all(det, images), whole)
    chunked = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    torch.testing.assert_close(chunked.fit_statistic_, det.fit_statistic_)
