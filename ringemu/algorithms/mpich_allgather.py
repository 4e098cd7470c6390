"""MPICH 5.0's all-gather algorithms (``MPI_Allgather``: rank r brings block r), as
``MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM`` forces them, run against the engine. All-gather only copies, so every
correct order gives the same bits; what the engine decides is who sends which block when, and so the bytes per
link and the number of steps.

Blocks are ``ChunkLayout(S, N)``'s shards (:func:`ringemu.algorithms._mpich.block_bounds`); the engine runs
S = N·k.

* ``mpich:ring`` — ``allgather_intra_ring.c`` lines 52-68: at step i rank r receives block r-1-i from r-1 (the
  plain ``ring`` all-gather's transfers).
* ``mpich:recursive-doubling`` — ``allgather_intra_recursive_doubling.c``, N a power of two: at distance 1, 2, ...
  partners swap every block of their subtree. For other N the engine falls back to its automatic choice (Bruck's
  or the ring by total size), and so does this entry.
* ``mpich:brucks`` — ``allgather_intra_brucks.c`` lines 58-90: at distance d = 1, 2, 4, ... rank r receives from
  r + d the blocks r + d .. r + d + min(d, N - d) - 1 (then rotates locally, which moves no data between ranks).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import COPY, Schedule, check_n_ranks
from . import Algorithm
from ._mpich import ENGINES, SOURCE, all_gather_rule, block_bounds, partitioned
from ._steps import Steps, pow2_below
from .ring import _ring_half, ring_all_gather

__all__ = ["mpich_ring_all_gather", "mpich_recursive_doubling_all_gather", "mpich_brucks_all_gather", "BUILDERS",
           "ALGORITHMS"]


def mpich_ring_all_gather(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Allgather_intra_ring: N-1 steps, one block per link and step."""
    n = check_n_ranks(n_ranks)
    ring = ring_all_gather(n)
    return Schedule("mpich_ring_all_gather", n, n, ring.n_steps, ring.table, "own", "gathered", False,
                    block_bounds(numel, n))


def mpich_brucks_all_gather(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Allgather_intra_brucks: ceil(log2 N) steps."""
    n = check_n_ranks(n_ranks)
    ranks = np.arange(n, dtype=np.int64)[:, None]
    steps = Steps()
    d = 1
    while d < n:
        offsets = np.arange(min(d, n - d), dtype=np.int64)[None, :]
        steps.add_step(((ranks + d) % n, ranks, (ranks + d + offsets) % n, COPY))
        d *= 2
    return partitioned(steps, "mpich_brucks_all_gather", n, block_bounds(numel, n), "own", "gathered")


def mpich_recursive_doubling_all_gather(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """MPIR_Allgather_intra_recursive_doubling for N a power of two (log2 N steps); other N: the engine's automatic
    choice (:func:`~ringemu.algorithms._mpich.all_gather_rule`)."""
    n = check_n_ranks(n_ranks)
    if n != pow2_below(n):
        return BUILDERS[all_gather_rule(n, numel, itemsize)](n, numel)
    ranks = np.arange(n, dtype=np.int64)[:, None]
    steps = Steps()
    mask = 1
    while mask < n:
        partner = ranks ^ mask
        steps.add_step((partner, ranks, (partner // mask) * mask + np.arange(mask, dtype=np.int64)[None, :], COPY))
        mask *= 2
    return partitioned(steps, "mpich_recursive_doubling_all_gather", n, block_bounds(numel, n), "own", "gathered")


BUILDERS = {"ring": mpich_ring_all_gather, "brucks": mpich_brucks_all_gather}


def _log_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """ceil(log2 N)·α + (N-1)/N·S·β (Thakur, Rabenseifner & Gropp 2005, §4.1: recursive doubling for N a power of
    two, Bruck's for any N)."""
    return (n - 1).bit_length() * alpha + Fraction(n - 1, n) * nbytes * beta


_AG = SOURCE + "allgather/allgather_intra_"
ALGORITHMS = (
    Algorithm("all-gather", "mpich:ring", mpich_ring_all_gather,
              "MPICH's ring all-gather: the ring's transfers over the engine's blocks",
              _AG + "ring.c, MPIR_Allgather_intra_ring", ENGINES, _ring_half, options=("numel",)),
    Algorithm("all-gather", "mpich:recursive-doubling", mpich_recursive_doubling_all_gather,
              "MPICH's recursive doubling all-gather (N a power of two; other N: the engine's automatic choice)",
              _AG + "recursive_doubling.c, MPIR_Allgather_intra_recursive_doubling", ENGINES, _log_cost,
              options=("numel", "itemsize")),
    Algorithm("all-gather", "mpich:brucks", mpich_brucks_all_gather,
              "Bruck's all-gather: at distance 1, 2, 4, ... a rank receives the blocks it lacks from r + d",
              _AG + "brucks.c, MPIR_Allgather_intra_brucks", ENGINES, _log_cost, options=("numel",)),
)
