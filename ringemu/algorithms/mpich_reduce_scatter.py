"""MPICH 5.0's reduce-scatter algorithms (``MPI_Reduce_scatter_block``: rank r ends with block r of the sum), as
``MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM`` forces them, proven bit for bit against the running engine.

Blocks are ``ChunkLayout(S, N)``'s shards (:func:`ringemu.algorithms._mpich.block_bounds`): for S = N·k, the k
elements per rank of ``MPI_Reduce_scatter_block``, the only case the engine runs (other S: the same loops over
the shorter last blocks, not checked against the engine).

* ``mpich:recursive-halving`` — ``reduce_scatter_block_intra_recursive_halving.c``: the fold of even r < 2·rem into
  r + 1 (lines 110-137); new rank i owns old blocks {i_old - 1, i_old} when i_old < 2·rem (148-157); halving from
  distance p/2 (``mask = pof2 >> 1``, 164-229; the lower rank keeps the lower half); odd r < 2·rem hands block
  r - 1 to r - 1 (241-253).
* ``mpich:pairwise`` — ``reduce_scatter_block_intra_pairwise.c`` lines 59-106: at step i rank r adds rank
  (r - i)'s block r into its own, i = 1 .. N-1.
* ``mpich:noncommutative`` — ``reduce_scatter_block_intra_noncommutative.c`` lines 66-123, N a power of two: at
  step k rank r and r XOR 2^k swap the blocks whose bit k differs from their own (k = 0 first); for other N the
  engine falls back to its automatic choice, and so does this entry.
* ``mpich:recursive-doubling`` — ``reduce_scatter_block_intra_recursive_doubling.c`` lines 78-242: at distance
  2^i rank r receives from r XOR 2^i every block outside that rank's subtree and adds it. For N not a power of
  two, ranks whose partner does not exist get the partner's data forwarded by a rank of their subtree (156-203);
  here the partner's data is sent to them directly: the same values and additions, but the ledger counts the
  forwarded bytes on the partner's links, not the forwarder's (a transfer is a slice of a rank's buffer, and the
  forwarder's buffer holds its own sum by then). For N a power of two nothing is forwarded.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._mpich import ENGINES, SOURCE, block_bounds, partitioned, reduce_scatter_rule
from ._steps import Steps, fold_map, pow2_below
from .halving_doubling import _rs_cost as _halving_cost

__all__ = ["mpich_recursive_halving_reduce_scatter", "mpich_pairwise_reduce_scatter",
           "mpich_noncommutative_reduce_scatter", "mpich_recursive_doubling_reduce_scatter", "BUILDERS",
           "ALGORITHMS"]


def mpich_recursive_halving_reduce_scatter(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Reduce_scatter_block_intra_recursive_halving: fold, log2(p) halving steps, delivery."""
    n = check_n_ranks(n_ranks)
    p, r, active = fold_map(n)
    owned = [np.array([a - 1, a] if a < 2 * r else [a], dtype=np.int64) for a in active.tolist()]
    steps = Steps()
    evens = np.arange(0, 2 * r, 2, dtype=np.int64)[:, None]
    steps.add_step((evens, evens + 1, np.arange(n, dtype=np.int64)[None, :], ADD))
    ranges = [(0, p)] * p
    mask = p >> 1
    while mask:
        kept = [(lo, lo + mask) if not j & mask else (lo + mask, hi) for j, (lo, hi) in enumerate(ranges)]
        steps.add_step(*((int(active[j ^ mask]), int(active[j]), np.concatenate(owned[kept[j][0]:kept[j][1]]), ADD)
                         for j in range(p)))
        ranges = kept
        mask >>= 1
    evens = evens[:, 0]
    steps.add_step((evens + 1, evens, evens, COPY))
    return partitioned(steps, "mpich_recursive_halving_reduce_scatter", n, block_bounds(numel, n), "all",
                       "reduced-own")


def mpich_pairwise_reduce_scatter(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Reduce_scatter_block_intra_pairwise: N-1 steps, one block per rank and step."""
    n = check_n_ranks(n_ranks)
    ranks = np.arange(n, dtype=np.int64)
    steps = Steps()
    for i in range(1, n):
        steps.add_step(((ranks - i) % n, ranks, ranks, ADD))
    return partitioned(steps, "mpich_pairwise_reduce_scatter", n, block_bounds(numel, n), "all", "reduced-own")


def mpich_noncommutative_reduce_scatter(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """MPIR_Reduce_scatter_block_intra_noncommutative for N a power of two (log2 N steps); other N: the engine's
    automatic choice (:func:`~ringemu.algorithms._mpich.reduce_scatter_rule`)."""
    n = check_n_ranks(n_ranks)
    if n != pow2_below(n):
        return BUILDERS[reduce_scatter_rule(n, numel, itemsize)](n, numel)
    blocks = np.arange(n, dtype=np.int64)
    steps = Steps()
    k = 0
    while (1 << k) < n:
        low = (1 << k) - 1
        steps.add_step(*((r ^ (1 << k), r, blocks[((blocks & low) == (r & low)) & ((((blocks ^ r) >> k) & 1) == 0)],
                          ADD) for r in range(n)))
        k += 1
    return partitioned(steps, "mpich_noncommutative_reduce_scatter", n, block_bounds(numel, n), "all",
                       "reduced-own")


def _forwarded_origins(n: int, mask: int, i: int) -> dict[int, int]:
    """Whose start-of-step data each rank receives at distance ``mask`` = 2^i: its partner's, or for a rank
    without a partner (N not a power of two) the partner's of the rank that forwards to it (the tmp_mask loop,
    ``reduce_scatter_block_intra_recursive_doubling.c`` 156-203)."""
    origin = {r: r ^ mask for r in range(n) if r ^ mask < n}
    tmp_mask, kk = mask >> 1, i
    while tmp_mask:
        forwards = []
        for r in range(n):
            dst_root, my_root = ((r ^ mask) >> i) << i, (r >> i) << i
            if dst_root + mask > n:
                holders = n - my_root - mask  # ranks of my subtree that had a partner
                dst, root = r ^ tmp_mask, (r >> kk) << kk
                if dst > r and r < root + holders <= dst:
                    forwards.append((r, dst))
        for src, dst in forwards:
            origin[dst] = origin[src]
        tmp_mask, kk = tmp_mask >> 1, kk - 1
    return origin


def mpich_recursive_doubling_reduce_scatter(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Reduce_scatter_block_intra_recursive_doubling: ceil(log2 N) steps, each adding every block outside the
    sender's subtree (forwarded data sent directly by its origin, see the module doc)."""
    n = check_n_ranks(n_ranks)
    blocks = np.arange(n, dtype=np.int64)
    steps = Steps()
    mask, i = 1, 0
    while mask < n:
        origin = _forwarded_origins(n, mask, i)
        transfers = []
        for r in sorted(origin):
            root = ((r ^ mask) >> i) << i
            transfers.append((origin[r], r, blocks[(blocks < root) | (blocks >= root + mask)], ADD))
        steps.add_step(*transfers)
        mask, i = mask << 1, i + 1
    return partitioned(steps, "mpich_recursive_doubling_reduce_scatter", n, block_bounds(numel, n), "all",
                       "reduced-own")


BUILDERS = {"recursive-halving": mpich_recursive_halving_reduce_scatter, "pairwise": mpich_pairwise_reduce_scatter}


def _pairwise_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """(N-1)·α + (N-1)/N·S·β (Thakur, Rabenseifner & Gropp 2005, §4.4, pairwise exchange)."""
    return (n - 1) * alpha + Fraction(n - 1, n) * nbytes * beta


def _log_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """log2(N)·α + (N-1)/N·S·β (Thakur et al. 2005, §4.4, recursive halving), N a power of two."""
    return (n - 1).bit_length() * alpha + Fraction(n - 1, n) * nbytes * beta


def _doubling_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """log2(N)·α + (log2(N) - (N-1)/N)·S·β (Thakur et al. 2005, §4.4, recursive doubling), N a power of two."""
    lg = (n - 1).bit_length()
    return lg * alpha + (lg - Fraction(n - 1, n)) * nbytes * beta


_RSB = SOURCE + "reduce_scatter_block/reduce_scatter_block_intra_"
ALGORITHMS = (
    Algorithm("reduce-scatter", "mpich:recursive-halving", mpich_recursive_halving_reduce_scatter,
              "MPICH's recursive halving: low ranks fold in pairs, halving from distance p/2 (the plain "
              "halving-doubling's pairs, its own fold of blocks)",
              _RSB + "recursive_halving.c, MPIR_Reduce_scatter_block_intra_recursive_halving", ENGINES,
              _halving_cost, options=("numel",)),
    Algorithm("reduce-scatter", "mpich:pairwise", mpich_pairwise_reduce_scatter,
              "MPICH's pairwise exchange: rank r adds rank r-i's block r at step i, i = 1 .. N-1",
              _RSB + "pairwise.c, MPIR_Reduce_scatter_block_intra_pairwise", ENGINES, _pairwise_cost,
              options=("numel",)),
    Algorithm("reduce-scatter", "mpich:noncommutative", mpich_noncommutative_reduce_scatter,
              "MPICH's recursive halving for non-commutative ops, distance 1 first (N a power of two; other N: "
              "the engine's automatic choice)",
              _RSB + "noncommutative.c, MPIR_Reduce_scatter_block_intra_noncommutative", ENGINES, _log_cost,
              options=("numel", "itemsize")),
    Algorithm("reduce-scatter", "mpich:recursive-doubling", mpich_recursive_doubling_reduce_scatter,
              "MPICH's recursive doubling: every block outside the partner's subtree added at each distance; "
              "N not a power of two: forwarded bytes counted on the partner's links",
              _RSB + "recursive_doubling.c, MPIR_Reduce_scatter_block_intra_recursive_doubling", ENGINES,
              _doubling_cost, options=("numel",)),
)
