"""Collective algorithms as data: a :class:`Schedule` is a list of steps of chunk transfers.

A schedule is written once and read by three consumers (DESIGN.md): the kernels that move numbers,
the :class:`~ringemu.ledger.CommLedger` that counts traffic, and the trace that shows each step.
Nothing else in ringemu knows the ring order.

Semantics (guaranteed by :func:`check_provenance` for every schedule built here):

* A step is a set of transfers ``(src, dst, chunk, op)`` that happen at once. ``op`` is ``COPY``
  (``dst[chunk] = src[chunk]``) or ``ADD`` (``dst[chunk] = dst[chunk] + src[chunk]``); ``src`` sends
  the value it held at the start of the step. Several ``ADD`` transfers into the same (dst, chunk) in one
  step are applied in the order they are listed.
* No rank sends, in a step, a chunk it receives in that step, so a kernel may update buffers in place
  without a staging buffer — unless the schedule is built with ``exchange=True``: then two ranks may swap a chunk
  in one step (recursive doubling: both send their partial sums and both add), and the kernels first copy, tile
  by tile, what every source sends in the step to a small staging buffer. Only such schedules pay for it.

The algorithms themselves live in :mod:`ringemu.algorithms` (one registry, one file per family). The transfers
are stored as integer arrays so that a schedule for N = 1024 ranks (about a million transfers) is built and
counted in milliseconds; :meth:`Schedule.steps` gives the readable form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .checks import check_n_ranks  # noqa: F401  (kept importable from here)

__all__ = ["COPY", "ADD", "Transfer", "Schedule", "new_table"]

COPY = 0  # dst[chunk] = src[chunk]
ADD = 1  # dst[chunk] = dst[chunk] + src[chunk]
_OP_NAMES = ("copy", "add")


class Transfer(NamedTuple):
    """One message: ``src`` sends its ``chunk`` to ``dst``, which copies or adds it."""

    src: int
    dst: int
    chunk: int
    op: str  # "copy" or "add"


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective algorithm over ``n_ranks`` ranks whose buffers are split into ``n_chunks`` chunks.

    ``table`` is an int64 array of shape (T, 5) with columns ``step, src, dst, chunk, op``, sorted by step;
    within a step, the row order is the order in which additions into one destination are applied.
    ``initial`` and ``final`` name the symbolic pre- and postcondition that :func:`check_provenance` proves:
    ``"all"`` (every rank holds its own contribution to every chunk), ``"own"`` (rank r holds only chunk r),
    ``"reduced-own"`` (rank r holds chunk r summed over all ranks), ``"reduced-all"`` (every rank holds
    every chunk summed over all ranks), ``"gathered"`` (every rank holds chunk c as rank c had it).
    For a schedule of ``n_chunks = k·n_ranks`` chunks, "chunk c" in ``"own"``, ``"reduced-own"`` and ``"gathered"``
    means every chunk of shard c (chunks ``c·k .. c·k + k - 1``); for ``n_chunks == 1`` "reduced-own" is
    "reduced-all" (the one chunk holds every shard). ``exchange`` lifts the in-place rule (see the module doc).
    """

    name: str
    n_ranks: int
    n_chunks: int
    n_steps: int
    table: np.ndarray
    initial: str
    final: str
    exchange: bool = False  # True: a rank may send, in a step, a chunk it receives in that step (staged)
    partition: tuple[int, ...] | None = None  # chunk bounds of an engine's own cut (ringemu.partition), for one S

    def __post_init__(self) -> None:
        self.table.setflags(write=False)
        if self.partition is not None:
            bounds = tuple(int(b) for b in self.partition)
            if len(bounds) != self.n_chunks + 1:
                raise ValueError(f"schedule {self.name}: a partition of {self.n_chunks} chunks has "
                                 f"{self.n_chunks + 1} bounds; got {len(bounds)}")
            object.__setattr__(self, "partition", bounds)

    @property
    def numel(self) -> int | None:
        """The buffer length per rank the schedule was cut for, or None (the textbook orders fit any length)."""
        return None if self.partition is None else self.partition[-1]

    def with_rows(self, name: str, n_steps: int, table: np.ndarray) -> "Schedule":
        """Another table (some of this schedule's steps, renumbered) with this schedule's chunks, partition and
        pre- and postconditions: how faults, traces and views run a schedule a step at a time."""
        return Schedule(name, self.n_ranks, self.n_chunks, n_steps, table, self.initial, self.final, self.exchange,
                        self.partition)

    @property
    def n_transfers(self) -> int:
        return int(self.table.shape[0])

    def step_bounds(self) -> np.ndarray:
        """Row offsets: the transfers of step ``s`` are ``table[bounds[s]:bounds[s + 1]]``."""
        return np.searchsorted(self.table[:, 0], np.arange(self.n_steps + 1), side="left")

    def steps(self) -> list[tuple[Transfer, ...]]:
        """The schedule as readable :class:`Transfer` tuples, one tuple per step (small N only)."""
        bounds = self.step_bounds()
        return [
            tuple(Transfer(int(r[1]), int(r[2]), int(r[3]), _OP_NAMES[r[4]]) for r in self.table[lo:hi])
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]

    def __repr__(self) -> str:
        return (f"Schedule({self.name!r}, n_ranks={self.n_ranks}, n_chunks={self.n_chunks}, "
                f"n_steps={self.n_steps}, n_transfers={self.n_transfers}"
                + (", exchange=True" if self.exchange else "")
                + (f", partition for {self.numel} elements)" if self.partition is not None else ")"))

    @property
    def split(self) -> int:
        """Chunks per shard: ``n_chunks // n_ranks`` (0 for a whole-buffer schedule of one chunk). For an engine's
        partition: 1 when its chunks belong to shards (a reduce-scatter or all-gather order), else 0."""
        if self.partition is not None:
            return 1 if self.initial == "own" or self.final in ("reduced-own", "gathered") else 0
        return self.n_chunks // self.n_ranks

    def renamed(self, name: str, final: str | None = None) -> "Schedule":
        """The same transfers under another name (and postcondition): how a derived collective reuses a schedule,
        e.g. a reduce-scatter that is an all-reduce keeping one's own chunk."""
        return Schedule(name, self.n_ranks, self.n_chunks, self.n_steps, self.table, self.initial,
                        self.final if final is None else final, self.exchange, self.partition)

    def shard_of(self, chunk: int) -> int | None:
        """The shard (rank) that ``chunk`` belongs to, or None for a whole-buffer chunk. For an engine's partition:
        the shard of ``ChunkLayout(S, N)`` that holds the chunk's elements; an empty chunk of a partition of one
        chunk per rank (MPI's blocks) is rank ``chunk``'s, since it holds no element to place."""
        if not self.split:
            return None
        if self.partition is None:
            return chunk // self.split
        if self.n_chunks == self.n_ranks and self.partition[chunk] == self.partition[chunk + 1]:
            return chunk
        shard_size = max(1, -(-self.partition[-1] // self.n_ranks))  # ceil(S/N), the textbook shard map
        return min(self.n_ranks - 1, self.partition[chunk] // shard_size)

    def chunks_of_shard(self, shard: int) -> list[int]:
        """The chunks that belong to ``shard`` (rank ``shard``'s own data before an all-gather)."""
        if self.partition is None and self.split:
            return list(range(shard * self.split, (shard + 1) * self.split))
        return [c for c in range(self.n_chunks) if self.shard_of(c) == shard]


def new_table(n_rows: int) -> np.ndarray:
    """An uninitialised (n_rows, 5) int64 table stored column by column, so that each column is filled (and later
    read by the ledger and the kernels) as one contiguous array."""
    return np.empty((5, n_rows), dtype=np.int64).T
