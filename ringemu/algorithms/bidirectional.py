"""The bidirectional ring: two rings in opposite directions, each on half of every chunk.

NCCL drives both directions of every link of its ring (NCCL's ring channels are built in both directions; see
also Patarasuk & Yuan 2009, §3, for the one-directional ring this doubles). Every shard of ``ceil(S/N)`` elements
is cut into two halves (``ChunkLayout(S, 2N, N)``): half 0 of shard c travels clockwise (c+1, c+2, ..., c), half 1
counter-clockwise (c-1, c-2, ..., c). Each step every rank sends one half-chunk to each neighbour, so each link
direction carries S/(2N) per step: half the ring's β-term for the same 2(N-1) steps.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps

__all__ = ["bidirectional_reduce_scatter", "bidirectional_all_gather", "bidirectional_all_reduce", "ALGORITHMS"]


def _passes(steps: Steps, n: int, op: int) -> None:
    """N-1 steps of both rings: at step s rank r sends half 0 of shard (r - s - 1) [reduce] or (r - s) [gather]
    to r + 1, and half 1 of shard (r + s + 1) or (r + s) to r - 1."""
    r = np.arange(n, dtype=np.int64)
    lag = 1 if op == ADD else 0
    for s in range(n - 1):
        steps.add_step((r, (r + 1) % n, 2 * ((r - s - lag) % n), op),
                       (r, (r - 1) % n, 2 * ((r + s + lag) % n) + 1, op))


def bidirectional_reduce_scatter(n_ranks: int) -> Schedule:
    """N-1 steps; rank r ends with both halves of shard r summed over all ranks (each half in its ring's order)."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    _passes(steps, n, ADD)
    return steps.schedule("bidirectional_reduce_scatter", n, 2 * n, "all", "reduced-own")


def bidirectional_all_gather(n_ranks: int) -> Schedule:
    """N-1 steps; every rank ends with both halves of every shard."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    _passes(steps, n, COPY)
    return steps.schedule("bidirectional_all_gather", n, 2 * n, "own", "gathered")


def bidirectional_all_reduce(n_ranks: int) -> Schedule:
    """Bidirectional reduce-scatter then bidirectional all-gather: 2(N-1) steps."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    _passes(steps, n, ADD)
    _passes(steps, n, COPY)
    return steps.schedule("bidirectional_all_reduce", n, 2 * n, "all", "reduced-all")


def _pass_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """(N-1)α + (N-1)/(2N)·S·β for N > 2 (one half-chunk per link direction per step); with N = 2 both halves
    share the one link, (N-1)α + (N-1)/N·S·β."""
    per_link = Fraction(nbytes, 2 * n) if n > 2 else Fraction(nbytes, n)
    return (n - 1) * (alpha + per_link * beta)


_SOURCE = "NCCL's bidirectional rings; the ring of Patarasuk & Yuan 2009, §3, run in both directions"
_ENGINES = "textbook (the ring run both ways, as NCCL drives both directions of its links); not an engine's bits"
ALGORITHMS = (
    Algorithm("reduce-scatter", "bidirectional-ring", bidirectional_reduce_scatter,
              "two opposite rings, each reducing half of every shard: N-1 steps", _SOURCE, _ENGINES, _pass_cost),
    Algorithm("all-gather", "bidirectional-ring", bidirectional_all_gather,
              "two opposite rings, each gathering half of every shard: N-1 steps", _SOURCE, _ENGINES, _pass_cost),
    Algorithm("all-reduce", "bidirectional-ring", bidirectional_all_reduce,
              "bidirectional reduce-scatter then all-gather: 2(N-1) steps, half the ring's bytes per link",
              _SOURCE, _ENGINES, lambda n, s, a, b: 2 * _pass_cost(n, s, a, b)),
)
