import numpy as np
import pytest
import torch
from sklearn.base import clone
from ssn_lateral import SSNEncoder, SSNParams, data


@pytest.fixture(scope="module")
def patches():
    return data.natural_patches(200, 6, images="textures", random_state=0)


def _small(**kw):
    settings = {
        "n_components": 12,
        "n_iter": 3,
        "batch_size": 20,
        "params": SSNParams(tol=1e-4),
        "random_state": 0,
    }
    return SSNEncoder(**{**settings, **kw})


@pytest.fixture(scope="module")
def fitted(patches):
    return _small(whiten=False).fit(patches)


def test_fit_transform_shapes_and_attributes(fitted, patches):
    codes = fitted.transform(patches[:50])
    assert codes.shape == (50, 12) and codes.dtype == np.float64 and (codes >= 0).all()
    assert fitted.components_.shape == (12, 72)  # ON and OFF channels of 36 pixels
    assert set(fitted.lateral_) == {"W_ee", "W_ei", "W_ie", "W_ii"}
    assert fitted.lateral_["W_ei"].shape == (12, 3)
    assert fitted.whitening_.shape == (36, 36) and fitted.n_features_in_ == 36
    assert fitted.rates(patches[:5]).shape == (5, 15)


def test_same_seed_same_code_and_clone(fitted, patches):
    again = clone(fitted).fit(patches)
    assert np.array_equal(again.transform(patches[:20]), fitted.transform(patches[:20]))
    assert clone(fitted).get_params() == fitted.get_params()


def test_ablated_is_the_closed_form_power_law(fitted, patches):
    abl = fitted.ablated()
    net = fitted.network_
    x = torch.as_tensor(patches[:10], dtype=torch.float32)
    h = net.drive(x, contrast=0.5)[:, :12]
    np.testing.assert_allclose(
        abl.transform(patches[:10], contrast=0.5), (0.04 * h.clamp(min=0) ** 2).numpy(), rtol=1e-6
    )
    assert fitted.lateral  # the original is untouched
    assert not np.allclose(abl.transform(patches[:10]), fitted.transform(patches[:10]))


def test_transform_degrades_like_data_degrade(fitted, patches):
    a = fitted.transform(patches[:10], contrast=0.7, noise=0.3, random_state=4)
    b = fitted.transform(data.degrade(patches[:10], 0.7, 0.3, random_state=4))
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_whitening_inside_the_encoder():
    raw = data.natural_patches(
        300, 6, images="textures", whiten=None, normalize=False, random_state=1
    )
    enc = _small(whiten=True).fit(raw)
    white = (raw - enc.mean_) @ enc.whitening_
    assert np.linalg.norm(white, axis=1).mean() == pytest.approx(1.0, rel=1e-6)
    with pytest.warns(UserWarning, match="condition number"):
        _small(whiten=False, n_iter=1).fit(raw)


@pytest.mark.slow
def test_sklearn_check_estimator_basics():
    from sklearn.utils.estimator_checks import check_estimator

    est = SSNEncoder(
        4,
        n_iter=2,
        batch_size=5,
        input_gain=5.0,
        params=SSNParams(tol=1e-3, t_max=200.0),
        random_state=0,
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failures = check_estimator(est, on_fail=None)
    failed = [f for f in failures if f["status"] == "failed"]
    assert not failed, [(f["check_name"], str(f["exception"])[:200]) for f in failed]


def test_bad_parameters_are_named(patches):
    for kw, match in (
        ({"n_components": 0}, "n_components"),
        ({"n_iter": -1}, "n_iter"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"rules": "fancy"}, "rules"),
        ({"n_inhibitory": -2}, "n_inhibitory"),
        ({"init": "svd"}, "init"),
    ):
        with pytest.raises(ValueError, match=match):
            _small(**kw).fit(patches)
    enc = _small(whiten=False, n_iter=1).fit(patches)
    with pytest.raises(ValueError, match="contrast"):
        enc.transform(patches, contrast=0.0)
    with pytest.raises(ValueError, match="noise"):
        enc.transform(patches, noise=-1.0)
    bad = patches[:3].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        enc.transform(bad)
    with pytest.raises(ValueError, match="features"):
        enc.transform(patches[:, :10])
