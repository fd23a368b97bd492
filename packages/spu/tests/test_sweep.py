"""The where-does-it-hold sweep: its settings per point and one smoke-size run."""

import numpy as np
import pytest
from spu_dna.data.synthetic import random_pwm
from spu_dna.experiments import WIDTHS, build, count_parameters, scaled_width
from spu_dna.reproduce import _settings
from spu_dna.sweep import cut_note, main, point_settings

from shared_core.cli import parse_reproduce_args
from shared_core.report import Report

BASE = _settings(parse_reproduce_args(["--quick"]))


def test_quick_own_point_keeps_its_settings_so_its_checkpoints_are_reused():
    assert point_settings(BASE, "length", BASE["length"]) == BASE
    assert point_settings(BASE, "strength", 0.85) == BASE  # random_pwm's default
    assert point_settings(BASE, "size", 1) == BASE


def test_points_change_only_their_setting():
    short = point_settings(BASE, "length", 64)
    assert short["length"] == 64 and short["task_options"] == {"periodic": {"segment": (32, 64)}}
    assert {k: v for k, v in short.items() if k not in ("length", "task_options")} == {
        k: v for k, v in BASE.items() if k not in ("length", "task_options")
    }
    weak = point_settings(BASE, "strength", 0.5)
    np.testing.assert_array_equal(weak["task_options"]["motif"]["pwm"], random_pwm(strength=0.5))
    assert weak["task_options"]["periodic"] == BASE["task_options"]["periodic"]
    assert BASE["task_options"].keys() == {"periodic"}  # the base is not mutated
    wide = point_settings(BASE, "size", 2)
    assert wide == {**BASE, "width_scale": 2.0} and "width_scale" not in BASE


def test_width_scale_scales_every_arm_alike_to_a_multiple_of_8():
    for name, width in WIDTHS.items():
        assert scaled_width(name, 1) == width
        assert scaled_width(name, 2) == 2 * width
        assert scaled_width(name, 0.5) % 8 == 0 and abs(scaled_width(name, 0.5) - width / 2) <= 4
        assert scaled_width(name, 0.25) >= 16
        small, base = (count_parameters(build(name, 64, s)) for s in (0.5, 1))
        assert small < base < count_parameters(build(name, 64, 2))
    # the embedding is the model's width: SPU at scale 2 is 208 wide
    assert build("SPU", 64, 2).config.d_model == 208


@pytest.mark.parametrize("scale", [0, -1, 0.01, 0.24, 4.01, float("nan"), float("inf")])
def test_a_width_scale_outside_the_accepted_range_is_refused_naming_it(scale):
    for call in (lambda: scaled_width("SPU", scale), lambda: build("CNN", 64, scale)):
        with pytest.raises(ValueError, match=r"width_scale must be in \[0.25, 4\], got"):
            call()


@pytest.mark.parametrize(
    ("axis", "value", "match"),
    [
        ("width", 1, "axis must be one of"),
        ("length", 64.5, "an integer in"),
        ("length", 16, r"\[32, 8192\]"),
        ("length", 16384, r"\[32, 8192\]"),
        ("strength", 0.2, r"\(0.25, 1\]"),
        ("size", 0.2, r"\[0.25, 4\]"),
        ("size", 5, r"\[0.25, 4\]"),
    ],
)
def test_bad_points_raise(axis, value, match):
    with pytest.raises(ValueError, match=match):
        point_settings(BASE, axis, value)


def test_sweep_smoke_reports_every_point_with_the_reproduction_rule(tmp_path):
    argv = ["--smoke", "--axis", "strength", "--values", "0.85", "0.6", "--tasks", "motif",
            "--models", "SPU", "CNN", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    report = Report.load(tmp_path / "sweep-strength")
    names = [c.name for c in report.claims]
    assert names == ["strength = 0.6: full SPU >= CNN on average over motif",
                     "strength = 0.85: full SPU >= CNN on average over motif"]  # fmt: skip
    (rows,) = report.tables.values()
    assert [(r["strength"], r["model"]) for r in rows] == [
        (0.6, "SPU"), (0.6, "CNN"), (0.85, "SPU"), (0.85, "CNN")
    ]  # fmt: skip
    assert (tmp_path / "sweep-strength" / "sweep-strength.png").exists()


def test_size_sweep_smoke_reports_each_arms_parameters_and_the_ablation_claims(tmp_path):
    argv = ["--smoke", "--axis", "size", "--values", "0.5", "1", "--models", "SPU", "SPU -LPL",
            "CNN", "--out", str(tmp_path), "--seeds", "1", "--lrs", "0.003"]  # fmt: skip
    assert main(argv) == 0
    report = Report.load(tmp_path / "sweep-size")
    assert report.settings["protocol cuts"] == {"seeds": 1, "lr_grid": [0.003]}
    names = [c.name for c in report.claims]
    for scale in ("0.5", "1"):
        assert f"size = {scale}: removing LPL costs most on the motif task" in names
        assert f"size = {scale}: the CNN fails the long-range task (no better than the " \
            "position-free ceiling)" in names  # fmt: skip
    accuracy, drops = report.tables.values()
    assert {(r["size"], r["model"]): r["params"] for r in accuracy} == {
        (s, m): count_parameters(build(m, 64, s)) for s in (0.5, 1) for m in ("SPU", "SPU -LPL", "CNN")
    }  # fmt: skip
    assert [(r["size"], r["ablation"]) for r in drops] == [(0.5, "SPU -LPL"), (1, "SPU -LPL")]
    assert drops[0].keys() == {"size", "ablation", "motif drop", "long_range drop", "periodic drop"}
    # the cuts reach the training: one seed (0; --smoke runs two) at lr 3e-3 per cell
    # (a checkpoint is train-<task>-<model>-<seed>-lr<lr>-<hash>)
    trained = [p.name.split("-")[-3:-1] for p in (tmp_path / "checkpoints").glob("train-*")]
    assert trained and {seed for seed, _ in trained} == {"0"}
    assert {lr for _, lr in trained} == {"lr0.003"}
    # and every verdict says what it rests on
    cut = "protocol cut: seeds 0 only (the protocol runs 2); lr grid {0.003} (the protocol chooses"
    assert all(cut in c.note for c in report.claims)


def test_cut_note_names_each_cut_against_the_protocol():
    assert cut_note(BASE, {}) == ""
    assert (
        cut_note(BASE, {"seeds": 2}, seed=5)
        == "protocol cut: seeds 5, 6 only (the protocol runs 3)"
    )
    lr_only = cut_note(BASE, {"lr_grid": [0.003]})
    assert lr_only.startswith("protocol cut: lr grid {0.003} (the protocol chooses each arm's lr from "
                              "{0.001, 0.003} on validation")  # fmt: skip


def test_sweep_refuses_a_strength_sweep_off_the_motif_task(tmp_path):
    with pytest.raises(SystemExit):
        main(["--smoke", "--axis", "strength", "--values", "0.6", "--out", str(tmp_path)])


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--axis", "length", "--values", "64", "100000"], "--values 100000"),
        (["--axis", "length", "--values", "64", "64.5"], "--values 64.5"),
        (["--axis", "strength", "--tasks", "motif", "--values", "0.6", "0.1"], "--values 0.1"),
        (["--axis", "size", "--values", "1", "8"], "--values 8"),
        (["--axis", "size", "--values", "1", "--seeds", "0"], "--seeds must be"),
        (["--axis", "size", "--values", "1", "--lrs", "0.001", "-1"], "--lrs must be"),
        (["--axis", "length", "--values", "64", "--models", "SPU", "SPU -LPL"], "one baseline"),
    ],
)
def test_sweep_cli_checks_every_value_before_training(tmp_path, monkeypatch, capsys, argv, match):
    import spu_dna.sweep as sweep_module

    def train(*args, **kwargs):
        raise AssertionError("trained before every value was checked")

    monkeypatch.setattr(sweep_module, "_tune_and_train", train)
    with pytest.raises(SystemExit) as exit_info:
        main(["--smoke", *argv, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert match in capsys.readouterr().err
