"""Regression tests for the 0.2 review's findings (near-singular inverse roots, argument traps)."""

import warnings

import prism_matfn as pm
import pytest
import torch
from prism_matfn.optim import PrismMuon

INVERSES = [pm.inv_sqrtm, lambda A, **kw: pm.inv_root(A, 4, **kw)]


@pytest.mark.parametrize("fn", INVERSES)
@pytest.mark.parametrize(
    "tiny, dtype", [(1e-20, torch.float64), (1e-30, torch.float32), (1e-12, torch.float32)]
)
def test_numerically_singular_inverse_roots_raise_with_the_ridge_hint(fn, tiny, dtype):
    A = torch.diag(torch.tensor([1.0, tiny], dtype=dtype))
    with pytest.raises(ValueError, match="ridge="):
        fn(A)


@pytest.mark.parametrize("fn", INVERSES)
@pytest.mark.parametrize("tiny", [1e-12, 1e-6])
def test_ill_conditioned_inverse_roots_warn_instead_of_a_silent_wrong_answer(fn, tiny):
    A = torch.diag(torch.tensor([1.0, tiny], dtype=torch.float64))
    with pytest.warns(RuntimeWarning, match="not converged"):
        fn(A)


@pytest.mark.parametrize("fn", INVERSES)
def test_well_conditioned_inverse_roots_stay_silent(fn):
    A = torch.diag(torch.tensor([1.0, 1e-2], dtype=torch.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn(A)


def test_everything_after_lr_is_keyword_only():
    p = [torch.nn.Parameter(torch.zeros(3, 2))]
    with pytest.raises(TypeError):
        PrismMuon(p, 0.02, 0.1)  # torch's order would mean weight_decay=0.1; ours was momentum


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_nesterov_must_be_a_bool(bad):
    with pytest.raises(TypeError, match="nesterov"):
        PrismMuon([torch.nn.Parameter(torch.zeros(3, 2))], nesterov=bad)


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_fixed_alpha_steps_is_validated(bad):
    with pytest.raises(ValueError, match="fixed_alpha_steps"):
        PrismMuon([torch.nn.Parameter(torch.zeros(3, 2))], fixed_alpha_steps=bad)


def test_fixed_alpha_steps_fix_the_first_iterations_at_the_upper_bound():
    p = torch.nn.Parameter(torch.zeros(6, 4))
    opt = PrismMuon([p], fixed_alpha_steps=2, log_alphas=True)
    p.grad = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    opt.step()
    assert opt.alpha_log is not None
    alphas = opt.alpha_log[0].reshape(5)
    assert torch.equal(alphas[:2], torch.full((2,), 1.45, dtype=torch.float64))
    assert not torch.equal(alphas[2:], torch.full((3,), 1.45, dtype=torch.float64))


@pytest.mark.parametrize("fit", ["sketch", "exact", "fixed"])
def test_lone_and_batched_polar_agree(fit):
    """The CPU scalar-α path of a lone matrix and the batched (per-matrix α) path agree."""
    G = torch.randn(3, 20, 9, generator=torch.Generator().manual_seed(2))
    batched = pm.polar(G, fit=fit)
    for k in range(3):
        torch.testing.assert_close(pm.polar(G[k], fit=fit), batched[k], atol=2e-5, rtol=0)


@pytest.mark.parametrize("fit", ["sketch", "fixed"])
def test_accelerator_code_path_matches_the_cpu_path(fit, monkeypatch):
    """The path an accelerator takes (gram kernel for R, no shared R², fused-step form, α kept as a
    tensor) run on the CPU through shared-core's reference kernels: same factor as the CPU path."""
    import prism_matfn.matfn as matfn

    G = torch.randn(2, 40, 12, generator=torch.Generator().manual_seed(6))
    cpu_path, info_cpu = pm.polar(G, fit=fit, return_info=True)
    monkeypatch.setattr(matfn, "_plain", lambda X: False)
    device_path, info_device = pm.polar(G, fit=fit, return_info=True)
    torch.testing.assert_close(device_path, cpu_path, atol=2e-5, rtol=0)
    torch.testing.assert_close(info_device.alphas, info_cpu.alphas, atol=1e-4, rtol=0)
