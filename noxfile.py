"""The single entry point for tests, lint, builds and reproductions.

    nox -t ci                      # what .ci/run runs: fast tests, triton parity, lint, types, pins, wheels
    nox -s reproduce               # the main job: every package's reproduction, aggregated in reports/
    nox -s "tests(package='prism')"  # one package alone, as per-package CI runs it

Installs go through uv with ``shared/constraints/ci.txt``, which pins the CPU build of torch. uv ignores
pip's configuration, so pip's find-links (where the CPU wheel lies) are forwarded to ``UV_FIND_LINKS``
here and the repo names no machine path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / "shared" / "constraints" / "ci.txt"
REPORTS = ROOT / "reports"
CORE = "shared-core"

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = []
nox.options.tags = ["ci"]


def _packages() -> dict[str, dict[str, str]]:
    """``{folder: {"dist", "import", "version"}}`` for every ``packages/*/pyproject.toml``."""
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        found[pyproject.parent.name] = {
            "dist": project["name"],
            "import": project["name"].replace("-", "_"),
            "version": project["version"],
            "dependencies": project.get("dependencies", []),
        }
    return found


PACKAGES = _packages()
METHODS = [folder for folder in PACKAGES if folder != CORE]


def _install_env() -> dict[str, str]:
    env = {}
    links = os.environ.get("UV_FIND_LINKS") or os.environ.get("PIP_FIND_LINKS")
    if not links:
        probe = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
            capture_output=True,
            text=True,
            check=False,
        )
        links = probe.stdout.strip() if probe.returncode == 0 else ""
    if links:
        # uv takes a comma-separated list; never pass --find-links on the command line as well,
        # it would replace this variable instead of adding to it.
        env["UV_FIND_LINKS"] = ",".join(links.split())
    return env


def _install(session: nox.Session, *args: str) -> None:
    session.install("-c", str(CONSTRAINTS), *args, env=_install_env())


def _editable(folders: list[str], extras: str = "test") -> list[str]:
    args = []
    for folder in folders:
        args += ["-e", f"packages/{folder}[{extras}]"]
    return args


def _assert_cpu_torch(session: nox.Session) -> None:
    session.run(
        "python",
        "-c",
        "import torch; assert torch.version.cuda is None, torch.__version__; print('torch', torch.__version__)",
    )


def _pytest(session: nox.Session, name: str, *args: str, env: dict[str, str] | None = None) -> None:
    REPORTS.mkdir(exist_ok=True)
    junit = REPORTS / f"junit-{name}.xml"
    junit.unlink(missing_ok=True)
    # Exit 5 means "collected nothing": a session may legitimately have no test of its kind.
    session.run(
        "pytest",
        f"--junitxml={junit}",
        "-p",
        "no:cacheprovider",
        *args,
        *session.posargs,
        env=env,
        success_codes=[0, 5],
    )


@nox.session(tags=["ci"])
def fast(session: nox.Session) -> None:
    """Every package editable in one venv, one pytest process (slow/gpu/triton tests excluded)."""
    _install(session, *_editable([CORE, *METHODS]))
    _assert_cpu_torch(session)
    tests = [f"packages/{folder}/tests" for folder in PACKAGES]
    _pytest(
        session, "fast", *tests, "shared/scripts", "-m", "not slow and not gpu and not triton", "-q"
    )


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """One package with shared-core only, in its own venv (what per-package CI runs)."""
    folders = [package] if package == CORE else [CORE, package]
    _install(session, *_editable(folders))
    _assert_cpu_torch(session)
    _pytest(session, f"tests-{package}", f"packages/{package}/tests", "-m", "not slow and not gpu")


@nox.session(tags=["ci"])
def triton(session: nox.Session) -> None:
    """Kernel parity tests on CPU in triton's interpreter (TRITON_INTERPRET=1 before Python starts)."""
    _install(session, *_editable([CORE, *METHODS], extras="test,triton"))
    _assert_cpu_torch(session)
    tests = [f"packages/{folder}/tests" for folder in PACKAGES]
    _pytest(session, "triton", *tests, "-m", "triton", "-q", env={"TRITON_INTERPRET": "1"})


@nox.session(tags=["ci"])
def lint(session: nox.Session) -> None:
    """ruff check and format check; the workflows against GitHub's schema.

    (actionlint's PyPI wrapper downloads its binary at install time, which CI's network refuses;
    check-jsonschema ships the workflow schema.)
    """
    _install(session, "ruff", "check-jsonschema")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    workflows = sorted(map(str, (ROOT / ".github" / "workflows").glob("*.yml")))
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)


@nox.session(tags=["ci"])
def typecheck(session: nox.Session) -> None:
    """mypy over every package's sources, shared-core's types included (it ships py.typed)."""
    _install(session, "mypy", *_editable([CORE, *METHODS]))
    session.run("mypy", *[f"packages/{folder}/src" for folder in PACKAGES])


def _readme_table() -> dict[str, tuple[str, str]]:
    """``{folder: (dist, import)}`` from the names table in README.md."""
    table = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("packages/"):
            table[cells[0].removeprefix("packages/").rstrip("/")] = (cells[1], cells[2])
    return table


@nox.session(tags=["ci"], venv_backend="none")
def pins(session: nox.Session) -> None:
    """Every package's shared-core range admits the in-repo version; the README table is true."""
    from packaging.requirements import Requirement  # nox depends on packaging

    core_version = PACKAGES[CORE]["version"]
    problems = []
    for folder in METHODS:
        info = PACKAGES[folder]
        reqs = [Requirement(d) for d in info["dependencies"]]
        core = [r for r in reqs if r.name == CORE]
        if len(core) != 1:
            problems.append(f"{folder}: needs exactly one {CORE} dependency, has {len(core)}")
            continue
        spec = core[0].specifier
        if not any(s.operator == "<" for s in spec) or not any(s.operator == ">=" for s in spec):
            problems.append(
                f"{folder}: {CORE} needs a compatible range like >=0.1,<0.2, has {spec!s}"
            )
        if core_version not in spec:
            problems.append(f"{folder}: {CORE}{spec} excludes the in-repo version {core_version}")
        if not (ROOT / "packages" / folder / "src" / info["import"]).is_dir():
            problems.append(f"{folder}: the import package src/{info['import']} is missing")
    table = _readme_table()
    for folder, info in PACKAGES.items():
        if table.get(folder) != (info["dist"], info["import"]):
            problems.append(
                f"README names table: packages/{folder} should read {info['dist']} / "
                f"{info['import']}, reads {table.get(folder)}"
            )
    problems += [
        f"README names table lists packages/{f}, which does not exist"
        for f in set(table) - set(PACKAGES)
    ]
    if problems:
        session.error("\n".join(problems))
    session.log(
        f"pins ok: {len(METHODS)} packages admit {CORE} {core_version}; the README table is true"
    )


@nox.session(tags=["ci"])
def wheels(session: nox.Session) -> None:
    """Build every wheel; install each alone (with shared-core's wheel) in a clean venv and import it.

    This is the release path: proof that ``pip install <dist>`` works outside the repo.
    """
    _install(session, "build", "hatchling")
    dist = Path(tempfile.mkdtemp(prefix="am-wheels-"))
    try:
        for folder in PACKAGES:
            session.run(
                "python",
                "-m",
                "build",
                "--wheel",
                "--no-isolation",
                "--outdir",
                str(dist),
                f"packages/{folder}",
                silent=True,
            )
        core_wheel = next(dist.glob("shared_core-*.whl"))
        # nox's own environment carries uv; fall back to whatever PATH finds.
        uv = shutil.which("uv", path=os.environ.get("PATH", "")) or "uv"
        for folder, info in PACKAGES.items():
            wheel = next(dist.glob(f"{info['import']}-{info['version']}-*.whl"))
            venv = dist / f"venv-{folder}"
            session.run(uv, "venv", "-q", "-p", sys.executable, str(venv), external=True)
            python = str(venv / "bin" / "python")
            wheels_ = [str(core_wheel)] if folder == CORE else [str(core_wheel), str(wheel)]
            session.run(
                uv,
                "pip",
                "install",
                "-q",
                "-p",
                python,
                "-c",
                str(CONSTRAINTS),
                *wheels_,
                external=True,
                env=_install_env(),
            )
            session.run(
                python,
                "-I",
                "-c",
                f"import {info['import']} as m; print(m.__name__, m.__version__)",
                external=True,
            )
    finally:
        shutil.rmtree(dist, ignore_errors=True)


@nox.session
def reproduce(session: nox.Session) -> None:
    """The main job: every package's ``python -m <import>.reproduce``, aggregated into reports/index.md.

    Size defaults to ``--quick``; pass another after ``--``: ``nox -s reproduce -- --smoke``.
    """
    size = session.posargs or ["--quick"]
    _install(session, *_editable([CORE, *METHODS], extras="test"))
    REPORTS.mkdir(exist_ok=True)
    results = {}
    for folder in METHODS:
        out = REPORTS / folder
        module = f"{PACKAGES[folder]['import']}.reproduce"
        session.run("python", "-m", module, *size, "--out", str(out))
        results[folder] = json.loads((out / "result.json").read_text())
    lines = ["# Reproduction index", ""]
    if not results:
        lines.append("No method package exists yet: nothing to reproduce.")
    else:
        lines += ["| package | claim | ours | baseline | held |", "|---|---|---|---|---|"]
        for folder, result in results.items():
            for claim in result["claims"]:
                lines.append(
                    f"| [{result['package']}]({folder}/report.md) | {claim['name']} | "
                    f"{claim['ours']:.4g} | {claim['baseline']:.4g} ({claim['baseline_name']}) | "
                    f"{'yes' if claim['held'] else 'no'} |"
                )
        lines += ["", "## Plots", ""]
        for folder, result in results.items():
            lines += [
                f"- {result['package']}: "
                + ", ".join(f"[{fig['name']}]({folder}/{fig['path']})" for fig in result["figures"])
            ]
    (REPORTS / "index.md").write_text("\n".join(lines) + "\n")
    session.log(f"wrote {REPORTS / 'index.md'}")
