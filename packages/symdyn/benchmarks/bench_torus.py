"""Benchmark: d = 256 torus (C_16 x C_16) against PyDMD, and adaptive discovery per new state.

    python packages/symdyn/benchmarks/bench_torus.py [--side 16] [--repeats 7]

1. Identification of A, each method timed on the data it needs, in one run with
   ``shared_core.bench.compare`` (interleaved, median ratio; float64 everywhere, one BLAS thread):
   - commutant LS by FFT at T = T* = 1 and at T = d, and by the orbital basis at T = 1 and T = d;
   - the orbital basis on a D_16 x D_16 system (not abelian: no FFT path) at T = d;
   - ``pydmd.DMD(svd_rank=-1)`` at T = d (the shortest trajectory from which it identifies A);
   - ``pydmd.PiDMD("BCCB", compute_A=True)`` at T = d (it keeps at most rank(X) <= T eigenvalues).
   Every method returns the dense d x d matrix (DMD: Phi diag(lambda) Phi^+).
2. Discovery over a 50-candidate library (default library + relabelled decoys): seconds per
   ``partial_fit`` call, state by state, until the stopping rule fires.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from symdyn_id import (
    EquivariantLinearSystem,
    Representation,
    SymmetryDiscovery,
    default_library,
    random_equivariant_matrix,
    relative_error,
    simulate,
)
from symdyn_id.integrations import pidmd_matrix, pydmd_matrix
from threadpoolctl import threadpool_limits

from shared_core.bench import compare


def library_of(d: int, size: int, rng: np.random.Generator) -> list[Representation]:
    base = default_library(d)
    movable = [r for r in base if not r.name.startswith(("trivial", "S"))]
    decoys = [
        movable[int(rng.integers(len(movable)))].conjugate(rng.permutation(d), name=f"decoy{i}")
        for i in range(size - len(base))
    ]
    return base + decoys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    side = args.side
    d = side * side
    rep = Representation.torus(side, side)
    rng = np.random.default_rng(0)
    a = random_equivariant_matrix(rep, rng)
    x = simulate(a, rng.standard_normal(d), d)
    short = x[:2]

    def ours_fft_short():
        return EquivariantLinearSystem(rep).fit(short).A_

    def ours_fft_long():
        return EquivariantLinearSystem(rep).fit(x).A_

    def ours_orbital_short():
        return EquivariantLinearSystem(rep, solver="basis").fit(short).A_

    def ours_orbital_long():
        return EquivariantLinearSystem(rep, solver="basis").fit(x).A_

    def dmd():
        return pydmd_matrix(x)

    dih = Representation.product(Representation.dihedral(side), Representation.dihedral(side))
    a_dih = random_equivariant_matrix(dih, rng)
    x_dih = simulate(a_dih, rng.standard_normal(d), d)

    def ours_dihedral_long():
        return EquivariantLinearSystem(dih).fit(x_dih).A_

    def dmd_dihedral():
        return pydmd_matrix(x_dih)

    def pidmd():
        return pidmd_matrix(x, "BCCB", (side, side))

    rep.commutant()  # the orbital basis is built once per group, like a fitted library
    dih.commutant()
    print(
        f"d = {d}, C{side} x C{side}, p = {rep.commutant_dim}, T* = {rep.min_trajectory_length()}"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in [
            ("ours FFT, T=1", ours_fft_short),
            ("ours FFT, T=d", ours_fft_long),
            ("ours orbital, T=1", ours_orbital_short),
            ("ours orbital, T=d", ours_orbital_long),
            ("DMD, T=d", dmd),
            ("PiDMD BCCB, T=d", pidmd),
        ]:
            print(f"  error {name:18s}: {relative_error(fn(), a):.2e}")
        for name, fn in [
            ("D16xD16 ours, T=d", ours_dihedral_long),
            ("D16xD16 DMD, T=d", dmd_dihedral),
        ]:
            print(f"  error {name:18s}: {relative_error(fn(), a_dih):.2e}")
        for cand, cname in [
            (ours_fft_short, "ours FFT T=1"),
            (ours_fft_long, "ours FFT T=d"),
            (ours_orbital_short, "ours orbital T=1"),
            (ours_orbital_long, "ours orbital T=d"),
        ]:
            for base, bname in [(dmd, "pydmd.DMD T=d"), (pidmd, "PiDMD BCCB T=d")]:
                print(
                    " ",
                    compare(
                        cand, base, name=cname, baseline_name=bname, repeats=args.repeats, warmup=1
                    ),
                )
        print(
            " ",
            compare(
                ours_dihedral_long,
                dmd_dihedral,
                name=f"ours D{side}xD{side} T=d",
                baseline_name="pydmd.DMD T=d",
                repeats=args.repeats,
                warmup=1,
            ),
        )
    lib_rng = np.random.default_rng(1)
    start = time.perf_counter()
    library = library_of(d, 50, lib_rng)
    for r in library:
        r.commutant()
    setup = time.perf_counter() - start
    disc = SymmetryDiscovery(library)
    times = []
    for state in x:
        t0 = time.perf_counter()
        disc.partial_fit(state)
        times.append(time.perf_counter() - t0)
        if disc.done_:
            break
    print(
        f"discovery, {len(library)} candidates (commutant bases {setup:.2f} s once): "
        f"{disc.representation_.name} after {disc.n_transitions_used_} transitions; "
        f"per new state {np.median(times[1:]) * 1e3:.1f} ms (median), "
        f"{max(times) * 1e3:.1f} ms (max); error {relative_error(disc.A_, a):.1e}"
    )


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        main()
