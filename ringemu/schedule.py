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
  without a staging buffer.

The ring algorithms follow Patarasuk & Yuan (2009), "Bandwidth optimal all-reduce algorithms for clusters
of workstations", §3, with the convention that after reduce-scatter rank ``r`` holds the fully reduced
chunk ``r``. The transfers are stored as integer arrays so that a schedule for N = 1024 ranks (about a
million transfers) is built and counted in milliseconds; :meth:`Schedule.steps` gives the readable form.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = [
    "COPY", "ADD", "Transfer", "Schedule", "ring_reduce_scatter", "ring_all_gather", "ring_all_reduce",
    "naive_reduce_broadcast", "SCHEDULES", "schedule_for", "check_n_ranks",
]

COPY = 0  # dst[chunk] = src[chunk]
ADD = 1  # dst[chunk] = dst[chunk] + src[chunk]
_OP_NAMES = ("copy", "add")


class Transfer(NamedTuple):
    """One message: ``src`` sends its ``chunk`` to ``dst``, which copies or adds it."""

    src: int
    dst: int
    chunk: int
    op: str  # "copy" or "add"


def check_n_ranks(n_ranks: object, name: str = "n_ranks") -> int:
    """Return ``n_ranks`` as an int, or raise a clear error if it is not an integer >= 1."""
    if isinstance(n_ranks, bool) or not isinstance(n_ranks, (int, np.integer)):
        raise TypeError(f"{name} must be an integer >= 1, got {n_ranks!r} ({type(n_ranks).__name__})")
    if n_ranks < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {n_ranks}")
    return operator.index(n_ranks)


@dataclass(frozen=True, eq=False)
class Schedule:
    """A collective algorithm over ``n_ranks`` ranks whose buffers are split into ``n_chunks`` chunks.

    ``table`` is an int64 array of shape (T, 5) with columns ``step, src, dst, chunk, op``, sorted by step;
    within a step, the row order is the order in which additions into one destination are applied.
    ``initial`` and ``final`` name the symbolic pre- and postcondition that :func:`check_provenance` proves:
    ``"all"`` (every rank holds its own contribution to every chunk), ``"own"`` (rank r holds only chunk r),
    ``"reduced-own"`` (rank r holds chunk r summed over all ranks), ``"reduced-all"`` (every rank holds
    every chunk summed over all ranks), ``"gathered"`` (every rank holds chunk c as rank c had it).
    """

    name: str
    n_ranks: int
    n_chunks: int
    n_steps: int
    table: np.ndarray
    initial: str
    final: str

    def __post_init__(self) -> None:
        self.table.setflags(write=False)

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
                f"n_steps={self.n_steps}, n_transfers={self.n_transfers})")


def _new_table(n_rows: int) -> np.ndarray:
    """An uninitialised (n_rows, 5) int64 table stored column by column, so that each column is filled (and later
    read by the ledger and the kernels) as one contiguous array."""
    return np.empty((5, n_rows), dtype=np.int64).T


def _fill_ring(out: np.ndarray, n: int, first_step: int, chunk_offset: int, op: int) -> np.ndarray:
    """Fill ``out`` ((N-1)·N rows) with N-1 ring steps: at step s rank r sends chunk (r - s + chunk_offset) mod N
    to rank r + 1. Rows are ordered by step, then by sending rank."""
    m = n - 1
    ranks = np.arange(n, dtype=np.int64)
    out[:, 0].reshape(m, n)[...] = np.arange(first_step, first_step + m, dtype=np.int64)[:, None]
    out[:, 1].reshape(m, n)[...] = ranks
    out[:, 2].reshape(m, n)[...] = (ranks + 1) % n
    chunk = out[:, 3].reshape(m, n)
    np.subtract.outer(np.arange(chunk_offset, chunk_offset + n, dtype=np.int64) % n,
                      np.arange(m, dtype=np.int64), out=chunk.T)  # r + offset - s, in (-N, 2N)
    np.remainder(chunk, n, out=chunk)
    out[:, 4] = op
    return out


def _ring_table(n: int, first_step: int, chunk_offset: int, op: int) -> np.ndarray:
    """N-1 ring steps: at step s rank r sends chunk (r - s + chunk_offset) mod N to rank r + 1."""
    return _fill_ring(_new_table((n - 1) * n), n, first_step, chunk_offset, op)


def ring_reduce_scatter(n_ranks: int) -> Schedule:
    """Ring reduce-scatter: N-1 steps; chunk c starts at rank c+1 and is summed around the ring
    (c+1, c+2, ..., c), so rank r ends with chunk r reduced over all ranks. Each rank sends
    (N-1)/N of its buffer (Patarasuk & Yuan 2009, §3; the lesson's "前一半 reduce-scatter")."""
    n = check_n_ranks(n_ranks)
    return Schedule("ring_reduce_scatter", n, n, n - 1, _ring_table(n, 0, -1, ADD), "all", "reduced-own")


def ring_all_gather(n_ranks: int) -> Schedule:
    """Ring all-gather: N-1 steps; rank r starts with chunk r and at step s forwards chunk r - s,
    so every rank ends with every chunk. Each rank sends (N-1)/N of the gathered buffer."""
    n = check_n_ranks(n_ranks)
    return Schedule("ring_all_gather", n, n, n - 1, _ring_table(n, 0, 0, COPY), "own", "gathered")


def ring_all_reduce(n_ranks: int) -> Schedule:
    """Ring all-reduce = ring reduce-scatter then ring all-gather: 2(N-1) steps, each rank sends
    2(N-1)/N of its buffer (the lesson's claim C1)."""
    n = check_n_ranks(n_ranks)
    half = (n - 1) * n
    table = _new_table(2 * half)
    _fill_ring(table[:half], n, 0, -1, ADD)
    _fill_ring(table[half:], n, n - 1, 0, COPY)
    return Schedule("ring_all_reduce", n, n, 2 * (n - 1), table, "all", "reduced-all")


def naive_reduce_broadcast(n_ranks: int) -> Schedule:
    """The contrast the lesson draws (claim C5): every rank sends its whole buffer to rank 0, which adds
    them in rank order, then sends the sum back to every rank. One chunk, two steps; rank 0 receives and
    sends (N-1) whole buffers, every other rank one."""
    n = check_n_ranks(n_ranks)
    others = np.arange(1, n, dtype=np.int64)
    zeros = np.zeros_like(others)
    gather = np.stack([zeros, others, zeros, zeros, np.full_like(others, ADD)], axis=1)
    scatter = np.stack([zeros + 1, zeros, others, zeros, np.full_like(others, COPY)], axis=1)
    n_steps = 2 if n > 1 else 0
    return Schedule("naive_all_reduce", n, 1, n_steps, np.concatenate([gather, scatter]), "all", "reduced-all")


SCHEDULES = {
    "reduce-scatter": ring_reduce_scatter,
    "all-gather": ring_all_gather,
    "all-reduce": ring_all_reduce,
    "naive-all-reduce": naive_reduce_broadcast,
}


def schedule_for(op: str, n_ranks: int) -> Schedule:
    """The schedule of a collective named as on the command line (``reduce-scatter``, ...)."""
    try:
        build = SCHEDULES[op]
    except KeyError:
        raise ValueError(f"op must be one of {', '.join(SCHEDULES)}; got {op!r}") from None
    return build(n_ranks)
