"""Open MPI 5.0's reduce-scatter orders: ``MPI_Reduce_scatter`` with recvcounts = the textbook shards, bit for bit.

ringemu's reduce-scatter leaves rank r with shard r of ``ChunkLayout(S, N)`` (ceil(S/N) elements each, the last
ones shorter or empty), so these are ``MPI_Reduce_scatter`` with exactly those recvcounts. Each builder follows one
function of ``ompi/mca/coll/base/coll_base_reduce_scatter.c`` (open-mpi/ompi v5.0.10; ids of
``coll_tuned_reduce_scatter_algorithm``):

* ring (3, ``ompi_coll_base_reduce_scatter_intra_ring``): the blocks are the recvcounts; rank r first sends block
  r - 1, at step s block (r - 1 - s) mod N, so block b is summed x[b+1], + x[b+2], ..., + x[b] and completes on its
  owner b (not the all-reduce ring's first half, which ends one rank early). No small-count fallback.
* recursive halving (2, ``..._intra_basic_recursivehalving``): with p = 2^floor(log2 N), rem = N - p, even
  e < 2·rem sends its whole vector to e + 1, which adds; virtual block i < rem stands for real blocks 2i and 2i + 1;
  at mask p/2, ..., 1 the lower virtual rank keeps the lower part of its window and adds the partner's copy of it;
  at the end odd e + 1 sends block e to e.
* butterfly (4, ``..._intra_butterfly``): the same fold, then at mask 1, 2, ..., the rank with (v & mask) == 0 keeps
  the lower half of its window (virtual blocks in natural order); a last exchange hands virtual block mirror(v) to
  its real owners. Every element is added ((x0 + x1) + (x2 + x3)) + ... over virtual ranks, low bits first.
* nonoverlapping (1, ``..._intra_nonoverlapping``): tuned's reduce of the whole vector to rank 0
  (:mod:`.ompi_reduce`), then ``coll_scatterv`` (basic linear: rank 0 sends each rank its block).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import Schedule, check_n_ranks
from . import Algorithm
from . import halving_doubling, ring
from .ompi_common import ADD, COPY, ENGINE, SOURCE_TAG, Ranges, emptied, mirror, pow2_below, shard_bounds
from .ompi_reduce import MAX_RANKS as REDUCE_MAX_RANKS, reduce_algorithm, reduce_to_root

__all__ = ["ompi_rs_ring", "ompi_rs_recursive_halving", "ompi_rs_butterfly", "ompi_rs_nonoverlapping", "BUILDERS",
           "ALGORITHMS"]


def _blocks_on_empty(builder, n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """For S = 0 (no communication in the engine): the pattern of one element per block, every chunk emptied."""
    if numel == 0:
        return emptied(builder(n_ranks, check_n_ranks(n_ranks), itemsize))
    return builder(n_ranks, numel, itemsize)


def _done(r: Ranges, name: str, n: int, disps: np.ndarray) -> Schedule:
    return r.schedule(f"ompi_{name}_reduce_scatter", n, "all", "reduced-own", disps)


def _rs_ring(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """The steps of :func:`ompi_rs_ring` (S = 0: one element per block, emptied by the wrapper)."""
    n = check_n_ranks(n_ranks)
    disps = shard_bounds(numel, n)
    r = Ranges(numel)
    ranks = np.arange(n, dtype=np.int64)
    for s in range(n - 1):
        b = (ranks - 1 - s) % n
        r.step((ranks, (ranks + 1) % n, disps[b], disps[b + 1], ADD))
    return _done(r, "ring", n, disps)


def _fold(r: Ranges, n: int):
    """The pre-step both halving orders share: even e < 2·rem adds its whole vector into e + 1. Returns
    (p, rem, real rank of each virtual rank, start of each virtual block with p + 1 entries)."""
    p = pow2_below(n)
    rem = n - p
    evens = np.arange(0, 2 * rem, 2, dtype=np.int64)
    if rem:
        r.step((evens, evens + 1, 0, r.numel, ADD))
    v = np.arange(p, dtype=np.int64)
    real = np.where(v < rem, 2 * v + 1, v + rem)
    return p, rem, real


def _vstart(disps: np.ndarray, rem: int, p: int) -> np.ndarray:
    """Element offset of virtual block i (i = 0 ... p): real block 2i for i < rem, else i + rem."""
    i = np.arange(p + 1, dtype=np.int64)
    return disps[np.where(i < rem, 2 * i, i + rem)]


def _rs_recursive_halving(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """The steps of :func:`ompi_rs_recursive_halving` (S = 0: one element per block, emptied by the wrapper)."""
    n = check_n_ranks(n_ranks)
    disps = shard_bounds(numel, n)
    r = Ranges(numel)
    if n > 1:
        p, rem, real = _fold(r, n)
        vs = _vstart(disps, rem, p)
        v = np.arange(p, dtype=np.int64)
        ri = np.zeros(p, dtype=np.int64)  # window [ri, li) in virtual blocks; si: the part sent
        si = np.zeros(p, dtype=np.int64)
        li = np.full(p, p, dtype=np.int64)
        mask = p >> 1
        while mask > 0:
            lower = v < (v ^ mask)
            si = np.where(lower, ri + mask, si)
            ri = np.where(lower, ri, si + mask)
            end = np.where(lower, si, li)
            r.step((real[v ^ mask], real, vs[ri], vs[end], ADD))
            si, li = ri, ri + mask
            mask >>= 1
        evens = np.arange(0, 2 * rem, 2, dtype=np.int64)
        if rem:
            r.step((evens + 1, evens, disps[evens], disps[evens + 1], COPY))
    return _done(r, "recursive_halving", n, disps)


def _rs_butterfly(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """The steps of :func:`ompi_rs_butterfly` (S = 0: one element per block, emptied by the wrapper)."""
    n = check_n_ranks(n_ranks)
    disps = shard_bounds(numel, n)
    r = Ranges(numel)
    if n > 1:
        p, rem, real = _fold(r, n)
        vs = _vstart(disps, rem, p)
        v = np.arange(p, dtype=np.int64)
        ri = np.zeros(p, dtype=np.int64)
        nb = p
        mask = 1
        while mask < p:
            nb //= 2
            ri = ri + np.where(v & mask, nb, 0)
            r.step((real[v ^ mask], real, vs[ri], vs[ri + nb], ADD))
            mask <<= 1
        vp = mirror(v, p.bit_length() - 1)  # v now holds virtual block vp, reduced over every rank
        if not np.array_equal(ri, vp):
            raise AssertionError("butterfly: a virtual rank does not hold its mirrored block")
        pair = vp < rem  # virtual block vp is real blocks 2vp (to rank 2vp) and 2vp + 1 (to rank 2vp + 1)
        first = np.where(pair, 2 * vp, vp + rem)
        r.step((real[pair], first[pair], disps[first[pair]], disps[first[pair] + 1], COPY),
               _last(real, vp, v, pair, first, disps))
    return _done(r, "butterfly", n, disps)


def _last(real, vp, v, pair, first, disps):
    """The last exchange's second message: the block of virtual block vp that real rank ``first + pair`` owns,
    unless that rank is the holder itself (vp == v)."""
    owner = first + pair
    send = vp != v
    return (real[send], owner[send], disps[owner[send]], disps[owner[send] + 1], COPY)


def _rs_nonoverlapping(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """The steps of :func:`ompi_rs_nonoverlapping` (S = 0: one element per block, emptied by the wrapper)."""
    n = check_n_ranks(n_ranks)
    disps = shard_bounds(numel, n)
    r = Ranges(numel)
    if n > 1:
        reduce_to_root(r, n, reduce_algorithm(n, numel * itemsize, numel))
        others = np.arange(1, n, dtype=np.int64)
        r.step((0, others, disps[others], disps[others + 1], COPY))
    return _done(r, "nonoverlapping", n, disps)


def ompi_rs_ring(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 3 (module doc): N-1 steps; block b completes on rank b."""
    return _blocks_on_empty(_rs_ring, n_ranks, numel, itemsize)


def ompi_rs_recursive_halving(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 2 (module doc)."""
    return _blocks_on_empty(_rs_recursive_halving, n_ranks, numel, itemsize)


def ompi_rs_butterfly(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 4 (module doc): the engine's general butterfly, for every N."""
    return _blocks_on_empty(_rs_butterfly, n_ranks, numel, itemsize)


def ompi_rs_nonoverlapping(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """Algorithm 1: tuned's reduce of the whole vector to rank 0 (by N and S·itemsize bytes), then rank 0 sends each
    rank its block."""
    return _blocks_on_empty(_rs_nonoverlapping, n_ranks, numel, itemsize)


BUILDERS = {1: ompi_rs_nonoverlapping, 2: ompi_rs_recursive_halving, 3: ompi_rs_ring, 4: ompi_rs_butterfly}


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


def _reduce_scatter_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """ceil(log2 N)·(α + S·β) + (N-1)·α + (N-1)/N·S·β: a binomial reduce, then a linear scatter (Thakur,
    Rabenseifner & Gropp 2005, §4.2 and §2's model)."""
    return _ceil_log2(n) * (alpha + nbytes * beta) + ring._ring_half(n, nbytes, alpha, beta)


def _not_past_reduce(n: int) -> str | None:
    return None if n < REDUCE_MAX_RANKS else f"tuned's reduce decision is modelled for N < {REDUCE_MAX_RANKS}"


_SRC = SOURCE_TAG + "/base/coll_base_reduce_scatter.c, "
_SIZED = ("numel", "itemsize")
ALGORITHMS = (
    Algorithm("reduce-scatter", "ompi:ring", ompi_rs_ring,
              "Open MPI's reduce-scatter ring: block b summed from rank b+1 and done on its owner b (MPI_Reduce_scatter, "
              "recvcounts = the shards)", _SRC + "ompi_coll_base_reduce_scatter_intra_ring", ENGINE, ring._ring_half,
              options=_SIZED),
    Algorithm("reduce-scatter", "ompi:recursive-halving", ompi_rs_recursive_halving,
              "fold even ranks into odd ones, recursive halving on virtual blocks (lower rank keeps the lower part), "
              "then unfold", _SRC + "ompi_coll_base_reduce_scatter_intra_basic_recursivehalving", ENGINE,
              halving_doubling._rs_cost, options=_SIZED),
    Algorithm("reduce-scatter", "ompi:butterfly", ompi_rs_butterfly,
              "fold, butterfly on virtual blocks (bit 0 first), last exchange of the mirrored blocks",
              _SRC + "ompi_coll_base_reduce_scatter_intra_butterfly", ENGINE, halving_doubling._rs_cost,
              options=_SIZED),
    Algorithm("reduce-scatter", "ompi:nonoverlapping", ompi_rs_nonoverlapping,
              "tuned's own reduce to rank 0 then a linear scatterv; where tuned picks the linear reduce (N >= 3), rank "
              "N-1 gathers for rank 0: every rank sends the engine's bytes, receivers differ",
              _SRC + "ompi_coll_base_reduce_scatter_intra_nonoverlapping; coll_tuned_decision_fixed.c (reduce)",
              ENGINE, _reduce_scatter_cost, _not_past_reduce, options=_SIZED),
)
