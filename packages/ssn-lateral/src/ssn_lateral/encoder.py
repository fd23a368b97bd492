"""``SSNEncoder``: the SSN as a scikit-learn transformer, drop-in where ``FastICA`` or
``MiniBatchDictionaryLearning`` encode patches; ``transform`` takes the degradation directly."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ssn_lateral.data import ZCAWhitener, check_whitened, degrade
from ssn_lateral.dynamics import SSNParams
from ssn_lateral.network import BLOCKS, SSN
from ssn_lateral.plasticity import PlasticityRule, RowSums, default_rules
from ssn_lateral.training import init_network, train_local

__all__ = ["SSNEncoder"]


class SSNEncoder(TransformerMixin, BaseEstimator):
    """Learn an E-I SSN code of patches with local plasticity; ``transform`` gives E rates.

    Parameters
    ----------
    n_components : E units (``N_E``).
    n_inhibitory : I units, default ``max(1, n_components // 4)``.
    rules : ``"default"`` (:func:`~ssn_lateral.plasticity.default_rules` at ``learning_rate`` and
        ``target_rates``) or a list of :class:`~ssn_lateral.plasticity.PlasticityRule`.
    n_iter, batch_size : mini-batches of training and their size.
    learning_rate : the rules' ``eta`` when ``rules="default"``.
    contrast : the contrast training patches are shown at.
    lateral : ``False`` is the ablation (``W = 0``, closed-form rates).
    signed_input : feed the signed patch instead of ON/OFF channels.
    input_gain : scale of the feed-forward drive (``Q`` rows have norm 1, patches norm ~1).
    whiten : fit a ZCA on ``X`` (scaled to mean patch norm 1); ``False`` uses ``X`` as given and
        warns if it does not look centred and whitened.
    row_sums : :class:`~ssn_lateral.plasticity.RowSums` targets of the projection.
    target_rates : ``(p_e, p_i)`` of the homeostatic and anti-Hebbian rules.
    init : ``"patches"`` or ``"random"`` feed-forward initialisation.
    params : :class:`~ssn_lateral.dynamics.SSNParams` (default ``SSNParams()``).
    random_state : seed of initialisation and mini-batches.
    """

    def __init__(
        self,
        n_components: int = 64,
        n_inhibitory: int | None = None,
        rules: str | Sequence[PlasticityRule] = "default",
        n_iter: int = 2000,
        batch_size: int = 100,
        learning_rate: float = 1e-2,
        contrast: float = 1.0,
        lateral: bool = True,
        signed_input: bool = False,
        input_gain: float = 10.0,
        whiten: bool = True,
        row_sums: RowSums | None = None,
        target_rates: tuple[float, float] = (1.0, 2.0),
        init: str = "patches",
        params: SSNParams | None = None,
        random_state: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.n_inhibitory = n_inhibitory
        self.rules = rules
        self.n_iter = n_iter
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.contrast = contrast
        self.lateral = lateral
        self.signed_input = signed_input
        self.input_gain = input_gain
        self.whiten = whiten
        self.row_sums = row_sums
        self.target_rates = target_rates
        self.init = init
        self.params = params
        self.random_state = random_state

    # -- validation ------------------------------------------------------------------------------
    def _check_params(self) -> tuple[int, list[PlasticityRule]]:
        for name, low in (("n_components", 1), ("n_iter", 0), ("batch_size", 1)):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        n_i = max(1, self.n_components // 4) if self.n_inhibitory is None else self.n_inhibitory
        if not isinstance(n_i, (int, np.integer)) or n_i < 0:
            raise ValueError(f"n_inhibitory must be None or an int >= 0, got {self.n_inhibitory!r}")
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not (np.isfinite(self.contrast) and self.contrast > 0):
            raise ValueError(f"contrast must be > 0, got {self.contrast!r}")
        rates = tuple(self.target_rates) if isinstance(self.target_rates, (tuple, list)) else ()
        if len(rates) != 2 or not all(np.isfinite(p) and p > 0 for p in rates):
            raise ValueError(
                f"target_rates must be two finite rates > 0 (p_e, p_i), got {self.target_rates!r}"
            )
        if isinstance(self.rules, str):
            if self.rules != "default":
                raise ValueError(f"rules must be 'default' or a list of rules, got {self.rules!r}")
            p_e, p_i = self.target_rates
            rules = default_rules(p_e, p_i, self.learning_rate)
        else:
            rules = list(self.rules)
            if not all(callable(rule) for rule in rules):
                raise ValueError("every rule must be callable as rule(net, pre, r) -> deltas")
        return int(n_i), rules

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, X: np.ndarray, y: object = None) -> SSNEncoder:
        """Fit the whitening, then train the network with the local rules on rows of ``X``."""
        n_i, rules = self._check_params()
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        if self.whiten:
            zca = ZCAWhitener().fit(X)
            scale = float(np.linalg.norm(zca.transform(X), axis=1).mean()) or 1.0
            self.mean_, self.whitening_ = zca.mean_, zca.matrix_ / scale
        else:
            check_whitened(X)
            self.mean_, self.whitening_ = np.zeros(X.shape[1]), np.eye(X.shape[1])
        generator = torch.Generator().manual_seed(
            int(np.random.default_rng(self.random_state).integers(2**31))
        )
        net = SSN(
            self.n_components,
            n_i,
            X.shape[1],
            self.params if self.params is not None else SSNParams(),
            lateral=self.lateral,
            signed_input=self.signed_input,
            input_gain=self.input_gain,
        )
        Xw = torch.as_tensor(self._whiten(X), dtype=torch.float32)
        init_network(net, Xw, generator, init=self.init, targets=self.row_sums)
        self.training_log_ = train_local(
            net,
            Xw,
            rules,
            n_iter=self.n_iter,
            batch_size=self.batch_size,
            generator=generator,
            contrast=self.contrast,
            targets=self.row_sums,
        )
        self.network_ = net
        return self

    def _whiten(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) @ self.whitening_

    # -- encoding --------------------------------------------------------------------------------
    def rates(
        self,
        X: np.ndarray,
        *,
        contrast: float = 1.0,
        noise: float = 0.0,
        random_state: int | np.random.Generator | None = None,
        batch_size: int = 2048,
    ) -> np.ndarray:
        """Steady-state rates of all units (E then I), ``(n_samples, n_e + n_i)``, for
        ``contrast * whiten(X) + noise * xi``."""
        check_is_fitted(self, "network_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        U = degrade(self._whiten(X), contrast, noise, random_state)
        out = []
        for start in range(0, U.shape[0], batch_size):
            batch = torch.as_tensor(U[start : start + batch_size], dtype=torch.float32)
            out.append(self.network_.steady_state(batch).numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros((0, self.network_.n))

    def transform(
        self,
        X: np.ndarray,
        contrast: float = 1.0,
        noise: float = 0.0,
        random_state: int | np.random.Generator | None = None,
    ) -> np.ndarray:
        """E rates at the steady state, ``(n_samples, n_components)``."""
        return self.rates(X, contrast=contrast, noise=noise, random_state=random_state)[
            :, : self.n_components
        ]

    def ablated(self) -> SSNEncoder:
        """A fitted copy with the lateral connections removed (same ``Q``, ``W = 0``)."""
        check_is_fitted(self, "network_")
        other = copy.deepcopy(self)
        other.lateral = False
        other.network_.lateral = False
        return other

    # -- learned attributes ----------------------------------------------------------------------
    @property
    def components_(self) -> np.ndarray:
        """Feed-forward weights of the E units, ``(n_components, channels)`` (ON then OFF)."""
        check_is_fitted(self, "network_")
        return self.network_.Q_e.detach().numpy().copy()

    @property
    def lateral_(self) -> dict[str, np.ndarray]:
        """The four non-negative lateral blocks ``W_ee, W_ei, W_ie, W_ii``."""
        check_is_fitted(self, "network_")
        return {name: getattr(self.network_, name).detach().numpy().copy() for name in BLOCKS}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags
