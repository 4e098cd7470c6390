"""Open MPI 5.0's own MPI_Reduce to rank 0, as the all-reduce and reduce-scatter orders that call it run it.

``nonoverlapping`` all-reduce and reduce-scatter (and the linear all-reduce) start with a reduce to rank 0; the
reduce is coll/tuned's own choice, ``ompi_coll_tuned_reduce_intra_dec_fixed`` (coll_tuned_decision_fixed.c),
commutative branch, on the whole vector's bytes. How each tree adds (``ompi_coll_base_reduce_generic``,
coll_base_reduce.c, commutative, not in place): a node receives child 0 into its accumulator, then acc = own + c0,
then acc = c1 + acc, ..., children in ``tree_next`` order: node = ((c0 + own) + c1) + ... — plain adds into the
node in child order, each node adding in the step after its deepest child finished. The fixed rules pass
segment size 0 (one segment) and chain fan-out 0, which ``build_chain`` makes 1 (a pipeline).

The linear reduce (``ompi_coll_base_reduce_intra_basic_linear``, coll_base_reduce.c) is the one order a plain
transfer cannot write at the root: rbuf = x[N-1], then rbuf = x[i] + rbuf for i = N-2 … 0, so the root's own x[0]
enters last, after two or more remote values. Here rank N-1 accumulates ((x[N-1] + x[N-2]) + …) + x[1] (the
same adds in the same order) and sends it to rank 0, which adds x[0]: the engine's bits (IEEE addition of two
operands is commutative), every rank sends the bytes it sends in the engine, but rank N-1 receives N-2 vectors
that the engine sends to rank 0, one step more. For N = 2 it is the engine's message exactly.
"""
from __future__ import annotations

import numpy as np

from .ompi_common import ADD, Ranges, pow2_below

__all__ = ["reduce_algorithm", "tree_children", "reduce_to_root", "REDUCE_NAMES"]

# coll_tuned_reduce_decision.c: the ids of tuned's reduce algorithms
REDUCE_NAMES = {1: "linear", 2: "chain", 3: "pipeline", 4: "binary", 5: "binomial", 6: "in-order binary",
                7: "reduce-scatter-gather"}
MAX_RANKS = 32  # the commutative fixed rules are transcribed for N < 32 (where 6 and 7 are not reached)


def _pick(table, x: int) -> int:
    for upper, value in table:
        if upper is None or x < upper:
            return value
    raise AssertionError("a rule table ends with None")


def reduce_algorithm(n_ranks: int, nbytes: int, count: int) -> int:
    """The reduce tuned's fixed rules run for ``count`` elements (``nbytes`` bytes) on N < 32 ranks
    (coll_tuned_decision_fixed.c, ``ompi_coll_tuned_reduce_intra_dec_fixed``, commutative branch); the
    reduce-scatter-gather choice (7) falls back to linear when count < pof2 (coll_base_reduce.c)."""
    n = n_ranks
    if n < 4:
        alg = _pick([(8, 7), (16, 4), (32, 3), (262144, 1), (524288, 3), (1048576, 2), (None, 3)], nbytes)
    elif n < 8:
        alg = _pick([(4096, 4), (65536, 2), (262144, 5), (524288, 1), (1048576, 5), (None, 1)], nbytes)
    elif n < 16:
        alg = _pick([(8192, 4), (None, 5)], nbytes)
    elif n < MAX_RANKS:
        alg = _pick([(4096, 4), (None, 5)], nbytes)
    else:
        raise ValueError(f"Open MPI's reduce decision is modelled for n_ranks < {MAX_RANKS}; got {n}")
    if alg == 7:
        if count >= pow2_below(n) >= 2:
            raise ValueError(f"Open MPI's reduce-scatter-gather reduce (chosen for {nbytes} B on {n} ranks, "
                             f"elements under 4 B) is not modelled")
        alg = 1
    return alg


def tree_children(alg: int, n: int) -> list[list[int]]:
    """Children of each rank (root 0) in ``tree_next`` order (coll_base_topo.c): chain/pipeline 0 <- 1 <- ... <- N-1;
    binary ``build_tree(2)`` in level order (node s at level L has children s + 2^L and s + 2^(L+1)); binomial
    ``build_in_order_bmtree`` (children v ^ 1, v ^ 2, v ^ 4, ... while greater than v)."""
    children: list[list[int]] = [[] for _ in range(n)]
    if alg in (2, 3):
        for s in range(1, n):
            children[s - 1].append(s)
    elif alg == 4:
        for s in range(n):
            delta = 1 << ((s + 1).bit_length() - 1)  # 2^level: level L holds positions 2^L - 1 ... 2^(L+1) - 2
            children[s] += [c for c in (s + delta, s + 2 * delta) if c < n]
    elif alg == 5:
        for v in range(n):
            m = 1
            while m < n and (v ^ m) > v:
                if v ^ m < n:
                    children[v].append(v ^ m)
                m <<= 1
    else:
        raise AssertionError(f"no tree for reduce algorithm {alg}")
    return children


def reduce_to_root(ranges: Ranges, n: int, alg: int) -> None:
    """The reduce of the whole buffer to rank 0 by tuned's algorithm ``alg`` (module doc), as steps of ``ranges``."""
    whole = (0, ranges.numel)
    if n < 2:
        return
    if alg == 1:
        if n == 2:
            ranges.step((1, 0, *whole, ADD))
            return
        ranges.step((np.arange(n - 2, 0, -1), n - 1, *whole, ADD))  # ((x[N-1] + x[N-2]) + ...) + x[1] on N-1
        ranges.step((n - 1, 0, *whole, ADD))  # + x[0]
        return
    children = tree_children(alg, n)
    height = [0] * n
    for r in range(n - 1, -1, -1):  # every child has a larger rank than its parent in these trees
        height[r] = 1 + max((height[c] for c in children[r]), default=-1)
    for h in range(1, height[0] + 1):
        srcs = [c for r in range(n) if height[r] == h for c in children[r]]
        dsts = [r for r in range(n) if height[r] == h for _ in children[r]]
        ranges.step((np.asarray(srcs, dtype=np.int64), np.asarray(dsts, dtype=np.int64), *whole, ADD))
