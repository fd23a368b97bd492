import numpy as np
import pytest
from ssn_lateral import data


def test_natural_patches_are_whitened_unit_norm_and_labelled():
    X, y = data.natural_patches(1200, 6, images="textures", random_state=0, return_labels=True)
    assert X.shape == (1200, 36) and y.shape == (1200,)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-10)
    assert sorted(np.bincount(y)) == [200] * 6
    lam = np.linalg.eigvalsh(np.cov(X, rowvar=False))[
        1:
    ]  # one direction removed by mean subtraction
    assert lam.max() / lam.min() < 5  # whitened (up to the per-patch normalisation)
    raw = data.natural_patches(
        1200, 6, images="textures", whiten=None, normalize=False, random_state=0
    )
    raw_lam = np.linalg.eigvalsh(np.cov(raw, rowvar=False))[1:]
    assert raw_lam.max() / raw_lam.min() > 50  # natural images are strongly coloured


def test_same_seed_same_patches():
    a = data.natural_patches(100, 8, images="sklearn", random_state=3)
    b = data.natural_patches(100, 8, images="sklearn", random_state=3)
    assert np.array_equal(a, b)


def test_a_user_folder_and_a_mat_file(tmp_path):
    from PIL import Image
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.random((40, 50)))
    Image.fromarray((rng.random((30, 30)) * 255).astype(np.uint8)).save(tmp_path / "b.png")
    X, y = data.natural_patches(20, 5, images=tmp_path, random_state=0, return_labels=True)
    assert X.shape == (20, 25) and set(y) == {0, 1}
    images = rng.standard_normal((64, 64, 3))
    savemat(tmp_path / "IMAGES.mat", {"IMAGES": images})
    loaded = data.load_images(tmp_path / "IMAGES.mat")
    assert len(loaded) == 3 and np.array_equal(loaded[1], images[:, :, 1])
    Xm = data.natural_patches(30, 8, images=tmp_path / "IMAGES.mat", whiten=None, random_state=0)
    assert Xm.shape == (30, 64)


def test_bad_sources_are_named(tmp_path):
    with pytest.raises(ValueError, match="nowhere"):
        data.natural_patches(10, images="nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no images"):
        data.natural_patches(10, images=tmp_path / "empty")
    with pytest.raises(ValueError, match="smaller than the patch size"):
        data.natural_patches(10, 16, images=[np.ones((8, 8))])
    with pytest.raises(ValueError, match="n must be"):
        data.natural_patches(0)


def test_degrade_and_zca():
    X = np.ones((3, 2))
    assert np.array_equal(data.degrade(X, 0.5), 0.5 * X)
    noisy = data.degrade(np.zeros((20000, 1)), 1.0, 0.3, random_state=0)
    assert noisy.std() == pytest.approx(0.3, rel=0.02)
    for bad in ({"contrast": 0.0}, {"contrast": -1.0}, {"noise": -0.1}, {"contrast": np.nan}):
        with pytest.raises(ValueError, match=r"contrast|noise"):
            data.degrade(X, **{"contrast": 1.0, "noise": 0.0, **bad})
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((5000, 4)) @ rng.standard_normal((4, 4))
    W = data.ZCAWhitener().fit(Z)
    np.testing.assert_allclose(np.cov(W.transform(Z), rowvar=False), np.eye(4), atol=1e-8)
    np.testing.assert_allclose(W.matrix_, W.matrix_.T, atol=1e-10)  # ZCA is the symmetric whitener
