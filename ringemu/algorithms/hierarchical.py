"""The hierarchical (2-D) ring for nodes × ranks per node.

N = M nodes × R ranks per node; rank g = m·R + l is local rank l of node m, and shard c = m'·R + l' is owned by
rank c. Reduce-scatter inside every node (a ring over the R local ranks; local rank l ends with block l, the M
shards m'·R + l), then reduce-scatter across nodes on that block (a ring over the M ranks with local rank l; node
m ends with shard m·R + l). The all-gather runs the same two rings in reverse (across nodes, then inside), and the
all-reduce is reduce-scatter then all-gather: inside the node, all-reduce across nodes on the shards, inside the
node (Horovod's hierarchical all-reduce; Jia et al. 2018, "Highly scalable deep learning training system with
mixed-precision: training ImageNet in four minutes", hierarchical all-reduce). Reduce-scatter and all-reduce add
in the same order; in a reduce-scatter or all-gather each rank sends only (M-1)/N·S bytes across nodes.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm, check_ranks_per_node
from ._steps import Steps

__all__ = ["hierarchical_reduce_scatter", "hierarchical_all_gather", "hierarchical_all_reduce", "ALGORITHMS"]


def _grid(n: int, ranks_per_node: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    r = check_ranks_per_node(ranks_per_node, n)
    g = np.arange(n, dtype=np.int64)
    return n // r, r, g // r, g % r


def _intra(steps: Steps, n: int, ranks_per_node: int, op: int) -> None:
    """R-1 ring steps inside every node on blocks of M shards: at step s local rank l sends block (l - s - 1)
    [reduce] or (l - s) [gather] to local rank l + 1."""
    m_nodes, r, node, local = _grid(n, ranks_per_node)
    lag = 1 if op == ADD else 0
    dst = node * r + (local + 1) % r
    nodes = np.arange(m_nodes, dtype=np.int64)
    for s in range(r - 1):
        block = (local - s - lag) % r
        steps.add_step((np.repeat(np.arange(n), m_nodes), np.repeat(dst, m_nodes),
                        (nodes[None, :] * r + block[:, None]).reshape(-1), op))


def _inter(steps: Steps, n: int, ranks_per_node: int, op: int) -> None:
    """M-1 ring steps across nodes among the ranks of one local index l: at step s node m sends shard
    ((m - s - 1) mod M)·R + l [reduce] or ((m - s) mod M)·R + l [gather] to node m + 1."""
    m_nodes, r, node, local = _grid(n, ranks_per_node)
    lag = 1 if op == ADD else 0
    dst = ((node + 1) % m_nodes) * r + local
    for s in range(m_nodes - 1):
        steps.add_step((np.arange(n), dst, ((node - s - lag) % m_nodes) * r + local, op))


def hierarchical_reduce_scatter(n_ranks: int, ranks_per_node: int) -> Schedule:
    """(R-1) steps inside the nodes, then (M-1) across: rank c ends with shard c summed over all ranks."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    _intra(steps, n, ranks_per_node, ADD)
    _inter(steps, n, ranks_per_node, ADD)
    return steps.schedule(f"hierarchical_reduce_scatter[{ranks_per_node}/node]", n, n, "all", "reduced-own")


def hierarchical_all_gather(n_ranks: int, ranks_per_node: int) -> Schedule:
    """(M-1) steps across nodes, then (R-1) inside: every rank ends with every shard."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    _inter(steps, n, ranks_per_node, COPY)
    _intra(steps, n, ranks_per_node, COPY)
    return steps.schedule(f"hierarchical_all_gather[{ranks_per_node}/node]", n, n, "own", "gathered")


def hierarchical_all_reduce(n_ranks: int, ranks_per_node: int) -> Schedule:
    """Reduce-scatter inside the node, all-reduce across nodes on the shards, all-gather inside the node:
    2(R-1) + 2(M-1) steps."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    _intra(steps, n, ranks_per_node, ADD)
    _inter(steps, n, ranks_per_node, ADD)
    _inter(steps, n, ranks_per_node, COPY)
    _intra(steps, n, ranks_per_node, COPY)
    return steps.schedule(f"hierarchical_all_reduce[{ranks_per_node}/node]", n, n, "all", "reduced-all")


def _pass_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction, *, ranks_per_node: int) -> Fraction:
    """One reduce-scatter or all-gather on one link class: (R-1)α + (R-1)/R·S·β inside the nodes plus
    (M-1)α + (M-1)/N·S·β across them."""
    r = check_ranks_per_node(ranks_per_node, n)
    m = n // r
    return (r - 1) * alpha + Fraction((r - 1) * nbytes, r) * beta + (m - 1) * alpha + Fraction((m - 1) * nbytes, n) * beta


def _ar_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction, *, ranks_per_node: int) -> Fraction:
    return 2 * _pass_cost(n, nbytes, alpha, beta, ranks_per_node=ranks_per_node)


_SOURCE = "Jia et al. 2018 (hierarchical all-reduce); Horovod's 2-D ring"
_ENGINES = "textbook two-level ring (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE describes it); not an engine's bits"
_OPTIONS = ("ranks_per_node",)
ALGORITHMS = (
    Algorithm("reduce-scatter", "hierarchical-ring", hierarchical_reduce_scatter,
              "ring reduce-scatter inside each node, then across nodes on each local rank's block",
              _SOURCE, _ENGINES, _pass_cost, options=_OPTIONS),
    Algorithm("all-gather", "hierarchical-ring", hierarchical_all_gather,
              "ring all-gather across nodes, then inside each node", _SOURCE, _ENGINES, _pass_cost, options=_OPTIONS),
    Algorithm("all-reduce", "hierarchical-ring", hierarchical_all_reduce,
              "reduce-scatter inside the node, all-reduce across nodes on the shards, all-gather inside the node",
              _SOURCE, _ENGINES, _ar_cost, options=_OPTIONS),
)
