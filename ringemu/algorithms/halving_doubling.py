"""Recursive halving reduce-scatter, recursive doubling all-gather, and Rabenseifner's all-reduce (both in turn).

Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in MPICH", §4.4 (reduce-
scatter by recursive halving), §4.1 (all-gather by recursive doubling), §4.5 (Rabenseifner's all-reduce). The
buffer is cut into N chunks (the shard map ``ChunkLayout(S, N)``). On p = N ranks (a power of two) rank j and
rank j XOR d exchange halves of their current range of chunks at distances d = p/2, p/4, ..., 1: the lower rank
keeps (and adds into) the lower half. Rank j ends with chunk j; all-gather retraces the steps at d = 1, 2, ...,
p/2, copying.

N not a power of two (the standard reduction, as MPICH's ``reduce_scatter_allgather`` all-reduce does): with
p = 2^floor(log2 N) and r = N - p, even rank 2i < 2r first adds its whole buffer into rank 2i + 1 and sits out;
the p remaining ranks halve the N chunks (unequal halves where N/p is not whole). The reduce-scatter then copies
each reduced chunk c to rank c; the all-gather first copies chunk c from rank c to the rank that holds it in the
halving; the all-reduce runs the doubling on the p ranks and copies the whole result back to the ranks that sat
out. Reduce-scatter and all-reduce add in exactly the same order.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps, fold_map

__all__ = ["halving_ranges", "halving_reduce_scatter", "doubling_all_gather", "rabenseifner_all_reduce",
           "ALGORITHMS"]


def halving_ranges(n: int) -> list[list[tuple[int, int]]]:
    """``ranges[k][j]``: the chunk range [lo, hi) new rank j holds after k halving steps (k = 0: all N chunks).
    At distance d the pair (j, j XOR d) splits its common range at lo + (hi - lo) // 2; the lower rank keeps the
    lower part."""
    p, _, _ = fold_map(n)
    current = [(0, n)] * p
    out = [current]
    d = p // 2
    while d >= 1:
        nxt = []
        for j, (lo, hi) in enumerate(current):
            mid = lo + (hi - lo) // 2
            nxt.append((lo, mid) if j < (j ^ d) else (mid, hi))
        current = nxt
        out.append(current)
        d //= 2
    return out


def _span(lo: int, hi: int) -> np.ndarray:
    return np.arange(lo, hi, dtype=np.int64)


def _fold(steps: Steps, n: int, r: int, op: int, back: bool, skip_own: bool = False) -> None:
    """Even rank 2i < 2r adds its whole buffer into 2i + 1 (or, ``back``, 2i + 1 copies the result to 2i; with
    ``skip_own`` every chunk but 2i's own, which an all-gather's rank 2i already holds)."""
    if r == 0:
        return
    evens = np.arange(0, 2 * r, 2, dtype=np.int64)[:, None]
    chunks = np.arange(n, dtype=np.int64)[None, :]
    src, dst = (evens + 1, evens) if back else (evens, evens + 1)
    src, dst, chunks = np.broadcast_arrays(src, dst, chunks)
    keep = (chunks != dst) if skip_own else np.ones(chunks.shape, dtype=bool)
    steps.add_step((src[keep], dst[keep], chunks[keep], op))


def _halving(steps: Steps, n: int, active: np.ndarray, ranges) -> None:
    p = active.size
    d, k = p // 2, 1
    while d >= 1:
        transfers = []
        for j in range(p):
            lo, hi = ranges[k - 1][j]
            keep = ranges[k][j]
            give = (keep[1], hi) if keep[0] == lo else (lo, keep[0])
            transfers.append((int(active[j]), int(active[j ^ d]), _span(*give), ADD))
        steps.add_step(*transfers)
        d //= 2
        k += 1


def _doubling_chunks(ranges, active: np.ndarray, k: int, j: int, d: int, skip_own: bool) -> np.ndarray:
    """The chunks new rank j sends to j XOR d in the doubling step that undoes halving level k (with ``skip_own``,
    not the receiver's own chunk, which an all-gather's receiver has had from the start)."""
    chunks = _span(*ranges[k][j])
    return chunks[chunks != active[j ^ d]] if skip_own else chunks


def _doubling(steps: Steps, active: np.ndarray, ranges, skip_own: bool = False) -> None:
    p = active.size
    d, k = 1, len(ranges) - 1
    while d < p:
        steps.add_step(*((int(active[j]), int(active[j ^ d]), _doubling_chunks(ranges, active, k, j, d, skip_own),
                          COPY) for j in range(p)))
        d *= 2
        k -= 1


def _deliver(steps: Steps, active: np.ndarray, final, to_owner: bool) -> None:
    """Chunk c moves between rank c and the new rank that holds it after the halving (one step, copies)."""
    transfers = []
    for j, (lo, hi) in enumerate(final):
        chunks = _span(lo, hi)
        chunks = chunks[chunks != active[j]]
        if to_owner:
            transfers.append((int(active[j]), chunks, chunks, COPY))
        else:
            transfers.append((chunks, int(active[j]), chunks, COPY))
    steps.add_step(*transfers)


def halving_reduce_scatter(n_ranks: int) -> Schedule:
    """Recursive halving: log2(p) steps (+ a fold and a delivery step when N is not a power of two)."""
    n = check_n_ranks(n_ranks)
    p, r, active = fold_map(n)
    ranges = halving_ranges(n)
    steps = Steps()
    _fold(steps, n, r, ADD, back=False)
    _halving(steps, n, active, ranges)
    _deliver(steps, active, ranges[-1], to_owner=True)
    return steps.schedule("halving_reduce_scatter", n, n, "all", "reduced-own")


def doubling_all_gather(n_ranks: int) -> Schedule:
    """Recursive doubling: log2(p) steps (+ a gathering and an unfold step when N is not a power of two)."""
    n = check_n_ranks(n_ranks)
    p, r, active = fold_map(n)
    ranges = halving_ranges(n)
    steps = Steps()
    _deliver(steps, active, ranges[-1], to_owner=False)
    _doubling(steps, active, ranges, skip_own=True)
    _fold(steps, n, r, COPY, back=True, skip_own=True)
    return steps.schedule("doubling_all_gather", n, n, "own", "gathered")


def rabenseifner_all_reduce(n_ranks: int) -> Schedule:
    """Rabenseifner: recursive halving reduce-scatter then recursive doubling all-gather, 2·log2(N) steps for N a
    power of two (2·log2(p) + 2 otherwise)."""
    n = check_n_ranks(n_ranks)
    p, r, active = fold_map(n)
    ranges = halving_ranges(n)
    steps = Steps()
    _fold(steps, n, r, ADD, back=False)
    _halving(steps, n, active, ranges)
    _doubling(steps, active, ranges)
    _fold(steps, n, r, COPY, back=True)
    return steps.schedule("rabenseifner_all_reduce", n, n, "all", "reduced-all")


def _halving_bytes(n: int, nbytes: int) -> Fraction:
    """Bytes on the busiest link over the halving steps: ceil(N / 2^k) chunks of S/N at step k."""
    p = fold_map(n)[0]
    total, k = 0, 1
    while (1 << k) <= p:
        total += -(-n // (1 << k))
        k += 1
    return Fraction(total * nbytes, n)


def _rs_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """log2(N)·α + (N-1)/N·S·β for N a power of two (Thakur et al. 2005, §4.4); exact for any N: otherwise add
    the fold (the whole buffer, S) and the delivery (one chunk, S/N, per link)."""
    p = fold_map(n)[0]
    extra = (2 * alpha + (nbytes + Fraction(nbytes, n)) * beta) if n != p else Fraction(0)
    return (p.bit_length() - 1) * alpha + _halving_bytes(n, nbytes) * beta + extra


def _ag_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """log2(N)·α + (N-1)/N·S·β for N a power of two (Thakur et al. 2005, §4.1); exact for any N: otherwise add
    the gathering step (one chunk, S/N, per link), the copy back (every chunk but the receiver's own), and count
    the doubling's chunks as sent (a receiver's own chunk is not sent back to it)."""
    p, _, active = fold_map(n)
    if n == p:
        return (p.bit_length() - 1) * alpha + _halving_bytes(n, nbytes) * beta
    ranges = halving_ranges(n)
    chunks, d, k = 0, 1, len(ranges) - 1
    while d < p:
        chunks += max(_doubling_chunks(ranges, active, k, j, d, True).size for j in range(p))
        d, k = 2 * d, k - 1
    return (p.bit_length() + 1) * alpha + Fraction(chunks * nbytes, n) * beta + nbytes * beta


def _ar_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2·log2(N)·α + 2(N-1)/N·S·β for N a power of two (Thakur et al. 2005, §4.5); exact for any N (the fold and
    the copy back carry the whole buffer)."""
    p = fold_map(n)[0]
    steps = 2 * (p.bit_length() - 1)
    extra = (2 * alpha + 2 * nbytes * beta) if n != p else Fraction(0)
    return steps * alpha + 2 * _halving_bytes(n, nbytes) * beta + extra


_SOURCE = "Thakur, Rabenseifner & Gropp 2005, §4.4, §4.1, §4.5 (Rabenseifner's algorithm)"
_ENGINES = ("textbook, halving from distance N/2 as Thakur, Rabenseifner & Gropp 2005 §4.4 describe it; not an "
            "engine's bits: MPICH's reduce_scatter_allgather starts at distance 1 (mpich:reduce-scatter-allgather), "
            "Open MPI's Rabenseifner is ompi:rabenseifner")
ALGORITHMS = (
    Algorithm("reduce-scatter", "halving-doubling", halving_reduce_scatter,
              "recursive halving: partners at distance N/2, N/4, ..., 1 swap halves of their range",
              _SOURCE, _ENGINES, _rs_cost),
    Algorithm("all-gather", "halving-doubling", doubling_all_gather,
              "recursive doubling: partners at distance 1, 2, ..., N/2 swap everything gathered so far",
              _SOURCE, _ENGINES, _ag_cost),
    Algorithm("all-reduce", "halving-doubling", rabenseifner_all_reduce,
              "Rabenseifner: recursive halving reduce-scatter then recursive doubling all-gather",
              _SOURCE, _ENGINES, _ar_cost),
)
