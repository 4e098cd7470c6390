"""Run a schedule on a padded world buffer: the one entry point from collectives to kernels.

Modes (all three leave the same bits in the world buffer; the tests check it for every dtype, N and S drawn):

* ``fused`` (default): :func:`ringemu.kernels.run_fused`, chunk by chunk and tile by tile, each rank's chunk
  read from memory once; exactly the ring's additions in the ring's order.
* ``step``: :func:`ringemu.kernels.run_steps`, the faithful step-by-step ring in place (what traces show, and
  the reference of ``fused``).
* ``reference``: :func:`ringemu.reference.run_schedule_reference`, plain numpy, transfer by transfer.

``exchange`` schedules (a rank sends a chunk it also receives in that step, as in recursive doubling) run in both
kernel modes through :func:`ringemu.kernels.run_staged`, which stages what every source sends, tile by tile;
every other schedule runs exactly as before, with no staging.

Every mode returns the (n_ranks, n_ranks) int64 array of elements each directed link (src, dst) carried,
padding included; the kernels count it themselves, the reference mode counts the schedule's table.
The kernels (and numba) are imported on the first call that needs them.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .checks import check_int
from .dtypes import resolve_dtype
from .reference import run_schedule_reference
from .schedule import Schedule
from .wire import kernel_view

__all__ = ["MODES", "STREAMING_BYTES", "run_schedule", "default_tile", "default_threads", "slabs", "run_slabs"]

MODES = ("fused", "step", "reference")
# Worlds of at least this many bytes are copied with streaming (non-temporal) stores, which skip reading the
# destination first but leave nothing in cache: a 1 MiB all-gather took 2x as long with them, a 512 MiB one
# 0.6x (measured on the benchmark machine of docs/performance.md).
STREAMING_BYTES = 32 << 20

_REASONS = {1: "a rank outside 0..n_ranks-1", 2: "a chunk outside 0..n_chunks-1", 3: "an op other than COPY/ADD",
            4: "a step out of order or outside 0..n_steps-1",
            5: "a rank sending a chunk it receives in the same step (cannot run in place)"}


def default_tile(itemsize: int) -> int:
    """Fused-mode tile in elements: 4 KiB per rank (1,024 fp32 elements), so that the N tiles a chunk's walk
    touches stay in L1/L2. Chunks that are only copied (all-gather) use 16 times that: their destinations are
    written with streaming stores and do not occupy the cache.

    Measured on the benchmark machine of docs/performance.md (N = 8, S = 2^24 fp32, fused all-reduce, one
    thread): 4 KiB tiles 46 ms, 8 KiB 56 ms, 32 KiB 66 ms; at N = 64, S = 2^20: 2 KiB 35 ms, 4 KiB 39 ms, 32 KiB 49 ms.
    """
    return max(1, 4096 // itemsize)


def default_threads(world_nbytes: int) -> int:
    """Threads for a world of ``world_nbytes`` bytes: every core this process may use for worlds of 16 MiB and
    more, else 1 (measured: a second thread made an 8 MiB all-reduce slower, 0.61 ms against 0.45 ms, and a
    16 MiB one faster, 0.86 ms against 1.01 ms)."""
    if world_nbytes < 16 << 20:
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def slabs(chunk: int, threads: int, align: int = 64) -> list[tuple[int, int]]:
    """Split a chunk's element range [0, chunk) into at most ``threads`` contiguous slabs [lo, hi), cut at
    multiples of ``align`` elements (so that threads do not share cache lines)."""
    if chunk == 0:
        return [(0, 0)]
    per = -(-chunk // max(1, threads))
    per = -(-per // align) * align
    return [(lo, min(lo + per, chunk)) for lo in range(0, chunk, per)]


@functools.lru_cache(maxsize=8)
def _workers(pid: int, count: int) -> ThreadPoolExecutor:
    """A pool of ``count`` worker threads kept for this process (``pid``: a forked child gets its own, since a
    parent's threads do not exist in it). Starting threads per call cost about 0.5 ms, more than a 16 MiB
    all-reduce's second slab saves; the pool only runs slabs, so it holds nothing a result depends on."""
    return ThreadPoolExecutor(max_workers=count, thread_name_prefix="ringemu-slab")


def run_slabs(body, width: int, threads: int) -> None:
    """``body(lo, hi)`` on each of the :func:`slabs` of ``[0, width)``: this thread runs the first, a kept worker
    thread each of the others (the kernels release the GIL), and every slab has finished on return."""
    parts = slabs(width, threads)
    if len(parts) == 1:
        body(*parts[0])
        return
    pool = _workers(os.getpid(), len(parts) - 1)
    futures = [pool.submit(body, lo, hi) for lo, hi in parts[1:]]
    try:
        body(*parts[0])
    finally:
        for f in futures:
            f.result()


def _columns(schedule: Schedule) -> tuple[np.ndarray, ...]:
    """The table's five columns as contiguous read-only int64 arrays (views when the table is stored column by
    column; read-only always, so that the kernels compile one signature for every schedule)."""
    cols = []
    for k in range(5):
        col = np.ascontiguousarray(schedule.table[:, k], dtype=np.int64).view()
        col.flags.writeable = False
        cols.append(col)
    return tuple(cols)


def _check_and_count(kernels, schedule: Schedule, cols, chunk: int) -> np.ndarray:
    links = np.zeros((schedule.n_ranks, schedule.n_ranks), dtype=np.int64)
    bad = int(kernels.check_and_count(*cols, int(schedule.n_ranks), int(schedule.n_chunks), int(schedule.n_steps),
                                     int(chunk), links, bool(schedule.exchange)))
    if bad >= 0:
        row, reason = divmod(bad, 8)
        raise ValueError(f"schedule {schedule.name}: transfer {row} {schedule.table[row].tolist()} has "
                         f"{_REASONS[reason]}")
    return links


def _prepared(kernels, schedule: Schedule) -> tuple:
    """(columns, messages per directed link, transfers sorted by chunk, chunk offsets) of ``schedule``, validated
    once and kept on the schedule itself (schedules are immutable; a world that reuses one pays this once)."""
    prepared = schedule.__dict__.get("_kernel_prepared")
    if prepared is None:
        cols = _columns(schedule)
        messages = _check_and_count(kernels, schedule, cols, 1)
        chunk_of = cols[3]
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(schedule.n_chunks + 1)).astype(np.int64)
        prepared = (cols, messages, order, bounds)
        object.__setattr__(schedule, "_kernel_prepared", prepared)  # a cache, not state: same value every time
    return prepared


def _reference_links(schedule: Schedule, chunk: int) -> np.ndarray:
    n = schedule.n_ranks
    count = np.bincount(schedule.table[:, 1] * n + schedule.table[:, 2], minlength=n * n)
    return (count * chunk).reshape(n, n).astype(np.int64)


def _staged_body(kernels, schedule: Schedule, cols, view: np.ndarray, wire: int, chunk: int, mode: str,
                 tile: int | None):
    """The slab runner of an ``exchange`` schedule: :func:`ringemu.kernels.run_staged` with one staging tile per
    transfer of the largest step (allocated per thread)."""
    step_of, src, dst, chunk_of, op = cols
    if mode == "step":
        order = np.arange(step_of.shape[0], dtype=np.int64)
        bounds = np.array([0, step_of.shape[0]], dtype=np.int64)
    else:
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(schedule.n_chunks + 1)).astype(np.int64)
    rows_per_step = int(np.bincount(step_of).max()) if step_of.shape[0] else 1
    tile_elems = int(tile) if tile is not None else default_tile(view.dtype.itemsize)

    def body(lo: int, hi: int) -> None:
        stage = np.empty((rows_per_step, tile_elems), dtype=view.dtype)
        kernels.run_staged(view, step_of, src, dst, chunk_of, op, order, bounds, chunk, lo, hi, tile_elems, stage,
                           wire)
    return body


def run_schedule(schedule: Schedule, world: np.ndarray, mode: str = "fused", *, tile: int | None = None,
                 threads: int | None = None, streaming: bool | None = None,
                 source: np.ndarray | None = None) -> np.ndarray:
    """Execute ``schedule`` in place on ``world`` of shape (n_ranks, n_chunks·chunk); return link counts.

    With ``source`` (an (n_ranks, S) array of the world's dtype, S at most the world's width), ``world`` first
    takes ``source``'s values followed by zeros: in fused mode inside the kernel's walk, tile by tile
    (:func:`ringemu.kernels.run_fused_from`: no separate pass over the world), in the other modes by a copy first.

    ``tile`` (elements, fused mode only) overrides :func:`default_tile`; ``threads`` overrides
    :func:`default_threads` (each thread runs the whole schedule on its own slab of every chunk, so the result does
    not depend on it); ``streaming`` forces streaming-store copies on or off (default: on for worlds of
    :data:`STREAMING_BYTES` or more). None of them changes the result. Raises ValueError/TypeError for an unknown mode, a world that does not fit the schedule or
    has an unsupported dtype, or a schedule whose table cannot run in place (see :mod:`ringemu.schedule`).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if not isinstance(schedule, Schedule):
        raise TypeError(f"schedule must be a ringemu Schedule; got {type(schedule).__name__}")
    if not isinstance(world, np.ndarray):
        raise TypeError(f"world must be a numpy array of shape (n_ranks, padded_numel); got {type(world).__name__}")
    resolve_dtype(world.dtype)
    if world.ndim != 2 or world.shape[0] != schedule.n_ranks or world.shape[1] % schedule.n_chunks:
        raise ValueError(f"world of shape {world.shape} does not fit {schedule}: need (n_ranks, a multiple of "
                         f"n_chunks)")
    if not world.flags.writeable:
        raise ValueError("world must be writeable (the schedule runs in place)")
    for name, value in (("tile", tile), ("threads", threads)):
        if value is not None:
            check_int(value, name, minimum=1)
    chunk = int(world.shape[1] // schedule.n_chunks)
    fused_load = (source is not None and mode == "fused" and not schedule.exchange and world.flags.c_contiguous
                  and not np.may_share_memory(source, world))
    if source is not None:
        if not (isinstance(source, np.ndarray) and source.ndim == 2 and source.shape[0] == world.shape[0]
                and source.shape[1] <= world.shape[1] and source.dtype == world.dtype):
            raise ValueError(f"source must be an ({world.shape[0]}, <= {world.shape[1]}) array of {world.dtype}; "
                             f"got {getattr(source, 'shape', None)} {getattr(source, 'dtype', None)}")
        if not fused_load:
            world[:, :source.shape[1]] = source
            world[:, source.shape[1]:] = 0
    if mode == "reference":
        run_schedule_reference(schedule, world)
        return _reference_links(schedule, chunk)

    from . import kernels  # numba is imported here, on first use

    cols, messages, order, bounds = _prepared(kernels, schedule)
    links = messages * chunk
    step_of, src, dst, chunk_of, op = cols
    work = world if world.flags.c_contiguous else np.ascontiguousarray(world)
    view, wire = kernel_view(work)
    if streaming is None:
        streaming = world.nbytes >= STREAMING_BYTES
    streaming = bool(streaming)
    if schedule.exchange:
        body = _staged_body(kernels, schedule, cols, view, wire, chunk, mode, tile)
    elif mode == "step":
        def body(lo: int, hi: int) -> None:
            kernels.run_steps(view, src, dst, chunk_of, op, chunk, lo, hi, streaming, wire)
    else:
        tile_elems = int(tile) if tile is not None else default_tile(world.dtype.itemsize)
        copy_elems = int(tile) if tile is not None else 16 * tile_elems  # 64 KiB: streaming-store copies

        if fused_load:
            source_view = kernel_view(np.ascontiguousarray(source))[0]

            def body(lo: int, hi: int) -> None:
                kernels.run_fused_from(view, source_view, src, dst, chunk_of, op, order, bounds, chunk, lo, hi,
                                       tile_elems, copy_elems, streaming, wire)
        else:
            def body(lo: int, hi: int) -> None:
                kernels.run_fused(view, src, dst, chunk_of, op, order, bounds, chunk, lo, hi, tile_elems,
                                  copy_elems, streaming, wire)
    run_slabs(body, chunk, int(threads) if threads is not None else default_threads(world.nbytes))
    if work is not world:
        world[...] = work
    return links
