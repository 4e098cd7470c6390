"""All numba kernels of ringemu, and nothing else (numba's on-disk cache only notices edits to this file).

Kernels run a :class:`~ringemu.schedule.Schedule` in place on a padded world buffer of shape
(n_ranks, n_chunks·chunk), one row per rank, and count the elements each directed link carried into an
(n_ranks, n_ranks) int64 array. The schedule arrives as four int64 columns (src, dst, chunk, op) in table order.

* :func:`run_steps` applies the transfers one by one in table order: the faithful step-by-step ring. It is
  exact because no rank sends, in a step, a chunk it receives in that step (checked by
  :func:`first_invalid_transfer` before any kernel runs), so in-place updates never change a value that
  is still to be sent.
* :func:`run_fused` gives bit-identical results faster: transfers of different chunks touch disjoint memory and
  elements are independent, so it walks one chunk at a time, tile by tile, applying that chunk's transfers in
  table order (for the ring: chunk c through ranks c+1, c+2, ..., c). A tile of every rank stays in cache, so
  each rank's chunk is read from memory once instead of once per step.

16-bit wire types arrive viewed as uint16 with ``wire`` = 1 (fp16) or 2 (bf16); each hop widens both operands
to fp32, adds once in fp32 and rounds to nearest even back to 16 bits, bit for bit as numpy's (fp16) and
ml_dtypes' (bf16) ``astype`` do, NaN payloads included. Inner loops index 0-based slice views so that LLVM
drops bounds arithmetic and vectorises them.
"""
from __future__ import annotations

import numpy as np

from ._jit import bits_to_f32, f32_to_bits, jit

__all__ = [
    "f16_to_f32", "f32_to_f16", "bf16_to_f32", "f32_to_bf16", "copy_tile", "add_tile", "widen_tile",
    "narrow_tile", "run_steps", "run_fused", "first_invalid_transfer",
]

# Wire kinds; the same values as ringemu.wire.WIRE_* (a test checks), repeated so this file stands alone.
_NATIVE, _FP16, _BF16 = 0, 1, 2
_COPY = 0  # == schedule.COPY
# first_invalid_transfer reasons (decoded in ringemu.execute)
_BAD_RANK, _BAD_CHUNK, _BAD_OP, _BAD_STEP, _SENDS_RECEIVED = 1, 2, 3, 4, 5


# -- 16-bit <-> fp32 on the bits (IEEE 754-2008 binary16; bfloat16 = the top half of a binary32) ---------------
@jit
def f16_to_f32(h):
    """binary16 bits -> float32 (exact). NaN payloads are kept, not quieted (as numpy's conversion)."""
    h = np.int64(h)
    sign = (h & 0x8000) << 16
    exponent = (h >> 10) & 0x1F
    mantissa = h & 0x3FF
    if exponent == 0x1F:  # inf / NaN
        bits = sign | 0x7F800000 | (mantissa << 13)
    elif exponent != 0:  # normal: rebias 15 -> 127
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13)
    else:  # zero or subnormal: mantissa · 2^-24, exact in float32
        magnitude = np.float32(mantissa) * np.float32(5.9604644775390625e-08)
        bits = sign | np.int64(f32_to_bits(magnitude))
    return bits_to_f32(np.uint32(bits))


@jit
def f32_to_f16(x):
    """float32 -> binary16 bits, round to nearest even; the same algorithm as numpy's npy_floatbits_to_halfbits
    (overflow -> inf; NaN keeps its top 10 payload bits, forced non-zero)."""
    f = np.int64(f32_to_bits(np.float32(x)))
    sign = (f >> 16) & 0x8000
    f_exp = f & 0x7F800000
    if f_exp >= 0x47800000:  # |x| >= 2^16: inf, NaN or overflow
        mantissa = f & 0x007FFFFF
        if f_exp == 0x7F800000 and mantissa != 0:
            payload = mantissa >> 13
            return sign | 0x7C00 | (payload if payload != 0 else 1)
        return sign | 0x7C00
    if f_exp <= 0x38000000:  # |x| <= 2^-15: subnormal or zero in binary16
        if f_exp < 0x33000000:  # |x| < 2^-25: rounds to zero
            return sign
        m = (0x00800000 + (f & 0x007FFFFF)) >> (113 - (f_exp >> 23))
        if (m & 0x3FFF) != 0x1000 or (f & 0x7FF) != 0:  # not an exact tie to an even result: round up at bit 12
            m += 0x1000
        return sign | (m >> 13)
    m = f & 0x007FFFFF
    if (m & 0x3FFF) != 0x1000:  # round half to even at bit 13
        m += 0x1000
    return sign | (((f_exp - 0x38000000) >> 13) + (m >> 13))  # a mantissa carry moves into the exponent


@jit
def bf16_to_f32(h):
    """bfloat16 bits -> float32 (exact: the bits are the top half of the float32)."""
    return bits_to_f32(np.uint32(np.int64(h) << 16))


@jit
def f32_to_bf16(x):
    """float32 -> bfloat16 bits, round to nearest even; NaN -> quiet NaN 0x7FC0 with the sign kept (ml_dtypes)."""
    f = np.int64(f32_to_bits(np.float32(x)))
    if (f & 0x7FFFFFFF) > 0x7F800000:
        return ((f >> 16) & 0x8000) | 0x7FC0
    return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16) & 0xFFFF


# -- tiles: equal-length 1-D views, 0-based loops ----------------------------------------------------------------
@jit
def copy_tile(dst, src):
    """dst[:] = src (a COPY transfer)."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@jit
def add_tile(dst, src, wire):
    """dst[:] = dst + src in the wire arithmetic (an ADD transfer; the receiver's value is the left operand)."""
    n = dst.shape[0]
    if wire == _FP16:
        for i in range(n):
            dst[i] = f32_to_f16(f16_to_f32(dst[i]) + f16_to_f32(src[i]))
    elif wire == _BF16:
        for i in range(n):
            dst[i] = f32_to_bf16(bf16_to_f32(dst[i]) + bf16_to_f32(src[i]))
    else:
        for i in range(n):
            dst[i] = dst[i] + src[i]


@jit
def widen_tile(out, bits, wire):
    """out[:] (float32) = the 16-bit values whose bits are ``bits`` (uint16)."""
    for i in range(bits.shape[0]):
        out[i] = f16_to_f32(bits[i]) if wire == _FP16 else bf16_to_f32(bits[i])


@jit
def narrow_tile(out, values, wire):
    """out[:] (uint16) = the 16-bit bits of the float32 ``values``, rounded to nearest even."""
    for i in range(values.shape[0]):
        out[i] = f32_to_f16(values[i]) if wire == _FP16 else f32_to_bf16(values[i])


# -- schedules ---------------------------------------------------------------------------------------------------
@jit
def first_invalid_transfer(step, src, dst, chunk_of, op, n_ranks, n_chunks, n_steps):
    """-1 if the table can run in place; else 8·row + reason (_BAD_* above) for the first offending row.

    Checks ranks, chunks and ops are in range, steps are sorted and below n_steps, and no rank sends a chunk it
    receives in the same step.
    """
    n = step.shape[0]
    received = np.full(n_ranks * n_chunks, -1, dtype=np.int64)  # step in which (rank, chunk) last received
    lo = 0
    while lo < n:
        s = step[lo]
        if s < 0 or s >= n_steps or (lo > 0 and s < step[lo - 1]):
            return 8 * lo + _BAD_STEP
        hi = lo
        while hi < n and step[hi] == s:
            k = hi
            if src[k] < 0 or src[k] >= n_ranks or dst[k] < 0 or dst[k] >= n_ranks:
                return 8 * k + _BAD_RANK
            if chunk_of[k] < 0 or chunk_of[k] >= n_chunks:
                return 8 * k + _BAD_CHUNK
            if op[k] != 0 and op[k] != 1:
                return 8 * k + _BAD_OP
            received[dst[k] * n_chunks + chunk_of[k]] = s
            hi += 1
        for k in range(lo, hi):
            if received[src[k] * n_chunks + chunk_of[k]] == s:
                return 8 * k + _SENDS_RECEIVED
        lo = hi
    return -1


@jit
def _count_links(src, dst, chunk, links):
    for k in range(src.shape[0]):
        links[src[k], dst[k]] += chunk  # elements, padding included (one whole chunk per message)


@jit
def run_steps(world, src, dst, chunk_of, op, chunk, wire, links):
    """Apply every transfer in table order, each on its whole chunk; count elements per link into ``links``."""
    for k in range(src.shape[0]):
        lo = chunk_of[k] * chunk
        target = world[dst[k], lo:lo + chunk]
        source = world[src[k], lo:lo + chunk]
        if op[k] == _COPY:
            copy_tile(target, source)
        else:
            add_tile(target, source, wire)
    _count_links(src, dst, chunk, links)


@jit
def run_fused(world, src, dst, chunk_of, op, order, chunk_bounds, chunk, tile, wire, links):
    """Same result as :func:`run_steps`: chunk by chunk, tile by tile, each chunk's transfers in table order.

    ``order`` lists the transfer rows sorted stably by chunk; chunk c's rows are
    ``order[chunk_bounds[c]:chunk_bounds[c + 1]]``. ``tile`` is in elements.
    """
    for c in range(chunk_bounds.shape[0] - 1):
        first, last = chunk_bounds[c], chunk_bounds[c + 1]
        base = c * chunk
        for t0 in range(0, chunk, tile):
            lo = base + t0
            hi = base + min(t0 + tile, chunk)
            for j in range(first, last):
                k = order[j]
                target = world[dst[k], lo:hi]
                source = world[src[k], lo:hi]
                if op[k] == _COPY:
                    copy_tile(target, source)
                else:
                    add_tile(target, source, wire)
    _count_links(src, dst, chunk, links)
