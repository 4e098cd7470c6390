"""Open MPI 5.0's all-reduce orders (coll/base, as coll/tuned runs them when forced), bit for bit.

Each builder follows one function of ``ompi/mca/coll/base/coll_base_allreduce.c`` (open-mpi/ompi v5.0.10; the
algorithm ids are those of ``coll_tuned_allreduce_algorithm``, coll_tuned_allreduce_decision.c) and cuts the
buffer as that function does, so each is built for one buffer length S (and element size, where the engine's
choice depends on bytes). ``benchmarks/engines/ompi.py`` runs them against ``mpirun`` and compares every bit.

* ring (4, ``ompi_coll_base_allreduce_intra_ring``): blocks of ``COLL_BASE_COMPUTE_BLOCKCOUNT`` (the first S mod N
  one element longer); at reduce-scatter step s rank r sends block (r - s) mod N to r + 1, which adds it, so block
  b is summed x[b], + x[b+1], ..., + x[b-1] and completes on rank b - 1; then at all-gather step k rank r sends
  block (r + 1 - k) mod N. **count < N: recursive doubling.**
* segmented ring (5): with ``coll_tuned_allreduce_algorithm_segmentsize`` 0 (its default, and what the fixed rules
  pass) ``COLL_BASE_COMPUTED_SEGCOUNT`` leaves one segment and the function runs the ring; any segment size only
  splits messages, never changes an element's adds.
* recursive doubling (3, ``..._intra_recursivedoubling``): with p = 2^floor(log2 N) and e = N - p, even r < 2e
  sends everything to r + 1; the survivors swap whole vectors at distance 1, 2, 4, ... and both add; odd r < 2e
  sends the result back to r - 1.
* Rabenseifner (6, ``..._intra_redscat_allgather``): the same fold, by halves; recursive halving in which the lower
  real rank keeps the lower half of its window (floor(w/2) elements), a recursive doubling all-gather back, then
  the unfold. **count < p: basic linear.**
* basic linear (1, ``..._intra_basic_linear``): the linear reduce to rank 0, then a linear broadcast.
* nonoverlapping (2, ``..._intra_nonoverlapping``): tuned's own reduce to rank 0 (:mod:`.ompi_reduce`), then
  ``coll_bcast``, booked here as rank 0 sending to every rank.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import Schedule, check_n_ranks, new_table
from . import Algorithm
from . import halving_doubling, recursive_doubling, ring
from .ompi_common import ADD, COPY, ENGINE, SOURCE_TAG, Ranges, block_bounds, pow2_below
from .ompi_reduce import MAX_RANKS as REDUCE_MAX_RANKS, reduce_algorithm, reduce_to_root

__all__ = ["ompi_ring", "ompi_recursive_doubling", "ompi_rabenseifner", "ompi_basic_linear", "ompi_nonoverlapping",
           "BUILDERS", "ALGORITHMS"]


def _done(r: Ranges, name: str, n: int, cuts=()) -> Schedule:
    return r.schedule(f"ompi_{name}_all_reduce", n, "all", "reduced-all", cuts)


def _recursive_doubling(r: Ranges, n: int) -> None:
    p = pow2_below(n)
    extra = n - p
    whole = (0, r.numel)
    evens = np.arange(0, 2 * extra, 2, dtype=np.int64)
    if extra:
        r.step((evens, evens + 1, *whole, ADD))
    new = np.arange(p, dtype=np.int64)
    real = np.where(new < extra, 2 * new + 1, new + extra)
    d = 1
    while d < p:
        r.step((real[new ^ d], real, *whole, ADD))
        d <<= 1
    if extra:
        r.step((evens + 1, evens, *whole, COPY))


def ompi_recursive_doubling(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 3 (module doc): log2(p) whole-vector exchanges, two more steps when N is not a power of two."""
    n = check_n_ranks(n_ranks)
    r = Ranges(numel)
    if n > 1:
        _recursive_doubling(r, n)
    return _done(r, "recursive_doubling", n)


def ompi_ring(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 4 (module doc); count < N runs recursive doubling, as the engine does."""
    n = check_n_ranks(n_ranks)
    if n > 1 and numel < n:
        return ompi_recursive_doubling(n, numel=numel)
    blocks = block_bounds(numel, n)
    if n == 1:
        return _done(Ranges(numel), "ring", n, blocks)
    # every block holds at least one element here (count >= N), so block b is chunk b: the table is written
    # directly, 2(N-1) steps of N rows (step, src r, dst r+1, block, op)
    m = n - 1
    ranks = np.arange(n, dtype=np.int64)
    steps = np.arange(2 * m, dtype=np.int64)[:, None]
    table = new_table(2 * m * n)
    table[:, 0] = np.broadcast_to(steps, (2 * m, n)).reshape(-1)
    table[:, 1] = np.broadcast_to(ranks, (2 * m, n)).reshape(-1)
    table[:, 2] = np.broadcast_to((ranks + 1) % n, (2 * m, n)).reshape(-1)
    shift = np.where(steps < m, -steps, 1 - (steps - m))  # reduce-scatter: r - s; all-gather: r + 1 - k
    table[:, 3] = ((ranks[None, :] + shift) % n).reshape(-1)
    table[:, 4] = np.where(np.arange(2 * m * n) < m * n, ADD, COPY)
    return Schedule("ompi_ring_all_reduce", n, n, 2 * m, table, "all", "reduced-all", False,
                    tuple(int(b) for b in blocks))


def _linear_bcast(r: Ranges, n: int) -> None:
    if n > 1:
        r.step((0, np.arange(1, n, dtype=np.int64), 0, r.numel, COPY))


def ompi_basic_linear(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 1: the linear reduce (rank N-1 accumulating for rank 0, see :mod:`.ompi_reduce`), then rank 0
    sends the sum to every rank."""
    n = check_n_ranks(n_ranks)
    r = Ranges(numel)
    reduce_to_root(r, n, 1)
    _linear_bcast(r, n)
    return _done(r, "basic_linear", n)


def ompi_rabenseifner(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 6 (module doc); count < p runs basic linear, as the engine does, one rank included (the check
    comes first: coll_base_allreduce.c v5.0.10 line 991)."""
    n = check_n_ranks(n_ranks)
    p = pow2_below(n)
    if numel < p:
        return ompi_basic_linear(n, numel=numel)
    r = Ranges(numel)
    if n == 1:
        return _done(r, "rabenseifner", n)
    rem = n - p
    half = numel // 2
    evens = np.arange(0, 2 * rem, 2, dtype=np.int64)
    if rem:
        r.step((evens + 1, evens, 0, half, ADD), (evens, evens + 1, half, numel, ADD))
        r.step((evens + 1, evens, half, numel, COPY))
    v = np.arange(p, dtype=np.int64)
    real = np.where(v < rem, 2 * v, v + rem)
    rindex = np.zeros(p, dtype=np.int64)
    sindex = np.zeros(p, dtype=np.int64)
    wsize = np.full(p, numel, dtype=np.int64)
    kept = []  # per halving step: (sindex, scount), what the doubling step sends back
    mask = 1
    while mask < p:
        lower = real < real[v ^ mask]
        rcount = np.where(lower, wsize // 2, wsize - wsize // 2)
        scount = wsize - rcount
        sindex = np.where(lower, rindex + rcount, sindex)
        rindex = np.where(lower, rindex, sindex + scount)
        r.step((real[v ^ mask], real, rindex, rindex + rcount, ADD))
        kept.append((sindex.copy(), scount, mask))
        sindex, wsize = rindex.copy(), rcount
        mask <<= 1
    for sidx, scount, mask in reversed(kept):
        r.step((real[v ^ mask], real, sidx, sidx + scount, COPY))
    if rem:
        r.step((evens, evens + 1, 0, numel, COPY))
    return _done(r, "rabenseifner", n)


def ompi_nonoverlapping(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 2: tuned's reduce to rank 0 (chosen by N and S·itemsize bytes), then the broadcast."""
    n = check_n_ranks(n_ranks)
    r = Ranges(numel)
    if n > 1 and numel:
        reduce_to_root(r, n, reduce_algorithm(n, numel * itemsize, numel))
        _linear_bcast(r, n)
    elif n > 1:  # count 0: no communication (one empty chunk, postcondition kept)
        reduce_to_root(r, n, 1)
        _linear_bcast(r, n)
    return _done(r, "nonoverlapping", n)


BUILDERS = {1: ompi_basic_linear, 2: ompi_nonoverlapping, 3: ompi_recursive_doubling, 4: ompi_ring,
            5: ompi_ring, 6: ompi_rabenseifner}  # coll_tuned_allreduce_algorithm ids; 5 with segment size 0


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


def _linear_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2(N-1)·(α + S·β): the root receives N-1 vectors one after another, then sends N-1 (linear reduce and
    broadcast, Thakur, Rabenseifner & Gropp 2005, §2 model)."""
    return 2 * (n - 1) * (alpha + nbytes * beta)


def _reduce_bcast_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2·ceil(log2 N)·(α + S·β): a binomial reduce then a binomial broadcast (Thakur et al. 2005, §4.2, §4.5)."""
    return 2 * _ceil_log2(n) * (alpha + nbytes * beta)


def _ring_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2(N-1)α + 2(N-1)/N·S·β (Patarasuk & Yuan 2009, §3)."""
    return 2 * ring._ring_half(n, nbytes, alpha, beta)


def _not_past_reduce(n: int) -> str | None:
    return None if n < REDUCE_MAX_RANKS else f"tuned's reduce decision is modelled for N < {REDUCE_MAX_RANKS}"


_SRC = SOURCE_TAG + "/base/coll_base_allreduce.c, "
_SIZED = ("numel", "itemsize")
ALGORITHMS = (
    Algorithm("all-reduce", "ompi:ring", ompi_ring,
              "Open MPI's ring: blocks cut early-long (first S mod N one longer), block b summed from rank b and "
              "done on rank b-1; count < N runs recursive doubling", _SRC + "ompi_coll_base_allreduce_intra_ring",
              ENGINE, _ring_cost, options=_SIZED),
    Algorithm("all-reduce", "ompi:segmented-ring", ompi_ring,
              "Open MPI's segmented ring with its default segment size 0: one segment, so it runs the ring "
              "(same bits at any segment size)", _SRC + "ompi_coll_base_allreduce_intra_ring_segmented",
              ENGINE, _ring_cost, options=_SIZED),
    Algorithm("all-reduce", "ompi:recursive-doubling", ompi_recursive_doubling,
              "whole-vector exchanges at distance 1, 2, 4, ...; non-powers of two fold even ranks into odd ones: "
              "bit for bit the plain recursive-doubling all-reduce", _SRC + "ompi_coll_base_allreduce_intra_recursivedoubling",
              ENGINE, recursive_doubling._ar_cost, options=_SIZED),
    Algorithm("all-reduce", "ompi:rabenseifner", ompi_rabenseifner,
              "recursive halving (lower rank keeps floor(w/2) elements) then recursive doubling; fold by halves; "
              "count < 2^floor(log2 N) runs basic linear", _SRC + "ompi_coll_base_allreduce_intra_redscat_allgather",
              ENGINE, halving_doubling._ar_cost, options=_SIZED),
    Algorithm("all-reduce", "ompi:basic-linear", ompi_basic_linear,
              "linear reduce to rank 0 (own value last) then linear broadcast; bytes: every rank sends what it "
              "sends in the engine, but rank N-1 gathers for rank 0 (N >= 3: the root's own value entering last "
              "has no plain-transfer form)", _SRC + "ompi_coll_base_allreduce_intra_basic_linear",
              ENGINE, _linear_cost, options=_SIZED),
    Algorithm("all-reduce", "ompi:nonoverlapping", ompi_nonoverlapping,
              "tuned's own reduce to rank 0 (binary, binomial, chain or linear by N and bytes) then a broadcast, "
              "booked as rank 0 to every rank (the engine's tuned broadcast may use a tree: bytes per link differ)",
              _SRC + "ompi_coll_base_allreduce_intra_nonoverlapping; coll_tuned_decision_fixed.c (reduce)",
              ENGINE, _reduce_bcast_cost, _not_past_reduce, options=_SIZED),
)
