"""Run a schedule on a padded world buffer: the one entry point from collectives to kernels.

Modes (all three leave the same bits in the world buffer; the tests check it for every dtype, N and S drawn):

* ``fused`` (default): :func:`ringemu.kernels.run_fused`, chunk by chunk and tile by tile, each rank's chunk
  read from memory once; exactly the ring's additions in the ring's order.
* ``step``: :func:`ringemu.kernels.run_steps`, the faithful step-by-step ring in place (what traces show, and
  the reference of ``fused``).
* ``reference``: :func:`ringemu.reference.run_schedule_reference`, plain numpy, transfer by transfer.

Every mode returns the (n_ranks, n_ranks) int64 array of elements each directed link (src, dst) carried,
padding included; the kernels count it themselves, the reference mode counts the schedule's table.
The kernels (and numba) are imported on the first call that needs them.
"""
from __future__ import annotations

import numpy as np

from .dtypes import resolve_dtype
from .reference import run_schedule_reference
from .schedule import Schedule
from .wire import kernel_view

__all__ = ["MODES", "run_schedule", "default_tile"]

MODES = ("fused", "step", "reference")

_REASONS = {1: "a rank outside 0..n_ranks-1", 2: "a chunk outside 0..n_chunks-1", 3: "an op other than COPY/ADD",
            4: "a step out of order or outside 0..n_steps-1",
            5: "a rank sending a chunk it receives in the same step (cannot run in place)"}


def default_tile(itemsize: int) -> int:
    """Fused-mode tile in elements: 8,192 (32 KiB of fp32), 16,384 for 16-bit types.

    Tiles of 8 K elements or more stream at memory speed while N tiles stay in L2; smaller tiles were
    30–60 % slower on the development machine (DESIGN.md, measured facts).
    """
    return 16384 if itemsize <= 2 else 8192


def _columns(schedule: Schedule) -> tuple[np.ndarray, ...]:
    table = schedule.table
    return tuple(np.ascontiguousarray(table[:, k]) for k in range(5))


def _check_table(kernels, schedule: Schedule, cols) -> None:
    bad = int(kernels.first_invalid_transfer(*cols, schedule.n_ranks, schedule.n_chunks, schedule.n_steps))
    if bad >= 0:
        row, reason = divmod(bad, 8)
        raise ValueError(f"schedule {schedule.name}: transfer {row} {schedule.table[row].tolist()} has "
                         f"{_REASONS[reason]}")


def _reference_links(schedule: Schedule, chunk: int) -> np.ndarray:
    n = schedule.n_ranks
    count = np.bincount(schedule.table[:, 1] * n + schedule.table[:, 2], minlength=n * n)
    return (count * chunk).reshape(n, n).astype(np.int64)


def run_schedule(schedule: Schedule, world: np.ndarray, mode: str = "fused", *, tile: int | None = None) -> np.ndarray:
    """Execute ``schedule`` in place on ``world`` of shape (n_ranks, n_chunks·chunk); return link counts.

    ``tile`` (elements, fused mode only) overrides :func:`default_tile`. Raises ValueError/TypeError for an
    unknown mode, a world that does not fit the schedule or has an unsupported dtype, or a schedule whose table
    cannot run in place (see :mod:`ringemu.schedule`).
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
    chunk = world.shape[1] // schedule.n_chunks
    if mode == "reference":
        run_schedule_reference(schedule, world)
        return _reference_links(schedule, chunk)
    if tile is None:
        tile = default_tile(world.dtype.itemsize)
    elif isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1:
        raise ValueError(f"tile must be a positive integer (elements); got {tile!r}")

    from . import kernels  # numba is imported here, on first use

    cols = _columns(schedule)
    _check_table(kernels, schedule, cols)
    _, src, dst, chunk_of, op = cols
    links = np.zeros((schedule.n_ranks, schedule.n_ranks), dtype=np.int64)
    work = world if world.flags.c_contiguous else np.ascontiguousarray(world)
    view, wire = kernel_view(work)
    if mode == "step":
        kernels.run_steps(view, src, dst, chunk_of, op, chunk, wire, links)
    else:
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(schedule.n_chunks + 1)).astype(np.int64)
        kernels.run_fused(view, src, dst, chunk_of, op, order, bounds, chunk, int(tile), wire, links)
    if work is not world:
        world[...] = work
    return links

