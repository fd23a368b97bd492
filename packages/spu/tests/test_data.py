"""The generated tasks plant what they promise; the loaders read local files and fail clearly."""

import numpy as np
import pytest
from spu_dna.data import (
    bag_of_motifs_ceiling,
    janggu_task,
    jaspar_pwm,
    long_range_task,
    motif_task,
    periodic_task,
    random_pwm,
    read_csv,
    read_fasta,
)
from spu_dna.data.synthetic import _sample


def test_motif_task_plants_the_pwm_in_positives_only():
    pwm = np.eye(4)[[0, 1, 2, 3, 3, 2, 1, 0, 0, 0]]  # a deterministic motif: ACGTTGCAAA
    task = motif_task(n=200, length=64, pwm=pwm, seed=1)
    assert task.labels.mean() == 0.5
    for codes, label, site in zip(task.codes, task.labels, task.sites, strict=False):
        planted = "".join("ACGT"[c] for c in codes[site : site + 10])
        if label:
            assert planted == "ACGTTGCAAA"
        else:  # the same bases in another column order
            assert planted != "ACGTTGCAAA" and sorted(planted) == sorted("ACGTTGCAAA")


def test_background_gc_content():
    task = motif_task(n=50, length=1000, gc=0.41)
    gc = np.isin(task.codes, [1, 2]).mean()
    assert abs(gc - 0.41) < 0.01


def test_pwm_sampling_matches_the_column_frequencies():
    pwm = random_pwm(3, 0.6, seed=3)
    draws = _sample(np.random.default_rng(0), pwm, 20000)
    freq = np.stack([np.bincount(draws[:, j], minlength=4) / 20000 for j in range(3)])
    np.testing.assert_allclose(freq, pwm, atol=0.015)


def _find(codes, motif):
    hits = []
    for pos in range(len(codes) - len(motif) + 1):
        if (codes[pos : pos + len(motif)] == motif).all():
            hits.append(pos)
    return hits


def test_long_range_labels_follow_order_and_distance(monkeypatch):
    # deterministic motifs so that each planted instance can be found again
    import spu_dna.data.synthetic as synthetic

    a, b = np.eye(4)[[0] * 8], np.eye(4)[[1] * 8]
    monkeypatch.setattr(synthetic, "random_pwm", lambda w, c, seed: a if seed == 11 else b)
    task = long_range_task(n=120, length=256, gc=0.5, seed=2)
    for codes, label in zip(task.codes, task.labels, strict=False):
        ha, hb = _find(codes, np.zeros(8, np.uint8)), _find(codes, np.ones(8, np.uint8))
        if label:
            assert any(q - p >= 128 for p in ha for q in hb)
        else:
            assert not any(q - p >= 128 for p in ha for q in hb)
    assert bag_of_motifs_ceiling() == pytest.approx(2 / 3)
    assert bag_of_motifs_ceiling(("reversed", "short")) == 0.5


def test_periodic_task_matches_dinucleotide_counts_and_differs_in_spacing():
    task = periodic_task(n=400, length=512, seed=3)

    def aa_tt(codes):
        return ((codes[:-1] == codes[1:]) & np.isin(codes[:-1], [0, 3])).sum()

    pos = [aa_tt(c) for c, y in zip(task.codes, task.labels, strict=False) if y]
    neg = [aa_tt(c) for c, y in zip(task.codes, task.labels, strict=False) if not y]
    assert abs(np.mean(pos) - np.mean(neg)) < 3  # composition-matched up to noise

    # the periodic class has a spectral peak at period 10 in its AA/TT indicator
    def power_at_10(codes):
        ind = ((codes[:-1] == codes[1:]) & np.isin(codes[:-1], [0, 3])).astype(float)
        spectrum = np.abs(np.fft.rfft(ind - ind.mean())) ** 2
        return spectrum[round(len(ind) / 10)]

    assert np.mean(
        [power_at_10(c) for c, y in zip(task.codes, task.labels, strict=False) if y]
    ) > 2 * np.mean(
        [power_at_10(c) for c, y in zip(task.codes, task.labels, strict=False) if not y]
    )


def test_tasks_refuse_impossible_sizes():
    with pytest.raises(ValueError, match="too short"):
        long_range_task(n=10, length=20)
    with pytest.raises(ValueError, match="n >= 2"):
        motif_task(n=1)


def test_jaspar_reads_ctcf():
    pytest.importorskip("pyjaspar")
    pwm = jaspar_pwm("MA0139.1")
    assert pwm.shape == (19, 4)
    np.testing.assert_allclose(pwm.sum(axis=1), 1.0)
    # CTCF's core motif CCAC-CAGGGGGCGC (JASPAR's orientation of MA0139.1)
    assert "CCACCAGGGGGCGC" in "".join("ACGT"[i] for i in pwm.argmax(axis=1))
    with pytest.raises(ValueError, match="not in JASPAR2024"):
        jaspar_pwm("MA9999.9")


def test_fasta_and_csv_loaders(tmp_path):
    fasta = tmp_path / "x.fa"
    fasta.write_text(">one desc\nACGT\nAC\n>two\nGG\n")
    assert read_fasta(fasta) == [("one", "ACGTAC"), ("two", "GG")]
    table = tmp_path / "x.csv"
    table.write_text("sequence,label\nACGT,1\nGGCC,0\n")
    seqs, labels = read_csv(table)
    assert seqs == ["ACGT", "GGCC"] and labels.tolist() == [1, 0]
    with pytest.raises(FileNotFoundError, match="no such sequence file"):
        read_fasta(tmp_path / "missing.fa")
    with pytest.raises(ValueError, match="no column 'target'"):
        read_csv(table, label_column="target")


def test_janggu_task_or_a_clear_hint():
    try:
        import janggu  # noqa: F401
    except ImportError:
        with pytest.raises(ModuleNotFoundError, match="pip install --no-deps janggu"):
            janggu_task()
        return
    task = janggu_task()
    assert task.codes.shape[1] == 200 and set(np.unique(task.labels)) == {0, 1}
