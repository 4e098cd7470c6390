"""Open MPI 5.0's all-gather orders: the message patterns of ``MPI_Allgather``, block r from rank r.

An all-gather only copies, so every correct order gives the same bits; what these builders reproduce is the engine's
message pattern, hence its bytes per peer. Each follows one function of ``ompi/mca/coll/base/coll_base_allgather.c``
(open-mpi/ompi v5.0.10; ids of ``coll_tuned_allgather_algorithm``). The blocks are the textbook shards
``ChunkLayout(S, N)``: for S a multiple of N they are ``MPI_Allgather``'s equal blocks; otherwise (shards of
ceil(S/N), the last shorter) the same pattern moves the uneven blocks, as ``MPI_Allgatherv`` would (modelled: the
engine's ``MPI_Allgather`` takes equal blocks only).

* ring (4, ``ompi_coll_base_allgather_intra_ring``): at step i rank r sends block (r - i) mod N to r + 1.
* Bruck (2, ``..._intra_bruck``): at distance d = 1, 2, 4, ... rank r sends blocks r, ..., r + c - 1 (mod N;
  c = d, or N - d in the last step) to r - d, as one message (the engine works in a rotated buffer and rotates
  at the end: the same blocks, written here at their final positions).
* recursive doubling (3, ``..._intra_recursivedoubling``): rank r sends its 2^k gathered blocks to r XOR 2^k;
  **N not a power of two: Bruck.**
* neighbor exchange (5, ``..._intra_neighborexchange``): N/2 steps; even ranks start with their right neighbour;
  after the first step pairs of blocks are forwarded alternately left and right; **odd N: ring.**
* two procs (6, ``..._intra_two_procs``, N = 2 only): one exchange.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import Schedule, check_n_ranks
from . import Algorithm
from . import halving_doubling, ring
from .ompi_common import COPY, ENGINE, SOURCE_TAG, Ranges, emptied, shard_bounds

__all__ = ["ompi_ag_ring", "ompi_ag_bruck", "ompi_ag_recursive_doubling", "ompi_ag_neighbor_exchange",
           "ompi_ag_two_procs", "BUILDERS", "ALGORITHMS"]


def _sized(builder, n_ranks: int, numel: int) -> Schedule:
    """Build on the shards of S (on one element per block when S = 0: the engine sends nothing, 0 bytes)."""
    n = check_n_ranks(n_ranks)
    r = Ranges(numel or n)
    disps = shard_bounds(numel or n, n)
    order = builder(r, n, disps)  # the order that ran: a fallback names its own
    schedule = r.schedule(f"ompi_{order}_all_gather", n, "own", "gathered", disps)
    return emptied(schedule) if numel == 0 else schedule


def _blocks(r: Ranges, src, dst, first, count, disps: np.ndarray, n: int) -> None:
    """One step: ``src`` sends blocks first, ..., first + count - 1 (mod N) to ``dst``, as one message: the part
    past block N-1 wraps to block 0 (one range each)."""
    src, dst, first, count = np.broadcast_arrays(*(np.asarray(a, dtype=np.int64) for a in (src, dst, first, count)))
    end = first + count
    head = np.minimum(end, n)
    tail = np.maximum(end - n, 0)
    r.step((src, dst, disps[first], disps[head], COPY), (src, dst, disps[0], disps[tail], COPY))


def _ring(r: Ranges, n: int, disps: np.ndarray) -> str:
    """Algorithm 4 (module doc). Each order steps ``r`` and returns the name of the order that ran."""
    ranks = np.arange(n, dtype=np.int64)
    for i in range(n - 1):
        b = (ranks - i) % n
        r.step((ranks, (ranks + 1) % n, disps[b], disps[b + 1], COPY))
    return "ring"


def _bruck(r: Ranges, n: int, disps: np.ndarray) -> str:
    """Algorithm 2 (module doc)."""
    ranks = np.arange(n, dtype=np.int64)
    d = 1
    while d < n:
        count = d if d <= n >> 1 else n - d
        _blocks(r, ranks, (ranks - d) % n, ranks, count, disps, n)
        d <<= 1
    return "bruck"


def _recursive_doubling(r: Ranges, n: int, disps: np.ndarray) -> str:
    """Algorithm 3 (module doc)."""
    if n & (n - 1):
        return _bruck(r, n, disps)
    ranks = np.arange(n, dtype=np.int64)
    d = 1
    while d < n:
        lo = ranks - ranks % d
        r.step((ranks, ranks ^ d, disps[lo], disps[lo + d], COPY))
        d <<= 1
    return "recursive_doubling"


def _neighbor_exchange(r: Ranges, n: int, disps: np.ndarray) -> str:
    """Algorithm 5 (module doc)."""
    if n % 2:
        return _ring(r, n, disps)
    ranks = np.arange(n, dtype=np.int64)
    even = ranks % 2 == 0
    neighbor = [np.where(even, (ranks + 1) % n, (ranks - 1) % n), np.where(even, (ranks - 1) % n, (ranks + 1) % n)]
    recv_from = [np.where(even, ranks, neighbor[0]), np.where(even, ranks, neighbor[0])]
    offset = [np.where(even, 2, -2), np.where(even, -2, 2)]
    r.step((ranks, neighbor[0], disps[ranks], disps[ranks + 1], COPY))
    send_from = np.where(even, ranks, recv_from[0])
    for i in range(1, n // 2):
        p = i % 2
        recv_from[p] = (recv_from[p] + offset[p]) % n
        _blocks(r, ranks, neighbor[p], send_from, 2, disps, n)
        send_from = recv_from[p]
    return "neighbor_exchange"


def _two_procs(r: Ranges, n: int, disps: np.ndarray) -> str:
    """Algorithm 6 (module doc)."""
    if n != 2:
        raise ValueError(f"Open MPI's two-procs all-gather runs on 2 ranks only; got n_ranks={n}")
    r.step((0, 1, disps[0], disps[1], COPY), (1, 0, disps[1], disps[2], COPY))
    return "two_procs"


def ompi_ag_ring(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """The ring (algorithm 4, module doc) on the shards of ``numel`` elements; ``itemsize`` changes no message."""
    return _sized(_ring, n_ranks, numel)


def ompi_ag_bruck(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Bruck (algorithm 2, module doc) on the shards of ``numel`` elements; ``itemsize`` changes no message."""
    return _sized(_bruck, n_ranks, numel)


def ompi_ag_recursive_doubling(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Recursive doubling (algorithm 3, module doc) on the shards of ``numel`` elements; ``itemsize`` changes no message."""
    return _sized(_recursive_doubling, n_ranks, numel)


def ompi_ag_neighbor_exchange(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Neighbor exchange (algorithm 5, module doc) on the shards of ``numel`` elements; ``itemsize`` changes no message."""
    return _sized(_neighbor_exchange, n_ranks, numel)


def ompi_ag_two_procs(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Two procs (algorithm 6, module doc) on the shards of ``numel`` elements; ``itemsize`` changes no message."""
    return _sized(_two_procs, n_ranks, numel)


BUILDERS = {2: ompi_ag_bruck, 3: ompi_ag_recursive_doubling, 4: ompi_ag_ring, 5: ompi_ag_neighbor_exchange,
            6: ompi_ag_two_procs}


def _log_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """ceil(log2 N)·α + (N-1)/N·S·β (Bruck et al. 1997; Thakur, Rabenseifner & Gropp 2005, §4.1)."""
    return (n - 1).bit_length() * alpha + Fraction(n - 1, n) * nbytes * beta


def _neighbor_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """N/2·α + (N-1)/N·S·β for even N (Chen et al. 2005, neighbor exchange); the ring's cost for odd N."""
    if n % 2:
        return ring._ring_half(n, nbytes, alpha, beta)
    return (n // 2) * alpha + Fraction(n - 1, n) * nbytes * beta


_SRC = SOURCE_TAG + "/base/coll_base_allgather.c, "
_SIZED = ("numel", "itemsize")
_SUMMARY_TAIL = " (copies only: the bits of any all-gather; the message pattern gives the bytes)"
ALGORITHMS = (
    Algorithm("all-gather", "ompi:ring", ompi_ag_ring, "Open MPI's ring: step i, rank r sends block r-i to r+1"
              + _SUMMARY_TAIL + "; the plain ring entry's messages", _SRC + "ompi_coll_base_allgather_intra_ring",
              ENGINE, ring._ring_half, options=_SIZED),
    Algorithm("all-gather", "ompi:recursive-doubling", ompi_ag_recursive_doubling,
              "partners at distance 1, 2, 4, ... swap what they gathered; N not a power of two runs Bruck"
              + _SUMMARY_TAIL, _SRC + "ompi_coll_base_allgather_intra_recursivedoubling", ENGINE,
              halving_doubling._ag_cost, options=_SIZED),
    Algorithm("all-gather", "ompi:bruck", ompi_ag_bruck,
              "Bruck: at distance d rank r sends its first min(d, N-d) gathered blocks to r-d" + _SUMMARY_TAIL,
              _SRC + "ompi_coll_base_allgather_intra_bruck", ENGINE, _log_cost, options=_SIZED),
    Algorithm("all-gather", "ompi:neighbor-exchange", ompi_ag_neighbor_exchange,
              "N/2 steps with alternate neighbours, pairs of blocks after the first; odd N runs the ring"
              + _SUMMARY_TAIL, _SRC + "ompi_coll_base_allgather_intra_neighborexchange", ENGINE, _neighbor_cost,
              options=_SIZED),
)
