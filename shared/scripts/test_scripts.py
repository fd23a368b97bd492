"""Tests of the repo scripts (run by ``nox -s fast``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_release_tag_resolves_shared_core_and_rejects_mismatches():
    release_tag = _load("release_tag")
    core = release_tag.resolve(f"shared-core-v{_core_version()}")
    assert core == {
        "folder": "shared-core",
        "dist": "shared-core",
        "import": "shared_core",
        "version": _core_version(),
    }
    for bad, message in [
        ("shared-core-v99.0.0", "says version 99.0.0"),
        ("no-such-package-v0.1.0", "names no package"),
        ("shared-core-0.1.0", "not of the form"),
    ]:
        with pytest.raises(SystemExit, match=message):
            release_tag.resolve(bad)


def _core_version() -> str:
    text = (HERE.parents[1] / "packages" / "shared-core" / "pyproject.toml").read_text()
    return text.split('version = "', 1)[1].split('"', 1)[0]


def test_affected_packages_widen_to_everything_on_shared_changes():
    affected = _load("affected_packages").affected
    folders = ["a", "b", "shared-core"]
    assert affected(["packages/a/src/a/x.py"], folders) == ["a"]
    assert affected(["packages/a/x", "packages/b/y", "README.md"], folders) == ["a", "b"]
    assert affected(["packages/shared-core/src/x.py"], folders) == folders
    assert affected(["noxfile.py"], folders) == folders
    assert affected(["shared/constraints/ci.txt"], folders) == folders
    assert affected(["README.md"], folders) == []


def test_new_package_writes_a_skeleton_that_builds_its_names(tmp_path):
    # Copy the pieces the script reads into a scratch repo so the real tree is untouched.
    root = tmp_path / "repo"
    (root / "shared" / "scripts").mkdir(parents=True)
    (root / "packages" / "shared-core").mkdir(parents=True)
    (root / "shared" / "scripts" / "new_package.py").write_bytes(
        (HERE / "new_package.py").read_bytes()
    )
    subprocess.run(["cp", "-r", str(HERE.parent / "templates"), str(root / "shared")], check=True)
    (root / "packages" / "shared-core" / "pyproject.toml").write_text('version = "0.3.2"\n')
    script = root / "shared" / "scripts" / "new_package.py"
    subprocess.run(
        [sys.executable, str(script), "demo", "demo-pkg"], check=True, capture_output=True
    )
    pkg = root / "packages" / "demo"
    pyproject = (pkg / "pyproject.toml").read_text()
    assert 'name = "demo-pkg"' in pyproject and '"shared-core>=0.3,<0.4"' in pyproject
    assert (pkg / "src" / "demo_pkg" / "reproduce.py").exists()
    readme = (pkg / "README.md").read_text()
    assert "## Reproduction" in readme and "## Deviations" in readme
    assert "## Coming from" in readme and "## What is reconstructed" in readme
    project = tomllib.loads(pyproject)["project"]
    assert set(project["optional-dependencies"]) == {"reproduce", "peers", "triton", "test"}
    assert "demo-pkg[reproduce]" in project["optional-dependencies"]["test"]
    assert "Typing :: Typed" in project["classifiers"] and "Source" in project["urls"]
    assert project["license-files"] == ["LICENSE"]
    for path in [
        "LICENSE",
        "src/demo_pkg/py.typed",
        "tests/conftest.py",
        "tests/test_reproduce.py",
        "CHANGELOG.md",
        "changelog.d/.gitkeep",
    ]:
        assert (pkg / path).exists(), path
    assert not list(pkg.rglob("*.tmpl"))
    again = subprocess.run(
        [sys.executable, str(script), "demo", "demo-pkg"], capture_output=True, text=True
    )
    assert again.returncode != 0 and "already exists" in again.stderr
    bad = subprocess.run(
        [sys.executable, str(script), "x", "Bad_Name"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "lowercase" in bad.stderr
