"""The world kernels of ringemu (numba), and nothing else (numba's on-disk cache only notices edits here).

Kernels run a :class:`~ringemu.schedule.Schedule` in place on a padded world buffer of shape
(n_ranks, n_chunks·chunk), one row per rank, on the elements [lo, hi) of every chunk (disjoint slabs can run on
separate threads: every operation is element-wise); :func:`check_and_count` validates the table and counts the
elements each directed link carries into an (n_ranks, n_ranks) int64 array. The schedule arrives as four int64 columns
(src, dst, chunk, op) in table order.

* :func:`run_steps` applies the transfers one by one in table order: the faithful step-by-step ring. It is
  exact because no rank sends, in a step, a chunk it receives in that step (checked by
  :func:`check_and_count` before any kernel runs), so in-place updates never change a value that
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

from ._jit import bf16_to_f32_fast, bits_to_f32, f32_to_bf16_fast, f32_to_bits, f32_to_half, half_to_f32, jit, jit_inline, store_fence, stream_copy

__all__ = [
    "f16_to_f32", "f32_to_f16", "bf16_to_f32", "f32_to_bf16", "copy_tile", "add_tile", "widen_tile",
    "narrow_tile", "check_and_count", "run_steps", "run_fused", "run_staged",
]

# Wire kinds; the same values as ringemu.wire.WIRE_* (a test checks), repeated so this file stands alone.
_NATIVE, _FP16, _BF16 = 0, 1, 2
_COPY = 0  # == schedule.COPY
# check_and_count reasons (decoded in ringemu.execute)
_BAD_RANK, _BAD_CHUNK, _BAD_OP, _BAD_STEP, _SENDS_RECEIVED = 1, 2, 3, 4, 5


# -- 16-bit <-> fp32 on the bits (IEEE 754-2008 binary16; bfloat16 = the top half of a binary32) ---------------
@jit_inline
def f16_to_f32(h):
    """binary16 bits -> float32 (exact). NaN payloads are kept, not quieted (as numpy's conversion).

    Branch-free (selects), so that LLVM vectorises the loops that call it.
    """
    h = np.int64(h)
    sign = (h & 0x8000) << 16
    em = h & 0x7FFF  # exponent and mantissa
    normal = (em << 13) + (112 << 23)  # rebias the exponent 15 -> 127
    inf_nan = (em << 13) + (224 << 23)  # exponent 31 -> 255, payload kept
    subnormal = np.int64(f32_to_bits(np.float32(em) * np.float32(5.9604644775390625e-08)))  # em · 2^-24, exact
    bits = subnormal if em < 0x400 else (inf_nan if em >= 0x7C00 else normal)
    return bits_to_f32(np.uint32(bits | sign))


@jit_inline
def f32_to_f16(x):
    """float32 -> binary16 bits, round to nearest even, bit for bit as numpy's npy_floatbits_to_halfbits
    (overflow -> inf; NaN keeps its top 10 payload bits, forced non-zero). Branch-free (selects)."""
    f = np.int64(f32_to_bits(np.float32(x)))
    sign = (f >> 16) & 0x8000
    a = f & 0x7FFFFFFF  # |x| as bits
    # normal: rebias 127 -> 15 and round half to even at bit 13 (a carry moves into the exponent, up to inf)
    normal = ((a - 0x38000000) + 0xFFF + ((a >> 13) & 1)) >> 13
    # |x| < 2^-14: adding 0.5 aligns the binary16 subnormal grid with float32's last place, and the float32 add
    # rounds to nearest even (IEEE 754 default); the bits above 0.5's are the result
    subnormal = np.int64(f32_to_bits(bits_to_f32(np.uint32(a)) + np.float32(0.5))) - 0x3F000000
    payload = (a >> 13) & 0x3FF
    nan = 0x7C00 | payload | (1 if payload == 0 else 0)
    r = subnormal if a < 0x38800000 else normal
    r = 0x7C00 if a >= 0x47800000 else r
    r = nan if a > 0x7F800000 else r
    return sign | r


@jit_inline
def bf16_to_f32(h):
    """bfloat16 bits -> float32 (exact: the bits are the top half of the float32)."""
    return bits_to_f32(np.uint32(np.int64(h) << 16))


@jit_inline
def f32_to_bf16(x):
    """float32 -> bfloat16 bits, round to nearest even; NaN -> quiet NaN 0x7FC0 with the sign kept (ml_dtypes).
    Branch-free (a select)."""
    f = np.int64(f32_to_bits(np.float32(x)))
    rounded = ((f + 0x7FFF + ((f >> 16) & 1)) >> 16) & 0xFFFF
    nan = ((f >> 16) & 0x8000) | 0x7FC0
    return nan if (f & 0x7FFFFFFF) > 0x7F800000 else rounded


# -- tiles: equal-length 1-D views, 0-based loops ----------------------------------------------------------------
@jit_inline
def copy_tile(dst, src):
    """dst[:] = src (a COPY transfer)."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@jit_inline
def add_tile(dst, src, wire):
    """dst[:] = dst + src in the wire arithmetic (an ADD transfer; the receiver's value is the left operand)."""
    n = dst.shape[0]
    if wire == _FP16:  # hardware conversions: the fp32 add quiets NaNs, so they match the software ones here
        for i in range(n):
            dst[i] = f32_to_half(half_to_f32(np.uint16(dst[i])) + half_to_f32(np.uint16(src[i])))
    elif wire == _BF16:  # the same conversions as bf16_to_f32 / f32_to_bf16, in 32-bit integer operations
        for i in range(n):
            dst[i] = f32_to_bf16_fast(bf16_to_f32_fast(np.uint16(dst[i])) + bf16_to_f32_fast(np.uint16(src[i])))
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
def check_and_count(step, src, dst, chunk_of, op, n_ranks, n_chunks, n_steps, chunk, links, exchange):
    """Validate the table, then count it: -1 if the table can run in place, after adding ``chunk`` elements
    (padding included) to ``links[src, dst]`` for every transfer; else 8·row + reason (_BAD_* above) for the first
    offending row, with ``links`` untouched.

    Checks ranks, chunks and ops are in range, steps are sorted and below n_steps, and (unless ``exchange``: the
    schedule runs with :func:`run_staged`) no rank sends a chunk it receives in the same step.
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
            if not exchange and received[src[k] * n_chunks + chunk_of[k]] == s:
                return 8 * k + _SENDS_RECEIVED
        lo = hi
    for k in range(n):
        links[src[k], dst[k]] += chunk
    return -1


@jit
def run_steps(world, src, dst, chunk_of, op, chunk, lo, hi, streaming, wire):
    """Apply every transfer in table order, each on elements [lo, hi) of its chunk.

    Elements are independent, so disjoint [lo, hi) slabs may run concurrently (one call per thread) and
    together equal one call on [0, chunk). If ``streaming``, copies use streaming stores (for worlds too large to
    stay in cache until the next step reads them).
    """
    for k in range(src.shape[0]):
        base = chunk_of[k] * chunk
        target = world[dst[k], base + lo:base + hi]
        source = world[src[k], base + lo:base + hi]
        if op[k] != _COPY:
            add_tile(target, source, wire)
        elif streaming:
            stream_copy(target, source)
        else:
            copy_tile(target, source)
    store_fence()


@jit
def run_fused(world, src, dst, chunk_of, op, order, chunk_bounds, chunk, lo, hi, tile, copy_only_tile, streaming,
              wire):
    """Same result as :func:`run_steps` on [lo, hi): chunk by chunk, tile by tile, each chunk's transfers in
    table order.

    ``order`` lists the transfer rows sorted stably by chunk; chunk c's rows are
    ``order[chunk_bounds[c]:chunk_bounds[c + 1]]``. ``tile`` is in elements; chunks whose transfers are all
    COPYs use ``copy_only_tile`` (their destinations do not occupy the cache, so larger tiles amortise more).

    Within one tile, ``origin[r]`` names a rank whose tile still holds, unmodified since the tile began, the
    values rank r now holds (r itself, or the rank a chain of COPYs started from), so reads go to a tile that is
    in cache; if ``streaming``, a COPY into a rank whose tile this walk has not touched yet is written with
    streaming stores (it would otherwise be read from memory only to be overwritten: all-gather's case).
    """
    n_ranks = world.shape[0]
    origin = np.arange(n_ranks)
    touched = np.zeros(n_ranks, dtype=np.bool_)  # read or written in this tile
    written = np.zeros(n_ranks, dtype=np.bool_)  # written in this tile
    for c in range(chunk_bounds.shape[0] - 1):
        first, last = chunk_bounds[c], chunk_bounds[c + 1]
        base = c * chunk
        step = copy_only_tile
        for j in range(first, last):
            if op[order[j]] != _COPY:
                step = tile
        for t0 in range(lo, hi, step):
            a = base + t0
            b = base + min(t0 + step, hi)
            for j in range(first, last):
                k = order[j]
                s, d = src[k], dst[k]
                o = origin[s]
                reader = o if not written[o] else s  # same values as rank s, in cache
                target = world[d, a:b]
                if op[k] == _COPY:
                    if touched[d] or not streaming:
                        copy_tile(target, world[reader, a:b])
                    else:
                        stream_copy(target, world[reader, a:b])
                    origin[d] = o if not written[o] else s
                else:
                    add_tile(target, world[reader, a:b], wire)
                    origin[d] = d
                touched[s] = touched[reader] = touched[d] = True
                written[d] = True
            for j in range(first, last):  # reset what this tile touched
                k = order[j]
                for r in (src[k], dst[k]):
                    origin[r] = r
                    touched[r] = False
                    written[r] = False
    store_fence()


@jit_inline
def load_tile(world, source, rank, a, b):
    """world[rank, a:b] = the rank's starting values there: source[rank] below its length, zeros beyond."""
    valid = source.shape[1]
    m = min(b, valid) - a
    if m > 0:
        copy_tile(world[rank, a:a + m], source[rank, a:a + m])
    for i in range(max(a, valid), b):
        world[rank, i] = 0


@jit
def run_fused_from(world, source, src, dst, chunk_of, op, order, chunk_bounds, chunk, lo, hi, tile,
                   copy_only_tile, streaming, wire):
    """:func:`run_fused` on a world whose row r starts as ``source[r]`` followed by zeros (its padding), without a
    copy pass first: a rank's tile is loaded from ``source`` when the walk first reads or adds into it (while the
    tile is in cache), a COPY's destination is not loaded at all (it is overwritten), and the tiles the walk did
    not touch are loaded when the tile ends. ``world`` may hold anything on entry; on return it holds exactly what
    copying ``source`` in and calling :func:`run_fused` leaves."""
    n_ranks = world.shape[0]
    origin = np.arange(n_ranks)
    touched = np.zeros(n_ranks, dtype=np.bool_)
    written = np.zeros(n_ranks, dtype=np.bool_)
    loaded = np.zeros(n_ranks, dtype=np.bool_)  # holds its starting values (or was overwritten) in this tile
    for c in range(chunk_bounds.shape[0] - 1):
        first, last = chunk_bounds[c], chunk_bounds[c + 1]
        base = c * chunk
        step = copy_only_tile
        for j in range(first, last):
            if op[order[j]] != _COPY:
                step = tile
        for t0 in range(lo, hi, step):
            a = base + t0
            b = base + min(t0 + step, hi)
            for j in range(first, last):
                k = order[j]
                s, d = src[k], dst[k]
                o = origin[s]
                reader = o if not written[o] else s
                if not loaded[reader]:
                    load_tile(world, source, reader, a, b)
                    loaded[reader] = True
                target = world[d, a:b]
                if op[k] == _COPY:
                    if touched[d] or not streaming:
                        copy_tile(target, world[reader, a:b])
                    else:
                        stream_copy(target, world[reader, a:b])
                    origin[d] = o if not written[o] else s
                else:
                    if not loaded[d]:
                        load_tile(world, source, d, a, b)
                    add_tile(target, world[reader, a:b], wire)
                    origin[d] = d
                loaded[d] = True
                touched[s] = touched[reader] = touched[d] = True
                written[d] = True
            for r in range(n_ranks):  # ranks this tile's walk did not reach keep their starting values
                if not loaded[r]:
                    load_tile(world, source, r, a, b)
                loaded[r] = False
            for j in range(first, last):
                k = order[j]
                for r in (src[k], dst[k]):
                    origin[r] = r
                    touched[r] = False
                    written[r] = False
    store_fence()


@jit
def run_staged(world, step, src, dst, chunk_of, op, order, group_bounds, chunk, lo, hi, tile, stage, wire):
    """Run an ``exchange`` schedule (a rank may send a chunk it receives in the same step) on [lo, hi).

    Rows are taken in groups ``order[group_bounds[g]:group_bounds[g + 1]]`` (one group of every row in table order
    for the step mode, one group per chunk for the fused mode), each group tile by tile; within a tile the rows of
    one step first copy what their sources hold into ``stage`` (rows × tile elements), then apply the transfers
    from it in table order: every source sends the value it held at the start of the step. Elements are
    independent, so the result is the same for any grouping, tile and slab. Only exchange schedules come here: the
    ring's :func:`run_fused` has no staging.
    """
    for g in range(group_bounds.shape[0] - 1):
        first, last = group_bounds[g], group_bounds[g + 1]
        for t0 in range(lo, hi, tile):
            t1 = min(t0 + tile, hi)
            width = t1 - t0
            a = first
            while a < last:
                b = a
                while b < last and step[order[b]] == step[order[a]]:
                    b += 1
                for j in range(a, b):
                    k = order[j]
                    base = chunk_of[k] * chunk
                    copy_tile(stage[j - a, :width], world[src[k], base + t0:base + t1])
                for j in range(a, b):
                    k = order[j]
                    base = chunk_of[k] * chunk
                    target = world[dst[k], base + t0:base + t1]
                    if op[k] != _COPY:
                        add_tile(target, stage[j - a, :width], wire)
                    else:
                        copy_tile(target, stage[j - a, :width])
                a = b
