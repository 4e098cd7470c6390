"""Collectives over backends whose ranks own separate buffers: results written into each rank's own output.

:func:`reduce_into` (reduce-scatter, all-reduce) and :func:`gather_into` (all-gather) take N per-rank input buffers
and N per-rank output buffers, as a process-group backend holds them (:mod:`ringemu.torch`: numpy views of each
rank's tensors). In fused mode they run :mod:`ringemu.direct` where the buffers live: no world buffer is gathered
and nothing is scattered back; an output may be its rank's input (in place). Every other case (step and reference
modes, engine orders that widen 16-bit types or start their sums from +0) runs through :mod:`ringemu.collectives`
and is copied out. Either way the result is bit for bit the :mod:`ringemu.collectives` call's, and the ledger
records the same call.
"""
from __future__ import annotations

import numpy as np

from .algorithms import CONTRACTS, DEFAULT_ALGORITHM, algorithm as _entry
from .checks import check_integer_sum
from .collectives import _dtype, _rows, _schedule_of, _shape, _widened, all_gather, all_reduce, reduce_scatter
from .direct import run_call, shard_starts
from .dtypes import resolve_dtype
from .layout import ChunkLayout
from .ledger import CommLedger
from .partition import layout_for
from .schedule import Schedule

__all__ = ["reduce_into", "gather_into"]


def reduce_into(collective: str, inputs: list, outputs: list, *, ledger: CommLedger | None = None,
                label: str | None = None, mode: str = "fused", algorithm: str = DEFAULT_ALGORITHM,
                schedule: Schedule | None = None) -> None:
    """Reduce-scatter or all-reduce of per-rank flat buffers ``inputs`` into ``outputs``: rank r's shard
    (``ChunkLayout(S, N)``) or its whole buffer. The result is bit for bit :func:`reduce_scatter`'s or
    :func:`all_reduce`'s; in fused mode it is computed where the buffers live (no world buffer, no copy in or out;
    ``outputs[r]`` may be ``inputs[r]``: in place), else through those functions and copied out. For backends
    whose ranks own separate buffers (:mod:`ringemu.torch`)."""
    reducing = [name for name, (initial, _) in CONTRACTS.items() if initial == "all"]  # the collectives that sum
    if collective not in reducing:
        raise ValueError(f"reduce_into: collective must be one of {', '.join(reducing)}; got {collective!r}")
    shard_results = CONTRACTS[collective][1][0] == "reduced-own"
    rows = _rows(list(inputs), "inputs")
    n, numel = _shape(rows)
    dtype = _dtype(rows)
    label = label if label is not None else collective.replace("-", "_")
    sizes = ChunkLayout(numel, n).payloads().tolist() if shard_results else [numel] * n
    if len(outputs) != n or any(not isinstance(o, np.ndarray) or o.shape != (m,) or o.dtype != dtype
                                for o, m in zip(outputs, sizes)):
        raise ValueError(f"reduce_into: outputs must be {n} 1-D {dtype} arrays of lengths {sizes}")
    if _widened(collective, algorithm, rows) is None and not _entry(collective, algorithm).sum_from_zero:
        built = _schedule_of(collective, n, algorithm, None, schedule, numel, dtype)
        check_integer_sum(rows)
        if run_call(built, layout_for(built, numel), rows, list(outputs), ledger, label, mode, None,
                    output_offsets=shard_starts(numel, n) if shard_results else None, shard_results=shard_results):
            return
        schedule = built
    run = reduce_scatter if shard_results else all_reduce
    results = run(rows, ledger=ledger, label=label, mode=mode, algorithm=algorithm, schedule=schedule)
    for out, result in zip(outputs, results):
        np.copyto(out, result)


def gather_into(shards: list, outputs: list, *, ledger: CommLedger | None = None, label: str = "all_gather",
                mode: str = "fused", algorithm: str = DEFAULT_ALGORITHM, schedule: Schedule | None = None) -> None:
    """All-gather of per-rank shards (``ChunkLayout(S, N)``) into per-rank flat buffers ``outputs`` of S elements:
    bit for bit :func:`all_gather`'s rows; in fused mode written where the buffers live (no world buffer), else
    through :func:`all_gather` and copied out."""
    n = len(shards)
    numel = sum(int(s.size) for s in shards)
    dtype = shards[0].dtype if n else None
    if len(outputs) != n or any(not isinstance(o, np.ndarray) or o.shape != (numel,) or o.dtype != dtype
                                for o in outputs):
        raise ValueError(f"gather_into: outputs must be {n} 1-D {dtype} arrays of {numel} elements")
    if n and all(isinstance(s, np.ndarray) and s.ndim == 1 for s in shards) and \
            [s.size for s in shards] == ChunkLayout(numel, n).payloads().tolist():
        built = _schedule_of("all-gather", n, algorithm, None, schedule, numel, resolve_dtype(dtype))
        if run_call(built, layout_for(built, numel), list(shards), list(outputs), ledger, label, mode, None,
                    input_offsets=shard_starts(numel, n)):
            return
        schedule = built
    gathered = all_gather(list(shards), ledger=ledger, label=label, mode=mode, algorithm=algorithm, schedule=schedule)
    for out, row in zip(outputs, gathered):
        np.copyto(out, row)
