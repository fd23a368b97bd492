"""Converters for shapiq users (shapiq is imported only here, and only when called)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from adalina.semivalues import SemiValue

if TYPE_CHECKING:
    from adalina.estimators import SemiValueResult


def shapiq_index(semivalue: SemiValue) -> str:
    """shapiq's name for a first-order semi-value: ``"SV"``, ``"BV"``, else adalina's own name.

    shapiq has no index for weighted Banzhaf (p != 0.5) or Beta Shapley values; their
    ``InteractionValues`` carry adalina's name and shapiq warns that it does not know it.
    """
    if semivalue.kind == "shapley":
        return "SV"
    if semivalue.kind == "banzhaf" and semivalue.p == 0.5:
        return "BV"
    return semivalue.name


def to_interaction_values(result: SemiValueResult) -> Any:
    """A :class:`~adalina.estimators.SemiValueResult` as a first-order ``shapiq.InteractionValues``.

    ``values`` keep their order (player ``i`` is the interaction ``(i,)``), ``estimation_budget``
    is the number of utility evaluations, ``baseline_value`` is ``U(∅)`` (0 when the estimator did
    not query it, as for Adalina-All) and the empty interaction is not included (``min_order=1``).
    """
    import shapiq

    if result.semivalue is None:
        raise ValueError("this result does not record its semi-value; rerun approximate")
    values = np.asarray(result.values, dtype=float)
    n = values.size
    return shapiq.InteractionValues(
        values=values.copy(),
        index=shapiq_index(result.semivalue),
        max_order=1,
        min_order=1,
        n_players=n,
        interaction_lookup={(i,): i for i in range(n)},
        estimated=True,
        estimation_budget=int(result.n_queries),
        baseline_value=float(result.baseline_value or 0.0),
    )
