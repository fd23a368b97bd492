"""ppai: prediction-powered inference on adaptively collected data (contextual bandits, A/B tests).

Combines a pretrained model's predictions on a large unlabeled pool with inverse-propensity-weighted
Z-estimation on the adaptively collected labeled rounds, with power tuning (PPI++). The estimating
equation, variance and tuning are a reconstruction from the paper's abstract (see the README).
"""

from importlib.metadata import PackageNotFoundError, version

from ppai.estimating import Block, ScoreStats, covariance, score_stats, tune_lambda
from ppai.estimator import PPAI, fit_blocks
from ppai.functional import (
    from_obp,
    ipw_ci,
    ppai_effect_ci,
    ppai_logistic_ci,
    ppai_logistic_pointestimate,
    ppai_logistic_pval,
    ppai_mean_ci,
    ppai_mean_pointestimate,
    ppai_mean_pval,
    ppai_ols_ci,
    ppai_ols_pointestimate,
    ppai_ols_pval,
    ppai_policy_value_ci,
    ppai_quantile_ci,
    ppai_quantile_pointestimate,
    ppi_ignoring_adaptivity_ci,
)
from ppai.problems import LogisticProblem, MeanProblem, OLSProblem, QuantileProblem, ZProblem

try:
    __version__ = version("ppai")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "PPAI",
    "Block",
    "LogisticProblem",
    "MeanProblem",
    "OLSProblem",
    "QuantileProblem",
    "ScoreStats",
    "ZProblem",
    "__version__",
    "covariance",
    "fit_blocks",
    "from_obp",
    "ipw_ci",
    "ppai_effect_ci",
    "ppai_logistic_ci",
    "ppai_logistic_pointestimate",
    "ppai_logistic_pval",
    "ppai_mean_ci",
    "ppai_mean_pointestimate",
    "ppai_mean_pval",
    "ppai_ols_ci",
    "ppai_ols_pointestimate",
    "ppai_ols_pval",
    "ppai_policy_value_ci",
    "ppai_quantile_ci",
    "ppai_quantile_pointestimate",
    "ppi_ignoring_adaptivity_ci",
    "score_stats",
    "tune_lambda",
]
