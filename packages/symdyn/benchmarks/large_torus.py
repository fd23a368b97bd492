"""Large systems on CPU: tori up to 64 x 64 (d = 4096) identified from T* = 1 transition.

    python packages/symdyn/benchmarks/large_torus.py [--sides 16 32 64] [--noise 0.01]

For each side: time of the FFT commutant fit at T = 1 (noise-free) and its error, and the error of
the fit from 8 noisy transitions. Plain least squares would need T = d = side^2 transitions and
d^2 parameters.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from symdyn_id import EquivariantLinearSystem, Representation, relative_error, simulate
from symdyn_id.fourier import dense_operator
from threadpoolctl import threadpool_limits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--noise", type=float, default=0.01)
    args = parser.parse_args()
    for side in args.sides:
        rep = Representation.torus(side, side)
        d = rep.d
        rng = np.random.default_rng(side)
        grid = rep.grid
        assert grid is not None
        # a discretised diffusion-advection stencil plus a random far-field kernel
        kern = 0.01 * rng.standard_normal((side, side))
        kern[0, 0] += 0.6
        kern[1, 0] += 0.15
        kern[-1, 0] += 0.05
        kern[0, 1] += 0.1
        kern[0, -1] += 0.1
        ops = np.fft.fft2(kern).reshape(d, 1, 1)
        ops *= 0.95 / np.abs(ops).max()
        a = dense_operator(grid, ops)
        x = simulate(a, rng.standard_normal(d), 1)
        t0 = time.perf_counter()
        est = EquivariantLinearSystem(rep).fit(x)
        elapsed = time.perf_counter() - t0
        noisy = simulate(a, rng.standard_normal(d), 8, args.noise, rng)
        err_noisy = relative_error(EquivariantLinearSystem(rep).fit(noisy).A_, a)
        print(
            f"C{side} x C{side} (d = {d}): fit at T = 1 in {elapsed:.3f} s, error "
            f"{relative_error(est.A_, a):.1e}; from 8 transitions at sigma = {args.noise:g}: "
            f"error {err_noisy:.2e}"
        )


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        main()
