"""One LoRA expert: its factors per module, its scaling, and reading it from a PEFT adapter folder.

A PEFT folder holds ``adapter_config.json`` and ``adapter_model.safetensors`` whose keys look like
``base_model.model.<module>.lora_A.weight``. We keep the factors raw and the scaling ``s`` beside
them, so it is applied exactly once: by the adaptive layer through ``m = c·s``, and by the ΔW-based
merges through :meth:`LoraExpert.scaled_factors` (each factor times ``sqrt(s)``, spec §2.1).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from lora_recycle.errors import AdapterError, NonFiniteAdapterError, UnsupportedAdapterError

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
_KEY = re.compile(
    r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<factor>[AB])(?:\.[^.]+)?\.weight$"
)
# Init schemes whose adapters are not plain LoRAs of the base (they rewrite the base's weights).
_SPECIAL_INITS = ("loftq", "eva", "corda", "olora", "pissa")


@dataclass
class LoraExpert:
    """A LoRA: ``factors[module] = (A, B)`` with ``A: r×in``, ``B: out×r``; ΔW = scaling · B A."""

    adapter_id: str
    factors: dict[str, tuple[torch.Tensor, torch.Tensor]]
    scaling: float
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        """The largest rank over modules (every module has the same rank in a filtered pool)."""
        return max(a.shape[0] for a, _ in self.factors.values())

    @property
    def modules(self) -> list[str]:
        return list(self.factors)

    def scaled_factors(self, module: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sqrt(s)·A, sqrt(s)·B)``: their product carries the scaling once."""
        a, b = self.factors[module]
        root = math.sqrt(self.scaling)
        return a * root, b * root

    def delta(self, module: str) -> torch.Tensor:
        """ΔW = s · B A for one module (forms the full matrix: for merges and tests)."""
        a, b = self.factors[module]
        return self.scaling * (b @ a)

    def with_factors(self, factors: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> LoraExpert:
        return LoraExpert(self.adapter_id, factors, self.scaling, dict(self.config))


def scaling_from_config(config: Mapping[str, Any], rank: int) -> float:
    """``lora_alpha / r``, or ``lora_alpha / sqrt(r)`` for rsLoRA (spec §2.1)."""
    alpha = float(config.get("lora_alpha", rank))
    if not math.isfinite(alpha) or alpha <= 0:  # NaN <= 0 is False: NaN would pass a bare check
        raise ValueError(f"lora_alpha must be a finite number > 0, got {alpha}")
    return alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)


def config_rejection(config: Mapping[str, Any], task_type: str | None) -> tuple[str, str] | None:
    """``(reason, message)`` when ``config`` falls outside the paper's pool filter, else ``None``."""
    checks: list[tuple[bool, str, str]] = [
        (
            config.get("peft_type", "LORA") != "LORA",
            "not_lora",
            f"peft_type {config.get('peft_type')!r} is not LORA",
        ),
        (
            task_type is not None and config.get("task_type") != task_type,
            "task_type",
            f"task_type {config.get('task_type')!r}, expected {task_type!r}",
        ),
        (
            bool(config.get("modules_to_save")),
            "modules_to_save",
            f"modules_to_save={config.get('modules_to_save')!r} (full weights, not a LoRA)",
        ),
        (
            config.get("bias", "none") != "none",
            "bias",
            f"bias={config.get('bias')!r}, expected 'none'",
        ),
        (bool(config.get("use_dora")), "dora", "use_dora=True (DoRA is not a plain LoRA)"),
        (bool(config.get("layer_replication")), "layer_replication", "layer_replication is set"),
        (bool(config.get("lora_bias")), "lora_bias", "lora_bias=True"),
        (
            bool(config.get("fan_in_fan_out")),
            "fan_in_fan_out",
            "fan_in_fan_out=True (Conv1D layout)",
        ),
        (
            bool(config.get("rank_pattern")),
            "rank_pattern",
            f"rank_pattern={config.get('rank_pattern')!r}",
        ),
        (
            bool(config.get("alpha_pattern")),
            "alpha_pattern",
            f"alpha_pattern={config.get('alpha_pattern')!r}",
        ),
        (
            bool(config.get("trainable_token_indices")),
            "trainable_tokens",
            "trainable_token_indices is set",
        ),
        (bool(config.get("target_parameters")), "target_parameters", "target_parameters is set"),
        (
            any(config.get(f"{name}_config") for name in ("loftq", "eva", "corda"))
            or str(config.get("init_lora_weights", True)).lower().startswith(_SPECIAL_INITS),
            "special_init",
            f"init_lora_weights={config.get('init_lora_weights')!r} rewrites the base (LoftQ/EVA/CorDA/PiSSA)",
        ),
    ]
    for failed, reason, message in checks:
        if failed:
            return reason, message
    return None


def parse_state_dict(
    adapter_id: str, state: Mapping[str, torch.Tensor], dtype: torch.dtype
) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], list[str]]:
    """PEFT keys -> ``{module: (A, B)}`` in ``dtype``; also the ``lm_head`` modules dropped.

    Raises :class:`AdapterError` for a lone A or B, or a key that is not a LoRA factor, and
    :class:`NonFiniteAdapterError` naming the tensor that holds NaN/Inf.
    """
    halves: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        match = _KEY.match(key)
        if match is None:
            raise UnsupportedAdapterError(
                adapter_id, "unknown_key", f"key {key!r} is not a LoRA factor"
            )
        if not torch.isfinite(tensor).all():
            raise NonFiniteAdapterError(
                adapter_id, "non_finite", f"tensor {key!r} holds NaN or Inf"
            )
        halves.setdefault(match["module"], {})[match["factor"]] = tensor.to(dtype)
    factors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    dropped = []
    for module, pair in halves.items():
        if set(pair) != {"A", "B"}:
            raise AdapterError(
                adapter_id,
                "lone_factor",
                f"module {module!r} has only lora_{''.join(pair)} (need A and B)",
            )
        if module.split(".")[-1] == "lm_head":
            dropped.append(module)
            continue
        a, b = pair["A"], pair["B"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise AdapterError(
                adapter_id,
                "lone_factor",
                f"module {module!r}: A {tuple(a.shape)} and B {tuple(b.shape)} do not chain",
            )
        factors[module] = (a, b)
    return factors, dropped


def read_adapter_folder(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The config and raw tensors of a PEFT adapter folder (``adapter_model.safetensors`` only)."""
    from safetensors.torch import load_file

    adapter_id = str(path)
    if not (path / CONFIG_FILE).is_file():
        raise AdapterError(adapter_id, "missing_config", f"no {CONFIG_FILE} in {path}")
    if not (path / WEIGHTS_FILE).is_file():
        raise AdapterError(adapter_id, "missing_weights", f"no {WEIGHTS_FILE} in {path}")
    config = json.loads((path / CONFIG_FILE).read_text())
    return config, load_file(str(path / WEIGHTS_FILE))


def resolve_adapter_path(id_or_dir: str) -> Path:
    """A local folder as is; otherwise a hub id, downloaded (config and safetensors only)."""
    path = Path(id_or_dir).expanduser()
    if path.exists():
        return path.resolve()
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise FileNotFoundError(
            f"{id_or_dir!r} is not a local folder, and loading hub ids needs huggingface_hub "
            "(pip install 'lora-recycle[transformers]')"
        ) from exc
    return Path(snapshot_download(id_or_dir, allow_patterns=[CONFIG_FILE, WEIGHTS_FILE]))


def save_adapter_folder(
    path: str | Path,
    factors: Mapping[str, tuple[torch.Tensor, torch.Tensor]],
    config: Mapping[str, Any],
) -> Path:
    """Write ``factors`` as a PEFT adapter folder (keys ``base_model.model.<m>.lora_{A,B}.weight``)."""
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for module, (a, b) in factors.items():
        tensors[f"base_model.model.{module}.lora_A.weight"] = a.detach().contiguous().cpu()
        tensors[f"base_model.model.{module}.lora_B.weight"] = b.detach().contiguous().cpu()
    save_file(tensors, str(out / WEIGHTS_FILE))
    (out / CONFIG_FILE).write_text(json.dumps(dict(config), indent=2, default=str))
    return out


def lora_config_dict(
    rank: int, alpha: float, target_modules: list[str], **extra: Any
) -> dict[str, Any]:
    """A plain PEFT LoRA config as JSON; ``target_modules`` become an exact-name regex."""
    pattern = "^(" + "|".join(re.escape(m) for m in sorted(target_modules)) + ")$"
    config: dict[str, Any] = {
        "peft_type": "LORA",
        "task_type": None,
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "target_modules": pattern,
        "bias": "none",
        "use_rslora": False,
        "use_dora": False,
        "fan_in_fan_out": False,
        "modules_to_save": None,
        "init_lora_weights": True,
        "base_model_name_or_path": None,
        "inference_mode": True,
    }
    config.update(extra)
    return config
