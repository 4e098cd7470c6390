"""NCCL's tree all-reduce (``nccl:tree``, modelled from NVIDIA/nccl v2.30.7: ``src/graph/trees.cc`` ncclGetBtree and
ncclGetDtree, ``src/device/all_reduce.h`` runTreeSplit), worked by hand: NCCL needs a GPU per rank and does not
run here, so these trees and schedules, derived from the source on paper, are the only pin the order has."""
from fractions import Fraction

import numpy as np

import ringemu
from ringemu.algorithms import cost
from ringemu.algorithms.nccl_tree import nccl_btree, nccl_tree_all_reduce, nccl_trees
from ringemu.schedule import ADD, COPY


# -- NCCL's trees (src/graph/trees.cc, ncclGetBtree / ncclGetDtree), worked by hand --------------------------------
def test_nccl_btree_of_8_and_5_ranks_worked_by_hand():
    """ncclGetBtree: the lowest set bit b of the rank; up = (r ^ b) | 2b, or r ^ b when that is >= n; children
    r - b/2 and r + b/2 (halving b/2 while r + b/2 >= n); rank 0 has the one child of the top power of two. For
    8 ranks: 0 -> 4; 4 -> 2, 6; 2 -> 1, 3; 6 -> 5, 7. For 5: 0 -> 4; 4 -> 2 (6 and 5 are not ranks); 2 -> 1, 3."""
    assert [nccl_btree(8, r) for r in range(8)] == [
        (-1, -1, 4, 0), (2, -1, -1, 0), (4, 1, 3, 0), (2, -1, -1, 1),
        (0, 2, 6, 1), (6, -1, -1, 0), (4, 5, 7, 1), (6, -1, -1, 1)]
    assert [nccl_btree(5, r)[:3] for r in range(5)] == [(-1, -1, 4), (2, -1, -1), (4, 1, 3), (2, -1, -1), (0, 2, -1)]
    assert nccl_btree(1, 0) == (-1, -1, -1, 0)


def test_nccl_dtree_mirrors_an_even_count_and_shifts_an_odd_one():
    """ncclGetDtree: tree 1 is the btree mirrored (r -> n - 1 - r) for even n, shifted by one (r -> r + 1 mod n)
    for odd n; children keep the btree's down[] order."""
    (up0, down0), (up1, down1) = nccl_trees(8)
    assert up0 == [-1, 2, 4, 2, 0, 6, 4, 6] and down0 == [[4], [], [1, 3], [], [2, 6], [], [5, 7], []]
    assert up1 == [1, 3, 1, 7, 5, 3, 5, -1] and down1 == [[], [2, 0], [], [5, 1], [], [6, 4], [], [3]]
    (up0, down0), (up1, down1) = nccl_trees(5)
    assert up0 == [-1, 2, 4, 2, 0] and down0 == [[4], [], [1, 3], [], [2]]
    assert up1 == [1, -1, 3, 0, 3] and down1 == [[3], [0], [], [2, 4], []]


def test_nccl_tree_all_reduce_on_4_ranks_worked_by_hand():
    """Tree 0 of 4 ranks is 0 -> 2, 2 -> 1, 3; tree 1 (mirrored) 3 -> 1, 1 -> 2, 0. runTreeSplit: the reduce step
    h - 1 adds the children of every rank of height h into it, in down[] order; the broadcast step d copies from the
    ranks of depth d to their children. A 10-element buffer is one chunk on one channel (tree 0); 262,149 fp32 are
    cut over two channels, the first in 512 KiB chunks (131,072 fp32), the second on tree 1."""
    tree0 = [(0, 1, 2, ADD), (0, 3, 2, ADD), (1, 2, 0, ADD), (2, 0, 2, COPY), (3, 2, 1, COPY), (3, 2, 3, COPY)]
    tree1 = [(0, 2, 1, ADD), (0, 0, 1, ADD), (1, 1, 3, ADD), (2, 3, 1, COPY), (3, 1, 2, COPY), (3, 1, 0, COPY)]
    small = nccl_tree_all_reduce(4, 10, 4)
    assert small.partition == (0, 10) and small.n_steps == 4
    assert [(s, a, b, op) for s, a, b, c, op in small.table.tolist()] == tree0
    big = nccl_tree_all_reduce(4, 2 * 131072 + 5, 4)
    assert big.partition[:2] == (0, 131072) and big.partition[-1] == 2 * 131072 + 5 and big.n_chunks == 3
    rows = big.table.tolist()
    by_chunk = [[(s, a, b, op) for s, a, b, cc, op in rows if cc == c] for c in range(3)]
    assert by_chunk == [tree0, tree0, tree1]
    assert nccl_tree_all_reduce(4, 0, 4).partition == (0, 0)  # an empty buffer: one empty chunk


def test_nccl_btree_of_6_ranks_where_the_second_child_halves():
    """6 ranks, worked from ncclGetBtree: rank 4 (lowest bit 4) has up 0 (4 ^ 4, since 0 | 8 >= 6), children
    4 - 2 = 2 and 4 + 2 = 6, which is not a rank, so the second child halves to 4 + 1 = 5; rank 5 (bit 1) has up
    4 (5 ^ 1, since 4 | 2 = 6 >= 6). The parent-child type is 0 where the rank is below its parent."""
    assert [nccl_btree(6, r) for r in range(6)] == [
        (-1, -1, 4, 0), (2, -1, -1, 0), (4, 1, 3, 0), (2, -1, -1, 1), (0, 2, 5, 1), (4, -1, -1, 1)]
    assert nccl_btree(2, 0) == (-1, -1, 1, 0) and nccl_btree(2, 1) == (0, -1, -1, 1)  # 0 -> 1 (1 | 2 >= 2)


def test_nccl_trees_are_trees_for_every_count():
    """For 1..64 ranks, each of the two trees has one root (up -1; rank 0 in tree 0, the btree's), every rank but
    the root has one parent, and a rank is its parent's child exactly when the parent lists it in down[] (the
    tree links both ways); every rank reaches the root."""
    for n in range(1, 65):
        for t, (up, down) in enumerate(nccl_trees(n)):
            assert up.count(-1) == 1 and (t == 1 or up[0] == -1)
            for r in range(n):
                hops, at = 0, r
                while up[at] != -1 and hops <= n:
                    at, hops = up[at], hops + 1
                assert up[at] == -1, (n, t, r)
            assert sorted(c for r in range(n) for c in down[r]) == [r for r in range(n) if up[r] != -1]
            assert all(up[c] == r for r in range(n) for c in down[r])


def test_nccl_tree_all_reduce_on_2_and_8_ranks_worked_by_hand():
    """2 ranks: tree 0 is 0 -> 1, so rank 1 adds into 0, then 0 copies down. 8 ranks (tree 0 above): the reduce
    steps go by height (ranks 2 and 6 gather their leaves, then 4 gathers 2 and 6, then 0 gathers 4), ranks in
    order and children in down[] order; the broadcast by depth (0 to 4, 4 to 2 and 6, 2 and 6 to their leaves)."""
    assert nccl_tree_all_reduce(2, 10, 4).table.tolist() == [[0, 1, 0, 0, ADD], [1, 0, 1, 0, COPY]]
    eight = nccl_tree_all_reduce(8, 10, 4)
    assert eight.n_steps == 6 and [tuple(r) for r in eight.table.tolist()] == [
        (0, 1, 2, 0, ADD), (0, 3, 2, 0, ADD), (0, 5, 6, 0, ADD), (0, 7, 6, 0, ADD),
        (1, 2, 4, 0, ADD), (1, 6, 4, 0, ADD), (2, 4, 0, 0, ADD),
        (3, 0, 4, 0, COPY), (4, 4, 2, 0, COPY), (4, 4, 6, 0, COPY),
        (5, 2, 1, 0, COPY), (5, 2, 3, 0, COPY), (5, 6, 5, 0, COPY), (5, 6, 7, 0, COPY)]
    assert nccl_tree_all_reduce(1, 10, 4).table.size == 0  # one rank: nothing to send
    assert nccl_tree_all_reduce(4, 0, 4).table.size == 0 and nccl_tree_all_reduce(4, 0, 4).n_steps == 0


def test_nccl_tree_schedule_states_its_contract():
    """The schedule is named for the order, starts from every rank's own buffer ("all") and ends with the sum
    everywhere ("reduced-all"), stages nothing within a step (no exchange), and carries NCCL's own cut."""
    s = nccl_tree_all_reduce(5, 2 * 131072 + 5, 4)
    assert (s.name, s.n_ranks, s.initial, s.final, s.exchange) == (
        "nccl_tree_all_reduce", 5, "all", "reduced-all", False)
    assert s.partition[0] == 0 and s.partition[-1] == 2 * 131072 + 5 and len(s.partition) == s.n_chunks + 1


def test_nccl_tree_all_reduce_sums_integers_exactly_on_every_count():
    """Integer blocks sum exactly in any order: on 1..20 ranks, one channel's worth and a buffer cut over both
    trees, every rank ends with the column sums."""
    for n in range(1, 21):
        for numel in (13, 2 * 131072 + 5):
            x = np.random.default_rng(n).integers(-1000, 1000, size=(n, numel), dtype=np.int32)
            got = ringemu.all_reduce(x.copy(), algorithm="nccl:tree")
            np.testing.assert_array_equal(got, np.broadcast_to(x.sum(axis=0, dtype=np.int32), x.shape))


def test_nccl_tree_formula_typed_from_its_docstring():
    """2⌈log2 N⌉(α + S·β) (the textbook binary-tree reduce then broadcast): 0 on 1 rank, depth 1, 2, 3, 3, 4 on
    2, 4, 5, 8, 9 ranks."""
    a, b, s = Fraction(7), Fraction(1, 3), 8192
    for n, depth in ((1, 0), (2, 1), (4, 2), (5, 3), (8, 3), (9, 4)):
        assert cost("all-reduce", "nccl:tree", n, s, a, b) == 2 * depth * (a + s * b), n
