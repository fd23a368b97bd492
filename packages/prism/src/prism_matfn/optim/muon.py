"""PrismMuon: Muon with PRISM's fitted polar factor in place of the fixed quintic.

Matrix parameters (``ndim >= 2``; conv filters are viewed as ``(out, in·kh·kw)``) get momentum,
optionally Nesterov, then the polar factor of the update by :func:`prism_matfn.polar`, rescaled by
Muon's shape factor. Everything else (biases, norms, and any group with ``use_muon=False``, which is
where embeddings and the output head belong) is updated by AdamW inside the same optimizer. Weight
decay is decoupled for both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from prism_matfn.matfn import polar
from prism_matfn.sketch import gaussian_sketch

ADJUST_LR: tuple[str | None, ...] = ("keller", "match_rms", None)


def muon_scale(shape: torch.Size, adjust_lr: str | None) -> float:
    """Factor applied to the orthogonalised update of an ``m×n`` matrix.

    ``"keller"``: ``√max(1, m/n)`` (KellerJordan/Muon); ``"match_rms"``: ``0.2·√max(m, n)`` so the
    update's RMS matches AdamW's (Moonlight), letting both share one learning rate; ``None``: 1.
    """
    m, n = shape[-2], shape[-1]
    if adjust_lr == "keller":
        return math.sqrt(max(1.0, m / n))
    if adjust_lr == "match_rms":
        return 0.2 * math.sqrt(max(m, n))
    return 1.0


class PrismMuon(torch.optim.Optimizer):
    """Muon with PRISM orthogonalisation, and AdamW for the non-matrix parameters.

    Args:
        params: parameters or groups. A group's ``use_muon`` (default: ``p.ndim >= 2`` per parameter)
            chooses the rule; set it ``False`` for embeddings and the output head.
        lr, momentum, nesterov, weight_decay: the Muon rule (``lr`` 0.02, momentum 0.95).
        ns_steps, degree, sketch_dim, sketch_seed, fit, alpha_solver: PRISM settings (5 steps of
            degree 5, an 8-column sketch per parameter, fixed from ``sketch_seed`` and kept in the state).
        adjust_lr: shape scaling, see :func:`muon_scale`.
        adam_lr, adam_betas, adam_eps: the AdamW rule for the other parameters.
        compute_dtype: dtype of the polar iteration (None: float32, or bfloat16 on CUDA).
        spectral_rescale: the author's later power-iteration rescale before PRISM (on in the
            author's latest code; off here by default, see :func:`prism_matfn.polar`).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        weight_decay: float = 0.0,
        ns_steps: int = 5,
        degree: int = 5,
        sketch_dim: int = 8,
        sketch_seed: int = 0,
        fit: str = "sketch",
        alpha_solver: str = "exact",
        adjust_lr: str | None = "keller",
        adam_lr: float = 6e-4,
        adam_betas: tuple[float, float] = (0.9, 0.95),
        adam_eps: float = 1e-8,
        compute_dtype: torch.dtype | None = None,
        spectral_rescale: bool = False,
    ) -> None:
        if lr < 0 or adam_lr < 0:
            raise ValueError(f"learning rates must be >= 0, got lr={lr}, adam_lr={adam_lr}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        if adjust_lr not in ADJUST_LR:
            raise ValueError(f"adjust_lr must be one of {ADJUST_LR}, got {adjust_lr!r}")
        if not all(0 <= b < 1 for b in adam_betas):
            raise ValueError(f"adam_betas must be in [0, 1), got {adam_betas}")
        defaults = dict(
            lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, ns_steps=ns_steps,
            degree=degree, sketch_dim=sketch_dim, sketch_seed=sketch_seed, fit=fit,
            alpha_solver=alpha_solver, adjust_lr=adjust_lr, adam_lr=adam_lr, adam_betas=adam_betas,
            adam_eps=adam_eps, compute_dtype=compute_dtype, spectral_rescale=spectral_rescale,
            use_muon=None,
        )  # fmt: skip
        super().__init__(params, defaults)

    @property
    def orthogonalize_calls(self) -> int:
        """How many polar factors this optimizer computed (a check that Muon really ran)."""
        return sum(int(s.get("muon_steps", 0)) for s in self.state.values())

    def _uses_muon(self, group: dict[str, Any], p: torch.Tensor) -> bool:
        return p.ndim >= 2 if group["use_muon"] is None else bool(group["use_muon"])

    @torch.no_grad()
    def orthogonalize(
        self, update: torch.Tensor, group: dict[str, Any], sketch: torch.Tensor
    ) -> torch.Tensor:
        """The scaled polar factor of a 2-D update (override to swap the orthogonaliser)."""
        dtype = group["compute_dtype"] or (torch.bfloat16 if update.is_cuda else torch.float32)
        O = polar(
            update, steps=group["ns_steps"], degree=group["degree"], fit=group["fit"],
            sketch=sketch if group["fit"] == "sketch" else None, alpha_solver=group["alpha_solver"],
            compute_dtype=dtype, check_finite=False, spectral_rescale=group["spectral_rescale"],
        )  # fmt: skip
        # Frobenius norm √min(m, n) as the author does: an exact polar factor has it already, a
        # truncated one is brought to it so the step size does not depend on how far PRISM got.
        O = O.float()
        O = O * (math.sqrt(min(O.shape)) / O.norm().clamp_min(torch.finfo(O.dtype).tiny))
        return O * muon_scale(update.shape, group["adjust_lr"])

    def _sketch(
        self,
        state: dict[str, Any],
        p2d_shape: torch.Size,
        group: dict[str, Any],
        index: int,
        device: torch.device,
    ) -> torch.Tensor:
        if "sketch" not in state:
            n = min(p2d_shape)
            state["sketch"] = gaussian_sketch(
                n, min(group["sketch_dim"], n), seed=group["sketch_seed"] + index, device=device
            ).clone()
        return state["sketch"]

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        items: list[tuple[torch.Tensor, dict[str, Any], int]] = []
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                index += 1
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("PrismMuon does not support sparse gradients")
                if self._uses_muon(group, p):
                    if p.ndim < 2:
                        raise ValueError(
                            f"use_muon=True needs parameters with ndim >= 2, got shape {tuple(p.shape)}"
                        )
                    items.append((p, group, index))
                else:
                    self._adamw_update(p, group, self.state[p])
        self._muon_step(items)
        return loss

    def _muon_step(self, items: list[tuple[torch.Tensor, dict[str, Any], int]]) -> None:
        """Momentum, polar factor and update for every Muon parameter (``index`` seeds its sketch)."""
        for p, group, index in items:
            update = self._momentum_update(p, group)
            O = self._orthogonalize_counted(p, update, group, index)
            self._apply(p, group, O)

    def _momentum_update(self, p: torch.Tensor, group: dict[str, Any]) -> torch.Tensor:
        """Update the momentum buffer; return the (Nesterov-blended) update as a 2-D matrix."""
        state, grad = self.state[p], p.grad
        assert grad is not None  # step() only passes parameters with a gradient
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(grad)
            state["muon_steps"] = 0
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - group["momentum"])
        update = grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
        return update.reshape(len(update), -1)

    def _orthogonalize_counted(
        self, p: torch.Tensor, update: torch.Tensor, group: dict[str, Any], index: int
    ) -> torch.Tensor:
        state = self.state[p]
        O = self.orthogonalize(
            update, group, self._sketch(state, update.shape, group, index, p.device)
        )
        state["muon_steps"] = state.get("muon_steps", 0) + 1
        return O

    @staticmethod
    def _apply(p: torch.Tensor, group: dict[str, Any], O: torch.Tensor) -> None:
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(O.reshape(p.shape).to(p.dtype), alpha=-group["lr"])

    def _adamw_update(self, p: torch.Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        grad = p.grad
        if "exp_avg" not in state:
            state["step"] = torch.zeros((), dtype=torch.float64)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        t = float(state["step"])
        beta1, beta2 = group["adam_betas"]
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (state["exp_avg_sq"] / (1 - beta2**t)).sqrt_().add_(group["adam_eps"])
        lr = group["adam_lr"]
        p.mul_(1 - lr * group["weight_decay"])
        p.addcdiv_(state["exp_avg"], denom, value=-lr / (1 - beta1**t))
