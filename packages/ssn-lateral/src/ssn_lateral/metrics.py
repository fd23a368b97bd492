"""Read-outs of a code: how many units it uses, how dense it is, what it costs, what it keeps.

Codes are ``(n_samples, n_units)`` arrays of rates. The linear read-outs are trained on the codes of
*clean* inputs and tested on the codes of degraded ones (spec section 2.4).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "active_fraction",
    "cost",
    "label_decoder",
    "participation_ratio",
    "reconstruction_r2",
    "texture_accuracy",
    "treves_rolls",
]


def _codes(r: np.ndarray) -> np.ndarray:
    r = np.asarray(r, dtype=np.float64)
    if r.ndim == 1:
        r = r[None]
    if r.ndim != 2 or r.shape[1] == 0:
        raise ValueError(f"codes must be (n_samples, n_units) with n_units >= 1, got {r.shape}")
    if not np.isfinite(r).all():
        raise ValueError("codes have NaN or infinite entries")
    return r


def active_fraction(
    r: np.ndarray, threshold: float | None = None, *, relative: float | None = None
) -> np.ndarray:
    """Per sample, the fraction of units above ``threshold`` or above ``relative`` x its own max.

    Exactly one of ``threshold`` (absolute rate) and ``relative`` (e.g. 0.05) must be given. A
    sample whose every rate is 0 has no active unit under either.
    """
    r = _codes(r)
    if (threshold is None) == (relative is None):
        raise ValueError(
            "give exactly one of threshold= (absolute) and relative= (fraction of max)"
        )
    if relative is not None:
        if not 0 < relative < 1:
            raise ValueError(f"relative must be in (0, 1), got {relative}")
        peak = np.abs(r).max(axis=1, keepdims=True)
        return ((np.abs(r) > relative * peak) & (peak > 0)).mean(axis=1)
    return (r > threshold).mean(axis=1)


def treves_rolls(r: np.ndarray) -> np.ndarray:
    """Population sparseness ``(mean_i r_i)^2 / mean_i r_i^2`` per sample: 1 dense, 1/N one-hot.

    Rates are taken in absolute value (signed codes such as ICA's); an all-zero sample gives NaN.
    """
    r = np.abs(_codes(r))
    second = (r**2).mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(second > 0, r.mean(axis=1) ** 2 / second, np.nan)


def participation_ratio(R: np.ndarray) -> float:
    """``(sum lam)^2 / sum lam^2`` of the response covariance: the number of dimensions used."""
    R = _codes(R)
    if R.shape[0] < 2:
        raise ValueError(f"participation_ratio needs >= 2 samples, got {R.shape[0]}")
    lam = np.clip(
        np.linalg.eigvalsh(np.cov(R, rowvar=False).reshape(R.shape[1], R.shape[1])), 0, None
    )
    total = (lam**2).sum()
    return float(lam.sum() ** 2 / total) if total > 0 else 0.0


def cost(r: np.ndarray) -> np.ndarray:
    """Metabolic cost per sample: the summed rate ``sum_i |r_i|``."""
    return np.abs(_codes(r)).sum(axis=1)


def reconstruction_r2(
    codes_clean: np.ndarray,
    X_clean: np.ndarray,
    codes_test: np.ndarray,
    X_test: np.ndarray,
    *,
    alpha: float = 1e-3,
) -> float:
    """R^2 of the clean test patches from a ridge decoder fitted on clean training codes.

    ``codes_test`` are codes of degraded versions of ``X_test``; the target stays the clean patch.
    """
    from sklearn.linear_model import Ridge
    from sklearn.metrics import r2_score

    decoder = Ridge(alpha=alpha).fit(_codes(codes_clean), X_clean)
    return float(
        r2_score(X_test, decoder.predict(_codes(codes_test)), multioutput="variance_weighted")
    )


def label_decoder(codes_clean: np.ndarray, y_clean: np.ndarray, *, C: float = 1.0):  # -> Pipeline
    """A standardised logistic regression fitted on clean codes (fit once, score many sweeps)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=500))
    return model.fit(_codes(codes_clean), y_clean)


def texture_accuracy(
    codes_clean: np.ndarray,
    y_clean: np.ndarray,
    codes_test: np.ndarray,
    y_test: np.ndarray,
    *,
    C: float = 1.0,
) -> float:
    """Accuracy on degraded test codes of a logistic regression fitted on clean training codes."""
    return float(label_decoder(codes_clean, y_clean, C=C).score(_codes(codes_test), y_test))
