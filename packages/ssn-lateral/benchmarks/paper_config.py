"""Every hyper-parameter of the reconstruction in one place, for when the paper's settings are known.

    python benchmarks/paper_config.py            # prints the configuration as JSON

Edit ``PAPER`` (each value is our reconstruction today; the paper's body and code are not public),
then build the encoder with :func:`build`. Nothing here has been matched to the paper's figures.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ssn_lateral import RowSums, SSNEncoder, SSNParams, plasticity

PAPER: dict[str, Any] = {
    # dynamics (canonical SSN values, spec section 2.1)
    "params": {
        "n": 2.0,
        "k": 0.04,
        "tau_e": 20.0,
        "tau_i": 10.0,
        "dt": 1.0,
        "t_max": 2000.0,
        "tol": 1e-4,
        "r_max": 1e4,
    },
    # network (spec section 2.3, guesses)
    "n_components": 64,
    "n_inhibitory": 16,
    "signed_input": True,
    "input_gain": 150.0,
    "row_sums": {"ee": 0.0, "ei": 1.3, "ie": 1.2, "ii": 0.5, "q_norm": 1.0},
    # plasticity (SAILnet / E-I Net family, recalled)
    "rules": {"eta": 1e-2, "p_e": 1.0, "p_i": 2.0, "ee_rule": None, "homeostasis": False},
    "n_iter": 2000,
    "batch_size": 100,
    "contrast": 1.0,
    "init": "patches",
    # data (spec section 5)
    "patch_size": 8,
    "whiten": "zca",
}


def build(config: dict[str, Any] = PAPER, random_state: int | None = 0) -> SSNEncoder:
    """An unfitted :class:`SSNEncoder` with every setting of ``config``."""
    r = config["rules"]
    rules = plasticity.switching_rules(r["p_e"], r["p_i"], r["eta"])
    if r["ee_rule"] == "cov":
        rules.append(plasticity.CovarianceEE(r["eta"]))
    elif r["ee_rule"] == "like-to-like":
        rules.append(plasticity.FixedLikeToLike())
    if r["homeostasis"]:
        rules.append(plasticity.HomeostaticThreshold(r["eta"], r["p_e"], r["p_i"]))
    return SSNEncoder(
        config["n_components"], config["n_inhibitory"], rules=rules, n_iter=config["n_iter"],
        batch_size=config["batch_size"], contrast=config["contrast"], signed_input=config["signed_input"],
        input_gain=config["input_gain"], whiten=False, row_sums=RowSums(**config["row_sums"]),
        init=config["init"], params=SSNParams(**config["params"]), random_state=random_state,
    )  # fmt: skip


if __name__ == "__main__":
    enc = build()
    print(
        json.dumps({**PAPER, "encoder": {k: str(v) for k, v in enc.get_params().items()}}, indent=2)
    )
    assert dataclasses.is_dataclass(enc.get_params()["params"])
