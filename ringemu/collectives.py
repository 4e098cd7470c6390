"""Public collectives on N virtual ranks: ``reduce_scatter``, ``all_gather``, ``all_reduce``, ``naive_all_reduce``.

Each call builds the schedule of its ``algorithm`` (default ``"ring"``; any name of
:func:`ringemu.algorithms.names`) from the registry :mod:`ringemu.algorithms`, records it in the :class:`~ringemu.ledger.CommLedger`
passed in, and — for real buffers — executes it with the kernels (:mod:`ringemu.execute`). Size-only buffers
(:class:`~ringemu.virtual.VirtualBuffer`) run the same call with counting only.

Input is a world array of shape (N, S), one row per rank, or a sequence of N one-dimensional per-rank buffers.
Rows are padded with zeros inside (to N·ceil(S/N) for the ring; :class:`~ringemu.layout.ChunkLayout` says where
for algorithms that cut shards finer); results drop the padding. The shard map is ``ChunkLayout(S, N)`` for every
algorithm:

* ``reduce_scatter(world)`` → list of N arrays; entry r is rank r's fully reduced chunk r (``ChunkLayout(S, N)``
  gives its length, which is 0 for chunks made only of padding);
* ``all_gather(shards)`` → (N, S) array, every row the concatenation of the shards;
* ``all_reduce(world)`` and ``naive_all_reduce(world)`` → (N, S) array, every row the sum over ranks.

For every algorithm, ``reduce_scatter(world, algorithm=A)[r]`` is bit for bit the shard r of
``all_reduce(world, algorithm=A)`` (the registry's reduce-scatter adds in its all-reduce's order), so data
parallelism (all-reduce) and ZeRO (reduce-scatter) agree exactly. ``schedule=`` passes a prebuilt schedule of
the same collective and N (the emulated world keeps one per collective). ``ranks_per_node`` is passed to the
hierarchical algorithms (:func:`ringemu.algorithms.build`).

``faults=`` (a :class:`~ringemu.faults.plan.FaultPlan`, or Fault objects / spec strings) injects faults into the
call (:mod:`ringemu.faults.plan`); a detected fault raises :class:`~ringemu.faults.plan.CollectiveFault` and no result is
returned (with faults the collective always works in a fresh padded world, even when ``out`` is given).

The input is never modified. Integer inputs whose exact sum does not fit the dtype are rejected (ring
partial sums wrap around but the final sum is exact whenever it fits, as in two's-complement hardware).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .direct import run_call, shard_starts
from .checks import check_integer_sum
from .dtypes import dtype_name, resolve_dtype
from .execute import MODES, run_schedule
from .faults.plan import as_plan
from .layout import ChunkLayout
from .partition import layout_for
from .ledger import CommLedger
from .algorithms import CONTRACTS, DEFAULT_ALGORITHM, algorithm as _entry, build
from .schedule import Schedule
from .virtual import VirtualBuffer

__all__ = ["reduce_scatter", "all_gather", "all_reduce", "naive_all_reduce", "as_world",
           "check_integer_sum"]


def as_world(buffers, name: str = "world") -> np.ndarray | VirtualBuffer:
    """An (N, S) world from an array, a VirtualBuffer or a sequence of equal-length 1-D per-rank buffers."""
    rows = _rows(buffers, name)
    return np.stack(rows) if isinstance(rows, list) else rows


def _rows(buffers, name: str) -> np.ndarray | VirtualBuffer | list[np.ndarray]:
    """Validate a world without copying it: the (N, S) array, the VirtualBuffer, or the list of N rows."""
    if isinstance(buffers, VirtualBuffer):
        if buffers.ndim != 2 or buffers.shape[0] < 1:
            raise ValueError(f"{name} must have shape (n_ranks >= 1, numel); got {buffers.shape}")
        return buffers
    if isinstance(buffers, np.ndarray):
        world = buffers
    elif isinstance(buffers, Sequence) and len(buffers) and all(isinstance(b, np.ndarray) for b in buffers):
        shapes = {b.shape for b in buffers}
        dtypes = {b.dtype for b in buffers}
        if len(shapes) != 1 or len(dtypes) != 1 or buffers[0].ndim != 1:
            raise ValueError(f"{name}: per-rank buffers must be 1-D with one shape and dtype; got shapes "
                             f"{sorted(shapes)} and dtypes {sorted(map(str, dtypes))}")
        resolve_dtype(buffers[0].dtype, f"{name} dtype")  # raises for unsupported dtypes
        return list(buffers)
    else:
        raise TypeError(f"{name} must be an (n_ranks, numel) numpy array, a VirtualBuffer, or a non-empty list "
                        f"of 1-D numpy arrays; got {type(buffers).__name__}")
    if world.ndim != 2 or world.shape[0] < 1:
        raise ValueError(f"{name} must have shape (n_ranks >= 1, numel); got {world.shape}")
    resolve_dtype(world.dtype, f"{name} dtype")  # raises for unsupported dtypes
    return world


def _dtype(rows):
    return rows[0].dtype if isinstance(rows, list) else rows.dtype


def _shape(rows) -> tuple[int, int]:
    return (len(rows), rows[0].shape[0]) if isinstance(rows, list) else rows.shape


def _padded(rows, layout: ChunkLayout) -> np.ndarray:
    """The world, zero-padded to ``layout.padded_numel`` columns: the one extra world buffer a collective holds
    (per-rank buffers are copied into it row by row, never stacked first)."""
    n, dtype = len(rows), rows[0].dtype
    padded = np.empty((n, layout.padded_numel), dtype=dtype)
    if isinstance(rows, list):
        for r, row in enumerate(rows):
            layout.pad(row[None, :], padded[r:r + 1])
    else:
        layout.pad(rows, padded)
    return padded


def _run(schedule: Schedule, layout: ChunkLayout, dtype, padded: np.ndarray | None,
         ledger: CommLedger | None, label: str, mode: str, source: np.ndarray | None = None,
         faults=None) -> None:
    if mode not in MODES:  # checked here too, so size-only calls reject what real ones would
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if ledger is not None and not isinstance(ledger, CommLedger):
        raise TypeError(f"ledger must be a CommLedger or None; got {type(ledger).__name__}")
    if not isinstance(label, str):
        raise TypeError(f"label must be a str; got {label!r}")
    plan = as_plan(faults)
    if plan is not None and padded is None:
        raise ValueError("faults need real buffers (size-only buffers only count)")
    if ledger is not None:
        ledger.record(schedule, layout, dtype, label, size_only=padded is None)
    if plan is not None:
        if source is not None:
            layout.pad(source, padded)
        seen = len(plan.messages)
        try:
            plan.run(schedule, padded, mode, label)  # raises CollectiveFault before any result is handed out
        finally:
            if ledger is not None:  # the link layer's records of this call's faulty steps
                ledger.messages.extend(plan.messages[seen:])
    elif padded is not None:
        run_schedule(schedule, padded, mode, source=source)


def _check_sum(padded: np.ndarray, layout: ChunkLayout) -> None:
    if padded.dtype.kind == "i":
        check_integer_sum(layout.unpad(padded))


def _schedule_of(collective: str, n: int, algorithm: str, ranks_per_node, schedule: Schedule | None,
                 numel: int, dtype) -> Schedule:
    """The registry's schedule (engine orders cut for this buffer's length and element size), or the prebuilt
    ``schedule`` a caller keeps (the emulated world keeps one per collective and algorithm, so the kernels'
    preparation of its table is done once). A prebuilt one must be on ``n`` ranks and declare the collective's
    pre- and postcondition (an all-gather's schedule handed to all_reduce would return unreduced data)."""
    if schedule is None:
        return build(collective, n, algorithm, ranks_per_node=ranks_per_node, numel=numel,
                     itemsize=resolve_dtype(dtype).itemsize)
    if not isinstance(schedule, Schedule) or schedule.n_ranks != n:
        raise ValueError(f"schedule must be a Schedule of {collective} on {n} ranks; got {schedule!r}")
    initial, finals = CONTRACTS[collective]  # ringemu.algorithms: what each collective's schedules declare
    if schedule.initial != initial or schedule.final not in finals:
        raise ValueError(f"schedule {schedule.name!r} goes from {schedule.initial!r} to {schedule.final!r}; "
                         f"{collective} needs {initial!r} to {' or '.join(map(repr, finals))}")
    return schedule


def _widened(collective: str, algorithm: str, world) -> np.ndarray | VirtualBuffer | list | None:
    """The world in fp32 when ``algorithm`` sums this 16-bit float type in fp32 (:attr:`Algorithm.accumulate`:
    upcast, run, round once), else None."""
    dtype = _dtype(world)
    if dtype.itemsize != 2 or dtype.kind == "i" or dtype_name(dtype) not in _entry(collective, algorithm).accumulate:
        return None
    if isinstance(world, VirtualBuffer):
        return VirtualBuffer(world.shape, np.float32)
    return [row.astype(np.float32) for row in world] if isinstance(world, list) else world.astype(np.float32)


def _from_zero(collective: str, algorithm: str, results) -> None:
    """Add +0 to each result in place where the entry's sum starts from +0 (:attr:`Algorithm.sum_from_zero`):
    x + (+0) is x for every x but -0.0, which becomes +0.0."""
    if _entry(collective, algorithm).sum_from_zero:
        for row in results:
            if row.dtype.kind != "i":
                row[row == 0] = 0


def _check_out(out, n: int, numel: int, dtype) -> None:
    if not isinstance(out, np.ndarray) or out.shape != (n, numel) or out.dtype != dtype:
        raise ValueError(f"out must be a numpy array of shape ({n}, {numel}) and dtype {dtype}; got "
                         f"{type(out).__name__} {getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")


def _reduce_into(schedule: Schedule, world, layout: ChunkLayout, out, ledger, label: str, mode: str,
                 faults=None) -> np.ndarray:
    """Run a reducing schedule (reduce-scatter or all-reduce) on the world's values; return the padded buffer the
    kernel ran on. With an (N, S) array, an unpadded layout and ``out`` (``out is world``: in place), the kernel
    runs in ``out`` itself; else in a fresh padded buffer. An (N, S)
    array is loaded into that buffer inside the kernel's walk (:func:`ringemu.execute.run_schedule` ``source``),
    per-rank lists row by row. With ``faults`` always a fresh padded buffer (a failure leaves ``out`` alone)."""
    n, numel = _shape(world)
    if out is not None:
        _check_out(out, n, numel, world[0].dtype if isinstance(world, list) else world.dtype)
    if faults is not None or isinstance(world, list) or not layout.contiguous:
        padded = _padded(world, layout)
        _check_sum(padded, layout)
        _run(schedule, layout, padded.dtype, padded, ledger, label, mode, faults=faults)
    else:
        if world.dtype.kind == "i":
            check_integer_sum(world)
        in_out = out is not None and layout.padded_numel == numel and out.flags.c_contiguous
        padded = out if in_out else np.empty((n, layout.padded_numel), dtype=world.dtype)
        _run(schedule, layout, padded.dtype, padded, ledger, label, mode, source=None if padded is world else world)
    return padded


def reduce_scatter(world, *, ledger: CommLedger | None = None, label: str = "reduce_scatter",
                   mode: str = "fused", algorithm: str = DEFAULT_ALGORITHM, ranks_per_node: int | None = None,
                   out: np.ndarray | None = None, schedule: Schedule | None = None, faults=None) -> list:
    """Reduce-scatter by ``algorithm``: entry r of the result is shard r (``ChunkLayout(S, N)``) of the sum over
    ranks, in that algorithm's order of additions.

    ``out``: an (N, S) array that receives the shards in place (``out=world``: in place): the result is then
    views of ``out``'s rows, whose other elements are unspecified (intermediate sums or left as they were)."""
    world = _rows(world, "world")
    n, numel = _shape(world)
    wide = _widened("reduce-scatter", algorithm, world)
    if wide is not None:  # the engine sums 16-bit floats in fp32 and rounds once
        shards = reduce_scatter(wide, ledger=ledger, label=label, mode=mode, algorithm=algorithm,
                                ranks_per_node=ranks_per_node, schedule=schedule, faults=faults)
        return [VirtualBuffer(s.shape, _dtype(world)) if isinstance(s, VirtualBuffer) else s.astype(_dtype(world))
                for s in shards]
    schedule = _schedule_of("reduce-scatter", n, algorithm, ranks_per_node, schedule, numel, _dtype(world))
    layout = layout_for(schedule, numel)
    if isinstance(world, VirtualBuffer):
        _run(schedule, layout, world.dtype, None, ledger, label, mode, faults=faults)
        return [VirtualBuffer((layout.shard_payload(r),), world.dtype) for r in range(n)]
    if out is not None:
        _check_out(out, n, numel, _dtype(world))
    starts, shard_map = shard_starts(numel, n), ChunkLayout(numel, n)
    target = out if out is not None else np.empty((1, numel), dtype=_dtype(world))  # out: the shards in place
    shards = [target[r if out is not None else 0, starts[r]:starts[r] + shard_map.shard_payload(r)] for r in range(n)]
    if faults is None and mode == "fused":
        check_integer_sum(world)
    if not run_call(schedule, layout, world, out if out is not None else shards, ledger, label, mode, faults,
                    output_offsets=None if out is not None else starts, shard_results=True):
        padded = _reduce_into(schedule, world, layout, out, ledger, label, mode, faults)
        shards = [layout.shard(padded[r], r) for r in range(n)]
    _from_zero("reduce-scatter", algorithm, shards)
    return shards


def all_gather(shards, *, ledger: CommLedger | None = None, label: str = "all_gather",
               mode: str = "fused", algorithm: str = DEFAULT_ALGORITHM, ranks_per_node: int | None = None,
               schedule: Schedule | None = None, faults=None):
    """All-gather by ``algorithm`` of per-rank shards laid out as ``ChunkLayout(S, N)`` (shard r = chunk r's
    payload).

    ``shards`` is a list of N 1-D arrays (lengths as the layout gives them), or a VirtualBuffer of shape
    (N, S) for counting only. Returns the (N, S) gathered world.
    """
    if isinstance(shards, VirtualBuffer):
        world = as_world(shards, "shards")
        n, numel = world.shape
        schedule = _schedule_of("all-gather", n, algorithm, ranks_per_node, schedule, numel, world.dtype)
        _run(schedule, layout_for(schedule, numel), world.dtype, None, ledger, label, mode, faults=faults)
        return VirtualBuffer((n, numel), world.dtype)
    if not isinstance(shards, Sequence) or not shards or not all(isinstance(s, np.ndarray) for s in shards):
        raise TypeError("shards must be a non-empty list of 1-D numpy arrays (one per rank) or a VirtualBuffer")
    n = len(shards)
    numel = sum(int(s.size) for s in shards)
    shard_map = ChunkLayout(numel, n)
    lengths = [s.size for s in shards]
    if [s.ndim for s in shards] != [1] * n or lengths != shard_map.payloads().tolist():
        raise ValueError(f"shards must be 1-D with lengths {shard_map.payloads().tolist()} "
                         f"(ChunkLayout({numel}, {n}) payloads); got lengths {lengths}")
    dtypes = {s.dtype for s in shards}
    if len(dtypes) != 1:
        raise ValueError(f"shards must share one dtype; got {sorted(map(str, dtypes))}")
    dtype = resolve_dtype(shards[0].dtype)
    schedule = _schedule_of("all-gather", n, algorithm, ranks_per_node, schedule, numel, dtype)
    layout = layout_for(schedule, numel)
    gathered = np.empty((n, numel), dtype=dtype)
    if run_call(schedule, layout, list(shards), gathered, ledger, label, mode, faults,
                input_offsets=shard_starts(numel, n)):
        return gathered
    padded = np.zeros((n, layout.padded_numel), dtype=dtype)
    for r, shard in enumerate(shards):
        layout.place_shard(padded[r], r, shard)
    _run(schedule, layout, dtype, padded, ledger, label, mode, faults=faults)
    return layout.unpad(padded)


def all_reduce(world, *, ledger: CommLedger | None = None, label: str = "all_reduce", mode: str = "fused",
               algorithm: str = DEFAULT_ALGORITHM, ranks_per_node: int | None = None,
               out: np.ndarray | None = None, schedule: Schedule | None = None, faults=None):
    """All-reduce by ``algorithm`` (default the ring: reduce-scatter then all-gather): every row of the result is
    the sum over ranks, bit-identical to :func:`reduce_scatter`'s shards with the same algorithm.

    ``out``: an (N, S) array that receives the result and is returned (reuse it across calls: no fresh world is
    allocated when S is a multiple of the schedule's chunk count); ``out=world`` reduces in place."""
    world = _rows(world, "world")
    n, numel = _shape(world)
    wide = _widened("all-reduce", algorithm, world)
    if wide is not None:  # the engine sums 16-bit floats in fp32 and rounds once
        if out is not None:
            _check_out(out, n, numel, _dtype(world))
        total = all_reduce(wide, ledger=ledger, label=label, mode=mode, algorithm=algorithm,
                           ranks_per_node=ranks_per_node, schedule=schedule, faults=faults)
        if isinstance(total, VirtualBuffer):
            return VirtualBuffer((n, numel), _dtype(world))
        if out is None:
            return total.astype(_dtype(world))
        out[...] = total.astype(_dtype(world))
        return out
    schedule = _schedule_of("all-reduce", n, algorithm, ranks_per_node, schedule, numel, _dtype(world))
    layout = layout_for(schedule, numel)
    if isinstance(world, VirtualBuffer):
        _run(schedule, layout, world.dtype, None, ledger, label, mode, faults=faults)
        return VirtualBuffer((n, numel), world.dtype)
    if out is not None:
        _check_out(out, n, numel, _dtype(world))
    result = out if out is not None else np.empty((n, numel), dtype=_dtype(world))
    if faults is None and mode == "fused":
        check_integer_sum(world)
    if run_call(schedule, layout, world, result, ledger, label, mode, faults):
        _from_zero("all-reduce", algorithm, result)
        return result
    padded = _reduce_into(schedule, world, layout, out, ledger, label, mode, faults)
    if out is None or padded is out:
        result = layout.unpad(padded) if out is None else out
    else:
        out[...] = layout.unpad(padded)
        result = out
    _from_zero("all-reduce", algorithm, result)
    return result


def naive_all_reduce(world, *, ledger: CommLedger | None = None, label: str = "naive_all_reduce",
                     mode: str = "fused", out: np.ndarray | None = None, faults=None):
    """The lesson's contrast, ``all_reduce(world, algorithm="naive")``: rank 0 receives every buffer, sums in
    rank order, sends the sum back."""
    return all_reduce(world, ledger=ledger, label=label, mode=mode, algorithm="naive", out=out, faults=faults)
