"""The classical baselines keep their error bounds; bad dtypes are refused clearly."""

import numpy as np
import pytest

pytest.importorskip("pysz")
pytest.importorskip("zfpy")
pytest.importorskip("blosc2")

from antic_compress.baselines import (
    blosc2_compress,
    match_rel_l2,
    rel_l2_np,
    sz3_compress,
    zfp_compress,
)


def smooth_field(n=64, seed=0):
    rng = np.random.default_rng(seed)
    k = np.fft.fftfreq(n, 1.0 / n)
    spec = rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n))
    spec /= 1.0 + (k[:, None] ** 2 + k[None, :] ** 2)
    return np.fft.ifft2(spec).real.astype(np.float32) * 100


@pytest.mark.parametrize("n", [64, 128])
@pytest.mark.parametrize("eb", [1e-3, 1e-2, 1e-1])
def test_sz3_keeps_its_absolute_bound(n, eb):
    x = smooth_field(n, seed=n)
    out = sz3_compress(x, eb)
    assert np.abs(out.recon - x).max() <= eb * (1 + 1e-5)
    assert out.ratio > 1


def test_zfp_tolerance_and_contiguity():
    x = smooth_field(128)
    view = x[::2, ::2]  # not C-contiguous
    out = zfp_compress(view, 1e-2)
    assert np.abs(out.recon - view).max() <= 1e-2
    fortran = np.asfortranarray(x)
    assert np.array_equal(zfp_compress(fortran, 1e-2).recon, zfp_compress(x, 1e-2).recon)


def test_zfp_refuses_float16():
    with pytest.raises(TypeError, match="float16"):
        zfp_compress(smooth_field().astype(np.float16), 1e-2)


def test_blosc2_lossless_is_exact_and_truncation_is_lossy():
    x = smooth_field()
    assert np.array_equal(blosc2_compress(x).recon, x)
    lossy = blosc2_compress(x, trunc_bits=10)
    assert 0 < rel_l2_np(lossy.recon, x) < 1e-2


def test_match_rel_l2_finds_the_largest_bound_under_target():
    x = smooth_field()
    bound, out = match_rel_l2(sz3_compress, x, 1e-3, 1e-6, 10.0)
    assert rel_l2_np(out.recon, x) <= 1e-3
    assert rel_l2_np(sz3_compress(x, bound * 1.5).recon, x) > 0.8e-3


def test_bad_bounds_and_non_finite():
    x = smooth_field()
    with pytest.raises(ValueError, match="abs_error"):
        sz3_compress(x, 0.0)
    x[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        zfp_compress(x, 1e-2)
