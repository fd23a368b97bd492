"""PrismMuon: Muon with PRISM's fitted polar factor in place of the fixed quintic.

Parameter groups follow Keller's ``MuonWithAuxAdam``: a group with ``use_muon=True`` gets momentum,
optionally Nesterov, the polar factor of the update (N-D weights such as conv filters are flattened to
``(out, in·kh·kw)``), the ``update_scale`` and Muon's shape factor; a group with ``use_muon=False`` gets
AdamW with the group's own ``lr``, ``betas``, ``eps`` and ``weight_decay``. A group without ``use_muon``
is split in two on construction: its matrices (``ndim >= 2``) become a Muon group, its vectors an AdamW
group at ``adam_lr``. Every hyper-parameter is read from the group at each step, so an lr scheduler
reaches both rules. Weight decay is decoupled for both.

Same-shape matrices of a group are orthogonalised in one batched call (as modded-nanogpt does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from prism_matfn.matfn import PrismOptions, polar_with
from prism_matfn.optim.orthogonalize import (
    ADJUST_LR,
    TORCH_ADJUST_LR_FN,
    UPDATE_SCALES,
    fixed_newton_schulz,
    muon_scale,
    scale_update,
)
from prism_matfn.sketch import gaussian_sketch

__all__ = ["ADJUST_LR", "UPDATE_SCALES", "PrismMuon", "muon_scale"]

Item = tuple[torch.Tensor, dict[str, Any], int]
"""A Muon parameter, its group, and its global index (which seeds its sketch)."""


def _check_coefficients(ns_coefficients: Any) -> tuple[float, float, float] | None:
    if ns_coefficients is None:
        return None
    coeffs = tuple(float(c) for c in ns_coefficients)
    if len(coeffs) != 3:
        raise ValueError(
            f"ns_coefficients must be three numbers (a, b, c), got {ns_coefficients!r}"
        )
    return coeffs[0], coeffs[1], coeffs[2]


class PrismMuon(torch.optim.Optimizer):
    """Muon with PRISM orthogonalisation, and AdamW for the non-matrix parameters.

    Args:
        params: parameters or groups (see the module docstring for ``use_muon``).
        lr, momentum, nesterov, weight_decay: the Muon rule (Keller's ``lr`` 0.02, momentum 0.95).
            Everything after ``lr`` is keyword-only: ``torch.optim.Muon`` and Keller's Muon take
            ``(params, lr, weight_decay, momentum, …)`` positionally, ours would silently differ.
        ns_steps, degree, sketch_dim, sketch_seed, fit, alpha_solver: PRISM settings (5 steps of
            degree 5, an 8-column sketch per parameter, fixed from ``sketch_seed`` and kept in the state).
        adjust_lr: shape factor, see :func:`muon_scale` (``adjust_lr_fn``: torch's names for it).
        update_scale: ``"muon"`` (the raw iterate, Keller's), ``"frobenius"`` (``‖O‖_F = √min(m,n)``,
            the marin author's) or ``"spectral"`` (``‖O‖_2 = 1``); see
            :func:`~prism_matfn.optim.orthogonalize.scale_update`.
        adam_lr, adam_betas, adam_eps: defaults of the AdamW groups (Keller: 3e-4, (0.9, 0.95), 1e-10).
        compute_dtype: dtype of the orthogonalisation (None: float32 on CPU, bfloat16 on CUDA).
        spectral_rescale: the author's later power-iteration rescale before PRISM (off).
        ns_coefficients, eps: ``torch.optim.Muon``'s: with ``ns_coefficients=(a, b, c)`` the fixed
            Newton–Schulz quintic replaces PRISM (``eps`` as torch: divide by ``max(‖G‖_F, eps)``;
            ``eps=None``, the default, normalises without any eps, so no input scale collapses).
        fixed_alpha_steps: the first this many PRISM iterations use the fixed α (the upper bound,
            29/20 for degree 5) instead of a fit, as the paper's App. E.2 does (0: fit every step).
        log_alphas: keep the α of every PRISM call in :attr:`alpha_log` (a host sync per call).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        *,
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
        adam_lr: float = 3e-4,
        adam_betas: tuple[float, float] = (0.9, 0.95),
        adam_eps: float = 1e-10,
        compute_dtype: torch.dtype | None = None,
        spectral_rescale: bool = False,
        update_scale: str = "muon",
        fixed_alpha_steps: int = 0,
        ns_coefficients: tuple[float, float, float] | None = None,
        eps: float | None = None,
        adjust_lr_fn: str | None = None,
        log_alphas: bool = False,
    ) -> None:
        if adjust_lr_fn is not None:
            if adjust_lr_fn not in TORCH_ADJUST_LR_FN:
                raise ValueError(
                    f"adjust_lr_fn must be one of {tuple(TORCH_ADJUST_LR_FN)}, got {adjust_lr_fn!r}"
                )
            adjust_lr = TORCH_ADJUST_LR_FN[adjust_lr_fn]
        if adam_lr < 0:
            raise ValueError(f"adam_lr must be >= 0, got {adam_lr}")
        self._adam_defaults = {"lr": adam_lr, "betas": adam_betas, "eps": adam_eps}
        defaults = dict(
            lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, ns_steps=ns_steps,
            degree=degree, sketch_dim=sketch_dim, sketch_seed=sketch_seed, fit=fit,
            alpha_solver=alpha_solver, adjust_lr=adjust_lr, compute_dtype=compute_dtype,
            spectral_rescale=spectral_rescale, update_scale=update_scale,
            fixed_alpha_steps=fixed_alpha_steps,
            ns_coefficients=_check_coefficients(ns_coefficients), eps=eps,
        )  # fmt: skip
        self.alpha_log: list[torch.Tensor] | None = [] if log_alphas else None
        self._options: dict[int, tuple[tuple[Any, ...], PrismOptions]] = {}
        super().__init__(params, defaults)

    # -- groups ---------------------------------------------------------------------------------

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group; one without ``use_muon`` is split into its matrices and its vectors."""
        if "use_muon" not in param_group or param_group["use_muon"] is None:
            params = param_group["params"]
            params = [params] if isinstance(params, torch.Tensor) else list(params)
            rest = {k: v for k, v in param_group.items() if k not in ("params", "use_muon")}
            matrices = [p for p in params if p.ndim >= 2]
            vectors = [p for p in params if p.ndim < 2]
            if matrices or not vectors:
                self.add_param_group({**rest, "params": matrices, "use_muon": True})
            if vectors:
                adam = {k: v for k, v in rest.items() if k in ("weight_decay", "betas")}
                self.add_param_group({**adam, "params": vectors, "use_muon": False})
            return
        group = dict(param_group)
        if group["use_muon"]:
            super().add_param_group(group)
            self._validate_muon_group(self.param_groups[-1])
        else:
            for key, value in self._adam_defaults.items():
                group.setdefault(key, group.pop(f"adam_{key}", value))
            super().add_param_group(group)
            self._validate_adam_group(self.param_groups[-1])

    @staticmethod
    def _validate_adam_group(group: dict[str, Any]) -> None:
        if not group["lr"] >= 0:
            raise ValueError(f"AdamW group lr must be >= 0, got {group['lr']!r}")
        if not all(0 <= b < 1 for b in group["betas"]):
            raise ValueError(f"AdamW group betas must be in [0, 1), got {group['betas']}")
        if not group["eps"] >= 0:
            raise ValueError(f"AdamW group eps must be >= 0, got {group['eps']!r}")
        if not group["weight_decay"] >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {group['weight_decay']!r}")

    def _validate_muon_group(self, group: dict[str, Any]) -> None:
        if not group["lr"] >= 0:
            raise ValueError(f"lr must be >= 0, got {group['lr']!r}")
        if not isinstance(group["nesterov"], bool):
            raise TypeError(f"nesterov must be a bool, got {group['nesterov']!r}")
        fas = group.setdefault("fixed_alpha_steps", 0)
        if isinstance(fas, bool) or not isinstance(fas, int) or fas < 0:
            raise ValueError(f"fixed_alpha_steps must be an int >= 0, got {fas!r}")
        if not 0 <= group["momentum"] < 1:
            raise ValueError(f"momentum must be in [0, 1), got {group['momentum']}")
        if not group["weight_decay"] >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {group['weight_decay']!r}")
        if group["adjust_lr"] not in ADJUST_LR:
            raise ValueError(f"adjust_lr must be one of {ADJUST_LR}, got {group['adjust_lr']!r}")
        if group["update_scale"] not in UPDATE_SCALES:
            raise ValueError(
                f"update_scale must be one of {UPDATE_SCALES}, got {group['update_scale']!r}"
            )
        if group["eps"] is not None and not group["eps"] >= 0:
            raise ValueError(f"eps must be >= 0 or None, got {group['eps']!r}")
        group["ns_coefficients"] = _check_coefficients(group["ns_coefficients"])
        for p in group["params"]:
            if p.ndim < 2:
                raise ValueError(
                    f"use_muon=True needs parameters with ndim >= 2, got shape {tuple(p.shape)}"
                )
        steps = group["ns_steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"ns_steps must be an int >= 1, got {steps!r}")
        dtype = group["compute_dtype"]
        if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"compute_dtype must be a floating torch.dtype or None, got {dtype!r}")
        self._prism_options(group)  # validates degree, ns_steps, sketch_dim, fit, alpha_solver

    def _prism_options(
        self, group: dict[str, Any], dtype: torch.dtype = torch.float32
    ) -> PrismOptions:
        """The group's PRISM options, validated once and rebuilt only when the group changes."""
        key = (
            group["ns_steps"], group["degree"], group["sketch_dim"], group["fit"],
            group["alpha_solver"], group["spectral_rescale"], group["sketch_seed"], dtype,
            group.get("fixed_alpha_steps", 0),
        )  # fmt: skip
        cached = self._options.get(id(group))
        if cached is not None and cached[0] == key:
            return cached[1]
        opts = PrismOptions(
            steps=key[0], degree=key[1], sketch_dim=key[2], fit=key[3], alpha_solver=key[4],
            spectral_rescale=key[5], sketch_seed=key[6], compute_dtype=dtype, check_finite=False,
            return_info=self.alpha_log is not None, fixed_alpha_steps=key[8],
        )  # fmt: skip
        self._options[id(group)] = (key, opts)
        return opts

    @property
    def orthogonalize_calls(self) -> int:
        """How many polar factors this optimizer computed (a check that Muon really ran)."""
        return sum(int(s.get("muon_steps", 0)) for s in self.state.values())

    # -- the Muon rule --------------------------------------------------------------------------

    @torch.no_grad()
    def orthogonalize(
        self, update: torch.Tensor, group: dict[str, Any], sketch: torch.Tensor
    ) -> torch.Tensor:
        """The scaled orthogonalised update of a ``(B, m, n)`` batch of matrices (override to swap
        the orthogonaliser); ``sketch`` is ``(B, min(m, n), p)``. Returns float32."""
        dtype = group["compute_dtype"] or (torch.bfloat16 if update.is_cuda else torch.float32)
        if group["ns_coefficients"] is not None:
            O = fixed_newton_schulz(
                update, group["ns_coefficients"], group["ns_steps"], group["eps"], dtype
            )
        else:
            opts = self._prism_options(group, dtype)
            out = polar_with(update, opts, sketch if opts.fit == "sketch" else None)
            if self.alpha_log is not None:
                out, info = out
                self.alpha_log.append(info.alphas)
            O = out.float()
        O = scale_update(O, group["update_scale"])
        return O * muon_scale(update.shape, group["adjust_lr"])

    def _sketch(self, state: dict[str, Any], shape2d: torch.Size, group: dict[str, Any], index: int,
                device: torch.device) -> torch.Tensor:  # fmt: skip
        sketch = state.get("sketch")
        # Optimizer.load_state_dict casts floating state to the parameter's dtype, so a bf16/fp16
        # weight resumes with a rounded sketch (and other α): the sketch is a function of its seed
        # and index, so it is drawn again in float32 instead of reusing the rounded copy.
        if sketch is None or sketch.dtype != torch.float32:
            n = min(shape2d)
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
        items: list[Item] = []
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                index += 1
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("PrismMuon does not support sparse gradients")
                if group["use_muon"]:
                    items.append((p, group, index))
                else:
                    self._adamw_update(p, group, self.state[p])
        self._muon_step(items)
        return loss

    def _muon_step(self, items: list[Item]) -> None:
        """Momentum, orthogonalisation (batched by shape) and update for every Muon parameter."""
        updates = [self._momentum_update(p, group) for p, group, _ in items]
        for (p, group, _), O in zip(items, self._orthogonalize_many(items, updates), strict=True):
            self._apply(p, group, O)

    def _orthogonalize_many(
        self, items: list[Item], updates: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        """Orthogonalised updates of ``items``, one batched call per (group, shape, dtype, device)."""
        buckets: dict[tuple[Any, ...], list[int]] = {}
        for k, ((_, group, _), u) in enumerate(zip(items, updates, strict=True)):
            buckets.setdefault((id(group), u.shape, u.dtype, u.device), []).append(k)
        out: list[torch.Tensor | None] = [None] * len(items)
        for ks in buckets.values():
            group = items[ks[0]][1]
            stacked = torch.stack([updates[k] for k in ks])
            sketches = torch.stack(
                [self._sketch(self.state[items[k][0]], updates[k].shape, group, items[k][2],
                              updates[k].device) for k in ks]
            )  # fmt: skip
            O = self.orthogonalize(stacked, group, sketches)
            for j, k in enumerate(ks):
                out[k] = O[j]
                state = self.state[items[k][0]]
                state["muon_steps"] = state.get("muon_steps", 0) + 1
        return [o for o in out if o is not None]

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

    @staticmethod
    def _apply(p: torch.Tensor, group: dict[str, Any], O: torch.Tensor) -> None:
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(O.reshape(p.shape).to(p.dtype), alpha=-group["lr"])

    # -- the AdamW rule (Keller's op order) -----------------------------------------------------

    @staticmethod
    def _adamw_update(p: torch.Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        grad = p.grad
        assert grad is not None
        if "exp_avg" not in state:
            state["step"] = torch.zeros((), dtype=torch.float64)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += 1
        t = float(state["step"])
        beta1, beta2 = group["betas"]
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].lerp_(grad.square(), 1 - beta2)
        m_hat = state["exp_avg"] / (1 - beta1**t)
        v_hat = state["exp_avg_sq"] / (1 - beta2**t)
        p.mul_(1 - group["lr"] * group["weight_decay"])
        p.add_(m_hat / (v_hat.sqrt() + group["eps"]), alpha=-group["lr"])
