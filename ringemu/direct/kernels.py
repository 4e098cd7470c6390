"""The numba kernels of the direct path: a schedule run straight over every rank's own buffer, no world buffer.

:func:`plan_direct` walks a schedule's table once, symbolically, chunk by chunk in table order, and writes a small
program per chunk: the additions it needs, each into a scratch tile (a *slot*), and the result each rank keeps.
:func:`run_direct` executes that program tile by tile over per-rank buffers given by their addresses. Compared with
the world kernels of :mod:`ringemu.kernels`:

* the same additions in the same order with the same operands (the receiver's value on the left), each rounded as
  the wire type says, so the bits are those of :func:`ringemu.kernels.run_steps` (the tests check every registry
  order);
* a COPY moves nothing: the receiving rank's value becomes a reference to the sender's, so the data a rank only
  relays is never written; a rank's buffer is read once per element and written once per element it keeps
  (reduce-scatter: its shard; all-reduce, all-gather: everything), which is each collective's least memory traffic;
* partial sums live in slots that a liveness pass recycles (the ring needs one per thread), so they stay in cache
  and never reach memory;
* an ``exchange`` schedule's sources send what they held at the start of the step, as
  :func:`ringemu.kernels.run_staged` stages it.

Operands are encoded as int64: ``v >= 0`` is slot v, ``v < 0`` is the input of rank ``-1 - v``; ``-1 - n_ranks``
is an undefined value (a rank's chunk it does not own before an all-gather). Like :mod:`ringemu.kernels`, this file
imports nothing of ringemu but :mod:`ringemu._jit`, and numba's on-disk cache notices edits to it alone.
"""
from __future__ import annotations

import numpy as np

from .._jit import address_view, bf16_to_f32_fast, by_kernel_dtype, f32_to_bf16_fast, f32_to_half, half_to_f32, jit, jit_inline, store_fence, stream_copy

__all__ = ["ADD", "COPY", "GROUP", "MAX_CHAIN", "plan_direct", "group_ops", "run_direct", "NOT_PLANNED_READ",
           "NOT_PLANNED_RESULT"]

ADD, COPY = 1, 0  # program op kinds (COPY == schedule.COPY)
_NATIVE, _FP16, _BF16 = 0, 1, 2  # == ringemu.wire.WIRE_*
NOT_PLANNED_READ, NOT_PLANNED_RESULT = 1, 2  # plan_direct's status: an addition reads, or a result is, undefined


@jit
def plan_direct(step, src, dst, op, order, chunk_bounds, has_input, keep_lo, keep_hi, in_place, live_release,
                ops, op_bounds, writes, write_bounds):
    """Write the program of a schedule into ``ops`` (rows: kind, slot, operand x, operand y) and ``writes`` (rows:
    rank, operand, first and end element within the chunk, 1 if the destination was not read in this chunk:
    a streaming store's candidate); chunk c's rows are ``ops[op_bounds[c]:op_bounds[c+1]]``
    and ``writes[write_bounds[c]:write_bounds[c+1]]``. Returns (status, slots used): status 0, or
    NOT_PLANNED_READ / NOT_PLANNED_RESULT (the schedule reads or keeps a value no input holds; the caller runs the
    world kernels instead).

    ``has_input[r, c]``: rank r's input holds chunk c. ``keep_lo/keep_hi[r, c]``: the elements of chunk c that rank
    r's result holds (empty when ``lo >= hi``). ``in_place``: every rank's output is its input's memory, so a
    result equal to the rank's own input is not written, and an input that another rank's result reads is first
    copied to a slot if its own rank's result overwrites it. ``live_release``: free a source's slot at its last
    read (non-exchange schedules; an exchange step reads every source at the step's start).
    """
    n_ranks = has_input.shape[0]
    n_chunks = chunk_bounds.shape[0] - 1
    undefined = -1 - n_ranks
    pool = 2 * n_ranks + 1
    refs = np.zeros(pool, dtype=np.int64)  # holders of each slot: ranks' values and step-start snapshots
    free = np.empty(pool, dtype=np.int64)  # stack of free slots
    loc = np.empty(n_ranks, dtype=np.int64)  # where each rank's current value of the chunk lives
    snap = np.empty(n_ranks, dtype=np.int64)
    snapped = np.zeros(n_ranks, dtype=np.bool_)
    live = np.zeros(n_ranks, dtype=np.bool_)
    dead_after = np.zeros(order.shape[0], dtype=np.bool_)  # the row's source value is not read again
    overwritten = np.zeros(n_ranks, dtype=np.bool_)
    copied = np.empty(n_ranks, dtype=np.int64)
    read = np.zeros(n_ranks, dtype=np.bool_)  # the rank's input was read in this chunk's program
    n_ops = 0
    n_writes = 0
    n_slots = 0
    for c in range(n_chunks):
        first, last = chunk_bounds[c], chunk_bounds[c + 1]
        for r in range(n_ranks):
            loc[r] = -1 - r if has_input[r, c] else undefined
            live[r] = keep_lo[r, c] < keep_hi[r, c]
        for i in range(pool):
            refs[i] = 0
            free[i] = pool - 1 - i
        n_free = pool
        if live_release:  # backward pass: is the source's value read after this row?
            for j in range(last - 1, first - 1, -1):
                k = order[j]
                dead_after[j] = not live[src[k]]
                live[dst[k]] = op[k] != COPY  # a COPY overwrites the receiver's value, an ADD reads it
                live[src[k]] = True
        op_bounds[c] = n_ops
        a = first
        while a < last:
            b = a
            while b < last and step[order[b]] == step[order[a]]:
                b += 1
            for j in range(a, b):  # exchange: what each source holds at the step's start
                s = src[order[j]]
                if not live_release and not snapped[s]:
                    snapped[s] = True
                    snap[s] = loc[s]
                    if loc[s] >= 0:
                        refs[loc[s]] += 1
            for j in range(a, b):
                k = order[j]
                s, d = src[k], dst[k]
                v = loc[s] if live_release else snap[s]  # in place: no source receives in its own step
                if op[k] == COPY and v >= 0:
                    refs[v] += 1  # before the source may let go of it
                if live_release and dead_after[j] and loc[s] >= 0:  # the source's value dies with this read
                    refs[loc[s]] -= 1
                    if refs[loc[s]] == 0:
                        free[n_free] = loc[s]
                        n_free += 1
                    loc[s] = undefined
                old = loc[d]
                if op[k] == COPY:
                    loc[d] = v
                else:
                    if old == undefined or v == undefined:
                        return NOT_PLANNED_READ, 0
                    if old >= 0 and refs[old] == 1:  # only d holds it: add in place
                        target = old
                        old = undefined
                    else:
                        n_free -= 1
                        target = free[n_free]
                        refs[target] = 1
                    ops[n_ops, 0], ops[n_ops, 1], ops[n_ops, 2], ops[n_ops, 3] = ADD, target, loc[d], v
                    n_ops += 1
                    loc[d] = target
                    n_slots = max(n_slots, target + 1)
                if old >= 0:
                    refs[old] -= 1
                    if refs[old] == 0:
                        free[n_free] = old
                        n_free += 1
            for j in range(a, b):  # the snapshots end with the step
                s = src[order[j]]
                if snapped[s]:
                    snapped[s] = False
                    if snap[s] >= 0:
                        refs[snap[s]] -= 1
                        if refs[snap[s]] == 0:
                            free[n_free] = snap[s]
                            n_free += 1
            a = b
        write_bounds[c] = n_writes
        for r in range(n_ranks):
            read[r] = False
        for j in range(op_bounds[c], n_ops):
            for v in (ops[j, 2], ops[j, 3]):
                if v < 0 and v != undefined:
                    read[-1 - v] = True
        for r in range(n_ranks):
            overwritten[r] = in_place and keep_lo[r, c] < keep_hi[r, c] and loc[r] != -1 - r
            copied[r] = -1
        for r in range(n_ranks):
            if keep_lo[r, c] >= keep_hi[r, c]:
                continue
            v = loc[r]
            if v == undefined:
                return NOT_PLANNED_RESULT, 0
            if in_place and v == -1 - r:
                continue  # the result is already there
            if in_place and v < 0 and overwritten[-1 - v]:  # save the input before its own rank overwrites it
                q = -1 - v
                if copied[q] < 0:
                    n_free -= 1
                    copied[q] = free[n_free]
                    ops[n_ops, 0], ops[n_ops, 1], ops[n_ops, 2], ops[n_ops, 3] = COPY, copied[q], v, v
                    n_ops += 1
                    n_slots = max(n_slots, copied[q] + 1)
                v = copied[q]
            writes[n_writes, 0], writes[n_writes, 1] = r, v
            writes[n_writes, 2], writes[n_writes, 3] = keep_lo[r, c], keep_hi[r, c]
            writes[n_writes, 4] = 0 if in_place and read[r] else 1  # the destination is not in cache
            n_writes += 1
    op_bounds[n_chunks] = n_ops
    write_bounds[n_chunks] = n_writes
    return 0, n_slots


@jit_inline
def _add(a, b):
    """a + b with the NaN rule of :func:`ringemu.reference.add_nan_left`: a NaN ``a`` (the receiver's value) wins,
    quieted (``a + a``), whatever order the compiled add takes its operands in; a branch-free select."""
    total = a + b
    return total if a == a else a + a


@jit_inline
def _sum(a, b, wire):
    """a + b in the wire arithmetic (16-bit floats: widened to fp32, added, rounded to nearest even), ``a`` the
    receiver's value (:func:`_add`'s NaN rule)."""
    if wire == _FP16:
        return f32_to_half(_add(half_to_f32(np.uint16(a)), half_to_f32(np.uint16(b))))
    if wire == _BF16:
        return f32_to_bf16_fast(_add(bf16_to_f32_fast(np.uint16(a)), bf16_to_f32_fast(np.uint16(b))))
    return _add(a, b)


GROUP = 2  # a run of additions in one pass: v = x + y, then v = y_k + v for k = 1..m (m <= MAX_CHAIN)
MAX_CHAIN = 3  # four additions per pass: eight compiled in about twice the time for a few % (docs/performance.md)


@jit
def group_ops(ops, op_bounds, n_slots, grouped, group_bounds, writes, write_bounds):
    """Rewrite a :func:`plan_direct` program so that each run of additions into one slot, each adding one more
    value on the left of the running sum (the ring's ``slot = input + slot``), is a single GROUP row: (GROUP,
    out, x, y, m, y1, ..., y_MAX_CHAIN) computes v = x + y, then v = y_k + v for k = 1..m, into a slot that none of its
    operands is (slots are renamed, one spare slot rotating), so that the group's loop reads its operands from
    memory together and writes once, and vectorises with no overlap to check. The same additions in the same order
    with the same operands: the bits do not change. ``writes``' operands are renamed in place. Returns the number
    of slots used (``n_slots + 1``) and fills ``grouped`` / ``group_bounds`` as ops / op_bounds."""
    n_chunks = op_bounds.shape[0] - 1
    phys = np.empty(n_slots + 1, dtype=np.int64)
    n_out = 0
    for c in range(n_chunks):
        for s in range(n_slots + 1):
            phys[s] = s
        spare = n_slots
        group_bounds[c] = n_out
        j = op_bounds[c]
        while j < op_bounds[c + 1]:
            kind, t, x, y = ops[j, 0], ops[j, 1], ops[j, 2], ops[j, 3]
            if kind == COPY:  # t is a fresh slot: its physical slot holds nothing anyone reads
                grouped[n_out, 0], grouped[n_out, 1] = COPY, phys[t]
                grouped[n_out, 2] = phys[x] if x >= 0 else x
                grouped[n_out, 3] = grouped[n_out, 2]
                n_out += 1
                j += 1
                continue
            row = grouped[n_out]
            row[0], row[1] = GROUP, spare
            row[2] = phys[x] if x >= 0 else x
            row[3] = phys[y] if y >= 0 else y
            m = 0
            k = j + 1
            while (m < MAX_CHAIN and k < op_bounds[c + 1] and ops[k, 0] == ADD and ops[k, 1] == t
                   and ops[k, 3] == t and ops[k, 2] != t):  # slot t = y_k + slot t
                v = ops[k, 2]
                row[5 + m] = phys[v] if v >= 0 else v
                m += 1
                k += 1
            row[4] = m
            freed = phys[t]
            phys[t] = spare
            spare = freed
            n_out += 1
            j = k
        for w in range(write_bounds[c], write_bounds[c + 1]):
            if writes[w, 1] >= 0:
                writes[w, 1] = phys[writes[w, 1]]
    group_bounds[n_chunks] = n_out
    return n_slots + 1


@jit_inline
def _group_native(out, x, y, y1, y2, y3, y4, y5, y6, y7, m, wire):
    """out[:] = y3 + (y2 + (y1 + (x + y))), as far as m terms go (m = 0..MAX_CHAIN), the receiver (the left
    operand) first in the NaN rule; out overlaps none of the operands (group_ops). One loop per m, so that each
    vectorises with its operands read together (y4..y7 are unused: the call has one signature for any
    MAX_CHAIN up to 7)."""
    n = out.shape[0]
    if m == 0:
        for i in range(n):
            v = _sum(x[i], y[i], _NATIVE)
            out[i] = v
    elif m == 1:
        for i in range(n):
            v = _sum(x[i], y[i], _NATIVE)
            v = _sum(y1[i], v, _NATIVE)
            out[i] = v
    elif m == 2:
        for i in range(n):
            v = _sum(x[i], y[i], _NATIVE)
            v = _sum(y1[i], v, _NATIVE)
            v = _sum(y2[i], v, _NATIVE)
            out[i] = v
    else:
        for i in range(n):
            v = _sum(x[i], y[i], _NATIVE)
            v = _sum(y1[i], v, _NATIVE)
            v = _sum(y2[i], v, _NATIVE)
            v = _sum(y3[i], v, _NATIVE)
            out[i] = v


@jit_inline
def _group_16(out, x, y, y1, y2, y3, y4, y5, y6, y7, m, wire):
    """:func:`_group_native` on 16-bit floats viewed as uint16: each addition in fp32, rounded to 16 bits."""
    n = out.shape[0]
    if wire == _FP16:
        if m == 0:
            for i in range(n):
                v = _sum(x[i], y[i], _FP16)
                out[i] = v
        elif m == 1:
            for i in range(n):
                v = _sum(x[i], y[i], _FP16)
                v = _sum(y1[i], v, _FP16)
                out[i] = v
        elif m == 2:
            for i in range(n):
                v = _sum(x[i], y[i], _FP16)
                v = _sum(y1[i], v, _FP16)
                v = _sum(y2[i], v, _FP16)
                out[i] = v
        else:
            for i in range(n):
                v = _sum(x[i], y[i], _FP16)
                v = _sum(y1[i], v, _FP16)
                v = _sum(y2[i], v, _FP16)
                v = _sum(y3[i], v, _FP16)
                out[i] = v
    else:
        if m == 0:
            for i in range(n):
                v = _sum(x[i], y[i], _BF16)
                out[i] = v
        elif m == 1:
            for i in range(n):
                v = _sum(x[i], y[i], _BF16)
                v = _sum(y1[i], v, _BF16)
                out[i] = v
        elif m == 2:
            for i in range(n):
                v = _sum(x[i], y[i], _BF16)
                v = _sum(y1[i], v, _BF16)
                v = _sum(y2[i], v, _BF16)
                out[i] = v
        else:
            for i in range(n):
                v = _sum(x[i], y[i], _BF16)
                v = _sum(y1[i], v, _BF16)
                v = _sum(y2[i], v, _BF16)
                v = _sum(y3[i], v, _BF16)
                out[i] = v

_group = by_kernel_dtype(_group_native, _group_16)  # typed per dtype: only the loops it needs compile


@jit_inline
def _operand(v, in_addr, offset, slots, stride, like, width):
    """The tile of operand ``v``: slot v, or the input of rank -1-v at byte ``offset``."""
    if v >= 0:
        return address_view(slots + v * stride, like, width)
    return address_view(in_addr[-1 - v] + offset, like, width)


@jit
def run_direct(in_addr, out_addr, like, chunk_start, chunk_len, ops, op_bounds, writes, write_bounds, slots, stride,
               lo, hi, tile, copy_tile, streaming, wire):
    """Run a :func:`group_ops` program on elements [lo, hi) of every chunk (relative to its start; clipped to its
    length), ``tile`` elements at a time (``copy_tile`` for chunks whose program has no operation: results copied
    straight from inputs, no slot). ``in_addr[r]`` / ``out_addr[r]``: the address of element 0 of rank r's
    input / output in the buffer's coordinates (chunk c starts at element ``chunk_start[c]``); ``slots``: the
    address of this thread's scratch, ``stride`` bytes per slot (at least ``tile`` elements); ``like``: any array of
    the buffers' dtype. With ``streaming``, results are written with streaming stores (outputs not read here).
    Disjoint [lo, hi) slabs may run on separate threads, each with its own slots."""
    itemsize = like.itemsize
    for c in range(chunk_start.shape[0]):
        end = min(hi, chunk_len[c])
        step = tile if op_bounds[c + 1] > op_bounds[c] else copy_tile  # a chunk only copied uses no slot
        for t0 in range(lo, end, step):
            width = min(step, end - t0)
            offset = (chunk_start[c] + t0) * itemsize
            for j in range(op_bounds[c], op_bounds[c + 1]):
                target = address_view(slots + ops[j, 1] * stride, like, width)
                x = _operand(ops[j, 2], in_addr, offset, slots, stride, like, width)
                if ops[j, 0] == GROUP:
                    m = ops[j, 4]
                    y = _operand(ops[j, 3], in_addr, offset, slots, stride, like, width)
                    y1 = _operand(ops[j, 5], in_addr, offset, slots, stride, like, width) if m >= 1 else x
                    y2 = _operand(ops[j, 6], in_addr, offset, slots, stride, like, width) if m >= 2 else x
                    y3 = _operand(ops[j, 7], in_addr, offset, slots, stride, like, width) if m >= 3 else x
                    _group(target, x, y, y1, y2, y3, x, x, x, x, m, wire)  # y4..y7: unused at MAX_CHAIN 3
                else:
                    for i in range(width):
                        target[i] = x[i]
            for j in range(write_bounds[c], write_bounds[c + 1]):
                a = max(t0, writes[j, 2])
                b = min(t0 + width, writes[j, 3])
                if a >= b:
                    continue
                skip = (a - t0) * itemsize
                x = _operand(writes[j, 1], in_addr, offset + skip, slots + skip, stride, like, b - a)
                out = address_view(out_addr[writes[j, 0]] + offset + skip, like, b - a)
                if streaming and writes[j, 4]:
                    stream_copy(out, x)
                else:
                    for i in range(b - a):
                        out[i] = x[i]
    store_fence()
