"""NCCL's tree all-reduce (``nccl:tree``, modelled from NVIDIA/nccl v2.30.7: ``src/graph/trees.cc`` ncclGetBtree and
ncclGetDtree, ``src/device/all_reduce.h`` runTreeSplit), worked by hand: NCCL needs a GPU per rank and does not
run here, so these trees and schedules, derived from the source on paper, are the only pin the order has.

Also NCCL's ring all-reduce (``nccl:ring``, Simple protocol), worked by hand the same way: the channel split
(``scheduleCollTasksToPlan``, src/enqueue.cc:576-720: 32 KiB MinTrafficPerChannel, 16 KiB cells, lo / mid / hi
channels and the overflow branch), the loops of N chunks per channel and the last loop's 16-byte alignment
(``runRing``, src/device/all_reduce.h:14-83, chunk 2 MiB aligned down to the 512 B grain, src/enqueue.cc:2222-2225),
and the chunk each ring position sends at each of the 2(N-1) steps of a loop."""
import signal
from fractions import Fraction

import numpy as np
import pytest

import ringemu
from ringemu.algorithms import cost
from ringemu.algorithms.nccl_ring import nccl_channel_parts, nccl_ring_all_reduce
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


# -- NCCL's ring all-reduce (src/enqueue.cc scheduleCollTasksToPlan, src/device/all_reduce.h runRing), by hand -----
A, C = ADD, COPY


@pytest.mark.parametrize("numel, itemsize, n_channels, parts", [
    (10, 4, 1, [(0, 0, 10)]),  # one channel: every cell goes to "lo"
    (0, 4, 1, [(1, 0, 0)]),  # no cell: cellsLo == 0, so channelId += 1 (the "least channel skipped" branch)
    # 1,048,596 B: traffic 2,097,192, per channel divUp(1,048,596, 16)·16 = 1,048,608, 65 cells of 32 KiB traffic,
    # cellsPerChannel = lo = divUp(1,048,608, 32,768) = 33, mid 32 // 33 = 0, hi 32; 4,091 elements of padding
    (262149, 4, 2, [(0, 0, 135168), (1, 135168, 126981)]),
    # int8, 3 cells: per channel divUp(98,294 // 3, 16)·16 = 32,768, so 1 cell each: lo 1, mid 2, hi 0, and
    # hi == 0 turns the last mid into hi (lo, mid, hi = 1, 1, 1); the last loses 5 of padding
    (49147, 1, 3, [(0, 0, 16384), (1, 16384, 16384), (2, 32768, 16379)]),
    # int8, 5 cells: per channel divUp(163,840 // 3, 16)·16 = 54,624 -> 2 cells; lo 2, mid 3 // 2 = 1, hi 1
    (81920, 1, 3, [(0, 0, 32768), (1, 32768, 32768), (2, 65536, 16384)]),
    # 4 MiB fp32, 256 cells: per channel divUp(8,388,608 // 3, 16)·16 = 2,796,208 -> 86 cells; lo 86, mid 1, hi 84
    (1 << 20, 4, 3, [(0, 0, 352256), (1, 352256, 352256), (2, 704512, 344064)]),
    # overflow (enqueue.cc "Overflowed available channels"): int8, 5 cells, per channel 131,074 // 4 = 32,768 ->
    # 1 cell; lo 1, mid 4, hi 0 wants 5 > 4 channels: mid = 4 - 2 = 2, cellsPerChannel = 4 // 3 = 1,
    # hi = 1 + 4 % 3 = 2; the last loses 16,383 of padding
    (65537, 1, 4, [(0, 0, 16384), (1, 16384, 16384), (2, 32768, 16384), (3, 49152, 16385)]),
    # overflow: int8, 9 cells, per channel 262,146 // 4 = 65,536 -> 2 cells; lo 2, mid 3, hi 1 wants 5 > 4:
    # mid = 2, cellsPerChannel = 7 // 3 = 2, hi = 2 + 7 % 3 = 3; the last loses 16,383 of padding
    (131073, 1, 4, [(0, 0, 32768), (1, 32768, 32768), (2, 65536, 32768), (3, 98304, 32769)]),
])
def test_nccl_channel_parts_follow_schedule_coll_tasks_to_plan_by_hand(numel, itemsize, n_channels, parts):
    """scheduleCollTasksToPlan (enqueue.cc:576-720), all-reduce trafficPerByte 2: traffic max(32 KiB, 2·S),
    cells of 16 KiB, lo / mid / hi channels, the overflow branch, and the last cell's padding off the last."""
    assert nccl_channel_parts(numel, itemsize, n_channels) == parts


RING_3 = [(0, 0, 1, 2, A), (0, 1, 2, 0, A), (0, 2, 0, 1, A), (1, 0, 1, 1, A), (1, 1, 2, 2, A), (1, 2, 0, 0, A),
          (2, 0, 1, 0, C), (2, 1, 2, 1, C), (2, 2, 0, 2, C), (3, 0, 1, 2, C), (3, 1, 2, 0, C), (3, 2, 0, 1, C)]
# 4 ranks, 5 fp32: chunkCount alignUp(divUp(5, 4), 4) = 4, so chunks [0, 4), [4, 5) and two empty ones (nelem <= 0)
RING_4_EMPTY = [(0, 1, 2, 0, A), (0, 2, 3, 1, A), (1, 2, 3, 0, A), (1, 3, 0, 1, A), (2, 0, 1, 1, A), (2, 3, 0, 0, A),
                (3, 0, 1, 0, C), (3, 1, 2, 1, C), (4, 1, 2, 0, C), (4, 2, 3, 1, C), (5, 2, 3, 0, C), (5, 3, 0, 1, C)]


@pytest.mark.parametrize("n, numel, partition, table", [
    (3, 10, (0, 4, 8, 10), RING_3),  # chunkCount alignUp(divUp(10, 3), 4) = 4
    (4, 5, (0, 4, 5, 5, 5), RING_4_EMPTY),
])
def test_nccl_ring_all_reduce_steps_worked_by_hand_from_run_ring(n, numel, partition, table):
    """runRing: at step k < N-1 position p sends chunk p-1-k (recvReduceSend, an add at p+1), at k = N-1 its own
    chunk p reduced, then chunk p-(k-N+1) (copies); a chunk of no element (nelem <= 0) sends nothing."""
    s = nccl_ring_all_reduce(n, numel, 4)
    assert s.partition == partition and s.n_chunks == len(partition) - 1 and s.n_steps == 2 * (n - 1)
    assert [tuple(r) for r in s.table.tolist()] == table


def _bounded(seconds, fn, *args, **kwargs):
    """fn(*args, **kwargs), failing (TimeoutError) instead of hanging if it runs past ``seconds``."""
    def stop(*_):
        raise TimeoutError(f"{fn.__name__} ran past {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_nccl_ring_all_reduce_runs_a_channel_in_loops_of_n_chunks():
    """runRing's loop: elemOffset steps by N·chunkCount with chunkCount = 1000 B aligned down to 512 B = 128 fp32;
    600 elements on 2 ranks are two full loops [0, 256), [256, 512) and a last one of alignUp(divUp(88, 2), 4) =
    44; loop l takes steps 2l, 2l + 1. A channel of exactly N chunks is one loop, an empty buffer none."""
    s = _bounded(2, nccl_ring_all_reduce, 2, 600, 4, chunk_bytes=1000)
    assert s.partition == (0, 128, 256, 384, 512, 556, 600) and s.n_steps == 6
    assert [tuple(r) for r in s.table.tolist()] == [
        (0, 0, 1, 1, A), (0, 1, 0, 0, A), (1, 0, 1, 0, C), (1, 1, 0, 1, C),
        (2, 0, 1, 3, A), (2, 1, 0, 2, A), (3, 0, 1, 2, C), (3, 1, 0, 3, C),
        (4, 0, 1, 5, A), (4, 1, 0, 4, A), (5, 0, 1, 4, C), (5, 1, 0, 5, C)]
    exact = _bounded(2, nccl_ring_all_reduce, 2, 256, 4, chunk_bytes=512)
    assert exact.partition == (0, 128, 256) and exact.n_steps == 2
    empty = nccl_ring_all_reduce(3, 0, 4)
    assert empty.partition == (0, 0) and empty.n_steps == 0 and empty.table.size == 0


def test_nccl_ring_all_reduce_channels_share_steps_and_default_to_one():
    """8,192 fp32 (2 cells) on 2 channels: lo 1 cell, hi 1 cell (enqueue.cc), each one loop of 2 chunks of
    alignUp(divUp(4,096, 2), 4) = 2,048; loop 0 of both channels runs in steps 0 and 1, channel 0 first. The
    default is one channel: the whole buffer is one loop."""
    two = nccl_ring_all_reduce(2, 8192, 4, n_channels=2)
    assert two.partition == (0, 2048, 4096, 6144, 8192) and two.n_steps == 2
    assert [tuple(r) for r in two.table.tolist()] == [
        (0, 0, 1, 1, A), (0, 1, 0, 0, A), (0, 0, 1, 3, A), (0, 1, 0, 2, A),
        (1, 0, 1, 0, C), (1, 1, 0, 1, C), (1, 0, 1, 2, C), (1, 1, 0, 3, C)]
    assert nccl_ring_all_reduce(2, 8192, 4).partition == (0, 4096, 8192)


@pytest.mark.parametrize("n, numel, itemsize, chunk_bytes, partition", [
    (2, 34, 1, 1 << 21, (0, 32, 34)),  # int8: alignUp(17, 16 / 1) = 32
    (3, 20, 1, 1 << 21, (0, 16, 20, 20)),  # alignUp(7, 16) = 16: the third chunk is empty
    (2, 7, 16, 1 << 21, (0, 4, 7)),  # a 16-byte element: alignUp(4, 16 / 16 = 1) = 4
    (2, 42, 3, 1 << 21, (0, 25, 42)),  # a 3-byte element: integer 16 / 3 = 5, alignUp(21, 5) = 25
    (2, 682, 3, 1024, (0, 341, 682)),  # chunkCount 1024 / 3 = 341 (integer); remCount 682 = 2·341 is a full loop
])
def test_nccl_ring_last_loop_aligns_to_16_bytes_in_integers(n, numel, itemsize, chunk_bytes, partition):
    """runRing: the last, partial loop uses alignUp(divUp(rem, N), 16 / sizeof(T)) (at least 1), a full loop
    (remCount >= loopCount) keeps chunkCount = chunkSize / sizeof(T); all integer divisions, as in C."""
    assert nccl_ring_all_reduce(n, numel, itemsize, chunk_bytes=chunk_bytes).partition == partition


@pytest.mark.parametrize("kwargs, message", [
    ({"chunk_bytes": 100}, r"^chunk_bytes must be an integer >= 512 \(the Simple protocol's grain\), got 100$"),
    ({"chunk_bytes": 1023, "itemsize": 1024}, r"^itemsize must be an integer >= 1 and <= 512 \(one element must fit"),
    ({"itemsize": 0}, r"^itemsize must be an integer >= 1"),
    ({"n_channels": 0}, r"^n_channels must be an integer >= 1, got 0$"),
])
def test_nccl_ring_refuses_a_chunk_that_holds_no_element_instead_of_looping_forever(kwargs, message):
    """A chunk aligned down to the 512 B grain must hold one element, or runRing's loop would never advance (it
    hung before this check): a ValueError saying what is allowed, within the guard's 2 s."""
    args = {"itemsize": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        _bounded(2, nccl_ring_all_reduce, 2, 10, **args)
