"""The maths of AdaSCALE and its baselines, as pure functions on tensors.

Shapes: ``z`` is a ``(B, D)`` batch of penultimate features (raw, before any ReLU the model may or
may not apply), ``logits`` is ``(B, C)``. Percentiles are in ``[0, 100)`` as in OpenOOD; fractions
(``k1``, ``k2``, ``o``) are in ``(0, 1]``. Nothing here calls a model except
:func:`gradient_perturbation`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

OnDegenerate = Literal["raise", "nan"]


def count_of(fraction: float, total: int, *, name: str, what: str = "D") -> int:
    """``floor(total * fraction)`` (the official ``int(D * k / 100)``), at least 1 or an error.

    The product is rounded to 9 decimals first so that ``0.29 * 100`` counts 29, not 28.
    """
    n = math.floor(round(total * fraction, 9))
    if n < 1:
        raise ValueError(
            f"{name}={fraction!r} selects floor({what}*{name}) = 0 elements for {what}={total}; "
            f"use {name} >= {1 / total:.3g}"
        )
    return n


def kept_count(d: int, percentile: Tensor) -> Tensor:
    """``D - round(D * p / 100)`` per sample: how many top activations SCALE/ASH keep.

    Rounds half to even like ``np.round`` in OpenOOD; computed in float64 so that a float32
    percentile does not move a half-way case.
    """
    return d - torch.round(d * percentile.to(torch.float64) / 100.0).to(torch.int64)


def _percentile_tensor(percentile: Tensor | float, batch: int, device: torch.device) -> Tensor:
    p = torch.as_tensor(percentile, dtype=torch.float64, device=device)
    if p.ndim == 0:
        p = p.expand(batch)
    if p.shape != (batch,):
        raise ValueError(f"percentile must be a float or a ({batch},) tensor, got {tuple(p.shape)}")
    if bool(((p < 0) | (p >= 100) | p.isnan()).any()):
        bad = p[(p < 0) | (p >= 100) | p.isnan()][0].item()
        raise ValueError(f"percentile must lie in [0, 100), got {bad}")
    return p


def _check_features(z: Tensor, name: str = "z") -> None:
    if z.ndim != 2:
        raise ValueError(f"{name} must be (batch, D) features, got shape {tuple(z.shape)}")
    if not z.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {z.dtype}")
    if not bool(torch.isfinite(z).all()):
        raise ValueError(f"{name} holds NaN or Inf features; the backbone's output is broken")


def top_sums(a: Tensor, k: Tensor) -> Tensor:
    """Sum of the ``k[i]`` largest entries of row ``i`` of ``a`` (one sort, one cumsum, a gather).

    One ``k`` for the whole batch (SCALE, or AdaSCALE with ``p_min == p_max``) takes a top-k instead.
    """
    if a.shape[0] and bool((k == k[0]).all()):
        return a.topk(int(k[0]), dim=1).values.sum(dim=1)
    ordered = a.sort(dim=1, descending=True).values
    return ordered.cumsum(dim=1).gather(1, (k - 1).clamp(min=0)[:, None]).squeeze(1)


def scale_factor(
    z: Tensor, percentile: Tensor | float, *, on_degenerate: OnDegenerate = "raise"
) -> Tensor:
    """SCALE's ``r = s1 / s2`` on ``ReLU(z)`` with a per-sample (or one) percentile; shape ``(B,)``.

    ``s1`` sums all activations, ``s2`` the ``k = D - round(D p / 100)`` largest. ``r >= 1``. A
    sample with no positive feature has ``s2 = 0``: that raises, or gives NaN with
    ``on_degenerate="nan"`` (never a silent inf).
    """
    _check_features(z)
    b, d = z.shape
    p = _percentile_tensor(percentile, b, z.device)
    k = kept_count(d, p)
    if bool((k < 1).any()):
        raise ValueError(
            f"percentile {p[k < 1][0].item()} keeps no activation of D={d} "
            f"(D - round(D*p/100) = 0); use a percentile below {100 * (d - 0.5) / d:.4g}"
        )
    a = z.clamp(min=0)
    s1 = a.sum(dim=1)
    s2 = top_sums(a, k)
    degenerate = s2 <= 0
    if bool(degenerate.any()):
        if on_degenerate == "raise":
            row = int(degenerate.nonzero()[0, 0])
            raise ValueError(
                f"sample {row} has no positive feature among its top {int(k[row])} (s2 = 0), so "
                "its scale factor is undefined; features from a ReLU-free head (ViT/Swin "
                "pre-logits) need on_degenerate='nan' or a ReLU'd feature layer"
            )
        if on_degenerate != "nan":
            raise ValueError(f"on_degenerate must be 'raise' or 'nan', got {on_degenerate!r}")
    return torch.where(degenerate, torch.full_like(s1, math.nan), s1 / s2.clamp(min=1e-30))


def energy(logits: Tensor, t: float = 1.0) -> Tensor:
    """Negative free energy ``t * logsumexp(logits / t)``: higher = more in-distribution."""
    if t <= 0:
        raise ValueError(f"temperature t must be > 0, got {t}")
    return t * torch.logsumexp(logits / t, dim=1)


# -- AdaSCALE ----------------------------------------------------------------------------------


def shift_terms(
    z: Tensor, z_perturbed: Tensor, *, k1: float = 0.01, k2: float = 0.05
) -> tuple[Tensor, Tensor]:
    """``(Q, C_o)`` per sample: the two parts of :func:`ood_statistic`."""
    _check_features(z)
    _check_features(z_perturbed, "z_perturbed")
    if z.shape != z_perturbed.shape:
        raise ValueError(f"z {tuple(z.shape)} and z_perturbed {tuple(z_perturbed.shape)} differ")
    d = z.shape[1]
    n1, n2 = count_of(k1, d, name="k1"), count_of(k2, d, name="k2")
    order = z.topk(max(n1, n2), dim=1).indices
    top1, top2 = order[:, :n1], order[:, :n2]
    q = (z.gather(1, top1) - z_perturbed.gather(1, top1)).abs().sum(dim=1)
    c_o = z_perturbed.gather(1, top2).clamp(min=0).sum(dim=1)
    return q, c_o


def ood_statistic(
    z: Tensor, z_perturbed: Tensor, *, k1: float = 0.01, k2: float = 0.05, lam: float = 10.0
) -> Tensor:
    """``Q' = lam * Q + C_o`` per sample (larger = more OOD-like); shape ``(B,)``.

    ``Q`` sums ``|z - z~|`` over the top ``floor(k1 D)`` entries of the raw ``z``; the correction
    ``C_o`` sums ``max(z~, 0)`` over the top ``floor(k2 D)`` entries of ``z``. This one function is
    used at fit and at test time (the official HEAD swaps k1 and k2 in one of the two places).
    """
    q, c_o = shift_terms(z, z_perturbed, k1=k1, k2=k2)
    return lam * q + c_o


def ecdf(values: Tensor, sorted_fit: Tensor) -> Tensor:
    """Right-continuous empirical CDF of ``sorted_fit`` at ``values``: ``#{fit <= v} / n``."""
    n = sorted_fit.numel()
    return torch.searchsorted(sorted_fit, values.to(sorted_fit.dtype), right=True).double() / n


def adaptive_percentile(
    q: Tensor, fit_q: Tensor, *, p_min: float = 60.0, p_max: float = 85.0
) -> Tensor:
    """``p(x) = p_min + (1 - F(Q'(x))) (p_max - p_min)``, ``F`` the ECDF of the fit set's ``Q'``.

    Likely-ID samples (small ``Q'``) get ``p`` near ``p_max`` (stronger scaling). float64, ``(B,)``.
    """
    check_percentiles(p_min, p_max)
    if fit_q.ndim != 1 or fit_q.numel() == 0:
        raise ValueError(f"fit_q must be a non-empty 1-D tensor, got shape {tuple(fit_q.shape)}")
    # sorting an already sorted fit set (the detector caches it so) is a cheap check-free pass
    f = ecdf(q, fit_q if bool((fit_q[1:] >= fit_q[:-1]).all()) else fit_q.sort().values)
    return p_min + (1.0 - f) * (p_max - p_min)


def check_percentiles(p_min: float, p_max: float) -> None:
    if not (0 < p_min <= p_max < 100):
        raise ValueError(
            f"need 0 < p_min <= p_max < 100 (p_min == p_max is SCALE), got p_min={p_min!r}, "
            f"p_max={p_max!r}"
        )


def input_gradient(model: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """Gradient of each sample's max logit with respect to its input, shape of ``x``.

    Samples are independent, so one backward of the batch sum gives every per-sample gradient.
    Parameters' ``.grad`` are left untouched. Works under a caller's ``no_grad``; inference mode
    cannot record a graph at all and raises.
    """
    if torch.is_inference_mode_enabled():
        raise RuntimeError(
            "AdaSCALE needs the input gradient, which torch.inference_mode() forbids; call it "
            "under torch.no_grad() or with no context (it re-enables grad internally)"
        )
    with torch.enable_grad():
        leaf = x.detach().clone().requires_grad_(True)
        logits = model(leaf)
        (grad,) = torch.autograd.grad(logits.max(dim=1).values.sum(), leaf)
    return grad


def perturb(x: Tensor, grad: Tensor, *, o: float = 0.05, eps: float = 0.5) -> Tensor:
    """``x + eps * sign(g) * 1_M``, ``M`` the ``floor(o * numel)`` smallest-``|g|`` elements."""
    if x.ndim < 2:
        raise ValueError(f"x must be a batch (B, ...), got shape {tuple(x.shape)}")
    numel = x[0].numel()
    n = count_of(o, numel, name="o", what="numel")
    g = grad.flatten(1)
    chosen = g.abs().topk(n, dim=1, largest=False).indices
    step = torch.zeros_like(g).scatter_(1, chosen, eps * g.gather(1, chosen).sign())
    return (x.detach().flatten(1) + step).view_as(x)


def gradient_perturbation(
    model: Callable[[Tensor], Tensor], x: Tensor, *, o: float = 0.05, eps: float = 0.5
) -> Tensor:
    """``x~ = x + eps * sign(g) * 1_M``: ``M`` the ``floor(o * numel)`` smallest-``|g|`` elements.

    ``g`` is the input gradient of the max logit (:func:`input_gradient`); any input rank ``>= 2``
    (batch first). ``sign(0) = 0``: a selected element with zero gradient does not move.
    """
    if x.ndim < 2:
        raise ValueError(f"x must be a batch (B, ...), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(
            f"x must be a floating tensor in the model's normalised units, got {x.dtype}; "
            "convert and normalise images before scoring (eps is in normalised units)"
        )
    return perturb(x, input_gradient(model, x), o=o, eps=eps)


# -- baselines on the same features -------------------------------------------------------------


def scale(z: Tensor, percentile: Tensor | float, **kw: OnDegenerate) -> Tensor:
    """SCALE (Xu et al. 2024): ``z * exp(r)`` without pruning."""
    return z * scale_factor(z, percentile, **kw).exp()[:, None].to(z.dtype)


def lts_factor(z: Tensor, percentile: Tensor | float, **kw: OnDegenerate) -> Tensor:
    """LTS's logit multiplier ``r**2`` (logits are scaled, features untouched)."""
    return scale_factor(z, percentile, **kw) ** 2


def _kept_mask(z: Tensor, percentile: float) -> tuple[Tensor, Tensor]:
    _check_features(z)
    d = z.shape[1]
    k = int(kept_count(d, _percentile_tensor(percentile, 1, z.device))[0])
    if k < 1:
        raise ValueError(f"percentile {percentile} keeps no activation of D={d}")
    idx = z.topk(k, dim=1).indices
    return torch.zeros_like(z, dtype=torch.bool).scatter_(1, idx, True), torch.tensor(k)


def ash_p(z: Tensor, percentile: float) -> Tensor:
    """ASH-P: keep each sample's top ``k`` activations, zero the rest."""
    mask, _ = _kept_mask(z, percentile)
    return torch.where(mask, z, torch.zeros_like(z))


def ash_b(z: Tensor, percentile: float) -> Tensor:
    """ASH-B: the kept activations all take ``s1 / k``, the rest zero."""
    mask, k = _kept_mask(z, percentile)
    fill = (z.sum(dim=1) / k.to(z.dtype))[:, None].expand_as(z)
    return torch.where(mask, fill, torch.zeros_like(z))


def ash_s(z: Tensor, percentile: float) -> Tensor:
    """ASH-S: prune to the top ``k``, then multiply by ``exp(s1 / s2)``."""
    mask, _ = _kept_mask(z, percentile)
    s1 = z.sum(dim=1)
    pruned = torch.where(mask, z, torch.zeros_like(z))
    return pruned * torch.exp(s1 / pruned.sum(dim=1))[:, None]


def react(z: Tensor, threshold: float) -> Tensor:
    """ReAct: clip activations at ``threshold``."""
    return z.clamp(max=threshold)


def optfs_shape(z: Tensor, left: float, width: float, theta: Tensor) -> Tensor:
    """OptFS's piecewise-constant shaping: ``z_j * theta[k]`` where ``z_j`` falls in interval ``k``.

    Intervals are ``[left + k width, left + (k+1) width)``; a value outside all of them maps to 0.
    """
    pos = torch.floor((z - left) / width)
    inside = (pos >= 0) & (pos < theta.numel())
    bins = pos.clamp(0, theta.numel() - 1).long()
    return torch.where(inside, z * theta.to(z.dtype)[bins], torch.zeros_like(z))


def optfs_theta(z: Tensor, weight_of_pred: Tensor, left: float, width: float, bins: int) -> Tensor:
    """OptFS's ID-only closed form ``theta ∝ E_ID[I(z)]`` (unit-free; ranking ignores the scale).

    ``I_k(z) = sum_j 1[z_j in interval k] w_{y^, j} z_j``: each interval's share of the max
    logit, with ``weight_of_pred`` the ``(B, D)`` head rows of the predicted classes.
    """
    contrib = (weight_of_pred * z).to(torch.float64)
    pos = torch.floor((z.to(torch.float64) - left) / width)
    inside = (pos >= 0) & (pos < bins)
    idx = pos.clamp(0, bins - 1).long()
    totals = torch.zeros(bins, dtype=torch.float64, device=z.device)
    totals.scatter_add_(0, idx[inside], contrib[inside])
    mean = totals / z.shape[0]
    norm = torch.linalg.vector_norm(mean)
    if norm == 0:
        raise ValueError("OptFS: every interval's mean contribution is zero; the fit set is empty")
    return mean / norm * 1000.0
