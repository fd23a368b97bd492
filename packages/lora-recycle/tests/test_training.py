import pytest
import torch
from lora_recycle import (
    AdaptiveMergeConfig,
    LoraExpert,
    LoraPool,
    get_adaptive_merge_model,
    presets,
    train_adaptive_merge,
)
from lora_testmodels import make_mlp


class WithLoss(torch.nn.Module):
    """An MLP classifier speaking the Trainer's language: forward(x, labels) -> {"loss", "logits"}."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, labels=None):
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(logits, labels)
        return out


def _data(n, seed, teacher=None):
    """Inputs with labels from ``teacher`` (by default a fixed rule on two coordinates)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    with torch.no_grad():
        y = (
            (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
            if teacher is None
            else teacher(x)["logits"].argmax(-1)
        )
    return [{"x": xi, "labels": int(yi)} for xi, yi in zip(x, y, strict=False)]


def _pool():
    g = torch.Generator().manual_seed(0)
    experts = [
        LoraExpert(
            f"e{i}",
            {
                "net.0": (torch.randn(2, 8, generator=g), torch.randn(12, 2, generator=g) * 0.3),
                "net.2": (torch.randn(2, 12, generator=g), torch.randn(4, 2, generator=g) * 0.3),
            },
            1.0,
        )
        for i in range(4)
    ]
    return LoraPool.from_experts(experts, WithLoss(make_mlp()))


def _valid_loss(model, data):
    x = torch.stack([d["x"] for d in data])
    y = torch.tensor([d["labels"] for d in data])
    with torch.no_grad():
        return float(model(x, labels=y)["loss"])


def test_step_zero_is_a_candidate_so_validation_never_worsens():
    train, valid = _data(16, 1), _data(8, 2)
    base_loss = _valid_loss(WithLoss(make_mlp()), valid)
    # a huge lr makes every trained step worse than the base: the base must come back
    model = get_adaptive_merge_model(WithLoss(make_mlp()), _pool(), presets.ours().config)
    result = train_adaptive_merge(
        model, train, valid, lr=50.0, max_steps=6, grad_accum=2, eval_every=2
    )
    assert result.start_eval_loss == pytest.approx(base_loss, rel=1e-6)
    assert result.best_eval_loss <= base_loss
    assert _valid_loss(model, valid) == pytest.approx(result.best_eval_loss, rel=1e-6)
    assert [s for s, _ in result.history][:2] == [0, 2]


def test_training_moves_coefficients_and_improves():
    # the labels come from the base plus expert 0 at coefficient 2: the merge can learn them
    teacher = get_adaptive_merge_model(
        WithLoss(make_mlp()),
        _pool().subset([0]),
        AdaptiveMergeConfig(activation="identity", init="ones"),
    )
    with torch.no_grad():
        teacher.coefficient_groups["net__0"].w.fill_(2.0)
        teacher.coefficient_groups["net__2"].w.fill_(2.0)
    train, valid = _data(64, 3, teacher), _data(16, 4, teacher)
    model = get_adaptive_merge_model(
        WithLoss(make_mlp()), _pool(), AdaptiveMergeConfig(activation="identity")
    )
    before = {k: v.clone() for k, v in model.coefficients().items()}
    result = train_adaptive_merge(
        model,
        train,
        valid,
        lr=0.1,
        max_steps=20,
        batch_size=4,
        grad_accum=1,
        eval_every=5,
        early_stopping_patience=5,
    )
    assert result.best_eval_loss < result.start_eval_loss - 0.05
    assert any(not torch.equal(before[k], v) for k, v in model.coefficients().items())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lr": 0.0}, "lr"),
        ({"lr": -1.0}, "lr"),
        ({"max_steps": 0}, "max_steps"),
        ({"grad_accum": 0}, "grad_accum"),
        ({"warmup_ratio": 1.0}, "warmup_ratio"),  # transformers would read it as 1 warmup step
        ({"warmup_ratio": -0.1}, "warmup_ratio"),
    ],
)
def test_bad_training_arguments(kwargs, match):
    model = get_adaptive_merge_model(WithLoss(make_mlp()), _pool())
    with pytest.raises(ValueError, match=match):
        train_adaptive_merge(model, _data(4, 0), _data(4, 1), **kwargs)
    with pytest.raises(ValueError, match="at least 2 validation examples"):
        train_adaptive_merge(model, _data(4, 0), _data(1, 1))
