"""A collective run straight over every rank's own buffer: one pass over the data, no world buffer.

:func:`run_direct` executes a schedule's additions, in the schedule's order, from each rank's input buffer to each
rank's output buffer (:mod:`ringemu.direct.kernels`): a rank's input is read once and its output written once,
partial sums stay in per-thread scratch tiles, and a COPY moves nothing until a result is written. The buffers are
named by their addresses, so per-rank arrays (a list, the rows of a world, numpy views of torch tensors) are used
where they live: no gather into a world and no scatter back.

Guarantees:

* the results are bit for bit those of :func:`ringemu.execute.run_schedule` in any mode on the padded world of
  :func:`ringemu.partition.layout_for` (tests: every registry order, dtype and size drawn);
* reduce-scatter writes only each rank's shard (``ChunkLayout(S, N)``), all-reduce and all-gather every element;
* in place when every rank's output is its input's memory (at the same buffer offsets); buffers that overlap any
  other way are refused (``ValueError``);
* the traffic the ledger counts is the schedule's, as for every mode: this module only changes how the emulator
  touches memory, never what crosses a virtual link.

:func:`program` returns None for the rare schedule the direct path cannot express (one whose result is a value
no input holds, or an all-gather chunk that spans shards); callers then use :func:`ringemu.execute.run_schedule`.
"""
from __future__ import annotations

import numpy as np

from ..execute import STREAMING_BYTES, default_threads, run_slabs
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..schedule import Schedule
from ..wire import kernel_view

__all__ = ["Program", "program", "run_direct", "run_call", "shard_starts"]

# 16 KiB per operand: a group of eight additions reads nine tiles (144 KiB, within a 1 MiB L2). Measured (N = 8,
# S = 2^24 fp32, in place, 2 threads): reduce-scatter 17.4 / 15.1 / 14.3 ms with 4 / 8 / 16 KiB tiles, all-reduce
# 21.7 / 20.4 / 20.2 ms; at N = 2, S = 2^20 all-reduce 0.81 / 0.57 / 0.50 ms (benchmarks' machine, quiet).
_TILE_BYTES = 16 << 10
_SLOT_BUDGET = 256 << 10  # bytes of scratch slots per thread before the tile shrinks (a quarter of a 1 MiB L2)


class Program:
    """A schedule's direct program for one layout and collective (numpy int64 arrays; see plan_direct)."""

    def __init__(self, ops, op_bounds, writes, write_bounds, n_slots: int, chunk_start, chunk_len):
        self.ops, self.op_bounds, self.writes, self.write_bounds = ops, op_bounds, writes, write_bounds
        self.n_slots, self.chunk_start, self.chunk_len = n_slots, chunk_start, chunk_len
        self.width = int(chunk_len.max()) if chunk_len.size else 0  # the longest chunk: the slabs' range
        for array in (ops, op_bounds, writes, write_bounds, chunk_start, chunk_len):
            array.flags.writeable = False  # one kernel signature for every program

    def tile(self, itemsize: int) -> int:
        """Elements per tile: ``_TILE_BYTES`` per operand, fewer when many slots are alive at once (exchange
        orders), so that a thread's slots stay within ``_SLOT_BUDGET`` bytes."""
        tile = max(64, _TILE_BYTES // itemsize)
        if self.n_slots * tile * itemsize > _SLOT_BUDGET:
            tile = max(64, _SLOT_BUDGET // max(1, self.n_slots) // itemsize // 64 * 64)
        return tile


def _chunk_ranges(layout) -> tuple[np.ndarray, np.ndarray]:
    """(first element, data elements) of every chunk in the unpadded buffer."""
    ranges = [layout.payload_slice(c) for c in range(layout.n_chunks)]
    start = np.array([r.start for r in ranges], dtype=np.int64)
    return start, np.array([r.stop - r.start for r in ranges], dtype=np.int64)


def _ownership(layout, shard_inputs: bool, shard_results: bool, start: np.ndarray, length: np.ndarray):
    """(has_input, keep_lo, keep_hi), each (n_ranks, n_chunks): which chunks each rank's input holds (its shard's,
    with ``shard_inputs``; else all), and the part of each chunk its result holds (within the chunk: its shard's
    part with ``shard_results``; else all). None if a chunk of shard inputs spans two shards."""
    shard_map = getattr(layout, "shard_map", None) or type(layout)(layout.numel, layout.n_shards)
    n, n_chunks = shard_map.n_chunks, start.size
    size = shard_map.shard_size
    shard_lo = np.minimum(np.arange(n, dtype=np.int64) * size, layout.numel)
    shard_hi = np.minimum(shard_lo + size, layout.numel)
    end = start + length
    if shard_results:  # rank r keeps its shard's part of every chunk
        keep_lo = np.clip(shard_lo[:, None], start[None, :], end[None, :]) - start[None, :]
        keep_hi = np.clip(shard_hi[:, None], start[None, :], end[None, :]) - start[None, :]
    else:
        keep_lo = np.zeros((n, n_chunks), dtype=np.int64)
        keep_hi = np.broadcast_to(length, (n, n_chunks)).copy()
    if shard_inputs:
        inside = (shard_lo[:, None] <= start[None, :]) & (end[None, :] <= shard_hi[:, None])
        has_input = inside | (length == 0)[None, :]
        if not np.all(has_input.any(axis=0)):
            return None
    else:
        has_input = np.ones((n, n_chunks), dtype=np.bool_)
    return has_input, keep_lo, keep_hi


def program(schedule: Schedule, layout, shard_results: bool, in_place: bool) -> Program | None:
    """The direct program of ``schedule`` on ``layout`` (kept on the schedule: schedules are immutable), or None
    where the direct path does not apply (module doc). The inputs are shards when the schedule starts from
    ``"own"`` chunks (an all-gather); ``shard_results``: each rank's result is its shard (a reduce-scatter)."""
    key = (bool(shard_results), bool(in_place), layout.numel, layout.n_chunks)
    cache = schedule.__dict__.setdefault("_direct_programs", {})  # a cache, not state: same value every time
    if key in cache:
        return cache[key]
    from . import kernels as kernels_direct  # numba is imported here, on first use

    start, length = _chunk_ranges(layout)
    owned = _ownership(layout, schedule.initial == "own", shard_results, start, length)
    found = None
    if owned is not None and layout.n_chunks == schedule.n_chunks:
        has_input, keep_lo, keep_hi = owned
        table = np.ascontiguousarray(schedule.table, dtype=np.int64)
        # fresh writable columns: an empty table's column is a read-only view, another numba signature (a compile)
        step, src, dst, chunk_of, op = (table[:, k].copy() for k in range(5))
        order = np.argsort(chunk_of, kind="stable").astype(np.int64)
        bounds = np.searchsorted(chunk_of[order], np.arange(schedule.n_chunks + 1)).astype(np.int64)
        n_keep = int(np.count_nonzero(keep_lo < keep_hi))
        ops = np.zeros((table.shape[0] + n_keep, 4), dtype=np.int64)
        writes = np.zeros((n_keep, 5), dtype=np.int64)
        op_bounds = np.zeros(schedule.n_chunks + 1, dtype=np.int64)
        write_bounds = np.zeros(schedule.n_chunks + 1, dtype=np.int64)
        status, n_slots = kernels_direct.plan_direct(step, src, dst, op, order, bounds, has_input, keep_lo, keep_hi,
                                                     bool(in_place), not schedule.exchange, ops, op_bounds, writes,
                                                     write_bounds)
        if status == 0:
            grouped = np.zeros((int(op_bounds[-1]), 5 + kernels_direct.MAX_CHAIN), dtype=np.int64)
            group_bounds = np.zeros_like(op_bounds)
            writes = writes[:write_bounds[-1]].copy()
            n_slots = kernels_direct.group_ops(ops, op_bounds, int(n_slots), grouped, group_bounds, writes,
                                               write_bounds)
            found = Program(grouped[:group_bounds[-1]].copy(), group_bounds, writes, write_bounds, int(n_slots),
                            start, length)
    if len(cache) >= 16:  # a schedule reused for many buffer sizes keeps the programs of the last few
        cache.pop(next(iter(cache)))
    cache[key] = found
    return found


def _address(array: np.ndarray, offset: int) -> int:
    """The address of element 0 of the buffer whose element ``offset`` is ``array[0]``."""
    return array.__array_interface__["data"][0] - offset * array.itemsize


def _table(buffers, offsets, n: int) -> np.ndarray:
    """The address of element 0 of every rank's buffer (a list of arrays, or a 2-D array: one row per rank)."""
    if isinstance(buffers, np.ndarray):
        return buffers.__array_interface__["data"][0] + np.arange(n, dtype=np.int64) * buffers.strides[0]
    return np.array([_address(a, o) for a, o in zip(buffers, offsets or [0] * n)], dtype=np.int64)


def _spans(buffers) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) byte addresses of the non-empty buffers, sorted by start (int64 arrays: no list per rank)."""
    n = len(buffers)
    lo = np.fromiter((a.__array_interface__["data"][0] for a in buffers), dtype=np.int64, count=n)
    hi = lo + np.fromiter((a.nbytes for a in buffers), dtype=np.int64, count=n)
    keep = hi > lo
    order = np.argsort(lo[keep], kind="stable")
    return lo[keep][order], hi[keep][order]


def _overlapping(inputs, outputs, in_place: bool) -> bool:
    """Whether two outputs share memory or, unless in place, an output shares memory with an input. Inputs may
    share memory with each other (one array passed for every rank): they are only read."""
    lo, hi = _spans(outputs)
    if np.any(lo[1:] < hi[:-1]):
        return True
    if in_place or lo.size == 0:
        return False
    in_lo, in_hi = _spans(inputs)
    first = np.searchsorted(hi, in_lo, side="right")  # the first output ending after each input starts (hi ascends)
    hit = first < lo.size
    return bool(np.any(lo[first[hit]] < in_hi[hit]))


def run_direct(schedule: Schedule, layout, inputs: list[np.ndarray], outputs: list[np.ndarray], *,
               shard_results: bool = False, input_offsets=None, output_offsets=None, threads: int | None = None,
               tile: int | None = None, streaming: bool | None = None) -> bool:
    """Run ``schedule`` from ``inputs`` into ``outputs`` (lists of N C-contiguous 1-D arrays of one dtype, or 2-D
    arrays whose rows are the ranks' buffers, with no offsets); return
    False, touching nothing, where the direct path does not apply (:func:`program`). ``shard_results``: rank r's
    result is its shard of the sum (a reduce-scatter), else the whole buffer.

    ``input_offsets[r]`` / ``output_offsets[r]``: the buffer element that ``inputs[r][0]`` / ``outputs[r][0]`` is
    (default 0; an all-gather's inputs and a reduce-scatter's outputs are shards: their shard's start). The caller
    sizes them (full buffers of ``layout.numel`` elements, or shards of ``ChunkLayout(S, N)``). ``threads`` and
    ``tile`` as in :func:`ringemu.execute.run_schedule`; neither changes the result."""
    n = schedule.n_ranks
    if len(inputs) != n or len(outputs) != n:
        raise ValueError(f"run_direct needs {n} inputs and {n} outputs; got {len(inputs)} and {len(outputs)}")
    for buffers, offsets, name in ((inputs, input_offsets, "inputs"), (outputs, output_offsets, "outputs")):
        if isinstance(buffers, np.ndarray) and (buffers.ndim != 2 or offsets is not None or (
                buffers.shape[1] > 1 and buffers.strides[1] != buffers.itemsize)):
            raise ValueError(f"run_direct: {name} as one array must be 2-D with contiguous rows and no offsets")
    in_addr = _table(inputs, input_offsets, n)
    if input_offsets == output_offsets and (outputs is inputs or (
            not isinstance(outputs, np.ndarray) and all(o is i for o, i in zip(outputs, inputs)))):
        out_addr, in_place = in_addr, True  # the same arrays: in place
    else:
        out_addr = _table(outputs, output_offsets, n)
        in_place = all(o == i or out.size == 0 or inp.size == 0  # each output on its input's memory (empty: anywhere)
                       for o, i, out, inp in zip(out_addr.tolist(), in_addr.tolist(), outputs, inputs))
    if _overlapping(inputs, outputs, in_place):
        raise ValueError("run_direct: an output overlaps another output or an input (only in place may an output "
                         "lie on an input: every rank's output at its own input's addresses)")
    prog = program(schedule, layout, shard_results, in_place)
    if prog is None:
        return False
    from . import kernels as kernels_direct

    view, wire = kernel_view(inputs[0][:1])
    like = np.empty(1, dtype=view.dtype)  # the kernel dtype (uint16 for 16-bit floats); one signature per dtype
    itemsize = like.itemsize
    tile = int(tile) if tile is not None else prog.tile(itemsize)
    nbytes = layout.numel * n * itemsize
    if streaming is None:
        streaming = nbytes >= STREAMING_BYTES
    stride = tile * itemsize
    copy_tile = 16 * tile  # as the world kernels' copy-only chunks (ringemu.execute): 64 KiB of fp32

    def body(lo: int, hi: int) -> None:
        slots = np.empty(max(1, prog.n_slots) * tile, dtype=like.dtype)
        kernels_direct.run_direct(in_addr, out_addr, like, prog.chunk_start, prog.chunk_len, prog.ops,
                                  prog.op_bounds, prog.writes, prog.write_bounds,
                                  slots.__array_interface__["data"][0], stride, lo, hi, tile, copy_tile, streaming,
                                  wire)

    threads = int(threads) if threads is not None else default_threads(nbytes)
    if threads == 1:
        body(0, prog.width)
    else:
        run_slabs(body, prog.width, threads)
    return True


def run_call(schedule: Schedule, layout, inputs, outputs, ledger, label: str, mode: str, faults,
             input_offsets=None, output_offsets=None, shard_results: bool = False) -> bool:
    """A collective call's direct run: :func:`run_direct` when the call allows it (fused mode, no faults,
    C-contiguous buffers, a schedule the direct path expresses; ``shard_results`` for a reduce-scatter), the call
    recorded in ``ledger`` as the world path records it. False (nothing done) otherwise."""
    if mode != "fused" or faults is not None:
        return False
    for buffers in (inputs, outputs):
        if not (buffers.flags.c_contiguous if isinstance(buffers, np.ndarray) else
                all(a.flags.c_contiguous for a in buffers)):
            return False
    if ledger is not None and not isinstance(ledger, CommLedger):
        raise TypeError(f"ledger must be a CommLedger or None; got {type(ledger).__name__}")
    if not isinstance(label, str):
        raise TypeError(f"label must be a str; got {label!r}")
    if not run_direct(schedule, layout, inputs, outputs, shard_results=shard_results,
                      input_offsets=input_offsets, output_offsets=output_offsets):
        return False
    if ledger is not None:
        ledger.record(schedule, layout, inputs[0].dtype, label, size_only=False)
    return True


def shard_starts(numel: int, n: int) -> list[int]:
    """Where each shard of ``ChunkLayout(numel, n)`` starts in the buffer (an empty shard: at most ``numel``)."""
    size = ChunkLayout(numel, n).shard_size
    return [min(numel, r * size) for r in range(n)]
