"""A ring written as a user would, twice: per-rank code (one object per rank, sending over links) and list-of-N
code (functions over a list of N arrays). Both are the textbook ring (Patarasuk & Yuan 2009, §3) over the
unpadded chunks of ``ChunkLayout(S, N)``: a chunk is sent with its real elements only, as engines send it.

``bug`` plants one classic mistake, for the conformance suite to catch on its defaults (``docs/testing.md``):

* ``"wrong-direction"``  — the ring runs the other way (rank r sends to r - 1): right sums, other bits (N >= 4);
* ``"off-by-one-shard"`` — a shard is ``S // N`` elements, not ``ceil(S/N)``: reduce-scatter's shards come back short;
* ``"missing-1/N"``      — each reduce-scatter step sends the whole buffer instead of one chunk (1/N of it);
* ``"wrong-shard-index"`` — the reduce-scatter starts one chunk late, so rank r's fully reduced chunk is r + 1,
  yet the code hands back chunk r.

``python examples/ring_communicators.py`` prints the suite's verdict on every variant.
"""
from __future__ import annotations

import numpy as np

from ringemu.layout import ChunkLayout

BUGS = (None, "wrong-direction", "off-by-one-shard", "missing-1/N", "wrong-shard-index")


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One hop's add; 16-bit floats add in fp32 and round once per hop, as NCCL does."""
    if a.dtype.itemsize == 2 and a.dtype.kind not in "iu":  # fp16 and bf16
        return (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)
    return a + b


def _plan(n: int, bug):
    """(successor of r, chunk rank r sends at reduce-scatter step t, chunk it sends at all-gather step t)."""
    if bug == "wrong-direction":
        return (lambda r: (r - 1) % n, lambda r, t: (r + t + 1) % n, lambda r, t: (r + t) % n)
    late = 0 if bug == "wrong-shard-index" else 1
    return (lambda r: (r + 1) % n, lambda r, t: (r - t - late) % n, lambda r, t: (r - t) % n)


def _shard(total: np.ndarray, r: int, n: int, bug) -> np.ndarray:
    layout = ChunkLayout(total.shape[0], n)
    if bug == "off-by-one-shard":
        start = layout.payload_slice(r).start
        return total[start:start + total.shape[0] // n].copy()
    return total[layout.payload_slice(r)].copy()


# -- list-of-N code --------------------------------------------------------------------------------------------
def _ring_lists(buffers, bug, reduce: bool, gather: bool, log=None):
    n, numel = len(buffers), buffers[0].shape[0]
    chunk = ChunkLayout(numel, n).payload_slice
    nxt, rs_chunk, ag_chunk = _plan(n, bug)
    bufs = [b.copy() for b in buffers]
    if reduce:
        for t in range(n - 1):
            moves = [(r, nxt(r), rs_chunk(r, t)) for r in range(n)]
            sent = [bufs[r].copy() if bug == "missing-1/N" else bufs[r][chunk(k)].copy() for r, _, k in moves]
            for (src, dst, k), data in zip(moves, sent):
                if log is not None:
                    log.send(src, dst, data, step=t)
                part = data[chunk(k)] if bug == "missing-1/N" else data
                bufs[dst][chunk(k)] = _add(bufs[dst][chunk(k)], part)
    if gather:
        for t in range(n - 1):
            moves = [(r, nxt(r), ag_chunk(r, t)) for r in range(n)]
            sent = [bufs[r][chunk(k)].copy() for r, _, k in moves]
            for (src, dst, k), data in zip(moves, sent):
                if log is not None:
                    log.send(src, dst, data, step=n - 1 + t)
                bufs[dst][chunk(k)] = data
    return bufs


def list_functions(bug=None) -> dict:
    """``reduce_scatter``, ``all_gather`` and ``all_reduce`` over lists of N arrays, for ``ListWorld``."""
    if bug not in BUGS:
        raise ValueError(f"bug must be one of {BUGS}; got {bug!r}")

    def reduce_scatter(buffers, log=None):
        n = len(buffers)
        return [_shard(b, r, n, bug) for r, b in enumerate(_ring_lists(buffers, bug, True, False, log))]

    def all_gather(shards, numel, log=None):
        n = len(shards)
        layout = ChunkLayout(numel, n)
        full = [np.zeros(numel, s.dtype) for s in shards]
        for r, s in enumerate(shards):
            full[r][layout.payload_slice(r)] = s
        return _ring_lists(full, bug, False, True, log)

    def all_reduce(buffers, log=None):
        return _ring_lists(buffers, bug, True, True, log)

    return {"reduce_scatter": reduce_scatter, "all_gather": all_gather, "all_reduce": all_reduce}


# -- per-rank code ---------------------------------------------------------------------------------------------
class RingRank:
    """One rank of the same ring, sending over ``links`` (``send(src, dst, data)``, ``recv(src, dst)``)."""

    def __init__(self, rank: int, n_ranks: int, links, bug=None):
        if bug not in BUGS:
            raise ValueError(f"bug must be one of {BUGS}; got {bug!r}")
        self.rank, self.n_ranks, self.links, self.bug, self.ledger = rank, n_ranks, links, bug, None

    def _ring(self, buffer: np.ndarray, reduce: bool, gather: bool, label: str) -> np.ndarray:
        n, r, bug = self.n_ranks, self.rank, self.bug
        chunk = ChunkLayout(buffer.shape[0], n).payload_slice
        nxt, rs_chunk, ag_chunk = _plan(n, bug)
        prv = next(q for q in range(n) if nxt(q) == r)
        buf = buffer.copy()
        if reduce:
            for t in range(n - 1):
                k_out, k_in = rs_chunk(r, t), rs_chunk(prv, t)
                self.links.send(r, nxt(r), buf if bug == "missing-1/N" else buf[chunk(k_out)], label=label)
                data = self.links.recv(prv, r)
                buf[chunk(k_in)] = _add(buf[chunk(k_in)], data[chunk(k_in)] if bug == "missing-1/N" else data)
        if gather:
            for t in range(n - 1):
                k_out, k_in = ag_chunk(r, t), ag_chunk(prv, t)
                self.links.send(r, nxt(r), buf[chunk(k_out)], label=label)
                buf[chunk(k_in)] = self.links.recv(prv, r)
        return buf

    def reduce_scatter(self, buffer, label="reduce_scatter"):
        return _shard(self._ring(buffer, True, False, label), self.rank, self.n_ranks, self.bug)

    def all_gather(self, shard, numel, label="all_gather"):
        full = np.zeros(numel, shard.dtype)
        full[ChunkLayout(numel, self.n_ranks).payload_slice(self.rank)] = shard
        return self._ring(full, False, True, label)

    def all_reduce(self, buffer, label="all_reduce"):
        return self._ring(buffer, True, True, label)


def worlds(bug=None) -> dict:
    """``make_world`` of both shapes for ``bug``: {"per-rank": ..., "list-of-N": ...}."""
    from ringemu.testing.adapters import lists, per_rank

    return {"per-rank": per_rank(lambda rank, n, links: RingRank(rank, n, links, bug)),
            "list-of-N": lists(**list_functions(bug))}


if __name__ == "__main__":
    from ringemu.testing import check_communicator

    for bug in BUGS:
        for shape, make_world in worlds(bug).items():
            print(check_communicator(make_world, name=f"{shape} ring, bug={bug!r}"))
            print()
