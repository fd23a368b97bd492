"""The where-does-it-hold sweep: its settings per point and one smoke-size run."""

import numpy as np
import pytest
from spu_dna.data.synthetic import random_pwm
from spu_dna.reproduce import _settings
from spu_dna.sweep import main, point_settings

from shared_core.cli import parse_reproduce_args
from shared_core.report import Report

BASE = _settings(parse_reproduce_args(["--quick"]))


def test_quick_own_point_keeps_its_settings_so_its_checkpoints_are_reused():
    assert point_settings(BASE, "length", BASE["length"]) == BASE
    assert point_settings(BASE, "strength", 0.85) == BASE  # random_pwm's default


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


@pytest.mark.parametrize(
    ("axis", "value", "match"),
    [
        ("width", 1, "axis must be one of"),
        ("length", 64.5, "an integer in"),
        ("length", 16, r"\[32, 8192\]"),
        ("length", 16384, r"\[32, 8192\]"),
        ("strength", 0.2, r"\(0.25, 1\]"),
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


def test_sweep_refuses_a_strength_sweep_off_the_motif_task(tmp_path):
    with pytest.raises(SystemExit):
        main(["--smoke", "--axis", "strength", "--values", "0.6", "--out", str(tmp_path)])


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--axis", "length", "--values", "64", "100000"], "--values 100000"),
        (["--axis", "length", "--values", "64", "64.5"], "--values 64.5"),
        (["--axis", "strength", "--tasks", "motif", "--values", "0.6", "0.1"], "--values 0.1"),
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
