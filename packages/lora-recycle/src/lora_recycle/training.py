"""``train_adaptive_merge``: the paper's training recipe on the Hugging Face ``Trainer`` (spec §2.2).

AdamW (β = 0.9, 0.999, no weight decay), cosine schedule with 10 % warm-up, validation every
``eval_every`` steps *and at step 0*, early stopping, best checkpoint by validation loss. Step 0 is
the base model under zero init, and it is a best-checkpoint candidate here (HF's ``eval_on_start``
evaluates it but never saves it), so the returned model's validation loss never exceeds the base's.
The best trainable state is kept in memory (only the coefficients are trainable, a few kB), not on
disk. Runs as is under ``torchrun``/``accelerate launch`` (the Trainer's DDP/FSDP).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class TrainResult:
    """``best_step`` (0 = the starting point), its validation loss, step 0's, and the eval history."""

    best_step: int
    best_eval_loss: float
    start_eval_loss: float
    history: list[tuple[int, float]] = field(default_factory=list)
    stopped_early: bool = False


def _check(
    lr: float, max_steps: int, grad_accum: int, eval_every: int, valid: Sequence[Any], patience: int
) -> None:
    if not lr > 0 or not math.isfinite(lr):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    for name, value in (
        ("max_steps", max_steps),
        ("grad_accum", grad_accum),
        ("eval_every", eval_every),
        ("early_stopping_patience", patience),
    ):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if len(valid) < 2:
        raise ValueError(
            f"need at least 2 validation examples for best-checkpoint selection, got {len(valid)}"
        )


def _callback(model: nn.Module, patience: int, result: TrainResult) -> Any:
    from transformers import TrainerCallback

    class BestTrainableState(TrainerCallback):
        """Keeps the trainable parameters of the best evaluation (step 0 included); stops early."""

        def __init__(self) -> None:
            self.best: dict[str, torch.Tensor] | None = None
            self.bad_evals = 0

        def on_evaluate(
            self,
            args: Any,
            state: Any,
            control: Any,
            metrics: dict[str, float] | None = None,
            **kw: Any,
        ) -> None:
            loss = float((metrics or {})["eval_loss"])
            result.history.append((state.global_step, loss))
            if state.global_step == 0:
                result.start_eval_loss = loss
            if self.best is None or loss < result.best_eval_loss:
                result.best_eval_loss, result.best_step = loss, state.global_step
                self.best = {
                    n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad
                }
                self.bad_evals = 0
            else:
                self.bad_evals += 1
                if self.bad_evals >= patience:
                    control.should_training_stop = True
                    result.stopped_early = True

        def restore(self) -> None:
            assert self.best is not None, "no evaluation ran"
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, value in self.best.items():
                    params[name].copy_(value)

    return BestTrainableState()


def train_adaptive_merge(
    model: nn.Module,
    train_dataset: Sequence[Any],
    valid_dataset: Sequence[Any],
    *,
    lr: float = 5e-2,
    max_steps: int = 100,
    batch_size: int = 1,
    grad_accum: int = 8,
    eval_every: int = 10,
    early_stopping_patience: int = 20,
    warmup_ratio: float = 0.1,
    scheduler: str = "cosine",
    l1: float = 0.0,
    seed: int = 123,
    data_collator: Callable[[list[Any]], dict[str, Any]] | None = None,
    output_dir: str | None = None,
    **training_args: Any,
) -> TrainResult:
    """Train ``model``'s trainable parameters; leave it at the best validation checkpoint.

    Examples are dicts of the model's forward keywords including ``labels`` (mask prompt tokens with
    -100 for the paper's assistant-only loss); the model must return ``loss``. ``l1`` adds the
    upstream ``regularization_coeff`` penalty on 1-D trainable parameters. Extra keywords go to
    ``transformers.TrainingArguments``.
    """
    from transformers import Trainer, TrainingArguments, default_data_collator
    from transformers.trainer_callback import PrinterCallback

    _check(lr, max_steps, grad_accum, eval_every, valid_dataset, early_stopping_patience)
    if not 0 <= warmup_ratio < 1:  # transformers reads warmup_steps >= 1 as a step count
        raise ValueError(f"warmup_ratio must be in [0, 1), got {warmup_ratio!r}")
    result = TrainResult(best_step=0, best_eval_loss=math.inf, start_eval_loss=math.nan)
    callback = _callback(model, early_stopping_patience, result)
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(
            output_dir=output_dir or tmp,
            per_device_train_batch_size=batch_size,
            per_device_eval_batch_size=max(batch_size, 8),
            gradient_accumulation_steps=grad_accum,
            max_steps=max_steps,
            learning_rate=lr,
            weight_decay=0.0,
            adam_beta1=0.9,
            adam_beta2=0.999,
            optim="adamw_torch",
            lr_scheduler_type=scheduler,
            warmup_steps=warmup_ratio,
            eval_strategy="steps",
            eval_steps=eval_every,
            eval_on_start=True,
            save_strategy="no",
            report_to="none",
            label_names=["labels"],
            remove_unused_columns=False,
            disable_tqdm=True,
            logging_strategy="no",
            seed=seed,
            use_cpu=not torch.cuda.is_available(),
            **training_args,
        )
        trainer = _trainer_class(Trainer, l1)(
            model=model,
            args=args,
            train_dataset=list(train_dataset),
            eval_dataset=list(valid_dataset),
            data_collator=data_collator or default_data_collator,
            callbacks=[callback],
        )
        # Our wrapper forwards **kwargs; the base model (an MLP, say) need not take num_items_in_batch.
        trainer.model_accepts_loss_kwargs = False
        trainer.remove_callback(PrinterCallback)  # the history is returned, not printed
        trainer.train()
        # The last step is evaluated too, so a late best is not missed between eval points.
        if result.history[-1][0] != trainer.state.global_step:
            trainer.evaluate()
        callback.restore()
    return result


def _trainer_class(trainer: type, l1: float) -> type:
    if l1 == 0:
        return trainer

    class L1Trainer(trainer):
        def compute_loss(
            self, model: nn.Module, inputs: dict[str, Any], return_outputs: bool = False, **kw: Any
        ) -> Any:
            out = super().compute_loss(model, inputs, return_outputs=return_outputs, **kw)
            penalty = sum(
                p.abs().sum() for p in model.parameters() if p.requires_grad and p.ndim == 1
            )
            if return_outputs:
                return out[0] + l1 * penalty, out[1]
            return out + l1 * penalty

    return L1Trainer
