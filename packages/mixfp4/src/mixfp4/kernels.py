"""Fused triton MixFP4 / NVFP4 quantizer: block amax, both candidates and the choice in one pass.

Each program takes ``ROWS`` blocks of ``BLOCK`` elements, keeps them in registers, computes the block
absmax, the E4M3 scale and the 4-bit codes of the E2M1 candidate and of the E1M2 candidate, their
block errors (float64: the decision the reference makes, which computes float32 errors and re-checks
near ties in float64), and writes the chosen codes packed two per byte and the
flagged scale byte. The torch reference in
:mod:`mixfp4.quantizers` is the oracle: the parity test asks for identical bits.

Rounding without a table: every grid here is a piecewise-uniform float grid, so round-to-nearest-even
is ``rint(a / quantum) · quantum`` with the binade's quantum, and ``rint`` is the float32
``(y + 1.5·2^23) - 1.5·2^23`` trick (exact and ties-to-even for ``|y| < 2^22``). Stochastic rounding
takes the reference's uniform noise tensor and rounds up where ``noise < (a - lo) / (hi - lo)``.

Every division is ``div_rn`` (IEEE round-to-nearest): a plain ``/`` on fp32 lowers to an approximate
division on NVIDIA GPUs, which would break bit parity with the torch reference there. For the same
reason the kernel is compiled with ``enable_fp_fusion=False``: triton's default contracts
``xhat - x`` with the product that forms ``xhat`` into one FMA (one rounding instead of two), which
moves errors of near-tied blocks. The autotuner keys on the power-of-two bucket of the block count,
so every activation shape of a model does not trigger a new tuning run.
"""

from __future__ import annotations

import torch

from mixfp4.formats import E1M2
from mixfp4.quantizers import SCALE_MINS, SELECTORS
from shared_core.kernels import HAS_TRITON, autotune_configs

__all__ = ["block_count_bucket", "mixfp4_quantize_triton"]

if HAS_TRITON:
    import triton
    import triton.language as tl

    _CONFIGS = autotune_configs(
        [
            triton.Config({"ROWS": 64}, num_warps=4),
            triton.Config({"ROWS": 128}, num_warps=4),
            triton.Config({"ROWS": 32}, num_warps=2),
        ]
    )

    @triton.jit
    def _rint(y):
        magic = 12582912.0  # 1.5 · 2^23
        return (y + magic) - magic

    @triton.jit
    def _pow2(k):
        # 2^k for integer k in the normal float32 range, built from the exponent bits.
        return ((k + 127) << 23).to(tl.float32, bitcast=True)

    @triton.jit
    def _div(x, y):
        return tl.math.div_rn(x, y)

    @triton.jit
    def _e4m3(c):
        """RNE of ``c`` in [2^-9, 448] to E4M3: (value, byte)."""
        e = ((c.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
        quantum = _pow2(tl.maximum(e, -6) - 3)
        value = _rint(_div(c, quantum)) * quantum
        vb = value.to(tl.int32, bitcast=True)
        ve = ((vb >> 23) & 0xFF) - 127
        normal = ((ve + 7) << 3) | ((vb >> 20) & 7)
        sub = (value * 512.0).to(tl.int32)
        byte = tl.where(value >= 0.015625, normal, sub)
        return value, byte

    @triton.jit
    def _e2m1_gap(v):
        # Grid step above the E2M1 magnitude v (0.5 below 2, 1 below 4, else 2).
        return tl.where(v < 2.0, 0.5, tl.where(v < 4.0, 1.0, 2.0))

    @triton.jit
    def _candidate(
        x,
        noise,
        amax,
        s_t,
        GRID: tl.constexpr,
        MULT: tl.constexpr,
        IS_E2M1: tl.constexpr,
        LO: tl.constexpr,
        ZERO_TO_ONE: tl.constexpr,
        SELECTOR: tl.constexpr,
        STOCHASTIC: tl.constexpr,
    ):
        raw = _div(_div(amax, GRID), s_t)
        if ZERO_TO_ONE:
            raw = tl.where(raw == 0.0, 1.0, raw)
        s_b, byte = _e4m3(tl.minimum(tl.maximum(raw, LO), 448.0))
        total = s_t * s_b
        reciprocal = _div(_div(1.0, s_t), s_b)
        scaled = _div(tl.minimum(tl.maximum(x * reciprocal[:, None], -GRID), GRID), MULT)
        a = tl.abs(scaled)
        if STOCHASTIC:
            # The reference's bucketize: lo = the largest grid point <= a (the one below max at
            # max), hi the next one; round up with probability (a - lo) / (hi - lo).
            if IS_E2M1:
                lo = tl.minimum(tl.floor(_div(a, _e2m1_gap(a))) * _e2m1_gap(a), 4.0)
                hi = lo + _e2m1_gap(lo)
            else:
                lo = tl.minimum(tl.floor(a * 4.0), 6.0) * 0.25
                hi = lo + 0.25
            mag_v = tl.where(noise < _div(a - lo, hi - lo), hi, lo)
        elif IS_E2M1:
            quantum = _e2m1_gap(a)
            mag_v = _rint(_div(a, quantum)) * quantum
        else:
            mag_v = _rint(a * 4.0) * 0.25
        if IS_E2M1:
            mag = tl.where(
                mag_v < 2.0, mag_v * 2.0, tl.where(mag_v < 4.0, mag_v + 2.0, mag_v * 0.5 + 4.0)
            )
        else:
            mag = mag_v * 4.0
        negative = x.to(tl.int32, bitcast=True) < 0
        code = mag.to(tl.int32) | tl.where(negative, 8, 0)
        v = tl.where(negative, -mag_v, mag_v)
        xhat = (v * MULT) * total[:, None]
        d = (xhat - x).to(tl.float64)
        if SELECTOR == 0:
            err = tl.sum(d * d, axis=1)
        elif SELECTOR == 1:
            err = tl.sum(tl.abs(d), axis=1)
        else:
            err = tl.max(tl.abs(d), axis=1)
        return code, byte, raw, err

    @triton.autotune(configs=_CONFIGS, key=["n_bucket", "BLOCK"])
    @triton.jit
    def _mixfp4_quantize_kernel(
        x_ptr,
        noise_ptr,
        s_t_ptr,
        codes_ptr,
        scales_ptr,
        saturated_ptr,
        n_blocks,
        n_bucket,
        BLOCK: tl.constexpr,
        ROWS: tl.constexpr,
        USE_A: tl.constexpr,
        USE_B: tl.constexpr,
        GRID_B: tl.constexpr,
        MULT_B: tl.constexpr,
        LO: tl.constexpr,
        ZERO_TO_ONE: tl.constexpr,
        SELECTOR: tl.constexpr,
        STOCHASTIC: tl.constexpr,
    ):
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK)
        row_ok = rows < n_blocks
        offs = rows[:, None] * BLOCK + cols[None, :]
        x = tl.load(x_ptr + offs, mask=row_ok[:, None], other=0.0).to(tl.float32)
        if STOCHASTIC:  # noqa: SIM108 (a constexpr branch: no load without noise)
            noise = tl.load(noise_ptr + offs, mask=row_ok[:, None], other=0.0)
        else:
            noise = x  # unused
        s_t = tl.load(s_t_ptr)
        amax = tl.max(tl.abs(x), axis=1)
        if USE_A:
            code_a, byte_a, raw_a, err_a = _candidate(
                x, noise, amax, s_t, 6.0, 1.0, True, LO, ZERO_TO_ONE, SELECTOR, STOCHASTIC
            )
        if USE_B:
            code_b, byte_b, raw_b, err_b = _candidate(
                x, noise, amax, s_t, GRID_B, MULT_B, False, LO, ZERO_TO_ONE, SELECTOR, STOCHASTIC
            )
        if USE_A and USE_B:
            pick = err_b < err_a  # ties keep E2M1
            code = tl.where(pick[:, None], code_b, code_a)
            byte = tl.where(pick, byte_b | 0x80, byte_a)
            raw = tl.where(pick, raw_b, raw_a)
        elif USE_A:
            code, byte, raw = code_a, byte_a, raw_a
        else:
            code, byte, raw = code_b, byte_b | 0x80, raw_b
        # Two codes per byte, element 2j in the low nibble.
        low, high = tl.split(tl.reshape(code, (ROWS, BLOCK // 2, 2)))
        half = tl.arange(0, BLOCK // 2)
        packed_offs = rows[:, None] * (BLOCK // 2) + half[None, :]
        tl.store(codes_ptr + packed_offs, (low | (high << 4)).to(tl.uint8), mask=row_ok[:, None])
        tl.store(scales_ptr + rows, byte.to(tl.uint8), mask=row_ok)
        tl.store(saturated_ptr + rows, (raw > 448.0).to(tl.int8), mask=row_ok)


def block_count_bucket(n_blocks: int) -> int:
    """The autotune key of ``n_blocks``: the next power of two (at least 1)."""
    return 1 << max(0, (n_blocks - 1).bit_length())


def mixfp4_quantize_triton(
    x: torch.Tensor,
    s_t: torch.Tensor,
    block_size: int,
    selector: str,
    use: tuple[bool, bool],
    e1m2_multiplier: float,
    scale_min: str,
    noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Triton twin of ``_mixfp4_reference``: packed codes ``[..., K/2]``, scale bytes, saturated mask.

    ``x`` is the padded, finite float32 input; ``block_size`` must be a power of two. ``noise``
    (uniform in [0, 1), ``x``'s shape) switches on stochastic rounding.
    """
    if not HAS_TRITON:
        raise RuntimeError("the fused MixFP4 kernel needs triton: pip install 'mixfp4[triton]'")
    if block_size & (block_size - 1):
        raise ValueError(f"the triton kernel needs a power-of-two block_size, got {block_size}")
    flat = x.contiguous().reshape(-1, block_size)
    noise_flat = flat if noise is None else noise.float().contiguous().reshape(-1, block_size)
    n_blocks = flat.shape[0]
    codes = torch.empty(n_blocks, block_size // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(n_blocks, dtype=torch.uint8, device=x.device)
    saturated = torch.empty(n_blocks, dtype=torch.int8, device=x.device)
    if n_blocks:
        s_t_buf = s_t.reshape(1).float().to(x.device)

        def grid(meta: dict) -> tuple[int]:
            return (triton.cdiv(n_blocks, meta["ROWS"]),)

        _mixfp4_quantize_kernel[grid](
            flat, noise_flat, s_t_buf, codes, scales, saturated, n_blocks, block_count_bucket(n_blocks),
            BLOCK=block_size, USE_A=use[0], USE_B=use[1],
            GRID_B=E1M2.max * e1m2_multiplier, MULT_B=e1m2_multiplier,
            LO=SCALE_MINS[scale_min], ZERO_TO_ONE=scale_min == "subnormal",
            SELECTOR=SELECTORS.index(selector), STOCHASTIC=noise is not None,
            enable_fp_fusion=False,
        )  # fmt: skip
    nb_shape = (*x.shape[:-1], x.shape[-1] // block_size)
    packed_shape = (*x.shape[:-1], x.shape[-1] // 2)
    return codes.reshape(packed_shape), scales.reshape(nb_shape), saturated.reshape(nb_shape).bool()
