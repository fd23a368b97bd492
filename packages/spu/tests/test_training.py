"""Baselines in the same API, the training protocol, MLM masking and the AUROC oracle."""

import numpy as np
import pytest
import torch
from spu_dna import SPUConfig, SPUForMaskedLM, SPUForSequenceClassification
from spu_dna.baselines import BASELINES, HyenaClassifier
from spu_dna.data import motif_task
from spu_dna.training import Protocol, _schedule, auroc, evaluate, fit, mask_for_mlm, pretrain_mlm


@pytest.mark.parametrize("name", list(BASELINES))
def test_baselines_share_the_classifier_api(name):
    torch.manual_seed(0)
    kwargs = {"state_size": 4, "n_layers": 1} if name == "Mamba" else {}
    model = BASELINES[name](d_model=16, **kwargs)
    ids = torch.randint(5, 9, (2, 24))
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([0, 1]))
    assert out.logits.shape == (2, 2) and torch.isfinite(out.loss)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_hyena_is_causal():
    torch.manual_seed(0)
    mixer = HyenaClassifier(d_model=8, n_layers=1).mixers[0].double()
    x = torch.randn(1, 10, 8, dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(lambda v: mixer(v, None), x)[0, :, :, 0]
    reach = jac.abs().sum(dim=(1, 3))  # (t, s)
    future = torch.triu(torch.ones(10, 10, dtype=torch.bool), diagonal=1)
    assert reach[future].max() < 1e-12 and reach[~future].min() > 1e-6


def test_auroc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, 60).astype(float)  # many ties
    labels = rng.integers(0, 2, 60)
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = (pos[:, None] > neg[None]).mean() + 0.5 * (pos[:, None] == neg[None]).mean()
    assert auroc(scores, labels) == pytest.approx(pairs)
    assert np.isnan(auroc(scores, np.ones(60)))


def test_schedule_warms_up_then_decays_to_the_floor():
    factor = _schedule(Protocol(warmup=0.1, min_lr_ratio=0.1), total=100)
    assert factor(0) == pytest.approx(0.1) and factor(9) == pytest.approx(1.0)
    assert factor(99) == pytest.approx(0.1, abs=1e-3)
    assert all(factor(i) >= factor(i + 1) for i in range(10, 99))


def test_mlm_masking_proportions():
    ids = torch.randint(5, 9, (200, 100))
    ids[:, 90:] = 0  # padding is never a target
    inputs, labels = mask_for_mlm(ids, torch.Generator().manual_seed(0))
    target = labels != -100
    assert abs(target[:, :90].float().mean() - 0.15) < 0.01 and not target[:, 90:].any()
    assert torch.equal(labels[target], ids[target])
    masked = (inputs[target] == 3).float().mean()
    assert abs(masked - 0.8) < 0.02


def test_fit_learns_a_planted_motif_and_mlm_lowers_the_loss():
    # a fixture that must learn: one strong motif in short sequences
    torch.manual_seed(0)
    train, test = motif_task(n=384, length=32, seed=0).split(256)
    config = SPUConfig(d_model=16, n_layers=1, lpl_groups=4, dpl_max_len=32, dropout=0.0)
    model = SPUForSequenceClassification(config)
    fit(model, train, Protocol(lr=5e-3, epochs=6, batch_size=32))
    assert evaluate(model, test)["accuracy"] > 0.6
    # MLM on a periodic corpus: the loss falls well below uniform guessing over 4 bases
    mlm = SPUForMaskedLM(config)
    corpus = torch.tensor([[5, 6, 7, 8] * 8] * 64)
    losses = []
    pretrain_mlm(mlm, corpus, Protocol(lr=1e-2, epochs=15, batch_size=16))
    with torch.no_grad():
        inputs, labels = mask_for_mlm(corpus, torch.Generator().manual_seed(1))
        losses.append(mlm(input_ids=inputs, labels=labels).loss.item())
    assert losses[0] < 0.5 * np.log(4)
