"""The ring family: ring reduce-scatter, all-gather and all-reduce, and the naive reduce-then-broadcast contrast.

The ring algorithms follow Patarasuk & Yuan (2009), "Bandwidth optimal all-reduce algorithms for clusters of
workstations", §3, with the convention that after reduce-scatter rank ``r`` holds the fully reduced chunk ``r``.
The transfers are written straight into the int64 table (no per-transfer Python objects), so a schedule for
N = 1024 ranks (about a million transfers) is built in milliseconds.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks, new_table
from . import Algorithm
from ._steps import Steps

__all__ = ["ring_reduce_scatter", "ring_all_gather", "ring_all_reduce", "naive_reduce_broadcast",
           "naive_reduce_scatter", "naive_all_gather", "ALGORITHMS"]


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


def ring_reduce_scatter(n_ranks: int) -> Schedule:
    """Ring reduce-scatter: N-1 steps; chunk c starts at rank c+1 and is summed around the ring
    (c+1, c+2, ..., c), so rank r ends with chunk r reduced over all ranks. Each rank sends
    (N-1)/N of its buffer (Patarasuk & Yuan 2009, §3; the lesson's "前一半 reduce-scatter")."""
    n = check_n_ranks(n_ranks)
    table = _fill_ring(new_table((n - 1) * n), n, 0, -1, ADD)
    return Schedule("ring_reduce_scatter", n, n, n - 1, table, "all", "reduced-own")


def ring_all_gather(n_ranks: int) -> Schedule:
    """Ring all-gather: N-1 steps; rank r starts with chunk r and at step s forwards chunk r - s,
    so every rank ends with every chunk. Each rank sends (N-1)/N of the gathered buffer."""
    n = check_n_ranks(n_ranks)
    table = _fill_ring(new_table((n - 1) * n), n, 0, 0, COPY)
    return Schedule("ring_all_gather", n, n, n - 1, table, "own", "gathered")


def ring_all_reduce(n_ranks: int) -> Schedule:
    """Ring all-reduce = ring reduce-scatter then ring all-gather: 2(N-1) steps, each rank sends
    2(N-1)/N of its buffer (the lesson's claim C1)."""
    n = check_n_ranks(n_ranks)
    half = (n - 1) * n
    table = new_table(2 * half)
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


def naive_reduce_scatter(n_ranks: int) -> Schedule:
    """The naive reduce-scatter: the naive all-reduce, each rank keeping its own chunk of the result (so it adds
    in the same order as :func:`naive_reduce_broadcast`)."""
    return naive_reduce_broadcast(n_ranks).renamed("naive_reduce_scatter")


def naive_all_gather(n_ranks: int) -> Schedule:
    """The naive all-gather: every rank sends its chunk to rank 0 (step 1), which sends every rank the chunks it
    lacks (step 2)."""
    n = check_n_ranks(n_ranks)
    others = np.arange(1, n, dtype=np.int64)
    steps = Steps()
    steps.add_step((others, 0, others, COPY))
    dst, chunk = np.meshgrid(others, np.arange(n, dtype=np.int64), indexing="ij")
    keep = dst != chunk
    steps.add_step((0, dst[keep], chunk[keep], COPY))
    return steps.schedule("naive_all_gather", n, n, "own", "gathered")


def _ring_half(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """(N-1)α + (N-1)/N·S·β: one ring pass (reduce-scatter or all-gather of an S-byte buffer)."""
    return (n - 1) * alpha + Fraction(n - 1, n) * nbytes * beta


def _naive(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2(N-1)·(α + S·β): rank 0's port takes N-1 whole buffers in, then sends N-1 out, one message at a time (the
    one-port model of Thakur, Rabenseifner & Gropp 2005 §3: every message pays its α)."""
    return 2 * (n - 1) * (alpha + nbytes * beta)


def _naive_gather(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2α + S·β, per link as the ledger times it: step 1 carries one chunk (S/N) per link into rank 0, step 2 the
    N-1 chunks a rank lacks on each of rank 0's links."""
    return (2 * alpha + nbytes * beta) if n > 1 else Fraction(0)


_RING = "Patarasuk & Yuan 2009, §3 (bandwidth-optimal ring)"
_TEXTBOOK_RING = ("textbook (Patarasuk & Yuan's description; Horovod and baidu-allreduce run it); the engines' own "
                  "rings cut and walk the buffer their own way: gloo:ring, ompi:ring, mpich:ring, nccl:ring")
ALGORITHMS = (
    Algorithm("reduce-scatter", "ring", ring_reduce_scatter, "N-1 steps around the ring; rank r ends with chunk r",
              _RING, _TEXTBOOK_RING, _ring_half),
    Algorithm("all-gather", "ring", ring_all_gather, "N-1 steps around the ring; every rank ends with every chunk",
              _RING, _TEXTBOOK_RING, _ring_half),
    Algorithm("all-reduce", "ring", ring_all_reduce, "ring reduce-scatter then ring all-gather: 2(N-1) steps",
              _RING, _TEXTBOOK_RING,
              lambda n, s, a, b: 2 * _ring_half(n, s, a, b)),
    Algorithm("reduce-scatter", "naive", naive_reduce_scatter,
              "the naive all-reduce, each rank keeping its own chunk (derived: same additions as naive all-reduce)",
              "the lesson's contrast (claim C5)", "none (teaching contrast)", _naive),
    Algorithm("all-gather", "naive", naive_all_gather,
              "every rank sends its chunk to rank 0, which sends every rank the chunks it lacks",
              "the lesson's contrast (claim C5)", "none (teaching contrast)", _naive_gather),
    Algorithm("all-reduce", "naive", naive_reduce_broadcast,
              "every rank sends its buffer to rank 0, which sums and sends the sum back",
              "the lesson's contrast (claim C5); a parameter server with one server", "none (teaching contrast)",
              _naive),
)
