"""PrismShampoo: Shampoo whose Kronecker-factor inverse roots come from PRISM instead of eigh.

For a matrix parameter (other shapes are viewed as ``(dim0, rest)``) with gradient ``G``, Shampoo keeps
``L ← β₂L + (1−β₂) G Gᵀ`` and ``R ← β₂R + (1−β₂) GᵀG`` and steps along ``L^{-1/r} M R^{-1/r}`` with ``M``
the first moment. The roots are recomputed every ``precondition_frequency`` steps, by
:func:`prism_matfn.inv_root` (``matrix_fn="prism"``), classic coupled Newton–Schulz (``"newton"``, α
fixed at 3/8) or ``torch.linalg.eigh`` (``"eigh"``). A side longer than ``max_preconditioner_dim`` is left
unpreconditioned. With ``grafting="adam"`` the Shampoo direction takes the norm of Adam's (per
parameter), which also sets the step before the first roots exist; 1-D parameters use Adam.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from prism_matfn.alpha import CLASSIC_ALPHA
from prism_matfn.baselines import eigh_inv_root
from prism_matfn.matfn import inv_root

MATRIX_FNS: tuple[str, ...] = ("prism", "eigh", "newton")
GRAFTINGS: tuple[str | None, ...] = ("adam", None)


def factor_inv_root(
    A: torch.Tensor, root: int, epsilon: float, matrix_fn: str, steps: int
) -> torch.Tensor:
    """``(A + εI)^{-1/root}`` of a symmetric PSD Kronecker factor by the chosen backend."""
    n = A.shape[-1]
    # The ridge is relative to the factor's scale as well, so a tiny ε cannot leave an exactly
    # singular factor (rank-1 after one step) with an unbounded root.
    # A 0-d tensor, not a float: no device→host synchronisation per factor on a GPU.
    ridge = epsilon + 1e-6 * A.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(0)
    shifted = A + ridge[..., None, None] * torch.eye(n, dtype=A.dtype, device=A.device)
    if matrix_fn == "eigh":
        return eigh_inv_root(shifted.double(), root).to(A.dtype)
    fixed = {"fit": "fixed", "alpha": CLASSIC_ALPHA[5]} if matrix_fn == "newton" else {}
    # No host-side checks inside a training step (as PrismMuon): the ridge keeps the factor definite,
    # and on a definite matrix the coupled iteration is the polar one on its eigenvalues.
    return inv_root(
        (shifted + shifted.mT) * 0.5,
        root,
        steps=steps,
        check_psd=False,
        check_finite=False,
        **fixed,
    )


class PrismShampoo(torch.optim.Optimizer):
    """Shampoo with PRISM inverse roots, Adam grafting and decoupled weight decay.

    Args:
        lr: step size (1e-3); betas: first moment and factor decay (0.9, 0.999).
        epsilon: ridge added to each factor before its root (1e-12).
        root: 2 (inverse square roots, the paper's setting) or 4 (classic Shampoo's fourth roots).
        precondition_frequency: steps between root recomputations (10).
        max_preconditioner_dim: a side longer than this is not preconditioned (2048).
        matrix_fn: ``"prism"``, ``"newton"`` or ``"eigh"``; prism_steps: PRISM iterations per root (5).
        grafting: ``"adam"`` or None; adam_eps: Adam's ε for grafting and 1-D parameters.
        weight_decay: decoupled.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        epsilon: float = 1e-12,
        root: int = 2,
        precondition_frequency: int = 10,
        max_preconditioner_dim: int = 2048,
        matrix_fn: str = "prism",
        prism_steps: int = 5,
        grafting: str | None = "adam",
        adam_eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        if lr < 0:
            raise ValueError(f"lr must be >= 0, got {lr}")
        if not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        if root not in (2, 4):
            raise ValueError(f"root must be 2 or 4, got {root!r}")
        if matrix_fn not in MATRIX_FNS:
            raise ValueError(f"matrix_fn must be one of {MATRIX_FNS}, got {matrix_fn!r}")
        if grafting not in GRAFTINGS:
            raise ValueError(f"grafting must be one of {GRAFTINGS}, got {grafting!r}")
        if precondition_frequency < 1 or max_preconditioner_dim < 1:
            raise ValueError(
                "precondition_frequency and max_preconditioner_dim must be >= 1, got "
                f"{precondition_frequency} and {max_preconditioner_dim}"
            )
        if epsilon < 0 or weight_decay < 0:
            raise ValueError(
                f"epsilon and weight_decay must be >= 0, got {epsilon}, {weight_decay}"
            )
        defaults = dict(
            lr=lr, betas=betas, epsilon=epsilon, root=root,
            precondition_frequency=precondition_frequency,
            max_preconditioner_dim=max_preconditioner_dim, matrix_fn=matrix_fn,
            prism_steps=prism_steps, grafting=grafting, adam_eps=adam_eps, weight_decay=weight_decay,
        )  # fmt: skip
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("PrismShampoo does not support sparse gradients")
                self._update(p, group, self.state[p])
        return loss

    def _update(self, p: torch.Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        assert p.grad is not None  # step() only passes parameters with a gradient
        grad = p.grad.float()
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float64)
            state["exp_avg"] = torch.zeros_like(grad)
            state["exp_avg_sq"] = torch.zeros_like(grad)
            if p.ndim >= 2:
                rows, cols = p.shape[0], p[0].numel()
                for side, size in (("left", rows), ("right", cols)):
                    if size <= group["max_preconditioner_dim"]:
                        state[f"{side}_factor"] = torch.zeros(size, size, device=p.device)
                        state[f"{side}_inv_root"] = torch.eye(size, device=p.device)
        state["step"] += 1
        t = float(state["step"])
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        m_hat = state["exp_avg"] / (1 - beta1**t)
        adam_dir = m_hat / (state["exp_avg_sq"] / (1 - beta2**t)).sqrt().add_(group["adam_eps"])
        direction = adam_dir
        if p.ndim >= 2:
            direction = self._shampoo_direction(grad, m_hat, adam_dir, group, state, int(t))
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(direction.to(p.dtype), alpha=-group["lr"])

    def _shampoo_direction(
        self,
        grad: torch.Tensor,
        m_hat: torch.Tensor,
        adam_dir: torch.Tensor,
        group: dict[str, Any],
        state: dict[str, Any],
        t: int,
    ) -> torch.Tensor:
        beta2 = group["betas"][1]
        G = grad.reshape(grad.shape[0], -1)
        if "left_factor" in state:
            state["left_factor"].mul_(beta2).add_(G @ G.T, alpha=1 - beta2)
        if "right_factor" in state:
            state["right_factor"].mul_(beta2).add_(G.T @ G, alpha=1 - beta2)
        if (t - 1) % group["precondition_frequency"] == 0:
            for side in ("left", "right"):
                if f"{side}_factor" in state:
                    state[f"{side}_inv_root"] = factor_inv_root(
                        state[f"{side}_factor"], group["root"], group["epsilon"],
                        group["matrix_fn"], group["prism_steps"],
                    )  # fmt: skip
        M = m_hat.reshape(G.shape)
        if "left_inv_root" in state:
            M = state["left_inv_root"] @ M
        if "right_inv_root" in state:
            M = M @ state["right_inv_root"]
        direction = M.reshape(grad.shape)
        if group["grafting"] == "adam":
            norm = direction.norm()
            direction = direction * (adam_dir.norm() / norm.clamp_min(torch.finfo(norm.dtype).tiny))
        return direction
