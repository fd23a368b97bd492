"""AdaSCALE (Regmi, ICML 2026): SCALE with a per-sample percentile set by an OOD-ness estimate.

For each input: perturb the ``o`` share of input elements with the smallest max-logit gradient by
``eps * sign(g)``; measure how much the top activations move (``Q``) plus a correction (``C_o``);
place ``Q' = lam Q + C_o`` on the ECDF of the ID fit set's ``Q'``; likely-ID inputs get a percentile
near ``p_max`` (strong scaling), likely-OOD ones near ``p_min``. Variant ``"A"`` scales the features
(``W (z e^r) + b``), ``"L"`` the logits (``(W z + b) r^2``); the score is the energy.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from adascale import functional as F
from adascale.base import Data, Detector, NotFittedError, batches, check_inputs
from adascale.distributed import gather_rows


class AdaSCALE(Detector):
    """AdaSCALE-A/L on a ``backbone`` (input -> penultimate features) and a linear ``head``.

    ``fit`` keeps the fit set's features ``z`` and ``z~``, so changing ``p_min``, ``p_max``,
    ``lam``, ``k1`` or ``k2`` never refits; ``o`` and ``eps`` change the perturbation (refit).
    ``n_fit`` ID samples are used (a random subset of a tensor, drawn with ``generator``; the first
    ``n_fit`` rows of a loader, which should shuffle); labels are ignored.
    """

    input_keys: ClassVar[tuple[str, ...]] = ("o", "eps")

    def __init__(
        self,
        backbone: Callable[[Tensor], Tensor],
        head: nn.Module,
        *,
        variant: Literal["A", "L"] = "A",
        p_min: float = 60.0,
        p_max: float = 85.0,
        lam: float = 10.0,
        k1: float = 0.01,
        k2: float = 0.05,
        o: float = 0.05,
        eps: float = 0.5,
        n_fit: int | None = 5000,
        generator: torch.Generator | None = None,
        on_degenerate: F.OnDegenerate = "raise",
    ) -> None:
        super().__init__(backbone, head)
        if variant not in ("A", "L"):
            raise ValueError(f"variant must be 'A' or 'L', got {variant!r}")
        F.check_percentiles(p_min, p_max)
        for name, value in (("k1", k1), ("k2", k2), ("o", o)):
            if not 0 < value <= 1:
                raise ValueError(f"{name} is a fraction in (0, 1], got {value!r}")
        d = self.head.in_features
        F.count_of(k1, d, name="k1")
        F.count_of(k2, d, name="k2")
        if n_fit is not None and n_fit < 100:
            warnings.warn(
                f"n_fit={n_fit} < 100: the ECDF is coarse, percentiles take at most {n_fit} "
                "distinct values",
                stacklevel=2,
            )
        if n_fit is not None and n_fit < 1:
            raise ValueError(f"n_fit must be >= 1 or None, got {n_fit}")
        if on_degenerate not in ("raise", "nan"):
            raise ValueError(f"on_degenerate must be 'raise' or 'nan', got {on_degenerate!r}")
        self.variant, self.p_min, self.p_max, self.lam = variant, p_min, p_max, lam
        self.k1, self.k2, self.o, self.eps = k1, k2, o, eps
        self.n_fit, self.generator, self.on_degenerate = n_fit, generator, on_degenerate
        self.fit_z_: Tensor | None = None
        self.fit_z_perturbed_: Tensor | None = None
        self._fit_q: tuple[tuple[float, float, float], Tensor] | None = None

    # -- features ---------------------------------------------------------------------------
    def extract(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(z, z~)``: features of ``x`` and of its gradient-guided perturbation.

        One forward with grad gives ``z`` and the input gradient, one backward, one forward of
        ``x~``: three passes, against SCALE's one.
        """
        self._eval_mode()
        check_inputs(x)
        x = x.to(self.device)
        captured: list[Tensor] = []

        def model(t: Tensor) -> Tensor:
            captured.append(self.features(t))
            return self.head(captured[-1])

        grad = F.input_gradient(model, x)
        x_tilde = F.perturb(x, grad, o=self.o, eps=self.eps)
        with torch.no_grad():
            return captured[0].detach(), self.features(x_tilde)

    # -- fit --------------------------------------------------------------------------------
    def fit(self, data: Data) -> AdaSCALE:
        """Collect ``z`` and ``z~`` on ID data (labels ignored); ``Q'``'s ECDF follows from them."""
        if isinstance(data, Tensor) and self.n_fit is not None and data.shape[0] > self.n_fit:
            pick = torch.randperm(data.shape[0], generator=self.generator)[: self.n_fit]
            data = data[pick.to(data.device)]
        z, z_tilde = self.extract_all(batches(data), self.n_fit)
        return self.fit_features(z, z_tilde)

    def fit_features(self, z: Tensor, z_perturbed: Tensor) -> AdaSCALE:
        """Fit from precomputed features (all-gathered across ranks under torch.distributed)."""
        F.ood_statistic(z, z_perturbed, k1=self.k1, k2=self.k2, lam=self.lam)  # validates
        self.fit_z_ = gather_rows(z.detach())
        self.fit_z_perturbed_ = gather_rows(z_perturbed.detach())
        self._fit_q = None
        return self

    @property
    def fit_statistic_(self) -> Tensor:
        """The fit set's sorted ``Q'`` under the current ``lam``, ``k1``, ``k2`` (cached per triple)."""
        if self.fit_z_ is None or self.fit_z_perturbed_ is None:
            raise NotFittedError("AdaSCALE requires fit() on ID data first")
        key = (float(self.lam), float(self.k1), float(self.k2))
        if self._fit_q is None or self._fit_q[0] != key:
            q = self.statistic_features(self.fit_z_, self.fit_z_perturbed_).sort().values
            self._fit_q = (key, q)
        return self._fit_q[1]

    # -- scoring ----------------------------------------------------------------------------
    def statistic_features(self, z: Tensor, z_perturbed: Tensor) -> Tensor:
        """``Q'`` per sample (larger = more OOD-like)."""
        return F.ood_statistic(z, z_perturbed, k1=self.k1, k2=self.k2, lam=self.lam)

    def percentile_features(self, z: Tensor, z_perturbed: Tensor) -> Tensor:
        """The adaptive percentile ``p(x)`` in ``[p_min, p_max]`` (float64)."""
        fit_q = self.fit_statistic_
        q = self.statistic_features(z, z_perturbed)
        return F.adaptive_percentile(q, fit_q, p_min=self.p_min, p_max=self.p_max)

    def percentile(self, x: Tensor) -> Tensor:
        """Per-sample ``p(x)``, for inspection."""
        return self.percentile_features(*self.extract(x))

    def logits_features(self, z: Tensor, z_perturbed: Tensor) -> Tensor:
        """The scaled logits whose energy is the score; their argmax is the prediction."""
        p = self.percentile_features(z, z_perturbed)
        r = F.scale_factor(z, p, on_degenerate=self.on_degenerate).to(z.dtype)
        if self.variant == "A":
            return self.head(z * r.exp()[:, None])
        return self.head(z) * (r**2)[:, None]

    def score_features(self, z: Tensor, z_perturbed: Tensor) -> Tensor:
        return F.energy(self.logits_features(z, z_perturbed))

    def score(self, x: Tensor) -> Tensor:
        if self.fit_z_ is None:
            raise NotFittedError("AdaSCALE requires fit() on ID data first")
        features = self.extract(x)
        with torch.no_grad():
            return self.score_features(*features)
