"""A small builder of schedule tables, step by step, from numpy arrays (so that N = 1024 builds in milliseconds)."""
from __future__ import annotations

import numpy as np

from ..schedule import ADD, COPY, Schedule, new_table

__all__ = ["Steps", "stable_order", "pow2_below", "fold_map", "from_transfers"]


class Steps:
    """Collects the transfers of consecutive steps; :meth:`schedule` returns them as a :class:`Schedule`.

    Within a step, rows keep the order in which they were added: additions into one (dst, chunk) are applied in
    that order. An empty step is dropped (it would cost an α for nothing). Columns are kept as separate arrays and
    written once into the column-major table.
    """

    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray, ...]] = []  # (step, src, dst, chunk, op) columns
        self.n_steps = 0

    def add_step(self, *transfers: tuple) -> None:
        """One step: each transfer is (src, dst, chunk, op), each field an int or an int array (broadcast)."""
        cols: list[list[np.ndarray]] = [[], [], [], []]
        for transfer in transfers:
            fields = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in transfer))
            if fields[0].size:
                for k in range(4):
                    cols[k].append(fields[k].reshape(-1))
        if cols[0]:
            joined = [np.concatenate(c) for c in cols]
            self._parts.append((np.full(joined[0].size, self.n_steps, dtype=np.int64), *joined))
            self.n_steps += 1

    def add_columns(self, step, src, dst, chunk, op) -> None:
        """Several steps at once, as five equal-length int64 columns with step numbers from 0: rows are stably
        sorted by step, empty steps dropped, and steps renumbered after the steps so far."""
        step = np.asarray(step, dtype=np.int64)
        if step.size == 0:
            return
        order = stable_order(step)
        present = np.bincount(step) > 0
        renumber = np.cumsum(present) - 1 + self.n_steps
        self._parts.append((renumber[step[order]],) + tuple(np.asarray(c, dtype=np.int64)[order]
                                                              for c in (src, dst, chunk, op)))
        self.n_steps += int(present.sum())

    def schedule(self, name: str, n_ranks: int, n_chunks: int, initial: str, final: str,
                 exchange: bool = False) -> Schedule:
        table = new_table(sum(part[0].size for part in self._parts))
        at = 0
        for part in self._parts:
            for k in range(5):
                table[at:at + part[0].size, k] = part[k]
            at += part[0].size
        return Schedule(name, n_ranks, n_chunks, self.n_steps, table, initial, final, exchange)


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for small non-negative int keys (step numbers), by a radix sort on
    16-bit keys where they fit (O(T) instead of a merge sort of millions of rows)."""
    if keys.size and int(keys.max()) < 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


def pow2_below(n: int) -> int:
    """The largest power of two p <= n."""
    return 1 << (n.bit_length() - 1)


def fold_map(n: int) -> tuple[int, int, np.ndarray]:
    """The standard reduction of N ranks to p = 2^floor(log2 N) (MPICH's recursive doubling and
    reduce_scatter_allgather all-reduce; Thakur, Rabenseifner & Gropp 2005, §4): with r = N - p, even rank 2i < 2r
    folds its buffer into rank 2i + 1 and sits out. Returns (p, r, active) with ``active[j]`` the rank that plays
    new rank j: 2j + 1 for j < r, else j + r."""
    p = pow2_below(n)
    r = n - p
    j = np.arange(p, dtype=np.int64)
    return p, r, np.where(j < r, 2 * j + 1, j + r)


_OPS = {"copy": COPY, "add": ADD}


def from_transfers(name: str, n_ranks: int, bounds, steps, initial: str, final: str) -> Schedule:
    """An engine order written as its engine's loop writes it: chunk ``bounds`` (the partition) and ``steps``, each
    a list of ``(src, dst, chunk, "copy" | "add")``. Every source sends what it held at the start of the step and
    additions into one (dst, chunk) apply in listed order, so a step in which a rank sends a chunk it also
    receives (recursive doubling's exchanges) makes the schedule an ``exchange`` schedule (staged by the kernels).
    The schedule carries ``bounds`` as its :attr:`~ringemu.schedule.Schedule.partition`."""
    rows = [(k, src, dst, chunk, _OPS[op]) for k, step in enumerate(s for s in steps if s)
            for src, dst, chunk, op in step]
    if any(src == dst for _, src, dst, _, _ in rows):
        raise ValueError(f"{name}: a transfer from a rank to itself is not a message")
    sent: dict[int, set] = {}
    received: dict[int, set] = {}
    for k, src, dst, chunk, _ in rows:
        sent.setdefault(k, set()).add((src, chunk))
        received.setdefault(k, set()).add((dst, chunk))
    exchange = any(sent[k] & received[k] for k in sent)
    n_steps = 1 + max((r[0] for r in rows), default=-1)
    table = new_table(len(rows))
    if rows:
        table[:] = np.asarray(rows, dtype=np.int64)
    return Schedule(name, n_ranks, len(bounds) - 1, n_steps, table, initial, final, exchange, tuple(bounds))
