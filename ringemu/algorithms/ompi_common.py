"""What Open MPI 5.0's coll/base orders share: its block partition and messages written as element ranges.

Open MPI's loops send element ranges of the user's buffer (a block, a window of a recursive halving, a whole
vector), not chunks of a fixed partition. :class:`Ranges` collects them as the engine's loop writes them, step
by step, and cuts the buffer at every range's ends, so that each message is a run of whole chunks and the
schedule's partition (:attr:`ringemu.schedule.Schedule.partition`) is exactly the set of element ranges the engine
moves. Only bounds are computed, never per-element data: a schedule for S = 10^9 elements is built as fast as for
S = 10.

Guarantees of :meth:`Ranges.schedule`: within a step, rows keep the order in which they were added (additions into
one (dst, chunk) apply in that order, as the engine's loop applies them); every source sends the value it held at
the start of the step; a step in which a rank sends a chunk it also receives makes the schedule an ``exchange``
schedule. A zero-length range is no message (the engine's loop sends 0 bytes there) and is dropped, except for an
empty buffer: MPI returns before any communication for count 0 (``ompi/mpi/c/allreduce.c``), and the schedule
keeps the algorithm's steps over empty chunks so that its postcondition still holds symbolically (0 bytes): one
empty chunk for a whole-vector order, and for an order of blocks the pattern of one element per block on the
textbook layout of 0 elements (:func:`emptied`).

Source: open-mpi/ompi v5.0.10 (the PyPI wheel is 5.0.11), ``ompi/mca/coll/base/coll_base_functions.h`` and
``coll_base_util.h``.
"""
from __future__ import annotations

import numpy as np

from ..layout import ChunkLayout
from ..schedule import ADD, COPY, Schedule, new_table
from ._steps import pow2_below

__all__ = ["ENGINE", "SOURCE_TAG", "Ranges", "emptied", "blockcount", "block_bounds", "shard_bounds", "pow2_below", "mirror",
           "ADD", "COPY"]

ENGINE = "Open MPI 5.0 (coll/tuned)"
SOURCE_TAG = "Open MPI 5.0.11 (source read: open-mpi/ompi v5.0.10), ompi/mca/coll"


def blockcount(count: int, n_blocks: int) -> tuple[int, int, int]:
    """``COLL_BASE_COMPUTE_BLOCKCOUNT(count, n, split, early, late)`` (coll_base_functions.h): (early, late, split):
    the first ``split = count mod n`` blocks have ``early = count // n + 1`` elements, the others ``late``."""
    late, split = divmod(count, n_blocks)
    return (late + 1 if split else late), late, split


def block_bounds(count: int, n_blocks: int) -> np.ndarray:
    """The n + 1 bounds of ``COLL_BASE_COMPUTE_BLOCKCOUNT``'s blocks: [0, early, 2·early, ..., count]
    (e.g. S = 10 on 4 blocks: 3, 3, 2, 2 elements; the textbook ceil cut would give 3, 3, 3, 1)."""
    early, late, split = blockcount(count, n_blocks)
    b = np.arange(n_blocks + 1, dtype=np.int64)
    return np.where(b < split, b * early, b * late + split)


def shard_bounds(numel: int, n_ranks: int) -> np.ndarray:
    """Bounds of the textbook shards ``ChunkLayout(S, N)`` (ceil(S/N) each, the last ones shorter or empty): the
    recvcounts ringemu's reduce-scatter passes to ``MPI_Reduce_scatter``, and the blocks of its all-gather."""
    lay = ChunkLayout(numel, n_ranks)
    sizes = np.array([lay.shard_payload(r) for r in range(n_ranks)], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def mirror(x: np.ndarray | int, n_bits: int):
    """``ompi_mirror_perm``: the low ``n_bits`` bits of x reversed."""
    x = np.asarray(x, dtype=np.int64)
    y = np.zeros_like(x)
    for i in range(n_bits):
        y |= ((x >> i) & 1) << (n_bits - 1 - i)
    return y


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if values.size else values


def emptied(schedule: Schedule) -> Schedule:
    """An order of blocks on an empty buffer: ``schedule``, built for one element per block (chunk c = shard c),
    without a partition, so that it runs on the textbook layout of 0 elements (every chunk empty, 0 bytes)."""
    if schedule.n_chunks != schedule.n_ranks:
        raise AssertionError("an emptied order needs one chunk per shard")
    return Schedule(schedule.name, schedule.n_ranks, schedule.n_chunks, schedule.n_steps, schedule.table,
                    schedule.initial, schedule.final, schedule.exchange)


class Ranges:
    """Messages of consecutive steps as element ranges ``[lo, hi)`` of an S-element buffer."""

    def __init__(self, numel: int) -> None:
        self.numel = int(numel)
        self._parts: list[tuple[np.ndarray, ...]] = []  # (step, src, dst, lo, hi, op) columns
        self.n_steps = 0

    def step(self, *messages: tuple) -> None:
        """One step: each message is (src, dst, lo, hi, op), each field an int or an int array (broadcast)."""
        cols: list[list[np.ndarray]] = [[], [], [], [], []]
        for message in messages:
            fields = [f.reshape(-1) for f in np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in message))]
            keep = fields[3] > fields[2] if self.numel else np.ones(fields[0].size, dtype=bool)
            if keep.any():
                for k in range(5):
                    cols[k].append(fields[k][keep])
        if cols[0]:
            joined = [np.concatenate(c) for c in cols]
            if np.any(joined[0] == joined[1]):
                raise AssertionError("a message from a rank to itself")
            if np.any(joined[2] < 0) or np.any(joined[3] > self.numel):
                raise AssertionError("a range outside the buffer")
            self._parts.append((np.full(joined[0].size, self.n_steps, dtype=np.int64), *joined))
            self.n_steps += 1

    def schedule(self, name: str, n_ranks: int, initial: str, final: str, cuts=()) -> Schedule:
        """The schedule, cut at every range's ends and at ``cuts`` (shard bounds, blocks)."""
        cols = [np.concatenate([p[k] for p in self._parts]) if self._parts else np.zeros(0, np.int64)
                for k in range(6)]
        step, src, dst, lo, hi, op = cols
        if self.numel == 0:
            bounds = np.zeros(2, dtype=np.int64)  # one empty chunk
            first = np.zeros(step.size, dtype=np.int64)
            count = np.ones(step.size, dtype=np.int64)
        else:
            bounds = _sorted_unique(np.concatenate([[0, self.numel], lo, hi, np.asarray(cuts, dtype=np.int64)]))
            first = np.searchsorted(bounds, lo)
            count = np.searchsorted(bounds, hi) - first
        total = int(count.sum())
        starts = np.repeat(np.cumsum(count) - count, count)
        chunk = np.repeat(first, count) + (np.arange(total, dtype=np.int64) - starts)
        table = new_table(total)
        for k, column in enumerate((step, src, dst)):
            table[:, k] = np.repeat(column, count)
        table[:, 3] = chunk
        table[:, 4] = np.repeat(op, count)
        n_chunks = bounds.size - 1
        width = n_ranks * n_chunks
        sent = table[:, 0] * width + table[:, 1] * n_chunks + chunk
        received = table[:, 0] * width + table[:, 2] * n_chunks + chunk
        keys = np.sort(np.concatenate([sent * 2, received * 2 + 1]))  # a sent key next to the same received one
        exchange = bool(np.any((keys[1:] >> 1 == keys[:-1] >> 1) & (keys[1:] != keys[:-1])))
        return Schedule(name, n_ranks, n_chunks, self.n_steps, table, initial, final, exchange,
                        tuple(int(b) for b in bounds))
