"""NCCL's tree all-reduce (Simple protocol), modelled from source: ``nccl:tree``. NOT run against NCCL (no GPUs).

Source: NVIDIA/nccl @ 5067397c2676d5aed50042fc39e5c8ee96eb0027 (v2.30.7); checked only against a separate
per-element formula (the study's self-check), never on a GPU.

* **Trees** (src/graph/trees.cc): ``ncclGetBtree`` (line 32) is an in-order binary tree over nodes, node 0 the
  root with one child; ``ncclGetDtree`` (line 90) gives tree 1, the btree shifted by one (odd node count) or
  mirrored (even). Ranks inside a node form a chain (src/graph/connect.cc:53-62) and the node trees hang off
  their heads (``connectTrees``, connect.cc:138-166). Here one rank per node (``local_ranks=1``): the trees are
  over ranks.
* **Channels**: NCCL doubles its C channels, channel c on tree 0 and c + C on tree 1, so the buffer is cut over 2C
  channels (:func:`~ringemu.algorithms.nccl_ring.nccl_channel_parts`); C = 1 here (the tuner is not modelled),
  and a small buffer uses one channel, so it all runs on tree 0.
* **Chunks**: 512 KiB per channel (Simple, tree: chunkSteps 1, src/enqueue.cc:2223-2225), aligned to the 512 B
  grain. Chunking changes neither bits nor bytes; it only splits the dependency steps.
* **Order** (``runTreeSplit``, src/device/all_reduce.h:146): ``acc = ((own + S(down[0])) + S(down[1])) +
  S(down[2])`` with srcs = [own input, children in down[] order], sent up; the root's sum is copied down. Steps:
  reduce step h-1 brings, into every rank of height h, its children's sums in down[] order (one step, listed
  order); broadcast step d copies from depth-d ranks to their children.
* **AVG**: each input × T(1/N) before the sum (``ncclDevPreMulSum``, enqueue.cc:2550-2565).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps
from .nccl_ring import GRAIN_BYTES, NCCL_SOURCE, nccl_channel_parts

__all__ = ["TREE_CHUNK_BYTES", "nccl_btree", "nccl_trees", "nccl_tree_all_reduce", "ALGORITHMS"]

TREE_CHUNK_BYTES = (4 << 20) // 8  # DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS 8: 512 KiB (tree: chunkSteps 1)


def nccl_btree(n: int, rank: int) -> tuple[int, int, int, int]:
    """``ncclGetBtree`` (src/graph/trees.cc:32): (up, down0, down1, parent-child type) of ``rank``."""
    bit = 1
    while bit < n and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1) if n > 1 else -1, 0
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    low = bit >> 1
    down0 = -1 if low == 0 else rank - low
    down1 = -1 if low == 0 else rank + low
    while down1 >= n:
        down1 = -1 if low == 0 else rank + low
        low >>= 1
    return up, down0, down1, 0 if rank < up else 1


def nccl_trees(n: int) -> list[tuple[list[int], list[list[int]]]]:
    """Trees 0 and 1 (``ncclGetDtree``, trees.cc:90) over n ranks, one per node: (up[r], down[r]) each."""
    trees = []
    for t in range(2):
        up, down = [-1] * n, [[] for _ in range(n)]
        for r in range(n):
            if t == 0:
                u, d0, d1, _ = nccl_btree(n, r)
                relabel = (lambda x: x)  # noqa: E731
            elif n % 2:
                u, d0, d1, _ = nccl_btree(n, (r - 1) % n)
                relabel = (lambda x: -1 if x == -1 else (x + 1) % n)  # noqa: E731
            else:
                u, d0, d1, _ = nccl_btree(n, n - 1 - r)
                relabel = (lambda x: -1 if x == -1 else n - 1 - x)  # noqa: E731
            up[r] = relabel(u)
            down[r] = [relabel(d) for d in (d0, d1) if d != -1]
        trees.append((up, down))
    return trees


def nccl_tree_all_reduce(n_ranks: int, numel: int, itemsize: int, n_channels: int = 1,
                         chunk_bytes: int = TREE_CHUNK_BYTES) -> Schedule:
    """NCCL's tree all-reduce, Simple protocol, one rank per node (module doc)."""
    n = check_n_ranks(n_ranks)
    chunk = chunk_bytes // GRAIN_BYTES * GRAIN_BYTES // itemsize
    bounds, tree_of = [0], []
    for channel, offset, count in nccl_channel_parts(numel, itemsize, 2 * n_channels):
        for start in range(0, count, chunk):
            bounds.append(offset + min(count, start + chunk))
            tree_of.append(0 if channel < n_channels else 1)
    if bounds[-1] != numel or len(bounds) == 1:  # an empty buffer: one empty chunk
        bounds.append(numel)
        tree_of.append(0)
    b, tree_of = np.asarray(bounds, dtype=np.int64), np.asarray(tree_of, dtype=np.int64)
    reduce_rows: dict[int, list] = {}
    bcast_rows: dict[int, list] = {}
    for t, (up, down) in enumerate(nccl_trees(n) if n > 1 else []):
        chunks = np.flatnonzero((tree_of == t) & (b[1:] > b[:-1]))
        height: dict[int, int] = {}

        def h(r: int) -> int:
            if r not in height:
                height[r] = 0 if not down[r] else 1 + max(h(c) for c in down[r])
            return height[r]
        depth, stack = {}, [(up.index(-1), 0)]
        while stack:
            r, d = stack.pop()
            depth[r] = d
            stack += [(c, d + 1) for c in down[r]]
        for r in range(n):
            if down[r] and chunks.size:  # per chunk, the children in down[] order
                children = np.tile(np.asarray(down[r], dtype=np.int64), chunks.size)
                per_chunk = np.repeat(chunks, len(down[r]))
                reduce_rows.setdefault(h(r) - 1, []).append((children, np.full_like(children, r), per_chunk))
                bcast_rows.setdefault(depth[r], []).append((np.full_like(children, r), children, per_chunk))
    steps = Steps()
    for rows, op in ((reduce_rows, ADD), (bcast_rows, COPY)):
        for level in sorted(rows):
            steps.add_step(tuple(np.concatenate([x[j] for x in rows[level]]) for j in range(3)) + (op,))
    s = steps.schedule("nccl_tree_all_reduce", n, len(bounds) - 1, "all", "reduced-all")
    return Schedule(s.name, n, s.n_chunks, s.n_steps, s.table, "all", "reduced-all", False, tuple(bounds))


def _cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2⌈log2 N⌉(α + S·β): the textbook binary-tree reduce then broadcast of the whole buffer (no pipelining)."""
    depth = (n - 1).bit_length()
    return 2 * depth * (alpha + nbytes * beta)


ALGORITHMS = (
    Algorithm("all-reduce", "nccl:tree", nccl_tree_all_reduce,
              "binary tree (two mirrored trees over channels) reduce then broadcast, 512 KiB chunks; acc = own + "
              "children in down[] order; AVG pre-multiplies by T(1/N)",
              f"{NCCL_SOURCE}: src/device/all_reduce.h runTreeSplit, src/graph/trees.cc",
              "NCCL (GPUs; modelled, not run here)", _cost, options=("numel", "itemsize"), average="premultiply",
              modelled=f"{NCCL_SOURCE}: src/device/all_reduce.h runTreeSplit, src/graph/trees.cc ncclGetBtree/"
                       "ncclGetDtree; 1 rank per node, 1 channel per tree, Simple chunk 512 KiB"),
)
