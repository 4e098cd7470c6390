"""Traffic records of the torch backend for any dtype it moves, ringemu's own and the narrow ones.

:meth:`ringemu.ledger.CommLedger.record` takes ringemu's dtypes (the kernels' types). The backend also moves
uint8, int8, int16 and bool tensors (:data:`ringemu.torch_tensors.EXACT_NUMPY_OF`) by copies and exact
reductions; their calls are recorded here as a :class:`~ringemu.ledger.CollectiveRecord` with the tensor's own
element size, so a uint8 pickle of 300 B counts 300 B on the wire, as it would on NCCL or gloo.
"""
from __future__ import annotations

import numpy as np

from ..algorithms import build
from ..dtypes import DTYPES
from ..layout import ChunkLayout
from ..ledger import CollectiveRecord, CommLedger
from ..schedule import Schedule

__all__ = ["record", "record_collective"]

_RINGEMU_DTYPES = frozenset(DTYPES.values())


def record(ledger: CommLedger | None, schedule: Schedule, layout: ChunkLayout, dtype, label: str,
           size_only: bool = True) -> None:
    """Add one call of ``schedule`` over ``layout`` elements of ``dtype`` to ``ledger`` (nothing if None)."""
    if ledger is None:
        return
    dt = np.dtype(dtype)
    if dt in _RINGEMU_DTYPES:
        ledger.record(schedule, layout, dt, label, size_only=size_only)
        return
    if ledger.records and ledger.n_ranks != schedule.n_ranks:
        raise ValueError(f"this ledger counts a world of {ledger.n_ranks} ranks; got a collective on "
                         f"{schedule.n_ranks} ranks (use one ledger per world)")
    ledger.records.append(CollectiveRecord(label, schedule, layout, dt.itemsize, dt.name, size_only))


def record_collective(ledger: CommLedger | None, collective: str, n: int, numel: int, dtype, label: str,
                      algorithm: str) -> None:
    """Record ``collective`` by ``algorithm`` on ``n`` ranks of ``numel`` elements each, as the collectives do
    (the algorithm's schedule, :class:`~ringemu.layout.ChunkLayout` over its chunks), without moving data."""
    schedule = build(collective, n, algorithm)
    record(ledger, schedule, ChunkLayout(numel, schedule.n_chunks, n), dtype, label)
