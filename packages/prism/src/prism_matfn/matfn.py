"""PRISM matrix functions: polar factor, matrix sign, square root, inverse square and fourth roots.

All share one loop: a residual ``R_k`` that is zero at the solution, an update by ``T_k = g(R_k)`` with
``g(r) = 1 + αr`` (degree 3) or ``1 + r/2 + αr²`` (degree 5), and α fitted each step by minimising the
sketched Frobenius norm of the next residual (:mod:`prism_matfn.alpha`). No spectral bounds are needed.

| function | start | residual | update |
|---|---|---|---|
| ``polar(G)`` (m ≥ n after a transpose) | ``X = G/‖G‖_F`` | ``I − XᵀX`` | ``X ← X T`` |
| ``sign(A)`` (real spectrum) | ``X = A/‖A‖_F`` | ``I − X²`` | ``X ← X T`` |
| ``sqrtm_and_inv(A)`` (SPD) | ``Y = A/c, Z = I`` | ``I − Z Y`` | ``Y ← Y T, Z ← T Z`` |

Options shared by every function (keyword-only):

- ``steps`` (5): iterations; ``tol``: stop early once every matrix's RMS residual ``‖R‖_F/√n ≤ tol``.
- ``degree`` (5): 3 or 5. ``fit``: ``"sketch"`` (default, ``sketch_dim`` columns, seeded by
  ``sketch_seed`` and cached, or drawn from ``generator``, or given as ``sketch``), ``"exact"``
  (eigenvalues of ``R``), or ``"fixed"`` (α = ``alpha`` every step).
- ``alpha`` (None → the upper bound, the author's warm-start value): α of fixed steps; the first
  ``fixed_alpha_steps`` steps are fixed. ``alpha_bounds`` (default ``[1/2, 1]`` / ``[3/8, 29/20]``);
  bounds beyond the convergent range need ``allow_unsafe=True``.
- ``alpha_solver``: ``"exact"`` (grid + Newton on ``Q'``: α within ~2e-6 and ``Q`` within ~1e-12
  relative of the true minimiser on 20 000 random quartics, not to float64 precision) or ``"grid"``;
  both run on the tensor's device without a host synchronisation.
- ``compute_dtype`` (None: float64 stays, everything else runs in float32).
- ``check_finite`` (True): reject NaN/Inf input, warn on all-zero input, raise on divergence. These
  are the only host synchronisations besides ``tol`` and ``return_info``: ``check_finite=False`` (what
  the optimizers use) makes a call run without any.
- ``return_info``: also return :class:`PrismInfo` (α per step, residual history).
- ``spectral_rescale`` (polar only, off): the author's later heuristic — estimate ``σ_max`` of the
  normalised input by 5 power iterations and, if it is below 0.66, divide by ``1.5 σ̂`` so the top
  singular values start near 2/3 instead of far below it (large, well-spread spectra).

A diverging run (residual non-finite, or growing three steps in a row above RMS 1) raises
:class:`~prism_matfn.errors.ConvergenceError`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from prism_matfn.alpha import (
    ALPHA_BOUNDS,
    ALPHA_SOLVERS,
    KrylovRows,
    check_degree,
    fit_alpha,
    krylov_order,
)
from prism_matfn.errors import ConvergenceError
from prism_matfn.fused_step import step_matrix
from prism_matfn.inputs import (
    _plain,
    check_square,
    gram_t,
    identity_like,
    prepare,
    safe_frobenius_normalize,
)
from prism_matfn.sketch import gaussian_sketch

FITS: tuple[str, ...] = ("sketch", "exact", "fixed")
Step = Callable[
    [tuple[Any, ...], torch.Tensor, "torch.Tensor | None", torch.Tensor, "float | None", bool],
    tuple[Any, ...],
]
"""``step(state, R, R², α, α as a float or None, again) -> state``: one PRISM update (see :func:`_iterate`)."""


class PrismInfo(NamedTuple):
    """Diagnostics of one run.

    ``alphas``: α of each step, shape ``(iterations, *batch)``; ``residual_fro``: ``‖R_k‖_F`` for
    ``k = 0..iterations``, shape ``(iterations + 1, *batch)`` (both float64 on the CPU);
    ``iterations``: steps taken (fewer than ``steps`` when ``tol`` was reached).
    """

    alphas: torch.Tensor
    residual_fro: torch.Tensor
    iterations: int
    n: int = 1
    """Size of the residual matrix (``min(m, n)`` for the polar factor)."""

    @property
    def residual_rms(self) -> torch.Tensor:
        """``‖R_k‖_F / √n``: the RMS of ``1 − σ_i²`` for the polar factor."""
        return self.residual_fro / math.sqrt(self.n)


@dataclasses.dataclass(frozen=True)
class PrismOptions:
    """The keyword options of every PRISM function, validated once (see the module docstring)."""

    steps: int = 5
    degree: int = 5
    sketch_dim: int = 8
    fit: str = "sketch"
    alpha: float | None = None
    alpha_bounds: tuple[float, float] | None = None
    fixed_alpha_steps: int = 0
    alpha_solver: str = "exact"
    alpha_grid_points: int = 65
    tol: float | None = None
    compute_dtype: torch.dtype | None = None
    sketch: torch.Tensor | None = None
    sketch_seed: int = 0
    generator: torch.Generator | None = None
    check_finite: bool = True
    allow_unsafe: bool = False
    return_info: bool = False
    spectral_rescale: bool = False

    def __post_init__(self) -> None:
        check_degree(self.degree)
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps must be a non-negative int, got {self.steps!r}")
        if (
            isinstance(self.sketch_dim, bool)
            or not isinstance(self.sketch_dim, numbers.Integral)
            or self.sketch_dim < 1
        ):
            raise ValueError(f"sketch_dim must be an int >= 1, got {self.sketch_dim!r}")
        if self.alpha_grid_points < 2:
            raise ValueError(f"alpha_grid_points must be >= 2, got {self.alpha_grid_points}")
        if self.fit not in FITS:
            raise ValueError(f"fit must be one of {FITS}, got {self.fit!r}")
        if self.alpha_solver not in ALPHA_SOLVERS:
            raise ValueError(
                f"alpha_solver must be one of {ALPHA_SOLVERS}, got {self.alpha_solver!r}"
            )
        fas = self.fixed_alpha_steps
        if isinstance(fas, bool) or not isinstance(fas, numbers.Integral) or fas < 0:
            raise ValueError(f"fixed_alpha_steps must be an int >= 0, got {fas!r}")
        if self.tol is not None and not self.tol > 0:
            raise ValueError(f"tol must be > 0 or None, got {self.tol!r}")
        lo, hi = self.bounds
        if not lo <= hi:
            raise ValueError(f"alpha_bounds must satisfy lo <= hi, got {self.alpha_bounds}")
        safe_hi = ALPHA_BOUNDS[self.degree][1]
        if not self.allow_unsafe and (hi > safe_hi or lo < 0):
            raise ValueError(
                f"alpha_bounds {self.alpha_bounds} leave the convergent range [0, {safe_hi}] for "
                f"degree {self.degree}; pass allow_unsafe=True to use them anyway"
            )
        if self.alpha is not None and not self.allow_unsafe and not 0 <= self.alpha <= safe_hi:
            raise ValueError(
                f"alpha={self.alpha} is outside the convergent range [0, {safe_hi}] for degree "
                f"{self.degree}; pass allow_unsafe=True to use it anyway"
            )

    @property
    def bounds(self) -> tuple[float, float]:
        if self.alpha_bounds is None:
            return ALPHA_BOUNDS[self.degree]
        lo, hi = self.alpha_bounds
        return float(lo), float(hi)

    @property
    def fixed_alpha(self) -> float:
        return self.bounds[1] if self.alpha is None else float(self.alpha)

    def sketch_for(self, n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
        """The sketch for ``n×n`` residuals, or ``None`` for exact and fixed fits."""
        if self.fit != "sketch":
            return None
        if self.sketch is not None:
            if self.sketch.ndim < 2 or self.sketch.shape[-2] != n:
                raise ValueError(
                    f"sketch must have shape ({n}, p) for these matrices, got {tuple(self.sketch.shape)}"
                )
            return self.sketch.to(device=device, dtype=dtype)
        # More columns than the dimension would only repeat information (the author clamps too).
        p = min(self.sketch_dim, n)
        return gaussian_sketch(
            n, p, seed=self.sketch_seed, generator=self.generator, device=device, dtype=dtype
        )


def _step_matrix(
    R: torch.Tensor,
    alpha: torch.Tensor,
    degree: int,
    symmetric: bool,
    squared: torch.Tensor | None = None,
) -> torch.Tensor:
    """``g(R) = I + αR`` (degree 3) or ``I + R/2 + αR²`` (degree 5, fused kernel on GPU; ``squared``
    is a precomputed ``R²``, overwritten)."""
    if degree == 5:
        return step_matrix(R, alpha, symmetric, squared=squared)
    T = alpha.to(R.dtype)[..., None, None] * R
    T.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return T


def _update_step(
    update: Callable[[tuple[torch.Tensor, ...], torch.Tensor], tuple[torch.Tensor, ...]],
    degree: int,
    symmetric: bool,
) -> Step:
    """The :data:`Step` of ``update(state, g(R))`` (sign and the square roots)."""

    def step(
        state: tuple[Any, ...],
        R: torch.Tensor,
        R2: torch.Tensor | None,
        alpha: torch.Tensor,
        scalar: float | None,
        again: bool,
    ) -> tuple[Any, ...]:
        return update(state, _step_matrix(R, alpha, degree, symmetric, R2))

    return step


def _iterate(
    state: tuple[Any, ...],
    residual: Callable[[tuple[Any, ...]], torch.Tensor],
    step: Step,
    n: int,
    opts: PrismOptions,
    *,
    symmetric: bool,
    name: str,
    sketch: torch.Tensor | None = None,
) -> tuple[tuple[Any, ...], PrismInfo]:
    """The PRISM loop shared by every function; ``symmetric`` says whether ``R`` is symmetric.

    ``sketch`` (already in ``X``'s dtype and device, ``(n, p)`` or ``(..., n, p)``) overrides the
    options' sketch: the optimizers pass their per-parameter sketches stacked. Each iteration takes
    ``R = residual(state)`` and ``state = step(state, R, R², α, scalar, again)``: ``R²`` is computed
    here once for a degree-5 step on plain tensors (CPU, float64) and shared by the sketched fit (its
    Krylov rows two at a time) and the step (``None`` on an accelerator, whose fused kernel squares);
    ``scalar`` is α as a Python float where one α serves the whole batch on the CPU (a fixed step, or
    one fitted matrix), else ``None``; ``again`` says whether another residual is needed after it.
    """
    X0 = state[0]
    batch = X0.shape[:-2]
    S = opts.sketch_for(n, X0.device, X0.dtype) if sketch is None else sketch
    if opts.fit == "exact" and not symmetric:
        S = torch.eye(n, dtype=X0.dtype, device=X0.device)  # exact Krylov Gram of a non-symmetric R
    eigen_fit = opts.fit == "exact" and symmetric
    share_square = opts.degree == 5 and _plain(X0)
    rows = None
    if opts.fit != "fixed" and not eigen_fit:
        assert S is not None
        order = krylov_order(opts.degree)
        rows = KrylovRows(S, batch.numel(), order, X0.dtype, share_square, symmetric)
    host_fit = rows is not None and X0.device.type == "cpu"
    alphas: list[torch.Tensor] = []
    norms: list[torch.Tensor] = []
    track = opts.check_finite or opts.return_info or opts.tol is not None
    fixed_alpha = torch.full(batch, opts.fixed_alpha, dtype=torch.float64, device=X0.device)
    for k in range(opts.steps):
        R = residual(state)
        if track:
            norms.append(torch.linalg.matrix_norm(R).double())
        if opts.tol is not None and bool((norms[-1] <= opts.tol * math.sqrt(n)).all()):
            break
        R2 = R @ R if share_square else None
        scalar: float | None
        if opts.fit == "fixed" or k < opts.fixed_alpha_steps:
            alpha, scalar = fixed_alpha, opts.fixed_alpha
        else:
            solver = (opts.bounds, opts.alpha_solver, opts.alpha_grid_points)
            if rows is None:
                alpha = fit_alpha((R + R.mT) * 0.5, None, opts.degree, bounds=solver[0],
                                  solver=solver[1], grid_points=solver[2])  # fmt: skip
            elif host_fit:
                fitted = rows.alpha_host(R, R2, opts.degree, *solver)
                alpha = torch.from_numpy(fitted).reshape(batch)
                scalar = float(fitted[0]) if len(fitted) == 1 else None
            else:
                alpha = rows.alpha(R, R2, opts.degree, *solver).reshape(batch)
            if not host_fit:
                on_host = alpha.device.type == "cpu" and alpha.numel() == 1
                scalar = float(alpha) if on_host else None
        alphas.append(alpha)
        again = k + 1 < opts.steps or opts.return_info or opts.tol is not None
        state = step(state, R, R2, alpha, scalar, bool(again))
    else:
        if opts.steps and (opts.return_info or opts.tol is not None):
            norms.append(torch.linalg.matrix_norm(residual(state)).double())
    history = torch.stack(norms).cpu() if norms else torch.zeros(0, *batch, dtype=torch.float64)
    if opts.check_finite:
        _check_convergence(history, state, n, name)
    if (
        opts.tol is not None
        and history.numel()
        and bool((history[-1] > opts.tol * math.sqrt(n)).any())
    ):
        warnings.warn(
            f"{name}: RMS residual {float(history[-1].max()) / math.sqrt(n):.3g} did not reach "
            f"tol={opts.tol} in {opts.steps} steps (more steps? rank-deficient input keeps residual 1 "
            "on its null space)",
            RuntimeWarning,
            stacklevel=3,
        )
    # Copying α to the host synchronises: only when asked for.
    keep = alphas and opts.return_info
    a = torch.stack(alphas).cpu() if keep else torch.zeros(0, *batch, dtype=torch.float64)
    return state, PrismInfo(a, history, len(alphas), n)


def _check_convergence(
    history: torch.Tensor, state: tuple[torch.Tensor, ...], n: int, name: str
) -> None:
    # A sum is non-finite iff an entry is (iterates are bounded, the sum cannot overflow): one
    # reduction instead of a boolean tensor the size of the matrix.
    finite = all(bool(torch.isfinite(t.sum())) for t in state if t is not None)
    finite = finite and bool(torch.isfinite(history).all())
    rms = history / math.sqrt(n)
    growing = (rms[1:] > rms[:-1]) & (rms[1:] > 1.0)
    run = 0
    for step in growing.reshape(growing.shape[0], -1).any(-1).tolist():
        run = run + 1 if step else 0
        if run >= 3:
            break
    if not finite or run >= 3:
        worst = [f"{v:.3g}" for v in rms.reshape(len(rms), -1).amax(-1).tolist()]
        raise ConvergenceError(
            f"{name} diverged: RMS residual history {worst} "
            "(for sign: is the spectrum real? for sqrt: is the matrix SPD?)"
        )


def _empty_result(X: torch.Tensor, out_dtype: torch.dtype, opts: PrismOptions, n: int) -> Any:
    """A matrix with a zero dimension has nothing to iterate on: return it (empty) as it is."""
    batch = X.shape[:-2]
    empty = torch.zeros(0, *batch, dtype=torch.float64)
    info = PrismInfo(empty, empty, 0, max(n, 1))
    return (X.to(out_dtype), info) if opts.return_info else X.to(out_dtype)


def _polar_only(opts: PrismOptions, name: str) -> None:
    if opts.spectral_rescale:
        raise ValueError(f"spectral_rescale applies to polar only, not {name}")


def _spectral_rescale(X: torch.Tensor, seed: int, iterations: int = 5) -> torch.Tensor:
    """Divide by ``1.5 σ̂`` where the power-iteration estimate ``σ̂`` of ``σ_max(X)`` is below 0.66.

    After Frobenius normalisation ``σ_max ≤ 1`` but can be ≈ 2/√n for a square Gaussian matrix; the
    factor 1.5 keeps ``σ_max`` below 1 even when the five iterations underestimate it by a third.
    """
    v = gaussian_sketch(X.shape[-1], 1, seed=seed, device=X.device, dtype=X.dtype)
    v = v.expand(*X.shape[:-2], *v.shape)
    for _ in range(iterations):
        v = X.mT @ (X @ v)
        v = v / torch.linalg.vector_norm(v, dim=-2, keepdim=True).clamp_min(
            torch.finfo(X.dtype).tiny
        )
    sigma = torch.linalg.vector_norm(X @ v, dim=-2, keepdim=True)  # (..., 1, 1)
    scale = torch.where((sigma < 0.66) & (sigma > 0), 1.5 * sigma, torch.ones_like(sigma))
    return X / scale


@functools.lru_cache(maxsize=16)
def _eye(n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A cached identity (read only: ``baddbmm`` reads it as its ``input``)."""
    return torch.eye(n, dtype=dtype, device=device)


def _polar_residual(X: torch.Tensor, plain: bool) -> torch.Tensor:
    """``R = I − X Xᵀ`` of a wide ``(B, n, m)`` ``X``: one ``baddbmm`` on plain tensors, else
    shared-core's gram kernel (see :func:`gram_t`) and the shift."""
    if plain:
        return torch.baddbmm(_eye(X.shape[-2], X.dtype, X.device), X, X.mT, alpha=-1.0)
    R = gram_t(X.mT).neg_()
    R.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return R


def _current_residual(state: tuple[Any, ...]) -> torch.Tensor:
    """Polar's residual: the step computes it with the iterate (state ``(X, R)``)."""
    R = state[1]
    assert R is not None, "the last step was told no residual follows"
    return R


def _polar_step(
    state: tuple[Any, ...],
    R: torch.Tensor,
    R2: torch.Tensor | None,
    alpha: torch.Tensor,
    scalar: float | None,
    again: bool,
    *,
    degree: int,
    plain: bool,
) -> tuple[Any, ...]:
    """``X ← g(R) X`` on the state ``(X, R = I − X Xᵀ)`` of a wide ``(B, n, m)`` ``X``; returns
    ``(X', R')`` (``None`` in place of ``R'`` when no residual follows).

    With ``R²`` at hand (degree 5, plain tensors) the step is ``X + (αR² + R/2) X``: two element-wise
    passes over ``R²`` and one ``baddbmm``, the flops of Muon's quintic (``R²`` replaces its
    ``A²``). Otherwise ``g(R) @ X`` (degree 3, or the fused kernel on an accelerator).
    """
    X = state[0]
    if R2 is None:
        X = _step_matrix(R, alpha.reshape(-1), degree, True) @ X
    elif scalar is not None and scalar > 0:  # α(R² + R/(2α)): one pass over R², α in the product
        X = torch.baddbmm(X, R2.add_(R, alpha=0.5 / scalar), X, alpha=scalar)
    else:
        X = torch.baddbmm(X, R2.mul_(alpha.to(X.dtype).reshape(-1, 1, 1)).add_(R, alpha=0.5), X)
    return (X, _polar_residual(X, plain) if again else None)


def polar(G: torch.Tensor, **options: Any) -> Any:
    """Orthogonal polar factor ``U Vᵀ`` of ``G = U Σ Vᵀ`` (the "zeroth power" Muon uses), by PRISM.

    ``G`` is ``(..., m, n)``; wide matrices are transposed so the Gram ``XᵀX`` is ``min(m,n)²``. The
    result is a true polar factor to the residual tolerance (singular values → 1), not Muon's
    ``U·diag(0.5..1.5)·Vᵀ``. Rank-deficient input gives the partial isometry. Returns the factor, or
    ``(factor, PrismInfo)`` with ``return_info=True``; options are described in the module docstring.
    """
    return polar_with(G, PrismOptions(**options))


def polar_with(G: torch.Tensor, opts: PrismOptions, sketch: torch.Tensor | None = None) -> Any:
    """:func:`polar` with options validated once (the optimizers' path: no per-call validation).

    ``sketch``: an ``(n, p)`` or batched ``(..., n, p)`` sketch in place of ``opts``'s, with
    ``n = min(m, n)``.
    """
    X, out_dtype = prepare(G, "polar", opts.compute_dtype, opts.check_finite)
    if X.numel() == 0:
        return _empty_result(X, out_dtype, opts, min(X.shape[-2:]))
    # Muon's orientation: a wide X (n ≤ m rows), A = X Xᵀ and X ← g X, with contiguous operands.
    transposed = X.shape[-2] > X.shape[-1]
    if transposed:
        X = X.mT
    X, _ = safe_frobenius_normalize(X, "polar", warn=opts.check_finite)
    n = X.shape[-2]
    if opts.spectral_rescale:
        X = _spectral_rescale(X.mT, opts.sketch_seed).mT

    if sketch is not None:
        sketch = sketch.to(device=X.device, dtype=X.dtype)
    # One flat batch for the loop, so every product is a plain bmm (no reshapes per step).
    batch = X.shape[:-2]
    X = X.reshape(-1, *X.shape[-2:])
    if sketch is not None and sketch.ndim > 2:
        sketch = sketch.reshape(-1, *sketch.shape[-2:])
    plain = _plain(X)
    step = functools.partial(_polar_step, degree=opts.degree, plain=plain)
    (X, _), info = _iterate(
        (X, _polar_residual(X, plain)), _current_residual, step, n, opts, symmetric=True,
        name="polar", sketch=sketch,
    )  # fmt: skip
    X = X.reshape(*batch, *X.shape[-2:])
    if info.alphas.numel() or info.residual_fro.numel():
        info = info._replace(
            alphas=info.alphas.reshape(len(info.alphas), *batch),
            residual_fro=info.residual_fro.reshape(len(info.residual_fro), *batch),
        )
    if transposed:
        X = X.mT
    return (X.to(out_dtype), info) if opts.return_info else X.to(out_dtype)


def sign(A: torch.Tensor, **options: Any) -> Any:
    """Matrix sign ``V sign(Λ) V⁻¹`` of a square ``A`` with real, non-zero eigenvalues, by PRISM.

    Complex eigenvalues (e.g. a rotation) make the iteration diverge: that raises
    :class:`~prism_matfn.errors.ConvergenceError`. Options as :func:`polar`.
    """
    opts = PrismOptions(**options)
    _polar_only(opts, "sign")
    X, out_dtype = prepare(A, "sign", opts.compute_dtype, opts.check_finite)
    check_square(X, "sign")
    if X.numel() == 0:
        return _empty_result(X, out_dtype, opts, X.shape[-1])
    symmetric = _is_symmetric(X)
    X, _ = safe_frobenius_normalize(X, "sign", warn=opts.check_finite)
    n = X.shape[-1]

    def residual(state: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return identity_like(state[0], n) - state[0] @ state[0]

    def update(state: tuple[torch.Tensor, ...], T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (state[0] @ T,)

    step = _update_step(update, opts.degree, symmetric)
    (X,), info = _iterate((X,), residual, step, n, opts, symmetric=symmetric, name="sign")
    if opts.check_finite:
        _warn_if_stalled(info, "sign")
    return (X.to(out_dtype), info) if opts.return_info else X.to(out_dtype)


def _is_symmetric(X: torch.Tensor) -> bool:
    """Symmetric to round-off (``‖X − Xᵀ‖_F ≤ 100·eps·‖X‖_F`` for every matrix), not bit-for-bit."""
    tol = 100 * torch.finfo(X.dtype).eps * torch.linalg.matrix_norm(X)
    return bool((torch.linalg.matrix_norm(X - X.mT) <= tol).all())


def _warn_if_stalled(info: PrismInfo, name: str) -> None:
    """Warn when the residual sits at ``‖R‖_F ≥ 1`` and no longer falls: an eigenvalue of ``X²`` is
    stuck at 0, i.e. the input is singular (``sign`` is undefined there) or far from converged."""
    hist = info.residual_fro.reshape(len(info.residual_fro), -1)
    if len(hist) < 3:
        return
    last, before = hist[-1], hist[-3]
    stalled = (last >= 1 - 1e-3) & (last >= 0.99 * before)
    if bool(stalled.any()):
        warnings.warn(
            f"{name}: the residual stalled at ‖R‖_F = {float(last.max()):.3g} ≥ 1: the matrix looks "
            "singular (a zero eigenvalue has no sign), or needs more steps",
            RuntimeWarning,
            stacklevel=3,
        )


def _check_spd(A: torch.Tensor, name: str) -> None:
    scale = torch.linalg.matrix_norm(A).amax()
    eps = torch.finfo(A.dtype).eps
    asym = torch.linalg.matrix_norm(A - A.mT).amax()
    if bool(asym > 1e3 * eps * scale):
        raise ValueError(
            f"{name} expects symmetric matrices; ‖A − Aᵀ‖_F = {float(asym):.3g} vs ‖A‖_F = {float(scale):.3g}"
        )
    n = A.shape[-1]
    shift = torch.clamp(n * eps * scale, min=torch.finfo(A.dtype).tiny)
    _, info = torch.linalg.cholesky_ex(
        (A + A.mT) * 0.5 + shift * torch.eye(n, dtype=A.dtype, device=A.device)
    )
    if bool((info > 0).any()):
        raise ValueError(
            f"{name} expects positive semi-definite matrices, but this one has a negative eigenvalue; "
            "pass ridge=λ to shift it by λI, or check_psd=False to skip this check"
        )


def _check_nonsingular(A: torch.Tensor, name: str) -> None:
    """An inverse root needs a positive definite ``A``: one unshifted Cholesky decides it."""
    L, info = torch.linalg.cholesky_ex((A + A.mT) * 0.5)
    if bool((info > 0).any()):
        raise ValueError(
            f"{name} needs a positive definite matrix, but this one is singular (or indefinite) to "
            "working precision, so its inverse root does not exist (the coupled iteration's Z would "
            "grow without bound); pass ridge=λ to use (A + λI)^{-1/2}"
        )
    # λ_min ≤ every squared Cholesky pivot: a pivot² below n·eps·‖A‖_F means rank deficiency at
    # this dtype's precision (diag(1, 1e-20) in float64 factors fine but has no usable inverse root).
    n = A.shape[-1]
    pivot2 = L.diagonal(dim1=-2, dim2=-1).square().amin(-1)
    floor = n * torch.finfo(A.dtype).eps * torch.linalg.matrix_norm(A)
    if bool((pivot2 <= floor).any()):
        ratio = float((pivot2 / torch.linalg.matrix_norm(A)).amin())
        raise ValueError(
            f"{name}: the matrix is numerically singular in {A.dtype} (smallest Cholesky pivot² / "
            f"‖A‖_F = {ratio:.3g}, below n·eps = {n * torch.finfo(A.dtype).eps:.3g}), so its "
            "inverse root cannot be computed; pass ridge=λ to use (A + λI)^{-1/2}"
        )


def sqrtm_and_inv(
    A: torch.Tensor, *, ridge: float = 0.0, check_psd: bool = True, **options: Any
) -> Any:
    """``(A^{1/2}, A^{-1/2})`` of a symmetric positive definite ``A`` from one coupled PRISM run.

    ``ridge`` adds ``ridge·I`` first. ``check_psd`` costs two Choleskys; it rejects non-symmetric,
    indefinite and singular input (whose inverse root does not exist) with a ``ValueError``.
    Returns ``(sqrt, inv_sqrt)`` or ``(sqrt, inv_sqrt, info)``.
    """
    return _coupled(A, ridge, check_psd, True, options)


def _coupled(
    A: torch.Tensor, ridge: float, check_psd: bool, inverse: bool, options: dict[str, Any]
) -> Any:
    """The coupled square-root run; ``inverse`` says the caller needs ``A^{-1/2}`` (so A must be PD)."""
    opts = PrismOptions(**options)
    _polar_only(opts, "sqrtm")
    Y, out_dtype = prepare(A, "sqrtm", opts.compute_dtype, opts.check_finite)
    check_square(Y, "sqrtm")
    if not ridge >= 0:  # NaN too: it would read as a negative eigenvalue in the PSD check
        raise ValueError(f"ridge must be a number >= 0, got {ridge!r}")
    if ridge:
        Y = Y + ridge * torch.eye(Y.shape[-1], dtype=Y.dtype, device=Y.device)
    if Y.numel() == 0:
        empty = Y.to(out_dtype)
        info = PrismInfo(torch.zeros(0), torch.zeros(0), 0, 1)
        return (empty, empty.clone(), info) if opts.return_info else (empty, empty.clone())
    if check_psd:
        _check_spd(Y, "sqrtm")
        if inverse:
            _check_nonsingular(Y, "inv_sqrtm")
    Y, c = safe_frobenius_normalize(Y, "sqrtm", warn=opts.check_finite)
    n = Y.shape[-1]
    Z = identity_like(Y, n).clone()

    def residual(state: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return identity_like(state[0], n) - state[1] @ state[0]

    def update(state: tuple[torch.Tensor, ...], T: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (state[0] @ T, T @ state[1])

    step = _update_step(update, opts.degree, True)
    (Y, Z), info = _iterate((Y, Z), residual, step, n, opts, symmetric=True, name="sqrtm")
    if inverse and opts.check_finite:
        _warn_if_unconverged(Y, Z, n, opts, "inv_sqrtm")
    root_c = c.sqrt()
    inv = torch.where(c > 0, Z / torch.where(c > 0, root_c, torch.ones_like(c)), torch.inf)
    result = ((Y * root_c).to(out_dtype), inv.to(out_dtype))
    return (*result, info) if opts.return_info else result


_UNCONVERGED_RMS = 1e-2


def _warn_if_unconverged(
    Y: torch.Tensor, Z: torch.Tensor, n: int, opts: PrismOptions, name: str
) -> None:
    """Warn when the coupled run ends with RMS ``‖I − Z Y‖ > 1e-2``: an ill-conditioned matrix
    (condition ≳ 1e5 at 5 steps) whose inverse root is still far off, not a silent wrong answer."""
    rms = torch.linalg.matrix_norm(identity_like(Y, n) - Z @ Y) / math.sqrt(n)
    worst = float(rms.max())
    if not worst <= _UNCONVERGED_RMS:
        warnings.warn(
            f"{name}: not converged after {opts.steps} steps (RMS residual ‖I − ZY‖/√n = "
            f"{worst:.3g}): the matrix is ill-conditioned; raise steps= or pass ridge=λ",
            RuntimeWarning,
            stacklevel=4,
        )


def sqrtm(A: torch.Tensor, **options: Any) -> Any:
    """``A^{1/2}`` of a symmetric positive semi-definite ``A``; see :func:`sqrtm_and_inv`."""
    ridge, check_psd = options.pop("ridge", 0.0), options.pop("check_psd", True)
    out = _coupled(A, ridge, check_psd, False, options)
    return (out[0], out[2]) if len(out) == 3 else out[0]


def inv_sqrtm(A: torch.Tensor, **options: Any) -> Any:
    """``A^{-1/2}`` of a symmetric positive definite ``A``; see :func:`sqrtm_and_inv`."""
    out = sqrtm_and_inv(A, **options)
    return (out[1], out[2]) if len(out) == 3 else out[1]


def inv_root(A: torch.Tensor, p: int, **options: Any) -> Any:
    """``A^{-1/p}`` for ``p ∈ {2, 4}`` of a symmetric positive definite ``A`` (Shampoo's preconditioner).

    ``p = 4`` composes two coupled runs, ``(A^{1/2})^{-1/2}``, each of ``steps`` iterations;
    ``info`` then concatenates both runs' histories.
    """
    if p not in (2, 4):
        raise ValueError(f"inv_root supports p in (2, 4), got {p!r}")
    if p == 2:
        return inv_sqrtm(A, **options)
    return_info = options.get("return_info", False)
    ridge, check_psd = options.pop("ridge", 0.0), options.pop("check_psd", True)
    out = _coupled(A, ridge, check_psd, True, options)
    half = out[0]
    second = dict(options, check_psd=False, ridge=0.0, check_finite=False)
    result = sqrtm_and_inv((half + half.mT) * 0.5, **second)
    if not return_info:
        return result[1]
    first_info, second_info = out[2], result[2]
    info = PrismInfo(
        torch.cat([first_info.alphas, second_info.alphas]),
        torch.cat([first_info.residual_fro, second_info.residual_fro]),
        first_info.iterations + second_info.iterations,
        first_info.n,
    )
    return result[1], info


def residual(X: torch.Tensor, kind: str = "polar") -> torch.Tensor:
    """``‖I − XᵀX‖_F`` (``kind="polar"``, X tall or wide) or ``‖I − X²‖_F`` (``"sign"``) per matrix."""
    if kind == "polar":
        if X.shape[-2] < X.shape[-1]:
            X = X.mT
        return torch.linalg.matrix_norm(identity_like(X, X.shape[-1]) - X.mT @ X)
    if kind == "sign":
        check_square(X, "residual")
        return torch.linalg.matrix_norm(identity_like(X, X.shape[-1]) - X @ X)
    raise ValueError(f"kind must be 'polar' or 'sign', got {kind!r}")
