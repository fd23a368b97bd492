"""``torch.optim.Optimizer`` versions of AdaGrad, AdaGrad-Norm and the heavy-tail baselines.

- :class:`AdaGrad`: torch's Adagrad, same arguments, defaults and state (``"step"``, ``"sum"``), so a
  ``state_dict`` moves between the two. The paper's λ is ``eps``, added outside the square root, and
  the accumulator starts at ``initial_accumulator_value`` (0, as the paper's v₀ = 0). One change:
  with ``eps=0`` a coordinate whose gradients were all zero takes a zero step instead of torch's NaN.
- :class:`AdaGradNorm`: one scalar accumulator ``v += ‖g‖²`` over the whole model (``scope="global"``,
  the theory's), per parameter group, or per parameter tensor. Sharded parameters (DTensor, or a
  ``process_group`` whose ranks hold disjoint shards) all-reduce the squared norms: one collective
  per step.
- :class:`ClippedSGD` (global-norm clipping) and :class:`NSGDM` (normalized SGD with momentum), with
  the step rules of :func:`~adagrad_heavytail.schedules.theory_params`; ``SGD`` is torch's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import torch
import torch.distributed as dist
from torch.optim import SGD, Optimizer

SCOPES: tuple[str, ...] = ("global", "group", "param")


def _check_lr(lr: float) -> None:
    if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise ValueError(f"Invalid learning rate: {lr} (must be a finite number > 0)")


def _check_nonnegative(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
        raise ValueError(f"Invalid {name} value: {value} (must be a finite number >= 0)")


def _check_unit(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 <= value < 1):
        raise ValueError(f"Invalid {name} value: {value} (must lie in [0, 1))")


def _dense_grad(p: torch.Tensor, group: dict[str, Any], name: str) -> torch.Tensor:
    """``p.grad`` with ``maximize`` and (coupled) ``weight_decay`` applied, for the norm methods."""
    grad = p.grad
    assert grad is not None
    if grad.is_sparse:
        raise RuntimeError(f"{name} does not support sparse gradients")
    if torch.is_complex(p):
        raise TypeError(f"{name} does not support complex parameters")
    if group.get("maximize", False):
        grad = -grad
    if group.get("weight_decay", 0.0):
        grad = grad.add(p, alpha=group["weight_decay"])
    return grad


class AdaGrad(Optimizer):
    """AdaGrad: ``v += g⊙g``; ``x -= clr · g ⊘ (sqrt(v) + eps)``, ``clr = lr/(1 + (t-1)·lr_decay)``.

    Arguments, defaults and state as ``torch.optim.Adagrad`` (``fused``/``differentiable`` are not
    offered; sparse gradients are, without weight decay, as in torch). ``eps`` is the paper's λ.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("lr_decay", lr_decay)
        _check_nonnegative("weight_decay", weight_decay)
        _check_nonnegative("initial_accumulator_value", initial_accumulator_value)
        _check_nonnegative("epsilon", eps)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[p]
        if not state:
            if torch.is_complex(p):
                raise TypeError("AdaGrad does not support complex parameters")
            state["step"] = torch.tensor(0.0)
            state["sum"] = torch.full_like(
                p, group["initial_accumulator_value"], memory_format=torch.preserve_format
            )
        return state

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._state(p, group) for p in params]
            grads = [p.grad for p in params]
            sparse = any(g.is_sparse for g in grads)
            foreach = group["foreach"]
            if foreach is None:  # torch's default: foreach on accelerators
                foreach = not sparse and all(p.device.type != "cpu" for p in params)
            if foreach and not sparse:
                self._foreach_step(group, params, grads, states)
            else:
                for p, g, s in zip(params, grads, states, strict=True):
                    self._single_step(group, p, g, s)
        return loss

    @staticmethod
    def _clr(group: dict[str, Any], step: torch.Tensor) -> float:
        return group["lr"] / (1 + (float(step) - 1) * group["lr_decay"])

    def _single_step(
        self, group: dict[str, Any], p: torch.Tensor, grad: torch.Tensor, state: dict[str, Any]
    ) -> None:
        state["step"] += 1
        clr = self._clr(group, state["step"])
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            if grad.is_sparse:
                raise RuntimeError("weight_decay option is not compatible with sparse gradients")
            grad = grad.add(p, alpha=group["weight_decay"])
        total = state["sum"]
        if grad.is_sparse:
            self._sparse_step(group, p, grad.coalesce(), total, clr)
            return
        total.addcmul_(grad, grad, value=1)
        std = total.sqrt().add_(group["eps"])
        if group["eps"] == 0:
            std.masked_fill_(std == 0, 1.0)  # there grad == 0: a zero step, not 0/0
        p.addcdiv_(grad, std, value=-clr)

    @staticmethod
    def _sparse_step(
        group: dict[str, Any], p: torch.Tensor, grad: torch.Tensor, total: torch.Tensor, clr: float
    ) -> None:
        # Only the rows present in the gradient are read and written (torch's sparse path).
        indices, values = grad._indices(), grad._values()
        size = grad.size()
        total.add_(torch.sparse_coo_tensor(indices, values.pow(2), size))
        std = total.sparse_mask(grad)._values().sqrt_().add_(group["eps"])
        if group["eps"] == 0:
            std.masked_fill_(std == 0, 1.0)
        p.add_(torch.sparse_coo_tensor(indices, values / std, size), alpha=-clr)

    def _foreach_step(
        self,
        group: dict[str, Any],
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        states: list[dict[str, Any]],
    ) -> None:
        steps = [s["step"] for s in states]
        sums = [s["sum"] for s in states]
        torch._foreach_add_(steps, 1)
        if group["maximize"]:
            grads = list(torch._foreach_neg(grads))
        if group["weight_decay"] != 0:
            grads = list(torch._foreach_add(grads, params, alpha=group["weight_decay"]))
        minus_clr = [-self._clr(group, s) for s in steps]
        torch._foreach_addcmul_(sums, grads, grads, value=1)
        std = torch._foreach_sqrt(sums)
        torch._foreach_add_(std, group["eps"])
        if group["eps"] == 0:
            for s in std:
                s.masked_fill_(s == 0, 1.0)
        numerator = torch._foreach_mul(grads, minus_clr)
        torch._foreach_addcdiv_(params, numerator, std)


def _local_square(grad: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """‖grad‖² of this rank's part, and whether the tensor is a sharded DTensor.

    A DTensor's replicated mesh dimensions hold copies: its local sum is divided by their size so
    that the all-reduce over the mesh counts every element once.
    """
    to_local = getattr(grad, "to_local", None)
    if to_local is None:
        return grad.pow(2).sum(), False
    local = to_local()
    dtensor: Any = grad  # a DTensor: placements and device_mesh are not on torch.Tensor's stubs
    copies = 1
    for dim, placement in enumerate(dtensor.placements):
        if placement.is_replicate():
            copies *= dtensor.device_mesh.size(dim)
    return local.pow(2).sum() / copies, True


class AdaGradNorm(Optimizer):
    """AdaGrad-Norm: ``v += ‖g‖₂²``; ``x -= lr · g / (eps + sqrt(v))`` with one scalar v per scope.

    ``scope``: ``"global"`` (one v over every parameter, the paper's algorithm), ``"group"`` (one per
    parameter group) or ``"param"`` (one per tensor). With ``scope="param"`` each parameter's state
    holds its ``"sum"`` (a 0-dim float64 tensor); with ``"global"``/``"group"`` the scope's v lives
    in :attr:`scope_sums` (key 0 for ``"global"``, the group's index for ``"group"``), so a
    parameter without a gradient on some steps neither loses nor rolls back v. ``state_dict``
    saves and restores both. ``lr_decay``, ``weight_decay`` and ``maximize`` as in :class:`AdaGrad`.

    Sharded parameters: gradients that are DTensors are reduced over their device mesh; with
    ``process_group`` set, every rank's gradients are taken as disjoint shards and their squared
    norms summed over the group. Either way one all-reduce per step, and every rank steps with the
    norm of the full gradient.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        eps: float = 1e-10,
        initial_accumulator_value: float = 0.0,
        scope: str = "global",
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        *,
        maximize: bool = False,
        process_group: Any = None,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("epsilon", eps)
        _check_nonnegative("initial_accumulator_value", initial_accumulator_value)
        _check_nonnegative("lr_decay", lr_decay)
        _check_nonnegative("weight_decay", weight_decay)
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        self.scope = scope
        self.process_group = process_group
        defaults = {
            "lr": lr,
            "eps": eps,
            "initial_accumulator_value": initial_accumulator_value,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)
        self.scope_sums: dict[int, torch.Tensor] = {}  # scope's v (float64 0-dim); not "param"

    def _state(self, p: torch.Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            if self.scope == "param":
                state["sum"] = self._initial(group, p.device)
        return state

    @staticmethod
    def _initial(group: dict[str, Any], device: torch.device) -> torch.Tensor:
        return torch.tensor(
            float(group["initial_accumulator_value"]), dtype=torch.float64, device=device
        )

    def _squared_norms(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """‖g_i‖² of every gradient (float64, on the first gradient's device), all-reduced if sharded."""
        device = grads[0].device
        pieces, sharded, mesh = [], False, None
        for g in grads:
            square, is_dtensor = _local_square(g)
            if is_dtensor:
                sharded, mesh = True, cast(Any, g).device_mesh
            pieces.append(square.to(device=device, dtype=torch.float64))
        squares = torch.stack(pieces)
        if self.process_group is not None:
            dist.all_reduce(squares, group=self.process_group)
        elif sharded:
            assert mesh is not None
            group = mesh.get_group() if mesh.ndim == 1 else None
            dist.all_reduce(squares, group=group)
        return squares

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        entries = [
            (gi, p, group)
            for gi, group in enumerate(self.param_groups)
            for p in group["params"]
            if p.grad is not None
        ]
        if not entries:
            return loss
        grads = [_dense_grad(p, group, "AdaGradNorm") for _, p, group in entries]
        states = [self._state(p, group) for _, p, group in entries]
        squares = self._squared_norms(grads)
        keys = self._scope_keys(entries)
        # one accumulator per scope key: its stored v plus this step's squared norm (summed first)
        totals: dict[int, torch.Tensor] = {}
        first: dict[int, dict[str, Any]] = {}
        for k, state, square in zip(keys, states, squares, strict=True):
            totals[k] = totals[k] + square if k in totals else square
            first.setdefault(k, state)
        accumulators: dict[int, torch.Tensor] = {}
        for k, total in totals.items():
            if self.scope == "param":
                stored = first[k]["sum"]
            else:
                stored = self.scope_sums.get(k)
                if stored is None:  # v0; "global": the first group's initial_accumulator_value
                    stored = self._initial(self.param_groups[k], squares.device)
            accumulators[k] = stored.to(squares.device) + total
        if self.scope != "param":
            self.scope_sums.update(accumulators)
        factors = []
        for (_, _, group), k, state in zip(entries, keys, states, strict=True):
            state["step"] += 1
            if self.scope == "param":
                state["sum"] = accumulators[k].to(state["sum"].device)
            denom = accumulators[k].sqrt() + group["eps"]
            clr = group["lr"] / (1 + (float(state["step"]) - 1) * group["lr_decay"])
            factors.append(torch.where(denom > 0, -clr / denom, torch.zeros_like(denom)))
        scale = torch.stack(factors).tolist()  # one host sync for every tensor
        params = [p for _, p, _ in entries]
        for p, g, s in zip(params, grads, scale, strict=True):
            p.add_(g, alpha=s)
        return loss

    def _scope_keys(self, entries: list[tuple[int, torch.Tensor, dict[str, Any]]]) -> list[int]:
        if self.scope == "global":
            return [0] * len(entries)
        if self.scope == "group":
            return [gi for gi, _, _ in entries]
        return list(range(len(entries)))

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        out["scope"] = self.scope
        out["scope_sums"] = {k: v.clone() for k, v in self.scope_sums.items()}
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        scope = state_dict.pop("scope", self.scope)
        if scope != self.scope:
            raise ValueError(
                f"state_dict was saved with scope={scope!r}, this optimizer has scope={self.scope!r}"
            )
        scope_sums = state_dict.pop("scope_sums", None)
        super().load_state_dict(state_dict)
        if scope_sums is None:  # a state_dict from 0.1.0: v in every parameter's "sum"
            scope_sums = self._sums_from_parameter_state()
        self.scope_sums = {int(k): v.detach().clone() for k, v in scope_sums.items()}

    def _sums_from_parameter_state(self) -> dict[int, torch.Tensor]:
        """v per scope from per-parameter ``"sum"`` entries (v only grows: the largest is the latest)."""
        out: dict[int, torch.Tensor] = {}
        if self.scope == "param":
            return out
        for gi, group in enumerate(self.param_groups):
            k = 0 if self.scope == "global" else gi
            for p in group["params"]:
                stored = self.state.get(p, {}).pop("sum", None)
                if stored is not None and (k not in out or bool(stored > out[k])):
                    out[k] = stored.to(torch.float64)
        return out


def _global_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors)))


class ClippedSGD(Optimizer):
    """Clipped SGD: ``g ← g·min(1, clip/‖g‖)`` (‖·‖ over every parameter), then heavy-ball
    ``buf = momentum·buf + g``, ``x -= lr·buf`` (``momentum=0``: Zhang et al. 2020)."""

    def __init__(
        self, params: Iterable[Any], lr: float, clip: float, momentum: float = 0.0
    ) -> None:
        _check_lr(lr)
        if not (isinstance(clip, (int, float)) and clip > 0):
            raise ValueError(f"Invalid clip value: {clip} (must be > 0)")
        _check_unit("momentum", momentum)
        super().__init__(params, {"lr": lr, "clip": clip, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        entries = [(p, g) for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not entries:
            return loss
        grads = [_dense_grad(p, group, "ClippedSGD") for p, group in entries]
        norm = _global_norm(grads)
        for (p, group), grad in zip(entries, grads, strict=True):
            factor = torch.clamp(group["clip"] / norm, max=1.0) if norm > 0 else 1.0
            update = grad * factor
            if group["momentum"]:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = update.clone()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(update)
                update = state["momentum_buffer"]
            p.add_(update, alpha=-group["lr"])
        return loss


class NSGDM(Optimizer):
    """Normalized SGD with momentum: ``m = β m + (1-β) g``; ``x -= lr · m/‖m‖`` (‖·‖ over every
    parameter; m₀ = 0). Cutkosky & Mehta (2021); Hübler et al. (2025) without knowledge of p."""

    def __init__(self, params: Iterable[Any], lr: float, beta: float = 0.9) -> None:
        _check_lr(lr)
        _check_unit("beta", beta)
        super().__init__(params, {"lr": lr, "beta": beta})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        entries = [(p, g) for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not entries:
            return loss
        momenta = []
        for p, group in entries:
            grad = _dense_grad(p, group, "NSGDM")
            state = self.state[p]
            if "exp_avg" not in state:
                state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg"].mul_(group["beta"]).add_(grad, alpha=1 - group["beta"])
            momenta.append(state["exp_avg"])
        norm = _global_norm(momenta)
        if norm == 0:
            return loss
        for (p, group), m in zip(entries, momenta, strict=True):
            p.add_(m / norm, alpha=-group["lr"])
        return loss


__all__ = ["NSGDM", "SCOPES", "SGD", "AdaGrad", "AdaGradNorm", "ClippedSGD"]
