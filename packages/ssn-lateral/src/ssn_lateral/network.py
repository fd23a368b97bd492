"""The E-I network under Dale's law: four non-negative lateral blocks, feed-forward weights, biases.

    W = [[W_ee, -W_ei], [W_ie, -W_ii]],   h = Q * channels(input_gain * (c x + sigma xi)) + b

``channels`` splits a signed input into ON and OFF parts ``[x]_+, [-x]_+`` so that non-negative
``Q`` can still carry a signed patch (``signed_input=True`` feeds ``x`` itself, ``Q`` signed).
``lateral=False`` is the ablation: ``W = 0`` and the steady state is ``k [h]_+^n`` in closed form.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal, overload

import torch
from torch import nn

from ssn_lateral.dynamics import (
    SSNParams,
    SteadyStateInfo,
    _divergence,
    diverged,
    euler_steady_state,
    fixed_point_jacobian,
    power_law,
    rhs,
    spectral_abscissa,
)

__all__ = ["BLOCKS", "SSN"]

BLOCKS = ("W_ee", "W_ei", "W_ie", "W_ii")


def _check_scalar(name: str, value: float, *, positive: bool) -> float:
    value = float(value)
    bad = not torch.isfinite(torch.tensor(value)) or (value <= 0 if positive else value < 0)
    if bad:
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} and finite, got {value}")
    return value


class SSN(nn.Module):
    """A batched stabilized supralinear network of ``n_e`` excitatory and ``n_i`` inhibitory units.

    Parameters are plain tensors (``nn.Parameter`` without gradients: the package learns with
    local plasticity, not backprop, but ``state_dict`` and ``.double()`` work as usual). ``dale=True``
    requires every lateral block (and ``Q`` for ON/OFF input) to be non-negative; ``project=True``
    clips negative entries with a warning instead of raising.
    """

    # declared for the type checker: nn.Module's __getattr__ is typed ``Tensor | Module``
    W_ee: nn.Parameter
    W_ei: nn.Parameter
    W_ie: nn.Parameter
    W_ii: nn.Parameter
    Q_e: nn.Parameter
    Q_i: nn.Parameter
    b: nn.Parameter
    n_e: int
    n_i: int
    n_in: int

    def __init__(
        self,
        n_e: int,
        n_i: int,
        n_in: int,
        params: SSNParams | None = None,
        *,
        lateral: bool = True,
        dale: bool = True,
        signed_input: bool = False,
        input_gain: float = 1.0,
    ) -> None:
        super().__init__()
        for name, value, low in (("n_e", n_e, 1), ("n_i", n_i, 0), ("n_in", n_in, 1)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if lateral and n_i == 0:
            warnings.warn(
                "SSN with lateral=True and n_i=0: no inhibition, the network cannot be "
                "stabilised at high contrast",
                UserWarning,
                stacklevel=2,
            )
        self.n_e, self.n_i, self.n_in = n_e, n_i, n_in
        self.params = params if params is not None else SSNParams()
        self.lateral, self.dale, self.signed_input = lateral, dale, signed_input
        self.input_gain = _check_scalar("input_gain", input_gain, positive=True)
        d = n_in if signed_input else 2 * n_in
        shapes = {"W_ee": (n_e, n_e), "W_ei": (n_e, n_i), "W_ie": (n_i, n_e), "W_ii": (n_i, n_i)}
        for name, shape in {**shapes, "Q_e": (n_e, d), "Q_i": (n_i, d)}.items():
            setattr(self, name, nn.Parameter(torch.zeros(shape), requires_grad=False))
        self.b = nn.Parameter(torch.zeros(n_e + n_i), requires_grad=False)

    # -- assembly --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.n_e + self.n_i

    @property
    def n_channels(self) -> int:
        return self.Q_e.shape[1]

    def set_weights(self, *, project: bool = False, **blocks: torch.Tensor) -> SSN:
        """Set blocks (``W_ee=...``, ``Q_e=...``, ``b=...``), checking shapes and Dale's law."""
        for name, value in blocks.items():
            current = getattr(self, name, None)
            if not isinstance(current, nn.Parameter):
                raise ValueError(
                    f"unknown block {name!r}; expected one of {(*BLOCKS, 'Q_e', 'Q_i', 'b')}"
                )
            value = torch.as_tensor(value, dtype=current.dtype)
            if value.shape != current.shape:
                raise ValueError(
                    f"{name} must have shape {tuple(current.shape)}, got {tuple(value.shape)}"
                )
            if not torch.isfinite(value).all():
                raise ValueError(f"{name} has non-finite entries")
            current.data.copy_(value)
        self.check_dale(project=project)
        return self

    def _dale_blocks(self) -> tuple[str, ...]:
        return BLOCKS if self.signed_input else (*BLOCKS, "Q_e", "Q_i")

    def check_dale(self, *, project: bool = False) -> None:
        """Raise (or, with ``project=True``, clip and warn) where a sign-constrained block is < 0."""
        if not self.dale:
            return
        for name in self._dale_blocks():
            block = getattr(self, name).data
            if block.numel() and float(block.min()) < 0:
                count = int((block < 0).sum())
                if not project:
                    raise ValueError(
                        f"{name} has {count} negative entries (min {float(block.min()):.4g}) but "
                        "dale=True needs every lateral block (and Q for ON/OFF input) >= 0; the "
                        "signs are fixed by W = [[W_ee, -W_ei], [W_ie, -W_ii]]. Pass project=True to clip."
                    )
                warnings.warn(
                    f"projected {count} negative entries of {name} to 0", UserWarning, stacklevel=3
                )
                block.clamp_(min=0.0)

    def weight(self) -> torch.Tensor:
        """The signed ``(N, N)`` recurrent matrix (zeros when ``lateral=False``)."""
        if not self.lateral:
            return torch.zeros(self.n, self.n, dtype=self.W_ee.dtype)
        top = torch.cat([self.W_ee, -self.W_ei], dim=1)
        bottom = torch.cat([self.W_ie, -self.W_ii], dim=1)
        return torch.cat([top, bottom], dim=0)

    def tau(self) -> torch.Tensor:
        return self.params.tau(self.n_e, self.n_i, dtype=self.W_ee.dtype)

    def channels(self, x: torch.Tensor) -> torch.Tensor:
        """The input as the feed-forward weights see it: ON/OFF halves, or ``x`` itself."""
        return x if self.signed_input else torch.cat([x.clamp(min=0.0), (-x).clamp(min=0.0)], dim=1)

    def _input(self, x: torch.Tensor) -> torch.Tensor:
        if self.W_ee.dtype not in (torch.float32, torch.float64):
            # bf16/fp16 Euler steps stall ~14 % away from the fixed point: refuse, never degrade
            raise ValueError(
                f"the SSN's weights are {self.W_ee.dtype}; it computes in torch.float32 or "
                "torch.float64 (call net.float() or net.double())"
            )
        x = torch.as_tensor(x, dtype=self.W_ee.dtype)
        if x.ndim != 2 or x.shape[1] != self.n_in:
            raise ValueError(f"x must have shape (batch, {self.n_in}), got {tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("x has NaN or infinite entries")
        return x

    def drive(
        self,
        x: torch.Tensor,
        *,
        contrast: float = 1.0,
        noise: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``h = Q channels(g (c x + sigma xi)) + b``, ``(B, N)``; ``xi`` standard normal."""
        x = self._input(x)
        contrast = _check_scalar("contrast", contrast, positive=True)
        noise = _check_scalar("noise", noise, positive=False)
        u = contrast * x
        if noise:
            u = u + noise * torch.randn(x.shape, generator=generator, dtype=x.dtype)
        Q = torch.cat([self.Q_e, self.Q_i], dim=0)
        return torch.addmm(self.b, self.channels(self.input_gain * u), Q.T)

    # -- dynamics --------------------------------------------------------------------------------
    @overload
    def steady_state(
        self,
        x: torch.Tensor,
        *,
        contrast: float = ...,
        noise: float = ...,
        r0: torch.Tensor | None = ...,
        return_info: Literal[False] = ...,
        generator: torch.Generator | None = ...,
    ) -> torch.Tensor: ...

    @overload
    def steady_state(
        self,
        x: torch.Tensor,
        *,
        contrast: float = ...,
        noise: float = ...,
        r0: torch.Tensor | None = ...,
        return_info: Literal[True],
        generator: torch.Generator | None = ...,
    ) -> tuple[torch.Tensor, SteadyStateInfo]: ...

    @torch.no_grad()
    def steady_state(
        self,
        x: torch.Tensor,
        *,
        contrast: float = 1.0,
        noise: float = 0.0,
        r0: torch.Tensor | None = None,
        return_info: bool = False,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, SteadyStateInfo]:
        """The fixed point ``r*`` for each row of ``x``, ``(B, n_e + n_i)``; ``r0`` warm-starts."""
        h = self.drive(x, contrast=contrast, noise=noise, generator=generator)
        if not self.lateral:
            r = power_law(h, self.params.k, self.params.n)
            info = SteadyStateInfo(
                steps=torch.zeros(h.shape[0], dtype=torch.long),
                residual=torch.zeros(h.shape[0], dtype=h.dtype),
                converged=torch.ones(h.shape[0], dtype=torch.bool),
            )
        else:
            self._check_r0(r0, h)
            r, info = euler_steady_state(
                self.weight(), h, self.tau(), self.params, r0, contrast=contrast
            )
        return (r, info) if return_info else r

    @staticmethod
    def _check_r0(r0: torch.Tensor | None, h: torch.Tensor) -> None:
        if r0 is None:
            return
        if tuple(r0.shape) != tuple(h.shape):
            raise ValueError(f"r0 must have shape {tuple(h.shape)}, got {tuple(r0.shape)}")
        if not torch.isfinite(r0).all() or bool((r0 < 0).any()):
            raise ValueError(
                f"r0 must be finite, non-negative rates, got min {float(r0.min()):.4g}"
            )

    @torch.no_grad()
    def simulate(
        self,
        x: torch.Tensor,
        t: float,
        *,
        contrast: float = 1.0,
        noise: float = 0.0,
        r0: torch.Tensor | None = None,
        record_every: int = 1,
    ) -> torch.Tensor:
        """Euler trajectories for ``t`` ms under constant drive: ``(steps // record_every + 1, B, N)``.

        Noise, if any, is frozen (drawn once): the input is a noisy but static image. Raises
        :class:`SSNDivergenceError` (contrast, step, last finite max rate) when a rate exceeds
        ``params.r_max`` or stops being finite, as :meth:`steady_state` does.
        """
        if not isinstance(record_every, int) or record_every < 1:
            raise ValueError(f"record_every must be an int >= 1, got {record_every!r}")
        if not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise ValueError(f"t must be a finite duration >= 0 ms, got {t!r}")
        h = self.drive(x, contrast=contrast, noise=noise)
        self._check_r0(r0, h)
        W, tau, dt = self.weight(), self.tau(), self.params.dt
        r = torch.zeros_like(h) if r0 is None else r0.to(h).clone()
        frames = [r.clone()]
        for step in range(1, round(t / dt) + 1):
            previous = r
            r = r + dt * rhs(r, W, h, self.params.k, self.params.n, tau)
            if diverged(r, self.params.r_max):
                last = float(previous.abs().max())
                raise _divergence(r, self.params.r_max, step, contrast, last)
            if step % record_every == 0:
                frames.append(r.clone())
        return torch.stack(frames)

    # -- stability -------------------------------------------------------------------------------
    def jacobian(self, r: torch.Tensor) -> torch.Tensor:
        """The Jacobian at fixed points ``r`` (``(B, N)`` -> ``(B, N, N)``), per ms."""
        r = torch.as_tensor(r, dtype=self.W_ee.dtype)
        if r.ndim != 2 or r.shape[1] != self.n:
            raise ValueError(f"r must have shape (batch, {self.n}), got {tuple(r.shape)}")
        return fixed_point_jacobian(r, self.weight(), self.params.k, self.params.n, self.tau())

    def is_stable(self, r: torch.Tensor) -> torch.Tensor:
        """Whether every eigenvalue of the Jacobian at ``r`` has a negative real part, ``(B,)``."""
        return spectral_abscissa(self.jacobian(r)) < 0

    def is_isn(self, r: torch.Tensor) -> torch.Tensor:
        """Inhibition-stabilised: the E subnetwork alone, ``-I + Phi_E W_ee``, is unstable, ``(B,)``."""
        r = torch.as_tensor(r, dtype=self.W_ee.dtype)
        k, n = self.params.k, self.params.n
        if not self.lateral:
            return torch.zeros(r.shape[0], dtype=torch.bool)
        gain = n * k ** (1.0 / n) * torch.clamp(r[:, : self.n_e], min=0.0).pow(1.0 - 1.0 / n)
        eye = torch.eye(self.n_e, dtype=r.dtype)
        return spectral_abscissa(gain.unsqueeze(-1) * self.W_ee - eye) > 0

    def extra_repr(self) -> str:
        return (
            f"n_e={self.n_e}, n_i={self.n_i}, n_in={self.n_in}, lateral={self.lateral}, "
            f"dale={self.dale}, signed_input={self.signed_input}, input_gain={self.input_gain}"
        )
