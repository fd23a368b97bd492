"""Fitted statistics round-trip through state_dict / load_state_dict: identical scores, no refit."""

import io

import pytest
import torch
from adascale import SCALE, AdaSCALE, NotFittedError, OptFS, ReAct


def _detectors(net):
    return {
        "AdaSCALE": lambda: AdaSCALE(net.features, net.fc, n_fit=None, p_max=90),
        "ReAct": lambda: ReAct(net.features, net.fc, n_fit=None),
        "OptFS": lambda: OptFS(net.features, net.fc, n_fit=None),
        "SCALE": lambda: SCALE(net.features, net.fc),
    }


@pytest.mark.parametrize("name", ["AdaSCALE", "ReAct", "OptFS", "SCALE"])
def test_state_dict_round_trip_gives_identical_scores(tiny_net, images, name):
    make = _detectors(tiny_net)[name]
    fitted = make().fit(images[:24])
    want = fitted.score(images[24:])
    buf = io.BytesIO()
    torch.save(fitted.state_dict(), buf)  # through a file, as a user saves it
    buf.seek(0)
    fresh = make()
    if name != "SCALE":
        with pytest.raises(NotFittedError):
            fresh.score(images[24:])
    fresh.load_state_dict(torch.load(buf, weights_only=False))
    assert torch.equal(fresh.score(images[24:]), want)


def test_unfitted_state_loads_as_unfitted(tiny_net, images):
    det = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None)
    other = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images)
    other.load_state_dict(det.state_dict())
    with pytest.raises(NotFittedError):
        other.score(images)


def test_loading_drops_the_cached_fit_statistic(tiny_net, images):
    a = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images[:16])
    b = AdaSCALE(tiny_net.features, tiny_net.fc, n_fit=None).fit(images[16:])
    b.score(images)  # caches b's sorted fit Q'
    b.load_state_dict(a.state_dict())
    assert torch.equal(b.score(images), a.score(images))
