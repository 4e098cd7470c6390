"""Recursive doubling all-reduce on whole buffers: latency-optimal, bandwidth-poor.

Thakur, Rabenseifner & Gropp 2005, §4.5 (MPICH's all-reduce for short messages): at distances d = 1, 2, ..., p/2
rank j and rank j XOR d swap their whole partial sums and both add, so after log2(p) steps every rank holds the
sum. Both partners send what they held at the start of the step and receive into the same buffer: this is an
``exchange`` schedule (:mod:`ringemu.schedule`), which the kernels stage tile by tile. Floating-point addition is
commutative, so both partners hold the same bits after every step.

N not a power of two: the standard reduction (:func:`ringemu.algorithms._steps.fold_map`): even rank 2i < 2r adds
its buffer into 2i + 1 first and gets the result back at the end. The reduce-scatter is this all-reduce, each
rank keeping its own shard (same additions, N times the bytes of a ring reduce-scatter); the all-gather is the
recursive doubling all-gather of :mod:`ringemu.algorithms.halving_doubling`.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps, fold_map
from .halving_doubling import _ag_cost, doubling_all_gather

__all__ = ["recursive_doubling_all_reduce", "recursive_doubling_reduce_scatter", "ALGORITHMS"]


def recursive_doubling_all_reduce(n_ranks: int) -> Schedule:
    """log2(N) exchange steps of the whole buffer (+ a fold and an unfold step when N is not a power of two)."""
    n = check_n_ranks(n_ranks)
    p, r, active = fold_map(n)
    steps = Steps()
    evens = np.arange(0, 2 * r, 2, dtype=np.int64)
    steps.add_step((evens, evens + 1, 0, ADD))
    j = np.arange(p, dtype=np.int64)
    d = 1
    while d < p:
        steps.add_step((active[j], active[j ^ d], 0, ADD))
        d *= 2
    steps.add_step((evens + 1, evens, 0, COPY))
    return steps.schedule("recursive_doubling_all_reduce", n, 1, "all", "reduced-all", exchange=True)


def recursive_doubling_reduce_scatter(n_ranks: int) -> Schedule:
    """The recursive doubling all-reduce, each rank keeping its own shard (derived; same additions)."""
    return recursive_doubling_all_reduce(n_ranks).renamed("recursive_doubling_reduce_scatter")


def _ar_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """log2(N)·(α + S·β) for N a power of two (Thakur et al. 2005, §4.5); two more whole-buffer steps otherwise."""
    p = fold_map(n)[0]
    steps = (p.bit_length() - 1) + (2 if n != p else 0)
    return steps * (alpha + nbytes * beta)


_SOURCE = "Thakur, Rabenseifner & Gropp 2005, §4.5 (recursive doubling)"
_ENGINES = ("textbook (Thakur, Rabenseifner & Gropp 2005 §4.5); the engines' own: mpich:recursive-doubling, "
            "ompi:recursive-doubling")
ALGORITHMS = (
    Algorithm("reduce-scatter", "recursive-doubling", recursive_doubling_reduce_scatter,
              "the recursive doubling all-reduce, each rank keeping its own shard (derived: same additions)",
              _SOURCE, _ENGINES, _ar_cost),
    Algorithm("all-gather", "recursive-doubling", doubling_all_gather,
              "recursive doubling: partners at distance 1, 2, ..., N/2 swap everything gathered so far",
              _SOURCE, _ENGINES, _ag_cost),
    Algorithm("all-reduce", "recursive-doubling", recursive_doubling_all_reduce,
              "partners at distance 1, 2, ..., N/2 swap whole buffers and both add: log2(N) steps",
              _SOURCE, _ENGINES, _ar_cost),
)
