"""Reproduce the paper's claims at CPU scale: ``python -m symdyn_id.reproduce [--quick|--full]``.

"Adaptive Symmetry Discovery for Dynamical System Identification" (ICML 2026): only the abstract is
public, so every claim below is the abstract's *shape* (known symmetry: a much shorter trajectory
suffices, characterised precisely; unknown symmetry: learnt from one trajectory at the same
optimal length) measured on our reconstruction, never a figure of the paper.

Systems x_{t+1} = A x_t (+ process noise) with A a random element of the commutant scaled to spectral
radius 0.95, x_0 ~ N(0, I): circulant (C_d), symmetric-circulant (D_d), block-circulant
(C_n on R^n (x) R^k), torus (C_a x C_b) and mean-field (S_d). Methods: plain least squares / DMD,
PiDMD where it applies (figure), known-group commutant LS, discovery over the default library plus
20 decoy groups (random relabellings of library groups, same commutant dimensions).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shared_core.cli import ReproduceArgs, progress, reproduce_main
from shared_core.report import Report

from .discovery import NoConsistentCandidateWarning, SymmetryDiscovery, default_library
from .estimators import EquivariantLinearSystem
from .integrations import least_squares_dmd
from .representation import Representation
from .systems import random_equivariant_matrix, relative_error, simulate
from .validation import NotExcitingWarning

R = Representation
EXACT = 1e-8
NOISES = (1e-3, 1e-2)
N_DECOYS = 20
HORIZON = 50


def _grid(d: int) -> tuple[int, int]:
    a = math.isqrt(d)
    while d % a:
        a -= 1
    return a, d // a


FAMILIES: dict[str, Callable[[int], Representation]] = {
    "circulant": R.cyclic,
    "symmetric-circulant": R.dihedral,
    "block-circulant": lambda d: R.block(R.cyclic(d // (4 if d >= 32 else 2)), 4 if d >= 32 else 2),
    "torus": lambda d: R.torus(*_grid(d)),
    "mean-field": R.symmetric,
}
# d_i / e_i > m_i for some irrep: one trajectory's Krylov space never fills R^d
DMD_BLIND = ("symmetric-circulant", "mean-field")


def same_group(a: Representation, b: Representation) -> bool:
    ca, cb = a.commutant(), b.commutant()
    if ca.p != cb.p:
        return False
    return ca.labels is None or (cb.labels is not None and np.array_equal(ca.labels, cb.labels))


def decoy_library(d: int, rng: np.random.Generator) -> list[Representation]:
    """The default library plus N_DECOYS random relabellings of its non-trivial members."""
    base = default_library(d)
    movable = [r for r in base if r.name not in (f"trivial({d})", f"S{d}")]
    decoys = []
    for i in range(N_DECOYS):
        rep = movable[int(rng.integers(len(movable)))]
        decoys.append(rep.conjugate(rng.permutation(d).tolist(), name=f"decoy{i}:{rep.name}"))
    return base + decoys


def min_exact_length(errors: Sequence[float]) -> float:
    """First T (1-based) whose error is below EXACT, inf if none."""
    hit = [t + 1 for t, e in enumerate(errors) if e < EXACT]
    return float(hit[0]) if hit else math.inf


def fit_error(rep: Representation, x: np.ndarray, a: np.ndarray, t: int) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotExcitingWarning)
        return relative_error(EquivariantLinearSystem(rep).fit(x[: t + 1]).A_, a)


def prediction_errors(a_hat: np.ndarray, a: np.ndarray, x0: np.ndarray) -> tuple[float, float]:
    """One-step (mean over the horizon) and HORIZON-step relative errors on a clean test run."""
    truth = simulate(a, x0, HORIZON)
    one = np.linalg.norm(truth[1:] - truth[:-1] @ a_hat.T, axis=1) / np.linalg.norm(
        truth[1:], axis=1
    )
    roll = truth[0].copy()
    for _ in range(HORIZON):
        roll = a_hat @ roll
    return float(one.mean()), float(np.linalg.norm(roll - truth[-1]) / np.linalg.norm(truth[-1]))


def discover(x: np.ndarray, library: list[Representation], noise: float) -> SymmetryDiscovery:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoConsistentCandidateWarning)
        return SymmetryDiscovery(library, noise_std=noise or None).fit(x)


def run_seed(family: str, d: int, seed: int) -> dict[str, Any]:
    """Every measurement of one random system."""
    rep = FAMILIES[family](d)
    rng = np.random.default_rng([seed, d, list(FAMILIES).index(family)])
    a = random_equivariant_matrix(rep, rng)
    t_star = rep.min_trajectory_length()
    x = simulate(a, rng.standard_normal(d), 2 * d)
    library = decoy_library(d, rng)
    out: dict[str, Any] = {"t_star": t_star, "p": rep.commutant_dim, "library_size": len(library)}
    known = [fit_error(rep, x, a, t) for t in range(1, t_star + 2)]
    out["known_min_t"] = min_exact_length(known)
    out["known_err_before"] = known[t_star - 2] if t_star > 1 else math.nan
    dmd = [relative_error(least_squares_dmd(x[: t + 1]), a) for t in range(1, 2 * d + 1)]
    out["dmd_min_t"], out["dmd_err_2d"] = min_exact_length(dmd), dmd[-1]
    plain = discover(x[: t_star + 4], default_library(d), 0.0)
    out["plain_t"] = plain.n_transitions_used_ or math.inf
    out["plain_ok"] = same_group(plain.representation_, rep)
    disc = discover(x[: t_star + 4], library, 0.0)
    out["disc_t"] = disc.n_transitions_used_ or math.inf
    out["disc_ok"] = bool(disc.done_ and same_group(disc.representation_, rep))
    out["disc_err"] = relative_error(disc.A_, a)
    x_test = rng.standard_normal(d)
    for noise in NOISES:
        xn = simulate(a, rng.standard_normal(d), 2 * t_star + 4, noise, rng)
        dn = discover(xn, library, noise)
        t_fit = 2 * t_star + 4
        known_hat = EquivariantLinearSystem(rep).fit(xn).A_
        dmd_hat = least_squares_dmd(xn)
        out[f"sel_{noise}"] = same_group(dn.representation_, rep)
        out[f"sel_t_{noise}"] = dn.n_transitions_used_ or math.inf
        out[f"t_fit_{noise}"] = t_fit
        for name, a_hat in (("known", known_hat), ("disc", dn.A_), ("dmd", dmd_hat)):
            one, many = prediction_errors(a_hat, a, x_test)
            out[f"{name}_err_{noise}"] = relative_error(a_hat, a)
            out[f"{name}_one_{noise}"], out[f"{name}_many_{noise}"] = one, many
    return out


def run_generic_control(d: int, seed: int) -> dict[str, Any]:
    """A generic (symmetry-free) system: ours must return the trivial group; the rule without the
    spare-equation requirement picks the smallest p that fits exactly at T = 1."""
    rng = np.random.default_rng([seed, d, 99])
    a = rng.standard_normal((d, d))
    a *= 0.95 / np.abs(np.linalg.eigvals(a)).max()
    x = simulate(a, rng.standard_normal(d), 2 * d)
    library = default_library(d)
    ours = discover(x, library, 0.0)
    fits = []
    for rep in library:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotExcitingWarning)
            est = EquivariantLinearSystem(rep).fit(x[:2])
        if est.identifiable_ and est.residual_ <= EXACT:
            fits.append((rep.commutant_dim, rep.name))
    worded = min(fits)[1] if fits else f"trivial({d})"
    return {
        "ours_nontrivial": ours.representation_.name != f"trivial({d})",
        "ours_t": ours.n_transitions_used_ or math.inf,
        "worded_nontrivial": worded != f"trivial({d})",
        "worded_pick": worded,
    }


def curves(family: str, d: int, with_pidmd: bool) -> dict[str, list[float]]:
    """Noise-free error versus T for one system (seed 0): known LS, least squares/DMD, PiDMD."""
    from .integrations import pidmd_matrix

    rep = FAMILIES[family](d)
    rng = np.random.default_rng([0, d, list(FAMILIES).index(family)])
    a = random_equivariant_matrix(rep, rng)
    x = simulate(a, rng.standard_normal(d), 2 * d)
    lengths = range(1, 2 * d + 1)
    out = {
        "known": [fit_error(rep, x, a, t) for t in lengths],
        "dmd": [relative_error(least_squares_dmd(x[: t + 1]), a) for t in lengths],
    }
    manifold = {"circulant": ("circulant", None), "torus": ("BCCB", _grid(d)[::-1])}.get(family)
    if manifold is not None and with_pidmd:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["pidmd"] = [relative_error(pidmd_matrix(x[: t + 1], *manifold), a) for t in lengths]
    return out


def _fraction(values: Sequence[bool]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _claims(report: Report, results: dict[str, list[dict[str, Any]]], control: list[dict]) -> None:
    runs = [r for rs in results.values() for r in rs]
    n = len(runs)
    report.claim(
        "known-group LS is exact at T*(rho) on every family",
        f"fraction of runs whose first T with ||A_hat - A||/||A|| < {EXACT:g} is T*",
        _fraction([r["known_min_t"] == r["t_star"] for r in runs]),
        1.0,
        direction="close",
        baseline_name="every run",
        samples=n,
        note="noise-free; per-family figures in the table 'lengths'",
    )
    tight = [r for r in runs if r["t_star"] > 1]
    report.claim(
        "T* is tight: one transition fewer does not identify A (control)",
        "fraction of runs with T* > 1 whose error at T* - 1 exceeds 1e-3",
        _fraction([r["known_err_before"] > 1e-3 for r in tight]),
        1.0,
        direction="close",
        baseline_name="every run",
        samples=len(tight),
    )
    seeing = [
        (int(k.split("@")[1]), r)
        for k, rs in results.items()
        if k.split("@")[0] not in DMD_BLIND
        for r in rs
    ]
    per_d = ", ".join(
        f"d = {dd}: {_fraction([r['dmd_min_t'] == d for d, r in seeing if d == dd]):.0%}"
        for dd in sorted({d for d, _ in seeing})
    )
    report.claim(
        "DMD / plain least squares needs T = d (circulant, block-circulant, torus)",
        "fraction of those runs whose first T with error < 1e-8 is exactly d",
        _fraction([r["dmd_min_t"] == d for d, r in seeing]),
        1.0,
        direction="close",
        baseline_name="every run",
        samples=len(seeing),
        note=(
            f"never before d in {_fraction([r['dmd_min_t'] >= d for d, r in seeing]):.0%} of "
            f"runs; exactly at d in {per_d}; where it misses, the single trajectory's Krylov "
            "matrix is too ill-conditioned for DMD to reach 1e-8 at any T <= 2d (table "
            "'lengths': DMD error at 2d)"
        ),
    )
    blind = [r for k, rs in results.items() if k.split("@")[0] in DMD_BLIND for r in rs]
    report.claim(
        "DMD never identifies A when an irrep has d_i/e_i > m_i (dihedral, mean-field)",
        "fraction of those runs with DMD error > 1e-3 at T = 2d",
        _fraction([r["dmd_err_2d"] > 1e-3 for r in blind]),
        1.0,
        direction="close",
        baseline_name="every run",
        samples=len(blind),
        note="known-group LS is exact on the same runs at T* = 1",
    )
    for noise in NOISES:
        report.claim(
            f"discovery selects the true group under noise sigma = {noise:g}, 20 decoys included",
            "selection accuracy over all families (adaptive, known sigma)",
            _fraction([r[f"sel_{noise}"] for r in runs]),
            0.9,
            direction="higher",
            baseline_name="0.9 ('high accuracy')",
            samples=n,
            note=f"analytic chance level (not run): a uniform pick from the "
            f"{runs[0]['library_size']}-candidate library is right with probability "
            f"{1 / runs[0]['library_size']:.3f}",
        )
    report.claim(
        "discovery finds no symmetry in a generic system (control)",
        "fraction of generic systems given a non-trivial group",
        _fraction([c["ours_nontrivial"] for c in control]),
        0.0,
        direction="close",
        baseline_name="no generic system (0)",
        tolerance=0.1,
        samples=len(control),
        note=(
            "tolerance: at most 1 in 10 false symmetries; the spec's rule as worded, without "
            "spare equations, gives a non-trivial group in "
            f"{_fraction([c['worded_nontrivial'] for c in control]):.0%} of them at T = 1 (C_d, "
            "p = dT, fits any data)"
        ),
    )
    for key, rs in results.items():
        family, d = key.split("@")
        used = [r["disc_t"] for r in rs]
        median = float(np.median(used))
        t_star = rs[0]["t_star"]
        ok = _fraction([r["disc_ok"] for r in rs])
        report.claim(
            f"discovery reaches T* ({family}, d = {d})",
            "median transitions discovery needs (noise-free, decoys) vs T*",
            median,
            float(t_star),
            direction="close",
            baseline_name="T*",
            samples=len(rs),
            note=(
                f"needs T = {median:g} (T* = {t_star}, p = {rs[0]['p']}, dT* = {int(d) * t_star}); "
                f"correct group in {ok:.0%} of runs"
                + (
                    "; with dT* = p every candidate of that size fits any data at T*, so one "
                    "spare transition is needed"
                    if int(d) * t_star <= rs[0]["p"]
                    else ""
                )
            ),
        )
    noise = NOISES[-1]
    ours = float(np.median([r[f"known_many_{noise}"] for r in runs]))
    base = float(np.median([r[f"dmd_many_{noise}"] for r in runs]))
    report.claim(
        "known symmetry predicts better than DMD from the same short noisy trajectory",
        f"median {HORIZON}-step relative prediction error, sigma = {noise:g}, T = 2 T* + 4",
        ours,
        base,
        direction="lower",
        baseline_name="least squares / DMD",
        samples=n,
    )


def _tables(report: Report, results: dict[str, list[dict[str, Any]]], control: list[dict]) -> None:
    rows = []
    for key, rs in results.items():
        family, d = key.split("@")
        rows.append(
            {
                "family": family,
                "d": int(d),
                "p": rs[0]["p"],
                "T*": rs[0]["t_star"],
                "known LS first exact T (median)": float(np.median([r["known_min_t"] for r in rs])),
                "discovery T (median)": float(np.median([r["disc_t"] for r in rs])),
                "discovery correct": _fraction([r["disc_ok"] for r in rs]),
                "no-decoy discovery T (median)": float(np.median([r["plain_t"] for r in rs])),
                "no-decoy discovery correct": _fraction([r["plain_ok"] for r in rs]),
                "DMD first exact T (median)": float(np.median([r["dmd_min_t"] for r in rs])),
                "DMD error at 2d (median)": float(np.median([r["dmd_err_2d"] for r in rs])),
            }
        )
    report.table("lengths", rows)
    rows = []
    for key, rs in results.items():
        family, d = key.split("@")
        for noise in NOISES:
            row: dict[str, Any] = {"family": family, "d": int(d), "sigma": noise}
            row["selection accuracy"] = _fraction([r[f"sel_{noise}"] for r in rs])
            row["discovery T (median)"] = float(np.median([r[f"sel_t_{noise}"] for r in rs]))
            for name in ("known", "disc", "dmd"):
                row[f"{name} ||A err||"] = float(np.median([r[f"{name}_err_{noise}"] for r in rs]))
                row[f"{name} 1-step"] = float(np.median([r[f"{name}_one_{noise}"] for r in rs]))
                row[f"{name} {HORIZON}-step"] = float(
                    np.median([r[f"{name}_many_{noise}"] for r in rs])
                )
            rows.append(row)
    report.table("noisy (T = 2 T* + 4 transitions; medians over seeds)", rows)
    report.table("generic control", control)


def _figure(report: Report, curve_data: dict[str, dict[str, list[float]]], d: int) -> None:
    from shared_core.report import subplots

    fig, axes = subplots(1, len(curve_data), figsize=(4 * len(curve_data), 3.2), sharey=True)
    for ax, (family, data) in zip(np.atleast_1d(axes), curve_data.items(), strict=True):
        lengths = np.arange(1, len(data["known"]) + 1)
        for name, label in (
            ("known", "known-group LS"),
            ("dmd", "least squares / DMD"),
            ("pidmd", "PiDMD"),
        ):
            if name in data:
                ax.semilogy(lengths, np.maximum(data[name], 1e-17), label=label)
        ax.axvline(FAMILIES[family](d).min_trajectory_length(), color="k", ls=":", lw=1)
        ax.set_title(f"{family}, d = {d}")
        ax.set_xlabel("transitions T")
    np.atleast_1d(axes)[0].set_ylabel("||A_hat - A|| / ||A||")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    report.figure("error_vs_T", fig, caption=f"noise-free error versus T (dotted: T*), d = {d}")


def run(args: ReproduceArgs) -> Report:
    from threadpoolctl import threadpool_limits

    # small dense algebra: one BLAS thread per process is several times faster on shared cores
    with threadpool_limits(limits=1):
        return _run(args)


def _run(args: ReproduceArgs) -> Report:
    dims = args.pick(smoke=[8], quick=[16, 64], full=[8, 16, 32, 64])
    seeds = args.pick(smoke=1, quick=10, full=50)
    n_control = args.pick(smoke=1, quick=10, full=50)
    report = Report(
        "symdyn-id",
        "Adaptive symmetry discovery for linear system identification (reconstruction)",
        args.out,
        {"size": args.size, "seed": args.seed, "dims": dims, "seeds": seeds},
    )
    cases = [(family, d) for d in dims for family in FAMILIES]
    results: dict[str, list[dict[str, Any]]] = {}
    for family, d in progress(cases, desc="systems"):
        results[f"{family}@{d}"] = report.cached(
            f"{family}-{d}",
            lambda family=family, d=d: [run_seed(family, d, args.seed + s) for s in range(seeds)],
        )
    control = report.cached(
        "generic", lambda: [run_generic_control(8, args.seed + s) for s in range(n_control)]
    )
    d_fig = dims[0]
    curve_data = report.cached(
        f"curves-{d_fig}",
        lambda: {family: curves(family, d_fig, not args.smoke) for family in FAMILIES},
    )
    _claims(report, results, control)
    _tables(report, results, control)
    _figure(report, curve_data, d_fig)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return reproduce_main(run, argv, description=__doc__ or "")


if __name__ == "__main__":
    raise SystemExit(main())
