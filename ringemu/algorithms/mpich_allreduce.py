"""MPICH 5.0's all-reduce algorithms, as ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` forces them (with
``MPIR_CVAR_DEVICE_COLLECTIVES=none``; see ``benchmarks/engines/mpich.py``), proven bit for bit against the running
engine.

* ``mpich:ring`` — ``allreduce_intra_ring.c`` ``MPIR_Allreduce_intra_ring``: blocks of ceil(S/N) while they fit
  (the last ones may be short or empty, lines 37-52); at step i rank r sends block r-1-i to r+1 and adds block
  r-2-i from r-1 (lines 68-87), then ``MPIR_Allgatherv_intra_ring``. The same transfers and additions as the plain
  ``ring`` entry, bit for bit; the engine sends no padding.
* ``mpich:recursive-doubling`` — ``allreduce_intra_recursive_doubling.c``: the fold of even ranks r < 2(N - p) into
  r + 1 (lines 63-89), whole-buffer exchanges at distance 1, 2, ... (lines 101-132), the unfold (137-146): the
  plain ``recursive-doubling`` entry's schedule exactly.
* ``mpich:reduce-scatter-allgather`` — ``allreduce_intra_reduce_scatter_allgather.c``: the same fold, p blocks
  (the first S mod p one element longer, lines 129-139), recursive halving **from distance 1** (``mask = 0x1``,
  lines 141-195; the lower rank of a pair keeps the lower half), recursive doubling back from distance p/2
  (199-239), the unfold. Halving from distance 1 meets the partial sums in exactly recursive doubling's pairs, so
  its bits equal ``mpich:recursive-doubling``'s (and differ from the plain ``halving-doubling``, which halves from
  p/2). It requires S >= p; for shorter buffers the engine falls back to its automatic choice, recursive doubling
  (``MPII_COLLECTIVE_FALLBACK_CHECK``), and so does this entry.
* ``mpich:tree`` — ``allreduce_intra_tree.c`` with the defaults ``TREE_TYPE=knomial_1``, ``TREE_KVAL=2``, one
  pipeline chunk, root 0: each node adds its children's subtree sums into its own buffer in the children's order
  (lines 139-165), the largest subtree first (``MPII_Treeutil_tree_knomial_1_init``, ``treeutil.c`` 147-221), then
  the result is broadcast down the same tree (166-189).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._mpich import ENGINES, SOURCE, block_bounds, partitioned, spread_bounds
from ._steps import Steps, fold_map
from .halving_doubling import _ar_cost as _rabenseifner_cost
from .recursive_doubling import _ar_cost as _doubling_cost, recursive_doubling_all_reduce
from .ring import _ring_half, ring_all_reduce

__all__ = ["mpich_ring_all_reduce", "mpich_recursive_doubling_all_reduce", "mpich_rsag_all_reduce",
           "whole_buffer_doubling", "knomial_tree", "mpich_tree_all_reduce", "ALGORITHMS"]


def mpich_ring_all_reduce(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Allreduce_intra_ring: 2(N-1) steps over the engine's ceil(S/N) blocks."""
    n = check_n_ranks(n_ranks)
    ring = ring_all_reduce(n)
    return Schedule("mpich_ring_all_reduce", n, n, ring.n_steps, ring.table, "all", "reduced-all", False,
                    block_bounds(numel, n))


def mpich_recursive_doubling_all_reduce(n_ranks: int) -> Schedule:
    """MPIR_Allreduce_intra_recursive_doubling: whole buffers, log2(p) exchanges (+ fold and unfold)."""
    return recursive_doubling_all_reduce(n_ranks).renamed("mpich_recursive_doubling_all_reduce")


def whole_buffer_doubling(n_ranks: int, numel: int) -> Schedule:
    """MPICH's recursive doubling cut for one buffer length (one chunk of S elements): what the automatic choice
    and the reduce_scatter_allgather fallback run."""
    rd = recursive_doubling_all_reduce(n_ranks)
    return Schedule("mpich_recursive_doubling_all_reduce", rd.n_ranks, 1, rd.n_steps, rd.table, "all",
                    "reduced-all", rd.exchange, (0, numel))


def _span(lo: int, hi: int) -> np.ndarray:
    return np.arange(lo, hi, dtype=np.int64)


def mpich_rsag_all_reduce(n_ranks: int, numel: int) -> Schedule:
    """MPIR_Allreduce_intra_reduce_scatter_allgather on p blocks; for S < p its fallback, recursive doubling."""
    n = check_n_ranks(n_ranks)
    p, r, active = fold_map(n)
    if numel < p:  # restriction count >= pof2 fails: the engine runs its automatic choice (allreduce_rule)
        return whole_buffer_doubling(n, numel)
    steps = Steps()
    evens = np.arange(0, 2 * r, 2, dtype=np.int64)[:, None]
    blocks = np.arange(p, dtype=np.int64)[None, :]
    steps.add_step((evens, evens + 1, blocks, ADD))  # the fold: even r < 2·rem adds everything into r + 1
    ranges = [(0, p)] * p
    mask = 1
    while mask < p:  # recursive halving from distance 1: the lower new rank keeps the lower half
        kept = [(lo, lo + (hi - lo) // 2) if not j & mask else (lo + (hi - lo) // 2, hi)
                for j, (lo, hi) in enumerate(ranges)]
        steps.add_step(*((int(active[j ^ mask]), int(active[j]), _span(*kept[j]), ADD) for j in range(p)))
        ranges = kept
        mask <<= 1
    mask = p >> 1
    while mask:  # recursive doubling from distance p/2: each partner copies the other's range
        steps.add_step(*((int(active[j ^ mask]), int(active[j]), _span(*ranges[j ^ mask]), COPY) for j in range(p)))
        ranges = [(min(lo, ranges[j ^ mask][0]), max(hi, ranges[j ^ mask][1])) for j, (lo, hi) in enumerate(ranges)]
        mask >>= 1
    steps.add_step((evens + 1, evens, blocks, COPY))  # the unfold
    return partitioned(steps, "mpich_rsag_all_reduce", n, spread_bounds(numel, p), "all", "reduced-all")


def knomial_tree(n: int, k: int = 2) -> list[list[int]]:
    """``children[r]`` of MPICH's knomial_1 tree rooted at 0 (``MPII_Treeutil_tree_knomial_1_init``): with D the
    number of base-k digits of N-1, node r at depth s has children r + 1 + j·k^(D-s-1)-spaced subtrees, the largest
    first, each a contiguous range of ranks (N = 8: 0 -> [1, 5, 7], 1 -> [2, 4], 2 -> [3], 5 -> [6])."""
    digits, rest = 0, n - 1
    while rest:
        digits, rest = digits + 1, rest // k
    children: list[list[int]] = [[] for _ in range(n)]

    def fill(node: int, depth: int) -> None:
        child = node + 1
        for level in range(depth, digits):
            for _ in range(1, k):
                if child < n:
                    children[node].append(child)
                    fill(child, level + 1)
                child += k ** (digits - level - 1)

    fill(0, 0)
    return children


def mpich_tree_all_reduce(n_ranks: int) -> Schedule:
    """MPIR_Allreduce_intra_tree (knomial_1, k = 2, root 0): reduce up, then broadcast down, whole buffers. Child
    i's subtree sum is added at the first step at which it is complete and child i-1's has been added (additions
    into one rank in one step apply in the children's order)."""
    n = check_n_ranks(n_ranks)
    children = knomial_tree(n)
    adds: dict[int, list[tuple[int, int]]] = {}
    done = [0] * n

    def reduce(node: int) -> None:
        t = 0
        for child in children[node]:
            reduce(child)
            t = max(t, done[child])
            adds.setdefault(t, []).append((child, node))
        done[node] = t + 1 if children[node] else 0

    reduce(0)
    steps = Steps()
    for t in range(done[0]):
        steps.add_step(*((src, dst, 0, ADD) for src, dst in adds.get(t, [])))
    level = [0]
    while level:
        down = [(parent, child) for parent in level for child in children[parent]]
        steps.add_step(*((parent, child, 0, COPY) for parent, child in down))
        level = [child for _, child in down]
    return steps.schedule("mpich_tree_all_reduce", n, 1, "all", "reduced-all")


def _tree_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2·ceil(log2 N)·(α + S·β): a binomial reduce then a binomial broadcast of the whole buffer (Thakur,
    Rabenseifner & Gropp 2005, §4.2 and §4.3)."""
    return 2 * (n - 1).bit_length() * (alpha + nbytes * beta)


def _ring_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2(N-1)·α + 2(N-1)/N·S·β (Patarasuk & Yuan 2009, §3)."""
    return 2 * _ring_half(n, nbytes, alpha, beta)


ALGORITHMS = (
    Algorithm("all-reduce", "mpich:ring", mpich_ring_all_reduce,
              "MPICH's ring: ceil(S/N) blocks (last ones short or empty), no padding sent; same bits as ring",
              SOURCE + "allreduce/allreduce_intra_ring.c, MPIR_Allreduce_intra_ring", ENGINES, _ring_cost,
              options=("numel",)),
    Algorithm("all-reduce", "mpich:recursive-doubling", mpich_recursive_doubling_all_reduce,
              "MPICH's recursive doubling: low ranks fold in pairs, whole buffers swapped; the schedule of "
              "recursive-doubling exactly",
              SOURCE + "allreduce/allreduce_intra_recursive_doubling.c, MPIR_Allreduce_intra_recursive_doubling",
              ENGINES, _doubling_cost),
    Algorithm("all-reduce", "mpich:reduce-scatter-allgather", mpich_rsag_all_reduce,
              "MPICH's Rabenseifner: halving from distance 1 (bits equal mpich:recursive-doubling's, not "
              "halving-doubling's); S < pof2(N) falls back to recursive doubling",
              SOURCE + "allreduce/allreduce_intra_reduce_scatter_allgather.c, "
              "MPIR_Allreduce_intra_reduce_scatter_allgather", ENGINES, _rabenseifner_cost, options=("numel",)),
    Algorithm("all-reduce", "mpich:tree", mpich_tree_all_reduce,
              "MPICH's knomial tree (k = 2, largest subtree first) reduce to rank 0, then broadcast; whole buffers",
              SOURCE + "allreduce/allreduce_intra_tree.c, MPIR_Allreduce_intra_tree (treealgo/treeutil.c, "
              "MPII_Treeutil_tree_knomial_1_init)", ENGINES, _tree_cost),
)
