"""Collectives as a specific engine actually runs them, where that differs from the textbook.

``gloo`` (torch 2.13's ProcessGroupGloo on CPU): its all-reduce and all-gather are rings, but its
``reduce_scatter_tensor`` is an all-reduce of the whole buffer after which each rank keeps its own chunk, so it
sends 2(N-1)/N·S per rank: 2.00× a ring reduce-scatter (the project's observed-bytes measurement of torch's gloo,
``zero_stages/torch/wire_bytes.py``). That is why ZeRO's gradient traffic is 2.0× DP's on gloo and 1.5× on a true
ring. The reduce-scatter here is the ring all-reduce keeping one's own chunk, so it adds in the ring's order.
"""
from __future__ import annotations

from fractions import Fraction

from ..schedule import Schedule
from . import Algorithm
from .ring import _ring_half, ring_all_gather, ring_all_reduce

__all__ = ["gloo_reduce_scatter", "ALGORITHMS"]


def gloo_reduce_scatter(n_ranks: int) -> Schedule:
    """gloo's reduce-scatter: the ring all-reduce, each rank keeping its own chunk (2(N-1) steps)."""
    return ring_all_reduce(n_ranks).renamed("gloo_reduce_scatter")


def _ar_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    return 2 * _ring_half(n, nbytes, alpha, beta)


_SOURCE = "torch 2.13 ProcessGroupGloo (gloo's ring all-reduce); measured with zero_stages/torch/wire_bytes.py"
ALGORITHMS = (
    Algorithm("reduce-scatter", "gloo", gloo_reduce_scatter,
              "ring all-reduce, each rank keeping its own chunk: 2.00x a ring reduce-scatter's bytes",
              _SOURCE, "gloo (torch.distributed on CPU)", _ar_cost),
    Algorithm("all-gather", "gloo", ring_all_gather, "ring all-gather", _SOURCE, "gloo (torch.distributed on CPU)",
              _ring_half),
    Algorithm("all-reduce", "gloo", ring_all_reduce, "ring all-reduce", _SOURCE, "gloo (torch.distributed on CPU)",
              _ar_cost),
)
