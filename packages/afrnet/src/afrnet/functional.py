"""The differentiable maths of AFR-Net: closed-form flow energy, routing mask, effective resistance.

Circuit meaning. With conductances ``g`` on the SC edges, ``L_g = Bᵀ diag(g) B + δI`` and the FC task
Laplacian ``L_T = Σ_{i<j} T_ij b_ij b_ijᵀ + ρI`` (``T = |(F + Fᵀ)/2|``, zero diagonal), the energy of
edge ``e = (u, v)`` is

    E_e = 2κ g_e d_eᵀ L_g⁻¹ L_T L_g⁻¹ d_e = 2κ Σ_{i<j} T_ij g_e (d_eᵀ L_g⁻¹ b_ij)²  (+ the ρ term)

i.e. twice the power dissipated in edge ``e`` when a unit current is routed between every FC-coupled
pair ``(i, j)`` through the SC resistor network, weighted by ``T_ij``; equivalently
``E_e = -2κ g_e ∂ tr(L_T L_g⁻¹) / ∂g_e``.

Two exact solvers. ``"solve"`` is the official code's: one LU of ``L_g`` and two solves with one
right-hand side per edge, O(N³ + N²E). ``"pinv"`` forms the restriction of ``(L + δI)⁻¹`` to the
range of ``L`` by grounding, ``R = (L + P + δI)⁻¹ - P/(1 + δ)`` (``P`` the projector on the null space,
``11ᵀ/N`` for a connected graph), then ``Q = R L_T R`` and ``E_e = 2κ g_e (Q_uu + Q_vv - 2Q_uv)``:
O(N³ + E). As every ``d_e`` is orthogonal to the null space, both give the same numbers in exact
arithmetic; the grounded form never builds the ``1/δ`` null-space component, so it is safe in
float32, where an explicit ``(L + δI)⁻¹`` loses every digit (spec section 2.8).
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from afrnet.preprocess import components, describe_components

Solver = Literal["solve", "pinv", "auto"]
SOLVERS = ("solve", "pinv", "auto")


def sc_edges(sc: torch.Tensor) -> torch.Tensor:
    """The official edge list of one SC matrix: ``(u, v)`` with ``u < v`` and ``S_uv > 0``, in
    row-major order, as a ``[2, E]`` long tensor."""
    upper = torch.triu(torch.ones_like(sc, dtype=torch.bool), diagonal=1)
    row, col = torch.where((sc > 0) & upper)
    return torch.stack([row, col])


def task_laplacian(fc: torch.Tensor, ridge: float = 1e-6) -> torch.Tensor:
    """``L_T = diag(T1) - T + ρI`` with ``T = |(F + Fᵀ)/2|`` and a zero diagonal (batched)."""
    t = torch.abs(0.5 * (fc + fc.transpose(-1, -2)))
    eye = torch.eye(fc.shape[-1], dtype=fc.dtype, device=fc.device)
    t = t * (1 - eye)
    return torch.diag_embed(t.sum(-1)) - t + ridge * eye


def conductance_laplacian(weights: torch.Tensor) -> torch.Tensor:
    """``Bᵀ diag(g) B = diag(W1) - W`` of a dense symmetric conductance matrix (batched)."""
    eye = torch.eye(weights.shape[-1], dtype=weights.dtype, device=weights.device)
    off = weights * (1 - eye)
    return torch.diag_embed(off.sum(-1)) - off


def null_projector(
    adjacency: torch.Tensor,
    *,
    node_mask: torch.Tensor | None = None,
    allow_disconnected: bool = False,
) -> torch.Tensor:
    """The orthogonal projector on the Laplacian's null space, ``Σ_c 1_c 1_cᵀ / |c|`` (batched).

    Components come from min-label propagation with pointer jumping, batched in torch (each node
    takes the smallest label among its neighbours, then its label's label): O(B N²) a round and a
    few rounds for connectomes, whose hop diameter is small; no per-subject loop, no host copy.
    Padded nodes (``node_mask`` false) are their own components. A subject whose real nodes form
    several components raises, listing them, unless ``allow_disconnected`` (then each component is
    grounded on its own).
    """
    squeeze = adjacency.dim() == 2
    adj = adjacency[None] if squeeze else adjacency
    masks = None if node_mask is None else (node_mask[None] if squeeze else node_mask)
    n = adj.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=adj.device)
    links = (adj.detach() != 0) | eye
    if masks is not None:
        links = (links & masks[:, :, None] & masks[:, None, :]) | eye
    labels = torch.arange(n, device=adj.device).expand(adj.shape[0], n)
    while (
        True
    ):  # labels only decrease, so this ends; at the fixpoint they are constant per component
        lowest = torch.where(links, labels[:, None, :], n).amin(-1)
        lowest = torch.gather(lowest, 1, lowest)
        if torch.equal(lowest, labels):
            break
        labels = lowest
    same = labels[:, :, None] == labels[:, None, :]
    if not allow_disconnected:
        valid = torch.full_like(labels[:, 0], n) if masks is None else masks.sum(-1)
        split = torch.nonzero(same[:, 0].sum(-1) != valid).flatten()
        if split.numel():
            b = int(split[0])
            size = int(valid[b])
            groups = components((adj[b, :size, :size] != 0).detach().cpu().numpy())
            raise ValueError(
                f"the SC graph of subject {b} is disconnected ({describe_components(groups)}): "
                "its Laplacian is singular and energies across components are undefined. "
                "Connect it, or pass allow_disconnected=True to ground each component on its own"
            )
    proj = same.to(adj.dtype) / same.sum(-1, keepdim=True).to(adj.dtype)
    return proj[0] if squeeze else proj


def grounded_inverse(
    laplacian: torch.Tensor, projector: torch.Tensor, delta: float
) -> torch.Tensor:
    """``(L + δI)⁻¹`` restricted to the range of ``L``: ``(L + P + δI)⁻¹ - P / (1 + δ)``.

    Equals ``L⁺`` at ``δ = 0``. Well conditioned whenever each component is connected.
    """
    eye = torch.eye(laplacian.shape[-1], dtype=laplacian.dtype, device=laplacian.device)
    return torch.linalg.inv(laplacian + projector + delta * eye) - projector / (1.0 + delta)


def check_number(name: str, value: float, *, low: float = 0.0, strict: bool = False) -> None:
    """Raise unless ``value`` is a finite number ``> low`` (``strict``) or ``>= low``."""
    ok = math.isfinite(value) and (value > low if strict else value >= low)
    if not ok:
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


def check_connectome(sc: torch.Tensor, fc: torch.Tensor) -> None:
    """The torch-side checks of every entry point: ``sc``/``fc`` square of one shape and dtype,
    at least 2 regions, finite, ``sc`` non-negative and symmetric, ``fc`` in [-1, 1]."""
    if sc.dim() < 2 or sc.shape[-1] != sc.shape[-2] or fc.shape != sc.shape:
        raise ValueError(
            f"sc and fc must be square and of one shape, got {tuple(sc.shape)} and {tuple(fc.shape)}"
        )
    if sc.shape[-1] < 2:
        raise ValueError(f"sc and fc need at least 2 regions, got N = {sc.shape[-1]}")
    sc, fc = sc.detach(), fc.detach()
    if sc.dtype != fc.dtype or not sc.is_floating_point():
        raise ValueError(
            f"sc and fc must share one floating dtype, got {sc.dtype} and {fc.dtype}; cast both "
            "(e.g. .double()) first"
        )
    if not (torch.isfinite(sc).all() and torch.isfinite(fc).all()):
        raise ValueError("sc or fc has a non-finite entry (NaN FC: a constant time series?)")
    if (sc < 0).any():
        raise ValueError(
            f"sc must be non-negative, got min {float(sc.min()):.4g}; preprocess_sc clips it"
        )
    gap = float((sc - sc.transpose(-1, -2)).abs().max())
    if gap > 1e-6 * max(float(sc.abs().max()), 1.0):
        raise ValueError(
            f"sc must be symmetric (largest |S - S^T| is {gap:.4g}); "
            "preprocess_sc(..., symmetrize=True) averages S and S^T"
        )
    if float(fc.abs().max()) > 1 + 1e-6:
        raise ValueError(
            f"fc must be a correlation matrix in [-1, 1], got max |F| = {float(fc.abs().max()):.4g}"
        )


def _check_edge_index(edges: torch.Tensor, num_nodes: int, count: int) -> None:
    if edges.shape != (2, count) or edges.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"edge_index must be [2, E] with E = {count} (one conductance per edge), of an "
            f"integer dtype, got {edges.dtype} {tuple(edges.shape)}"
        )
    if count == 0:
        raise ValueError("the SC graph has no edge (after thresholding?): nothing to route over")
    if int(edges.min()) < 0 or int(edges.max()) >= num_nodes:
        raise ValueError(
            f"edge_index must lie in [0, {num_nodes - 1}], got range "
            f"[{int(edges.min())}, {int(edges.max())}]"
        )
    loops = torch.nonzero(edges[0] == edges[1]).flatten()
    if loops.numel():
        raise ValueError(f"edge_index has a self-loop at column {int(loops[0])}: no current flows")
    low, high = torch.minimum(edges[0], edges[1]), torch.maximum(edges[0], edges[1])
    if torch.unique(low * num_nodes + high).numel() != count:
        raise ValueError("edge_index lists an edge twice (as (u, v) or (v, u)); list it once")


def check_solver_dtype(solver: Solver, dtype: torch.dtype) -> None:
    """float32 goes only through the grounded form: the double solve's ``L_g + δI`` has condition
    ``≈ λ_max / δ``, beyond float32's ``1/ε`` on dense SC (spec section 2.8)."""
    if solver == "solve" and dtype != torch.float64:
        raise ValueError(
            f"solver='solve' (the official double solve) is for float64 audits, got {dtype}: "
            "use solver='pinv' or 'auto' (the grounded form, float32-safe), or cast to float64"
        )


def _check_weights(weights: torch.Tensor, sc: torch.Tensor) -> None:
    if not torch.isfinite(weights).all():
        raise ValueError("conductance has a non-finite entry")
    on_edge = sc > 0
    if (weights[on_edge] <= 0).any():
        raise ValueError("conductance must be > 0 on every SC edge (g = exp(a) in AFR-Net)")
    off = (~on_edge) & ~torch.eye(sc.shape[-1], dtype=torch.bool, device=sc.device)
    if (weights[off] != 0).any():
        raise ValueError("conductance is non-zero where sc has no edge")
    if (weights - weights.transpose(-1, -2)).abs().max() > 1e-6 * weights.abs().max():
        raise ValueError("a dense conductance matrix must be symmetric")


def _energy_pinv(
    weights: torch.Tensor, lap_t: torch.Tensor, proj: torch.Tensor, delta: float
) -> torch.Tensor:
    inv = grounded_inverse(conductance_laplacian(weights), proj, delta)
    q = inv @ lap_t @ inv
    diag = torch.diagonal(q, dim1=-2, dim2=-1)
    resistance = diag[..., :, None] + diag[..., None, :] - q - q.transpose(-1, -2)
    return 2.0 * weights * resistance


def _energy_solve(weights: torch.Tensor, lap_t: torch.Tensor, delta: float) -> torch.Tensor:
    """The official double solve, batched: edges padded to the largest edge count."""
    b, n = weights.shape[0], weights.shape[-1]
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool, device=weights.device), 1)
    bi, u, v = torch.where((weights != 0) & upper)
    counts = torch.bincount(bi, minlength=b)
    offsets = torch.cumsum(counts, 0) - counts
    pos = torch.arange(bi.numel(), device=weights.device) - offsets[bi]
    width = max(int(counts.max()), 1)
    rhs = torch.zeros(b, n, width, dtype=weights.dtype, device=weights.device)
    rhs[bi, u, pos] = 1.0
    rhs[bi, v, pos] = -1.0
    eye = torch.eye(n, dtype=weights.dtype, device=weights.device)
    lap = conductance_laplacian(weights) + delta * eye
    lu, pivots = torch.linalg.lu_factor(lap)
    x = torch.linalg.lu_solve(lu, pivots, rhs)
    z = torch.linalg.lu_solve(lu, pivots, lap_t @ x)
    dots = (rhs * z).sum(-2)
    energy = torch.zeros_like(weights)
    values = 2.0 * weights[bi, u, v] * dots[bi, pos]
    energy = energy.index_put((bi, u, v), values)
    return energy + energy.transpose(-1, -2)


def flow_energy(
    sc: torch.Tensor,
    fc: torch.Tensor,
    conductance: torch.Tensor,
    *,
    edge_index: torch.Tensor | None = None,
    node_mask: torch.Tensor | None = None,
    delta: float = 1e-6,
    ridge: float = 1e-6,
    scale: float = 100.0,
    solver: Solver = "auto",
    allow_disconnected: bool = False,
) -> torch.Tensor:
    """Closed-form flow energy of every SC edge (module docstring), differentiable.

    Two layouts:

    * one subject, ``sc``/``fc`` ``[N, N]`` and ``conductance`` ``[E]`` on ``edge_index`` ``[2, E]``
      (default :func:`sc_edges`, the official order): returns ``[E]``;
    * a batch of dense symmetric conductance matrices ``[B, N, N]`` (or ``[N, N]``), zero off the SC
      edges: returns dense symmetric energies of the same shape, zero off the edges.

    ``solver``: ``"solve"`` (official double solve), ``"pinv"`` (grounded inverse), ``"auto"``
    (``"pinv"``: cheaper whenever ``E >= N - 1``, which connectivity forces, and float32-safe).
    ``delta`` is the official ridge of ``L_g``, ``ridge`` that of ``L_T``, ``scale`` is κ.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if conductance.dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"flow_energy needs float32 or float64 conductances, got {conductance.dtype} "
            "(Laplacian inverses are not reliable in half precision; AFRNet upcasts for you)"
        )
    check_connectome(sc, fc)
    check_solver_dtype(solver, conductance.dtype)
    check_number("delta", delta)
    check_number("ridge", ridge)
    check_number("scale", scale, strict=True)
    if conductance.dim() == 1:
        if sc.dim() != 2:
            raise ValueError("a 1-D conductance [E] belongs to one [N, N] subject")
        edges = sc_edges(sc) if edge_index is None else edge_index
        _check_edge_index(edges, sc.shape[-1], conductance.shape[0])
        if not torch.isfinite(conductance).all() or (conductance <= 0).any():
            raise ValueError("conductance must be finite and > 0 on every edge (g = exp(a))")
        dense = torch.zeros(sc.shape, dtype=conductance.dtype, device=conductance.device)
        dense = dense.index_put((edges[0], edges[1]), conductance)
        dense = dense + dense.transpose(-1, -2)
        structure = torch.zeros_like(dense).index_put(
            (edges[0], edges[1]), torch.ones_like(conductance)
        )
        structure = structure + structure.T
        energy = _dense_energy(
            dense, fc, structure, node_mask, delta, ridge, solver, allow_disconnected
        )
        return scale * energy[edges[0], edges[1]]
    if conductance.shape != sc.shape:
        raise ValueError(f"conductance must be [E] or the shape of sc {tuple(sc.shape)}")
    _check_weights(conductance, sc)
    energy = _dense_energy(conductance, fc, sc, node_mask, delta, ridge, solver, allow_disconnected)
    return scale * energy


def _dense_energy(
    weights: torch.Tensor,
    fc: torch.Tensor,
    structure: torch.Tensor,
    node_mask: torch.Tensor | None,
    delta: float,
    ridge: float,
    solver: Solver,
    allow_disconnected: bool,
) -> torch.Tensor:
    squeeze = weights.dim() == 2
    w = weights[None] if squeeze else weights
    f = (fc[None] if squeeze else fc).to(w.dtype)
    lap_t = task_laplacian(f, ridge)
    if solver == "solve":
        if not allow_disconnected:
            null_projector(structure, node_mask=node_mask)  # raises on a disconnected subject
        energy = _energy_solve(w, lap_t, delta)
    else:
        mask = None if node_mask is None else (node_mask[None] if squeeze else node_mask)
        proj = null_projector(
            structure[None] if squeeze else structure,
            node_mask=mask,
            allow_disconnected=allow_disconnected,
        ).to(w.dtype)
        energy = _energy_pinv(w, lap_t, proj, delta)
    return energy[0] if squeeze else energy


def effective_resistance(weights: torch.Tensor, *, laplacian: bool = False) -> torch.Tensor:
    """``R_ij = (e_i - e_j)ᵀ L⁺ (e_i - e_j)`` of a conductance matrix (or of a Laplacian with
    ``laplacian=True``), batched; raises on a disconnected graph (infinite resistance)."""
    if weights.dim() < 2 or weights.shape[-1] != weights.shape[-2] or weights.shape[-1] < 2:
        raise ValueError(
            f"weights must be square [.., N, N] with N >= 2, got {tuple(weights.shape)}"
        )
    if not torch.isfinite(weights).all():
        raise ValueError("weights has a non-finite entry")
    lap = weights if laplacian else conductance_laplacian(weights)
    off = -lap * (1 - torch.eye(lap.shape[-1], dtype=lap.dtype, device=lap.device))
    if (off < 0).any():
        what = (
            "off-diagonal Laplacian entries must be <= 0" if laplacian else "weights must be >= 0"
        )
        raise ValueError(f"{what} (conductances), got {float(off.min()):.4g}")
    if float((lap - lap.transpose(-1, -2)).abs().max()) > 1e-6 * float(lap.abs().max()):
        raise ValueError("the conductance matrix (or Laplacian) must be symmetric")
    inv = grounded_inverse(lap, null_projector(off).to(lap.dtype), 0.0)
    diag = torch.diagonal(inv, dim1=-2, dim2=-1)
    return diag[..., :, None] + diag[..., None, :] - inv - inv.transpose(-1, -2)


def check_mask_params(tau: float, lambda_cost: float) -> None:
    """``tau`` (mask sharpness) finite and > 0, ``lambda_cost`` (SC cost weight) finite and >= 0."""
    check_number("tau", tau, strict=True)
    check_number("lambda_cost (budget_lambda)", lambda_cost)


def _segment_minmax(x: torch.Tensor, batch: torch.Tensor | None, eps: float) -> torch.Tensor:
    """The official per-subject min-max: ``(x - min) / (max - min + eps)``, zeros if all equal."""
    if batch is None:
        low, high = x.min(), x.max()
        return (x - low) / (high - low + eps) if bool(high > low) else torch.zeros_like(x)
    segments = int(batch.max()) + 1 if batch.numel() else 0
    low = torch.full((segments,), float("inf"), dtype=x.dtype, device=x.device)
    high = torch.full((segments,), float("-inf"), dtype=x.dtype, device=x.device)
    low = low.scatter_reduce(0, batch, x, "amin")
    high = high.scatter_reduce(0, batch, x, "amax")
    lo, hi = low[batch], high[batch]
    return torch.where(hi > lo, (x - lo) / (hi - lo + eps), torch.zeros_like(x))


def routing_mask(
    energy: torch.Tensor,
    s_edge: torch.Tensor,
    *,
    batch: torch.Tensor | None = None,
    tau: float = 8.0,
    lambda_cost: float = 1.0,
    threshold: torch.Tensor | float = 0.0,
    eps: float = 1e-6,
) -> torch.Tensor:
    """``m_e = σ(τ (minmax(log(E_e + ε)) - λ_c minmax(-log(S_e + ε)) - θ))`` per subject.

    ``batch`` (as in torch-geometric) names each edge's subject for a flat multi-subject edge list;
    the min-max is taken within each subject, as the official per-subject loop does.
    """
    if energy.shape != s_edge.shape or energy.dim() != 1:
        raise ValueError(
            f"energy and s_edge must be 1-D of one length, got {energy.shape}, {s_edge.shape}"
        )
    if energy.numel() == 0:
        raise ValueError("routing_mask got zero edges: the SC graph has no edge left")
    if batch is not None and batch.shape != energy.shape:
        raise ValueError(f"batch must give one subject per edge, got shape {tuple(batch.shape)}")
    check_mask_params(tau, lambda_cost)
    check_number("eps", eps, strict=True)
    if not (torch.isfinite(energy).all() and torch.isfinite(s_edge).all()):
        raise ValueError("energy or s_edge has a non-finite entry (a NaN energy: check the SC/FC)")
    # Flow energies are >= 0; a float32 solve may leave round-off below 0, never more.
    e_d, s_d = energy.detach(), s_edge.detach()
    low, high, s_low = float(e_d.min()), float(e_d.abs().max()), float(s_d.min())
    if low < -(eps + 1e-4 * high) or s_low < 0:
        raise ValueError(
            "energy and s_edge must be >= 0 (flow energies and SC weights), got min "
            f"{low:.4g} and {s_low:.4g}"
        )
    e_hat = _segment_minmax(torch.log(energy.clamp_min(0) + eps), batch, eps)
    c_hat = _segment_minmax(-torch.log(s_edge + eps), batch, eps)
    return torch.sigmoid(tau * (e_hat - lambda_cost * c_hat - threshold))
