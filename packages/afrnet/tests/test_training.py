import numpy as np
import pytest
import torch
from afrnet.data import ConnectomeDataset, synthetic_cohort
from afrnet.estimators import AFRNetClassifier, split_connectomes, stack_connectomes
from afrnet.model import AFRNet
from afrnet.training import TrainConfig, fit, protocol_split, subset
from sklearn.base import clone
from sklearn.exceptions import NotFittedError


@pytest.fixture(scope="module")
def cohort():
    return synthetic_cohort(
        24, base="geometric", num_nodes=12, timepoints=100, density=None, seed=5
    )


def test_protocol_split_is_balanced_stratified_and_fixed():
    y = np.array([0] * 30 + [1] * 20)
    a, b = protocol_split(y), protocol_split(y)
    assert all(
        np.array_equal(x, z)
        for x, z in zip((a.train, a.val, a.test), (b.train, b.val, b.test), strict=False)
    )
    used = np.concatenate([a.train, a.val, a.test])
    assert len(used) == 40 and len(set(used)) == 40
    assert y[used].sum() == 20
    assert abs(len(a.test) - 12) <= 1


def test_fit_keeps_the_best_validation_auc(cohort):
    data = ConnectomeDataset(cohort.sc, cohort.fc, cohort.y)
    split = protocol_split(cohort.y, val_size=0.3)
    torch.manual_seed(0)
    model = AFRNet(12, d_model=16, nhead=2, dim_feedforward=32)
    states = []
    result = fit(
        model,
        subset(data, split.train),
        subset(data, split.val),
        TrainConfig(epochs=3, batch_size=8),
        on_epoch=lambda e, row: states.append(
            {k: v.clone() for k, v in model.state_dict().items()}
        ),
    )
    aucs = [row["val_auc"] for row in result.history]
    assert result.best_epoch == int(np.argmax(aucs))
    for key, value in model.state_dict().items():
        assert torch.equal(value, states[result.best_epoch][key])


def test_classifier_is_a_scikit_learn_estimator(cohort):
    clf = AFRNetClassifier(epochs=1, batch_size=8, d_model=16, nhead=2)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    X = stack_connectomes(cohort.sc, cohort.fc)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    labels = np.where(cohort.y == 1, "patient", "control")
    assert clf.fit(X, labels) is clf
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    assert set(clf.predict(X)) <= {"patient", "control"}
    assert list(clf.classes_) == ["control", "patient"]
    sc, _fc = split_connectomes(X)
    np.testing.assert_array_equal(sc, cohort.sc)
    np.testing.assert_allclose(clf.predict_proba((cohort.sc, cohort.fc)), proba)
    with pytest.raises(ValueError, match="2N\\^2"):
        clf.predict_proba(np.zeros((2, 7)))


def _fit_full_batch(label: str, steps: int) -> list[float]:
    """Training AUC every 10 full-batch Adam steps of AFR-Net without dropout on a tiny cohort
    whose label is one of its coins (``functional``: the pathway's FC coupling; ``structural``:
    its SC)."""
    from sklearn.metrics import roc_auc_score

    cohort = synthetic_cohort(20, delta=0.6, timepoints=300, base="geometric", num_nodes=16, seed=1)
    y = torch.as_tensor(getattr(cohort, label))
    batch = ConnectomeDataset(cohort.sc, cohort.fc, y.numpy()).batch(list(range(20)))
    torch.manual_seed(0)
    model = AFRNet(16, dropout=0.0).eval()  # eval: the head's and attention's fixed dropouts too
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    aucs = []
    for step in range(steps):
        optimizer.zero_grad()
        logits = model(batch["sc"], batch["fc"], features=batch["features"]).logits
        torch.nn.functional.cross_entropy(logits, y).backward()
        optimizer.step()
        if step % 10 == 9:
            aucs.append(roc_auc_score(y.numpy(), logits.detach()[:, 1].numpy()))
    return aucs


@pytest.mark.slow
@pytest.mark.parametrize("label", ["functional", "structural"])
def test_afrnet_fits_a_tiny_cohort_on_either_coin(label):
    # Issue 19: AFR-Net stayed at chance on --quick. This guards the gradient path end to end
    # (encoder, gate, energy, mask, transformer, head): with dropout off, 20 subjects are fitted
    # from either half of the SC-FC coupling within 60 full-batch steps.
    aucs = _fit_full_batch(label, 60)
    assert max(aucs) > 0.9, aucs
