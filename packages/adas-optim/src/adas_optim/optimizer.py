"""``AdaS``: AdamW whose step mixes in momentum SGD, per tensor, at a target excess update energy γ.

A drop-in for :class:`torch.optim.AdamW`: same arguments in the same order (``gamma`` after ``lr``, as
the official code has it), same decoupled weight-decay order, same bias correction, same state keys
(``step``, ``exp_avg``, ``exp_avg_sq``), so an AdamW ``state_dict`` loads into AdaS and back.

One code path serves both layouts: ``foreach=True`` runs every step over all tensors of a
(device, dtype) bucket with ``torch._foreach_*`` kernels; ``foreach=False`` runs the same code over
one tensor at a time (less temporary memory). λ stays a device tensor throughout, so a CUDA step makes
no host synchronisation (the official code turns λ into a Python number per parameter).

Sharded parameters (``torch.distributed.tensor.DTensor``, as FSDP2 makes them) are updated on their
local shards; the squared norms behind λ are summed over the shard dimensions of the device mesh
(one all-reduce per bucket), so λ equals the unsharded tensor's. Replicated parameters (DDP) need
nothing: every rank sees the same averaged gradient and computes the same λ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, cast

import torch

from adas_optim.mixing import excess_energy, mixing_lambda

SGD_COMPONENTS: tuple[str, ...] = ("momentum", "grad")

MIGRATION_NOTE = (
    "AdaS.step takes a closure (or nothing), like every torch optimizer; the official AdaS code's "
    "step(current_loss) form is not supported: call opt.step() after loss.backward() "
    "(README, 'Coming from the official AdaS code')"
)


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def _local(t: torch.Tensor) -> torch.Tensor:
    """The local shard of a DTensor (sharing its storage), or ``t`` itself."""
    return cast(torch.Tensor, t.to_local()) if _is_dtensor(t) else t  # type: ignore[attr-defined]


def _check_hyper(
    lr: float, gamma: float, betas: tuple[float, float], eps: float, weight_decay: float
) -> None:
    # torch.optim.AdamW's messages, word for word, so code that matches on them keeps working.
    if not lr >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not eps >= 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not weight_decay >= 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if not gamma >= 0.0:  # also catches NaN, which the official code lets through to a NaN step
        raise ValueError(f"gamma must be >= 0, got {gamma}")


class AdaS(torch.optim.Optimizer):
    """AdaS (Zhou et al., ICML 2026), following the official ``cifar10-dvs/optimizer.py``.

    Args:
        params: parameters or parameter groups; a group may override any hyper-parameter, ``gamma``
            included.
        lr: learning rate η₀.
        gamma: target excess update energy γ ≥ 0. λ → 1 (pure AdamW) as ``2γ/η`` grows; the knob is
            ``γ/η``, so re-tune γ when lr changes.
        betas, eps, weight_decay: as :class:`torch.optim.AdamW` (decoupled weight decay).
        correct_bias: bias-correct both moments (``False`` reproduces the official option).
        sgd_component: ``"momentum"`` (the reference and segmentation copies) or ``"grad"`` (the
            SpikeLM copy, which also defaults to ``gamma=2.0``): what the AdamW direction is mixed with.
        maximize: ascend instead of descend.
        foreach: batch the step over all tensors of a (device, dtype) bucket with ``torch._foreach_*``;
            ``None`` (default) picks it on CUDA and the per-tensor loop elsewhere, as torch does (on
            CPU the loop is faster: it holds temporaries for one tensor at a time).
        capturable: keep ``step`` and the bias corrections on the parameter's device (CUDA graphs).
        track_update_norms: record ``‖Δθ‖`` per tensor in :meth:`mixing_stats` (one extra norm pass).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        gamma: float = 1.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        correct_bias: bool = True,
        sgd_component: str = "momentum",
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        track_update_norms: bool = False,
    ) -> None:
        _check_hyper(lr, gamma, betas, eps, weight_decay)
        if sgd_component not in SGD_COMPONENTS:
            raise ValueError(
                f"sgd_component must be one of {SGD_COMPONENTS}, got {sgd_component!r}"
            )
        defaults = dict(
            lr=lr,
            gamma=gamma,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            correct_bias=correct_bias,
            sgd_component=sgd_component,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
        )
        self.track_update_norms = track_update_norms
        # Diagnostics of the last step, per parameter: device tensors, read only on request.
        self._last: dict[torch.Tensor, dict[str, Any]] = {}
        super().__init__(params, defaults)

    # -- groups --------------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        _check_hyper(
            group["lr"], group["gamma"], group["betas"], group["eps"], group["weight_decay"]
        )
        if group["sgd_component"] not in SGD_COMPONENTS:
            raise ValueError(
                f"sgd_component must be one of {SGD_COMPONENTS}, got {group['sgd_component']!r}"
            )
        for p in group["params"]:
            if p.is_complex():
                raise TypeError(
                    f"AdaS does not support complex parameters (got {p.dtype}, shape "
                    f"{tuple(p.shape)}); pass torch.view_as_real(p) views instead"
                )

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.__dict__.setdefault("_last", {})
        self.__dict__.setdefault("track_update_norms", False)
        for group in self.param_groups:
            for key, value in self.defaults.items():
                group.setdefault(key, value)

    # -- step ----------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One AdaS step; returns ``closure()`` when a closure is given."""
        if closure is not None and not callable(closure):
            raise TypeError(f"{MIGRATION_NOTE}; got {type(closure).__name__} {closure!r}")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            items = self._init_group(group)
            if not items:
                continue
            foreach = group["foreach"]
            if foreach is None:  # torch's rule: foreach on CUDA; on CPU the loop is faster
                foreach = all(p.is_cuda for p in items)
            if foreach:
                for batch in _buckets(items):
                    self._step_batch(group, batch)
            else:
                for p in items:
                    self._step_one(group, p)
        return loss

    def _init_group(self, group: dict[str, Any]) -> list[torch.Tensor]:
        items = []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("AdaS does not support sparse gradients")
            state = self.state[p]
            if len(state) == 0:
                # AdamW's layout: a float32 step on the CPU (on the device when capturable).
                device = p.device if group["capturable"] else torch.device("cpu")
                state["step"] = torch.zeros((), dtype=torch.float32, device=device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            items.append(p)
        return items

    def _step_batch(self, group: dict[str, Any], batch: list[torch.Tensor]) -> None:
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        params = [_local(p) for p in batch]
        grads = [_local(cast(torch.Tensor, p.grad)) for p in batch]
        exp_avgs = [_local(self.state[p]["exp_avg"]) for p in batch]
        exp_avg_sqs = [_local(self.state[p]["exp_avg_sq"]) for p in batch]
        steps = [self.state[p]["step"] for p in batch]
        if group["maximize"]:
            grads = list(torch._foreach_neg(grads))

        torch._foreach_add_(steps, 1)
        if wd != 0:
            torch._foreach_mul_(params, 1 - lr * wd)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)

        step_size, bc2_sqrt = _bias_corrections(steps, group)
        adam = list(torch._foreach_sqrt(exp_avg_sqs))
        torch._foreach_div_(adam, bc2_sqrt)
        torch._foreach_add_(adam, group["eps"])
        torch._foreach_div_(adam, exp_avgs)
        torch._foreach_reciprocal_(adam)  # adam = m / D, in D's buffer: no second temporary
        diffs = torch._foreach_sub(adam, exp_avgs)  # foreach kernels have no dot product
        diff_sq = _squared_norms(diffs)
        del diffs
        m_sq = _squared_norms(exp_avgs)
        m_sq, diff_sq = _reduce_sharded(batch, m_sq, diff_sq)

        eta = step_size if isinstance(step_size, float) else torch.stack(step_size)
        lam = mixing_lambda(m_sq, diff_sq, group["gamma"], eta)
        base = exp_avgs if group["sgd_component"] == "momentum" else grads
        # adam ← λ·adam + (1 − λ)·base: the AdaS direction d, still in D's buffer.
        torch._foreach_lerp_(adam, base, list((1 - lam).to(adam[0].dtype).unbind()))
        update_sq = _squared_norms(adam) if self.track_update_norms else None
        if isinstance(step_size, float):
            torch._foreach_add_(params, adam, alpha=-step_size)
        else:
            torch._foreach_mul_(adam, [-s.to(adam[0].dtype) for s in step_size])
            torch._foreach_add_(params, adam)
        self._record(batch, group, lam, m_sq, diff_sq, eta, update_sq)

    def _step_one(self, group: dict[str, Any], param: torch.Tensor) -> None:
        """:meth:`_step_batch` for one tensor with plain in-place kernels (the CPU default).

        In float32/64, ``‖a − m‖²`` comes from three read-only dot products instead of a materialised
        ``a − m``: ``‖a‖² − 2⟨a, m⟩ + ‖m‖²``. Its cancellation only bites where ``‖a − m‖ ≪ ‖a‖``,
        which forces ``‖a − m‖ < ‖m‖`` and so λ = 1 whatever the rounding; where λ < 1,
        ``‖a‖ ≤ 2‖a − m‖`` bounds the amplification of the dot products' rounding by about 9.
        """
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        state = self.state[param]
        p, grad = _local(param), _local(cast(torch.Tensor, param.grad))
        m, v = _local(state["exp_avg"]), _local(state["exp_avg_sq"])
        if group["maximize"]:
            grad = -grad
        state["step"] += 1
        if wd != 0:
            p.mul_(1 - lr * wd)
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size, bc2_sqrt = _bias_corrections([state["step"]], group)
        a = v.sqrt().div_(bc2_sqrt[0]).add_(group["eps"])
        torch.div(m, a, out=a)  # a = m / D in D's buffer
        acc = torch.promote_types(a.dtype, torch.float32)
        if a.dtype == acc:
            a_flat, m_flat = a.reshape(-1), m.reshape(-1)
            m_sq = torch.vdot(m_flat, m_flat).reshape(1)
            a_sq = torch.vdot(a_flat, a_flat).reshape(1)
            diff_sq = (a_sq - 2 * torch.vdot(a_flat, m_flat) + m_sq).clamp_(min=0.0)
        else:  # half precision: a dot product rounded to 8 bits would make the difference coarse
            m_sq = torch.linalg.vector_norm(m, dtype=acc).square().reshape(1)
            diff_sq = torch.linalg.vector_norm(a - m, dtype=acc).square().reshape(1)
        m_sq, diff_sq = _reduce_sharded([param], m_sq, diff_sq)
        eta = step_size if isinstance(step_size, float) else step_size[0].reshape(1)
        lam = mixing_lambda(m_sq, diff_sq, group["gamma"], eta)
        a.lerp_(m if group["sgd_component"] == "momentum" else grad, (1 - lam[0]).to(a.dtype))
        update_sq = a.square().sum().to(acc).reshape(1) if self.track_update_norms else None
        if isinstance(step_size, float):
            p.add_(a, alpha=-step_size)
        else:
            p.sub_(a * step_size[0].to(a.dtype))
        self._record([param], group, lam, m_sq, diff_sq, eta, update_sq)

    def _record(
        self,
        batch: list[torch.Tensor],
        group: dict[str, Any],
        lam: torch.Tensor,
        m_sq: torch.Tensor,
        diff_sq: torch.Tensor,
        eta: float | torch.Tensor,
        update_sq: torch.Tensor | None,
    ) -> None:
        energy = excess_energy(lam, diff_sq, eta)
        for i, p in enumerate(batch):
            entry = {
                "lambda": lam[i],
                "m_norm": m_sq[i].sqrt(),
                "adam_minus_m_norm": diff_sq[i].sqrt(),
                "step_size": eta if isinstance(eta, float) else eta[i],
                "excess_energy": energy[i],
                "gamma": group["gamma"],
            }
            if update_sq is not None:
                step = eta if isinstance(eta, float) else eta[i]
                entry["update_norm"] = update_sq[i].sqrt() * step
            self._last[p] = entry

    # -- diagnostics ---------------------------------------------------------------------------
    @property
    def last_lambda(self) -> dict[torch.Tensor, torch.Tensor]:
        """λ of the last step per parameter (0-dim device tensors; reading them syncs, stepping not)."""
        return {p: entry["lambda"] for p, entry in self._last.items()}

    def mixing_stats(self) -> list[dict[str, Any]]:
        """Per parameter of the last step: its group and index, shape, and as floats λ, ``‖m‖``,
        ``‖a − m‖``, η, the excess energy ``(η/2)‖d − m‖²`` and γ (``update_norm`` ``‖Δθ‖``, without
        weight decay, when ``track_update_norms``). Reads device tensors: call it for logging."""
        index = {
            p: (g, i)
            for g, group in enumerate(self.param_groups)
            for i, p in enumerate(group["params"])
        }
        rows = []
        for p, entry in self._last.items():
            g, i = index.get(p, (-1, -1))
            row: dict[str, Any] = {"group": g, "index": i, "shape": tuple(p.shape)}
            row.update({k: float(v) for k, v in entry.items()})
            rows.append(row)
        return rows


def _squared_norms(tensors: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``‖t‖²`` per tensor, stacked, in float32 at least (bf16 norms would make λ coarse)."""
    norms = torch.stack(torch._foreach_norm(tensors))
    return norms.to(torch.promote_types(norms.dtype, torch.float32)).square()


def _buckets(items: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """Parameters bucketed by (device, dtype, DTensor or not): what one foreach call can take."""
    buckets: dict[tuple[Any, ...], list[torch.Tensor]] = {}
    for p in items:
        buckets.setdefault((p.device, p.dtype, _is_dtensor(p)), []).append(p)
    return list(buckets.values())


def _bias_corrections(
    steps: list[torch.Tensor], group: dict[str, Any]
) -> tuple[float | list[torch.Tensor], list[float] | list[torch.Tensor]]:
    """``(η = lr/bc1, sqrt(bc2))``: floats from CPU steps, device tensors when capturable.

    The step size is one float when every tensor of the batch is at the same step (the usual case),
    so the final add takes it as ``alpha``.
    """
    beta1, beta2 = group["betas"]
    lr = group["lr"]
    if not group["correct_bias"]:
        return float(lr), [1.0] * len(steps)
    if group["capturable"]:
        bc1 = torch._foreach_pow(beta1, steps)
        bc2 = torch._foreach_pow(beta2, steps)
        step_size = [lr / (1 - b) for b in bc1]
        bc2_sqrt = [(1 - b).sqrt() for b in bc2]
        return step_size, bc2_sqrt
    counts = [float(s) for s in steps]  # CPU scalars: no device synchronisation
    bc2_sqrt_f = [math.sqrt(1 - beta2**t) for t in counts]
    sizes = [lr / (1 - beta1**t) for t in counts]
    if all(s == sizes[0] for s in sizes):
        return sizes[0], bc2_sqrt_f
    device = steps[0].device
    return [torch.tensor(s, device=device) for s in sizes], bc2_sqrt_f


def _reduce_sharded(
    batch: list[torch.Tensor], m_sq: torch.Tensor, diff_sq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum the squared norms of DTensor shards over the mesh dimensions they are sharded on."""
    if not any(_is_dtensor(p) for p in batch):
        return m_sq, diff_sq
    import torch.distributed as dist

    both = torch.stack([m_sq, diff_sq])  # (2, n): one collective per mesh dimension
    by_dims: dict[tuple[Any, ...], list[int]] = {}
    for i, p in enumerate(batch):
        placements = getattr(p, "placements", ())
        dims = tuple(d for d, pl in enumerate(placements) if pl.is_shard())
        if dims:
            by_dims.setdefault((id(p.device_mesh), dims), []).append(i)  # type: ignore[attr-defined]
    for (_, dims), idx in by_dims.items():
        mesh = batch[idx[0]].device_mesh  # type: ignore[attr-defined]
        part = both[:, idx].contiguous()
        for d in dims:
            dist.all_reduce(part, group=mesh.get_group(d))
        both[:, idx] = part
    return both[0], both[1]
