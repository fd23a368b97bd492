import numpy as np
import prism_matfn as pm
import pytest
import torch

G = torch.randn(8, 5, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"degree": 4}, "degree must be 3 or 5, got 4"),
        ({"steps": -1}, "steps must be a non-negative int, got -1"),
        ({"sketch_dim": 0}, "sketch_dim must be an int >= 1, got 0"),
        ({"sketch_dim": 2.5}, "sketch_dim must be an int >= 1, got 2.5"),
        ({"alpha_grid_points": 1, "fit": "fixed"}, "alpha_grid_points must be >= 2, got 1"),
        ({"fit": "magic"}, "fit must be one of"),
        ({"alpha_solver": "newton"}, "alpha_solver must be one of"),
        ({"alpha_bounds": (1.0, 0.5)}, "lo <= hi"),
        ({"alpha_bounds": (0.375, 2.0)}, "convergent range"),
        ({"degree": 3, "alpha_bounds": (0.5, 1.2)}, "convergent range"),
        ({"alpha": 3.0, "fit": "fixed"}, "alpha=3.0 is outside"),
        ({"tol": 0.0}, "tol must be > 0"),
        ({"fixed_alpha_steps": 1.5}, "fixed_alpha_steps must be an int >= 0, got 1.5"),
        ({"sketch": torch.randn(7, 3)}, r"sketch must have shape \(5, p\)"),
    ],
)
def test_bad_options_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pm.polar(G, **kwargs)


def test_unsafe_bounds_are_allowed_on_request():
    out = pm.polar(G, alpha_bounds=(0.375, 1.6), allow_unsafe=True)
    assert torch.isfinite(out).all()


def test_bad_inputs():
    with pytest.raises(
        ValueError, match=r"polar expects a matrix or batch of matrices, got shape \(5,\)"
    ):
        pm.polar(torch.ones(5))
    with pytest.raises(TypeError, match=r"torch\.Tensor, got ndarray"):
        pm.polar(np.ones((3, 3)))
    with pytest.raises(TypeError, match="real matrices only"):
        pm.polar(torch.ones(3, 3, dtype=torch.complex64))
    bad = G.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or Inf"):
        pm.polar(bad)
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="NaN or Inf"):
        pm.sqrtm(bad @ bad.T)


def test_all_zero_input_returns_zeros_with_warning():
    with pytest.warns(RuntimeWarning, match="all-zero"):
        out = pm.polar(torch.zeros(2, 6, 4))
    assert torch.equal(out, torch.zeros(2, 6, 4))
    mixed = torch.stack([torch.zeros(6, 4), G[:6, :4]])
    with pytest.warns(RuntimeWarning, match="all-zero"):
        out = pm.polar(mixed, steps=10)
    assert torch.equal(out[0], torch.zeros(6, 4))
    assert float(pm.residual(out[1])) < 1e-3


def test_sqrtm_rejects_non_square_non_symmetric_and_indefinite():
    with pytest.raises(ValueError, match="square"):
        pm.sqrtm(torch.ones(3, 4))
    A = torch.randn(4, 4, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="symmetric"):
        pm.sqrtm(A)
    with pytest.raises(ValueError, match="ridge="):
        pm.inv_sqrtm(torch.diag(torch.tensor([1.0, -0.5, 2.0])))
    # a ridge makes it definite
    out = pm.sqrtm(torch.diag(torch.tensor([1.0, -0.5, 2.0])), ridge=1.0, steps=30)
    torch.testing.assert_close(out, torch.diag(torch.tensor([2.0, 0.5, 3.0]).sqrt()))


def test_inv_root_rejects_other_orders():
    with pytest.raises(ValueError, match="p in"):
        pm.inv_root(torch.eye(3), 3)


def test_baseline_bad_coefficients():
    with pytest.raises(ValueError, match="coeffs must be one of"):
        pm.baselines.newton_schulz(G, 5, "cubic5")
    with pytest.raises(ValueError, match="triples"):
        pm.baselines.newton_schulz(G, 5, [(1.0, 2.0)])


def test_check_finite_false_is_the_silent_fast_path():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no all-zero warning, no host-side checks
        out = pm.polar(torch.zeros(6, 4), check_finite=False)
    assert torch.equal(out, torch.zeros(6, 4))


# -- issue 28, section 6 -------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [pm.inv_sqrtm, lambda A, **kw: pm.inv_root(A, 4, **kw)])
def test_inverse_roots_of_a_singular_psd_matrix_raise_with_the_ridge_hint(fn):
    # 0.1 returned 23 after 5 steps (1.6e8 after 30) for diag(1, 0)
    A = torch.diag(torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="ridge="):
        fn(A)
    assert torch.isfinite(fn(A, ridge=1e-3)).all()


def test_sqrtm_of_a_singular_psd_matrix_is_fine():
    A = torch.diag(torch.tensor([4.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(pm.sqrtm(A, steps=30), torch.diag(torch.tensor([2.0, 0.0]).double()))


@pytest.mark.parametrize("kwargs", [{"steps": True}, {"sketch_dim": True}, {"steps": 2.0}])
def test_bool_and_float_counts_are_rejected(kwargs):
    with pytest.raises(ValueError, match=r"steps|sketch_dim"):
        pm.polar(torch.randn(4, 3), **kwargs)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3), (0, 4, 4)])
def test_empty_matrices_come_back_empty(shape):
    G = torch.zeros(shape)
    assert pm.polar(G).shape == shape
    X, info = pm.polar(G, return_info=True)
    assert X.shape == shape and info.iterations == 0
    assert pm.baselines.newton_schulz(G, 5).shape == shape
    if shape[-1] == shape[-2] or (shape[-1] == 0 and shape[-2] == 0):
        assert pm.sign(G).shape == shape


def test_empty_square_matrices_for_sign_and_roots():
    E = torch.zeros(0, 0)
    assert pm.sign(E).shape == (0, 0)
    assert pm.sqrtm(E).shape == (0, 0)
    assert pm.inv_sqrtm(E).shape == (0, 0)


def test_sign_of_a_singular_matrix_warns():
    with pytest.warns(RuntimeWarning, match="singular"):
        pm.sign(torch.diag(torch.tensor([1.0, 0.0])))


def test_sign_treats_a_round_off_asymmetric_matrix_as_symmetric():
    # 0.1 decided symmetry by exact equality: A + Aᵀ computed in another order failed it.
    g = torch.Generator().manual_seed(0)
    B = torch.randn(6, 6, generator=g)
    A = B @ B.T - 2.0 * torch.eye(6)
    A_noisy = A + 1e-7 * torch.randn(6, 6, generator=g)
    from prism_matfn.matfn import _is_symmetric

    assert _is_symmetric(A_noisy) and not torch.equal(A_noisy, A_noisy.T)
    assert not _is_symmetric(B)
    S = pm.sign(A_noisy, steps=40)
    torch.testing.assert_close(S @ S, torch.eye(6), atol=1e-3, rtol=0)


@pytest.mark.parametrize("fn", [pm.sqrtm, pm.inv_sqrtm])
def test_nan_ridge_is_named_not_read_as_a_negative_eigenvalue(fn):
    with pytest.raises(ValueError, match="ridge must be a number >= 0, got nan"):
        fn(torch.eye(3), ridge=float("nan"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"compute_dtype": torch.int32}, "compute_dtype must be a floating torch.dtype"),
        ({"ns_steps": 2.5}, "ns_steps must be an int >= 1, got 2.5"),
        ({"fixed_alpha_steps": 1.5}, "fixed_alpha_steps must be an int >= 0"),
    ],
)
def test_prism_muon_rejects_bad_options_at_construction(kwargs, match):
    from prism_matfn.optim import PrismMuon

    with pytest.raises(ValueError, match=match):
        PrismMuon([torch.nn.Parameter(G.clone())], **kwargs)
