"""Copy-only patterns that engines use beside the reductions: broadcast, scatter, gather, all-to-all, send.

These move data without adding, so they have no order of addition to get right; they are schedules so that the
:class:`~ringemu.ledger.CommLedger` counts their traffic per link and per step exactly like the reductions'.
They are not registry entries (the registry's collectives are the reductions and the all-gather that ZeRO
uses); the torch backend (:mod:`ringemu.torch`) records them.

* broadcast: NCCL's chain (ring) from the root, root -> root+1 -> ... -> root-1, N-1 steps of the whole buffer
  (NCCL pipelines it in slices, which changes time, not bytes; NCCL docs, "Collective Operations: Broadcast").
* scatter and gather: the root sends chunk r to (receives chunk r from) every rank r in one step.
* all-to-all: N-1 pairwise-exchange steps; at step s rank r sends its chunk (r + s) mod N to rank (r + s) mod N.
* send: one transfer of one chunk.
"""
from __future__ import annotations

import numpy as np

from ..schedule import COPY, Schedule, check_n_ranks

__all__ = ["chain_broadcast", "direct_scatter", "direct_gather", "pairwise_all_to_all", "point_to_point"]


def _schedule(name: str, n: int, n_chunks: int, rows: list[tuple[int, int, int, int]]) -> Schedule:
    table = np.array([(step, src, dst, chunk, COPY) for step, src, dst, chunk in rows], dtype=np.int64)
    table = table.reshape(-1, 5)
    n_steps = int(table[:, 0].max()) + 1 if len(table) else 0
    return Schedule(name, n, n_chunks, n_steps, table, "all", "copied")


def _root(root: int, n: int) -> int:
    if not 0 <= root < n:
        raise ValueError(f"root must be a rank in 0..{n - 1}; got {root}")
    return root


def chain_broadcast(n_ranks: int, root: int) -> Schedule:
    """Root's buffer (one chunk) down the chain root, root+1, ..., root-1: every rank but the last sends it once."""
    n = check_n_ranks(n_ranks)
    root = _root(root, n)
    return _schedule("chain_broadcast", n, 1, [(s, (root + s) % n, (root + s + 1) % n, 0) for s in range(n - 1)])


def direct_scatter(n_ranks: int, root: int) -> Schedule:
    """The root sends chunk r of its buffer (N chunks) to rank r, for every r != root, in one step."""
    n = check_n_ranks(n_ranks)
    root = _root(root, n)
    return _schedule("direct_scatter", n, n, [(0, root, r, r) for r in range(n) if r != root])


def direct_gather(n_ranks: int, root: int) -> Schedule:
    """Every rank r != root sends its chunk r to the root in one step."""
    n = check_n_ranks(n_ranks)
    root = _root(root, n)
    return _schedule("direct_gather", n, n, [(0, r, root, r) for r in range(n) if r != root])


def pairwise_all_to_all(n_ranks: int) -> Schedule:
    """N-1 steps; at step s (1..N-1) rank r sends its chunk (r+s) mod N to rank (r+s) mod N."""
    n = check_n_ranks(n_ranks)
    return _schedule("pairwise_all_to_all", n, n,
                     [(s - 1, r, (r + s) % n, (r + s) % n) for s in range(1, n) for r in range(n)])


def point_to_point(n_ranks: int, src: int, dst: int) -> Schedule:
    """One message: ``src`` sends its (single-chunk) buffer to ``dst``."""
    n = check_n_ranks(n_ranks)
    if src == dst:
        raise ValueError(f"a rank cannot send to itself (src = dst = {src})")
    return _schedule("send", n, 1, [(0, _root(src, n), _root(dst, n), 0)])
