import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "geometry_replication.py"


def _script():
    spec = importlib.util.spec_from_file_location("geometry_replication", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--setting", "bimodal, M = 2"], "invalid choice"),
        (["--seeds", "3", "4", "3"], "--seeds must be distinct"),
    ],
)
def test_bad_arguments_are_rejected_before_any_training(argv, message, capsys, monkeypatch):
    module = _script()
    monkeypatch.setattr(module.rep, "_train_and_test", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit):
        module.main(argv)
    assert message in capsys.readouterr().err


def _training_atoms(M: int, seed: int, stratified: bool) -> list[float]:
    """The winds meta-training keeps in the bimodal geometry setting at the --quick budget."""
    import dataclasses

    from wasserstein_meta import reproduce as rep
    from wasserstein_meta.training import VAL_FRAC, train_val_split

    from shared_core.cli import ReproduceArgs

    _, bimodal, _ = rep._geometry_laws()
    budget = dataclasses.replace(rep._budget(ReproduceArgs(Path("."), "quick", 0)), M=M)
    winds = rep.ensemble_winds(bimodal, budget, seed) if stratified else bimodal.sample(M, seed)
    _, _, kept, _ = train_val_split(budget.n_refs, M, VAL_FRAC, seed)
    return [float(winds[i]) for i in kept]


@pytest.mark.parametrize("M", [3, 4])
@pytest.mark.parametrize("seed", range(6))
def test_stratified_ensemble_keeps_a_training_atom_in_each_regime(M, seed):
    atoms = _training_atoms(M, seed, stratified=True)
    assert len(atoms) == M - 1
    assert min(atoms) < 3 and max(atoms) > 6, atoms  # lower regime 0–3, upper 6–9


def test_iid_ensemble_misses_a_regime_on_some_seeds():
    # The negative control: the i.i.d. draws the search used left both M = 3 atoms in the upper
    # regime on seeds 1, 4 and 5 (the README's per-seed table).
    missing = [s for s in range(6) if min(_training_atoms(3, s, stratified=False)) > 6]
    assert missing == [1, 4, 5]


def test_stratified_sampling_deals_regimes_round_robin_and_refuses_bad_input():
    from wasserstein_meta.tasks import BetaWind, MixtureWind

    mix = MixtureWind((BetaWind(0, 3, 5, 5), BetaWind(6, 9, 5, 5)), (0.5, 0.5))
    draws = mix.sample_stratified(10, 0, order=[9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
    upper = (draws > 6).astype(int)
    assert ((draws < 3) | (draws > 6)).all() and upper.sum() == 5
    assert (upper[:-1] != upper[1:]).all()  # alternating along any order that is a reversal
    with pytest.raises(ValueError, match="permutation"):
        mix.sample_stratified(3, 0, order=[0, 0, 1])
    with pytest.raises(ValueError, match="equal weights"):
        MixtureWind(mix.components, (0.3, 0.7)).sample_stratified(3, 0)
