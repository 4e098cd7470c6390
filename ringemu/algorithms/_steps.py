"""A small builder of schedule tables, step by step, from numpy arrays (so that N = 1024 builds in milliseconds)."""
from __future__ import annotations

import numpy as np

from ..schedule import Schedule, new_table

__all__ = ["Steps", "pow2_below", "fold_map"]


class Steps:
    """Collects the transfers of consecutive steps; :meth:`schedule` returns them as a :class:`Schedule`.

    Within a step, rows keep the order in which they were added: additions into one (dst, chunk) are applied in
    that order. An empty step is dropped (it would cost an α for nothing).
    """

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self.n_steps = 0

    def add_step(self, *transfers: tuple) -> None:
        """One step: each transfer is (src, dst, chunk, op), each field an int or an int array (broadcast)."""
        rows = []
        for src, dst, chunk, op in transfers:
            cols = np.broadcast_arrays(*(np.asarray(v, dtype=np.int64) for v in (src, dst, chunk, op)))
            if cols[0].size:
                rows.append(np.stack([np.full(cols[0].size, self.n_steps, dtype=np.int64)]
                                     + [c.reshape(-1) for c in cols], axis=1))
        if rows:
            self._parts.append(np.concatenate(rows))
            self.n_steps += 1

    def add_rows(self, rows: np.ndarray) -> None:
        """Several steps at once: ``rows`` (T, 5) with step numbers from 0, renumbered after the steps so far;
        rows are stably sorted by step."""
        if rows.shape[0] == 0:
            return
        rows = rows[np.argsort(rows[:, 0], kind="stable")].copy()
        used, rows[:, 0] = np.unique(rows[:, 0], return_inverse=True)
        rows[:, 0] += self.n_steps
        self._parts.append(rows)
        self.n_steps += int(used.size)

    def schedule(self, name: str, n_ranks: int, n_chunks: int, initial: str, final: str,
                 exchange: bool = False) -> Schedule:
        rows = np.concatenate(self._parts) if self._parts else np.zeros((0, 5), dtype=np.int64)
        table = new_table(rows.shape[0])
        table[...] = rows
        return Schedule(name, n_ranks, n_chunks, self.n_steps, table, initial, final, exchange)


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
