"""Binary tree reduce + broadcast, pipelined in chunks, and a double binary tree on heap-ordered trees (textbook).

The tree is the heap-ordered binary tree on tree positions 0..N-1 (parent (i-1)//2, children 2i+1 and 2i+2; depth
floor(log2(i+1)), D = depth of the last position). The buffer is cut into segments that flow up the tree (each
node adds its left, then its right child's partial sum into its own, then sends the sum up) and back down as
copies, pipelined: the node at depth d sends segment k up at step k + D - d, and the root's result of segment k
goes down from depth d at step k + D + d. With P segments that is P + 2D - 1 steps, each carrying one segment per
link and direction (the pipelined tree of Sanders, Speck & Träff 2009, §2).

* ``tree``: one tree on ranks in order; P = N segments (the shards).
* ``double-binary-tree`` (Sanders, Speck & Träff 2009, §3, on heap-ordered trees): two trees, each on half of
  every shard (``ChunkLayout(S, 2N, N)``); the second tree is the first on mirrored ranks (position i is rank
  N-1-i), so every rank is an inner node of at most one tree and the two trees together use each rank's links
  about evenly. These are the textbook shapes, not NCCL's: NCCL's double binary tree is in-order, its root has
  one child, and its second tree is the first shifted (odd N) or mirrored (even N) (``src/graph/trees.cc``): the
  registry's ``nccl:tree``.

The tree families have no reduce-scatter of their own: it is the all-reduce, each rank keeping its own shard
(derived: the same additions; NCCL has no tree reduce-scatter either). The all-gather copies every shard up to the
root (one step per level, a node forwarding its whole subtree) and the missing shards back down.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps

__all__ = ["tree_all_reduce", "tree_reduce_scatter", "tree_all_gather", "double_tree_all_reduce",
           "double_tree_reduce_scatter", "double_tree_all_gather", "tree_depth", "ALGORITHMS"]


def tree_depth(n: int) -> int:
    """D = floor(log2(N)): the depth of the deepest position of the heap-ordered tree on N positions."""
    return n.bit_length() - 1


def _depths(n: int) -> np.ndarray:
    return np.array([(i + 1).bit_length() - 1 for i in range(n)], dtype=np.int64)


def _tree_columns(n: int, rank_of: np.ndarray, chunk_of_segment: np.ndarray) -> tuple[np.ndarray, ...]:
    """(step, src, dst, chunk, op) columns of the pipelined reduce + broadcast; sorted stably by step
    (:meth:`Steps.add_columns`) they are within a step in position order, so a node adds its left child before its
    right child."""
    if n == 1:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(5))
    depth, big_d = _depths(n), tree_depth(n)
    child = np.arange(1, n, dtype=np.int64)  # every non-root position, in order
    parent = (child - 1) // 2
    seg = np.arange(chunk_of_segment.size, dtype=np.int64)
    shape = (child.size, seg.size)
    up_step = seg[None, :] + (big_d - depth[child])[:, None]  # child i sends segment k up at k + D - depth(i)
    down_step = seg[None, :] + (big_d + depth[parent])[:, None]  # and gets it back at k + D + depth(parent)
    lower = np.broadcast_to(rank_of[child][:, None], shape).reshape(-1)
    upper = np.broadcast_to(rank_of[parent][:, None], shape).reshape(-1)
    chunk = np.broadcast_to(chunk_of_segment[None, :], shape).reshape(-1)
    ops = np.repeat(np.array([ADD, COPY], dtype=np.int64), lower.size)
    return (np.concatenate([up_step.reshape(-1), down_step.reshape(-1)]), np.concatenate([lower, upper]),
            np.concatenate([upper, lower]), np.concatenate([chunk, chunk]), ops)


def tree_all_reduce(n_ranks: int) -> Schedule:
    """Pipelined binary tree reduce + broadcast on N segments: N + 2·floor(log2 N) - 1 steps."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    steps.add_columns(*_tree_columns(n, np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)))
    return steps.schedule("tree_all_reduce", n, n, "all", "reduced-all")


def tree_reduce_scatter(n_ranks: int) -> Schedule:
    """The tree all-reduce, each rank keeping its own shard (derived; same additions)."""
    return tree_all_reduce(n_ranks).renamed("tree_reduce_scatter")


def double_tree_all_reduce(n_ranks: int) -> Schedule:
    """Two pipelined trees at once, tree 0 on half 0 of every shard (chunk 2c), tree 1 (mirrored ranks) on half 1
    (chunk 2c + 1): N + 2·floor(log2 N) - 1 steps of S/(2N) per tree link."""
    n = check_n_ranks(n_ranks)
    shards = np.arange(n, dtype=np.int64)
    first = _tree_columns(n, shards, 2 * shards)
    second = _tree_columns(n, n - 1 - shards, 2 * shards + 1)
    steps = Steps()
    steps.add_columns(*(np.concatenate([a, b]) for a, b in zip(first, second)))  # tree 0's rows first in a step
    return steps.schedule("double_tree_all_reduce", n, 2 * n, "all", "reduced-all")


def double_tree_reduce_scatter(n_ranks: int) -> Schedule:
    """The double binary tree all-reduce, each rank keeping its own shard (derived; same additions)."""
    return double_tree_all_reduce(n_ranks).renamed("double_tree_reduce_scatter")


def _gather_broadcast(n: int, split: int, name: str) -> Schedule:
    """All-gather on the heap tree of ranks: level by level, the deepest first, every node sends its subtree's
    shards to its parent; then level by level from the root, every node sends each child the shards outside the
    child's subtree. ``split`` chunks per shard."""
    depth, big_d = _depths(n), tree_depth(n)
    subtree = [[i] for i in range(n)]
    for i in range(n - 1, 0, -1):
        subtree[(i - 1) // 2] = subtree[(i - 1) // 2] + subtree[i]
    parts = np.arange(split, dtype=np.int64)

    def chunks(shards) -> np.ndarray:
        return (np.asarray(shards, dtype=np.int64)[:, None] * split + parts[None, :]).reshape(-1)

    steps = Steps()
    for level in range(big_d, 0, -1):
        steps.add_step(*((i, (i - 1) // 2, chunks(subtree[i]), COPY) for i in range(n) if depth[i] == level))
    everyone = np.arange(n, dtype=np.int64)
    for level in range(1, big_d + 1):
        steps.add_step(*(((i - 1) // 2, i, chunks(np.setdiff1d(everyone, subtree[i])), COPY)
                         for i in range(n) if depth[i] == level))
    return steps.schedule(name, n, split * n, "own", "gathered")


def tree_all_gather(n_ranks: int) -> Schedule:
    """Gather up the tree, broadcast down: 2·floor(log2 N) steps."""
    return _gather_broadcast(check_n_ranks(n_ranks), 1, "tree_all_gather")


def double_tree_all_gather(n_ranks: int) -> Schedule:
    """The tree all-gather on the double tree's layout (two halves per shard, both moved by the first tree)."""
    return _gather_broadcast(check_n_ranks(n_ranks), 2, "double_tree_all_gather")


def _tree_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """(N + 2D - 1)·(α + S/N·β) with D = floor(log2 N): every step moves one segment of S/N per link."""
    if n == 1:
        return Fraction(0)
    return (n + 2 * tree_depth(n) - 1) * (alpha + Fraction(nbytes, n) * beta)


@lru_cache(maxsize=32)
def _double_tree_load(n: int) -> int:
    """Half-segments on the busiest link, summed over the steps of the double tree's all-reduce. The two trees
    share some links (always for N = 2; the edge 0-2 for N = 4, ...), and while one tree reduces up such a link the
    other broadcasts down it, so some steps carry two half-segments on one link: read from the rows, not assumed."""
    shards = np.arange(n, dtype=np.int64)
    first, second = _tree_columns(n, shards, 2 * shards), _tree_columns(n, n - 1 - shards, 2 * shards + 1)
    step, src, dst = (np.concatenate([first[k], second[k]]) for k in range(3))
    key = (step * n + src) * n + dst
    used, count = np.unique(key, return_counts=True)
    busiest = np.zeros(int(step.max()) + 1, dtype=np.int64)
    np.maximum.at(busiest, used // (n * n), count)
    return int(busiest.sum())


def _double_tree_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """(N + 2D - 1)·α + L·S/(2N)·β, with L the half-segments on the busiest link summed over the steps
    (N + 2D - 1 <= L: one half-segment per link and step where the two trees use different links)."""
    if n == 1:
        return Fraction(0)
    return (n + 2 * tree_depth(n) - 1) * alpha + Fraction(_double_tree_load(n) * nbytes, 2 * n) * beta


def _gather_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """Level by level: step up from level l carries the largest subtree of level l; step down to level l the
    shards outside the smallest subtree of level l (S/N bytes per shard)."""
    depth, big_d = _depths(n), tree_depth(n)
    size = np.ones(n, dtype=np.int64)
    for i in range(n - 1, 0, -1):
        size[(i - 1) // 2] += size[i]
    shards = sum(int(size[depth == level].max()) + n - int(size[depth == level].min()) for level in range(1, big_d + 1))
    return 2 * big_d * alpha + Fraction(shards * nbytes, n) * beta


_TREE_SOURCE = "Sanders, Speck & Träff 2009, §2 (pipelined binary tree)"
_DOUBLE_SOURCE = "Sanders, Speck & Träff 2009, §3 (two-tree broadcast and reduction)"
ALGORITHMS = (
    Algorithm("reduce-scatter", "tree", tree_reduce_scatter,
              "the tree all-reduce, each rank keeping its own shard (derived: same additions)",
              _TREE_SOURCE, "textbook, derived from the tree's all-reduce", _tree_cost),
    Algorithm("all-gather", "tree", tree_all_gather,
              "every shard copied up the tree to the root, then the missing shards down",
              _TREE_SOURCE, "none natively (derived)", _gather_cost),
    Algorithm("all-reduce", "tree", tree_all_reduce,
              "binary tree reduce then broadcast, pipelined in N segments",
              _TREE_SOURCE, "textbook heap-ordered binary tree; not an engine's bits (MPICH's k-nomial tree is "
              "mpich:tree, NCCL's in-order trees nccl:tree)", _tree_cost),
    Algorithm("reduce-scatter", "double-binary-tree", double_tree_reduce_scatter,
              "the double binary tree all-reduce, each rank keeping its own shard (derived: same additions)",
              _DOUBLE_SOURCE, "textbook, derived from the tree's all-reduce", _double_tree_cost),
    Algorithm("all-gather", "double-binary-tree", double_tree_all_gather,
              "the tree all-gather on the double tree's half-shard layout (derived)",
              _DOUBLE_SOURCE, "none natively (derived)", _gather_cost),
    Algorithm("all-reduce", "double-binary-tree", double_tree_all_reduce,
              "two pipelined binary trees, each on half of every shard; ranks inner in one tree are leaves in the other",
              _DOUBLE_SOURCE, "textbook (Sanders, Speck & Träff's two trees, on heap-ordered trees); NCCL's own "
              "double binary tree (in-order, src/graph/trees.cc) is nccl:tree", _double_tree_cost),
)
