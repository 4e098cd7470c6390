"""MPICH 5.0's orders in the registry (``mpich:*``): properties of every entry for drawn N and S, and the orders
the MPICH source fixes, written out by hand. The entries against the running engine: test_engines.py
(benchmarks/engines/mpich.py)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ringemu
from ringemu import algorithms
from ringemu.execute import MODES
from ringemu.layout import ChunkLayout
from ringemu.ledger import CommLedger
from ringemu.provenance import check_provenance
from ringemu.virtual import VirtualBuffer

ENTRIES = [(c, name) for c in algorithms.COLLECTIVES for name in algorithms.names(c) if name.startswith("mpich:")]
_RUN = {"all-reduce": ringemu.all_reduce, "reduce-scatter": ringemu.reduce_scatter}


def _collective(collective, name, world, **kw):
    """The collective's per-rank results (all-gather: rank r brings its own shard of ``world``'s row r)."""
    if collective == "all-gather":
        layout = ChunkLayout(world.shape[1], world.shape[0])
        shards = [world[r, layout.payload_slice(r)].copy() for r in range(world.shape[0])]
        return list(ringemu.all_gather(shards, algorithm=name, **kw))
    return list(_RUN[collective](world, algorithm=name, **kw))


def _world(n, numel, dtype, seed):
    return np.random.default_rng(seed).standard_normal((n, numel)).astype(dtype)


def test_the_catalog_names_every_mpich_order_of_the_study():
    # the names of the study of MPICH 5.0.2's collectives (one per algorithm the engine's CVARs accept, + default)
    assert {name for c, name in ENTRIES if c == "all-reduce"} == {
        "mpich:ring", "mpich:recursive-doubling", "mpich:reduce-scatter-allgather", "mpich:tree", "mpich:default"}
    assert {name for c, name in ENTRIES if c == "reduce-scatter"} == {
        "mpich:recursive-halving", "mpich:pairwise", "mpich:noncommutative", "mpich:recursive-doubling",
        "mpich:default"}
    assert {name for c, name in ENTRIES if c == "all-gather"} == {
        "mpich:ring", "mpich:recursive-doubling", "mpich:brucks", "mpich:default"}
    for c, name in ENTRIES:
        entry = algorithms.algorithm(c, name)
        assert entry.modelled == "" and "MPICH 5.0.2" in entry.source and "MPICH" in entry.engines


@given(entry=st.sampled_from(ENTRIES), n=st.integers(1, 16), per_rank=st.integers(0, 40),
       itemsize=st.sampled_from([4, 8]), data=st.data())
def test_every_entry_proves_its_postcondition(entry, n, per_rank, itemsize, data):
    """Property: for any N <= 16 and S (a positive multiple of N for reduce-scatter and all-gather, as MPI's block
    collectives take, any S for all-reduce), the schedule leaves what its collective promises (provenance).
    S = 0 is left out for the sharded collectives: every block is then empty, and the shard map of empty chunks
    (ringemu.partition, an empty chunk belongs to the shard at its offset) puts them all in shard 0; no data moves."""
    collective, name = entry
    numel = data.draw(st.integers(0, 3 * n + 40)) if collective == "all-reduce" else n * max(1, per_rank)
    schedule = algorithms.build(collective, n, name, numel=numel, itemsize=itemsize)
    check_provenance(schedule)


@given(entry=st.sampled_from(ENTRIES), n=st.integers(1, 12), per_rank=st.integers(0, 9), extra=st.integers(0, 11),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2 ** 32 - 1))
def test_fused_step_and_reference_modes_give_the_same_bits(entry, n, per_rank, extra, dtype, seed):
    """Property: the three execution modes (fused kernel, one launch per step, the plain-Python reference) run
    the same additions in the same order, so every rank's result has the same bits."""
    collective, name = entry
    numel = n * per_rank + (extra % n if collective == "all-reduce" else 0)
    world = _world(n, numel, dtype, seed)
    results = [_collective(collective, name, world.copy(), mode=mode) for mode in MODES]
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@given(entry=st.sampled_from(ENTRIES), n=st.integers(1, 16), per_rank=st.integers(0, 50), extra=st.integers(0, 15),
       itemsize=st.sampled_from([4, 8]))
def test_ledger_bytes_per_rank_are_the_chunk_lengths_each_rank_sends(entry, n, per_rank, extra, itemsize):
    """Property: the ledger's bytes sent per rank equal the sum, over the schedule's rows from that rank, of the
    sent chunk's length in the engine's partition (read here straight from the table), times the element size:
    no padding is counted, and none is reported."""
    collective, name = entry
    numel = n * per_rank + (extra % n if collective == "all-reduce" else 0)
    dtype = {4: "float32", 8: "float64"}[itemsize]
    ledger = CommLedger()
    world = VirtualBuffer((n, numel), dtype)
    if collective == "all-gather":
        ringemu.all_gather(world, algorithm=name, ledger=ledger)
    else:
        _RUN[collective](world, algorithm=name, ledger=ledger)
    schedule = ledger.records[0].schedule
    bounds = schedule.partition or (0, numel)  # a whole-buffer order: its one chunk is the buffer
    lengths = np.diff(np.asarray(bounds, dtype=np.int64))
    want = np.zeros(n, dtype=np.int64)
    np.add.at(want, schedule.table[:, 1], lengths[schedule.table[:, 3]])
    per_rank_sent = [t.sent for t in ledger.per_rank()]
    assert [t.bytes for t in per_rank_sent] == (want * itemsize).tolist()
    assert all(t.padding_bytes == 0 for t in per_rank_sent)


@pytest.mark.parametrize("n, numel", [(7, 6), (12, 10007), (4, 10), (16, 10 ** 9)])
def test_the_ring_cuts_blocks_of_ceil_s_over_n_and_sends_them_unpadded(n, numel):
    # allreduce_intra_ring.c lines 37-52, as the MPICH study lists them: N = 7, S = 6 -> six blocks of 1 and one
    # empty; N = 12, S = 10007 -> eleven of 834 and one of 833. Rank r sends every block but r in the
    # reduce-scatter and every block but r + 1 in the all-gather: 2S - |r| - |r+1| elements (counted by hand).
    schedule = algorithms.build("all-reduce", n, "mpich:ring", numel=numel)
    size = -(-numel // n)
    blocks = [max(0, min(size, numel - c * size)) for c in range(n)]
    assert np.diff(schedule.partition).tolist() == blocks
    ledger = CommLedger()
    ringemu.all_reduce(VirtualBuffer((n, numel), "float32"), algorithm="mpich:ring", ledger=ledger)
    want = [4 * (2 * numel - blocks[r] - blocks[(r + 1) % n]) for r in range(n)]
    assert [t.sent.bytes for t in ledger.per_rank()] == want


def test_the_knomial_tree_adds_largest_subtree_first():
    # MPICH study, allreduce tree for N = 8: rank 0's sum is ((x0 + S(1..4)) + S(5,6)) + x7 with
    # S(1..4) = (x1 + (x2 + x3)) + x4 (children 0: [1, 5, 7], 1: [2, 4], 2: [3], 5: [6]); written out here.
    x = _world(8, 257, "float32", 3)
    s14 = (x[1] + (x[2] + x[3])) + x[4]
    want = ((x[0] + s14) + (x[5] + x[6])) + x[7]
    got = ringemu.all_reduce(x, algorithm="mpich:tree")
    assert all(row.tobytes() == want.tobytes() for row in got)


def test_pairwise_adds_the_other_ranks_in_decreasing_order():
    # reduce_scatter_block_intra_pairwise.c 59-106: acc = x_r[r]; for i = 1 .. N-1: acc = x_{r-i}[r] + acc
    n, k = 5, 7
    x = _world(n, n * k, "float32", 11)
    got = ringemu.reduce_scatter(x, algorithm="mpich:pairwise")
    for r in range(n):
        acc = x[r, r * k:(r + 1) * k].copy()
        for i in range(1, n):
            acc = x[(r - i) % n, r * k:(r + 1) * k] + acc
        assert got[r].tobytes() == acc.tobytes()


@pytest.mark.parametrize("n", [3, 5, 6, 8, 12])
def test_mpich_rabenseifner_adds_as_recursive_doubling_and_the_textbook_one_does_not(n):
    # The MPICH study's finding: halving from distance 1 meets the partial sums in recursive doubling's pairs, so
    # mpich:reduce-scatter-allgather has mpich:recursive-doubling's bits (and the ring's are equal to the ring's)
    x = _world(n, 1000, "float32", n)
    rd = ringemu.all_reduce(x, algorithm="mpich:recursive-doubling")
    assert ringemu.all_reduce(x, algorithm="mpich:reduce-scatter-allgather").tobytes() == rd.tobytes()
    assert ringemu.all_reduce(x, algorithm="recursive-doubling").tobytes() == rd.tobytes()
    assert ringemu.all_reduce(x, algorithm="mpich:ring").tobytes() == ringemu.all_reduce(x).tobytes()
    if n >= 4:  # from 4 ranks on the textbook halving (distance p/2 first) pairs the partial sums differently
        assert ringemu.all_reduce(x, algorithm="halving-doubling").tobytes() != rd.tobytes()


def test_fallbacks_follow_the_engine():
    # coll_algorithms.txt restrictions: reduce_scatter_allgather needs S >= pof2(N) (else recursive doubling);
    # noncommutative and recursive-doubling all-gather need N a power of two (else the automatic choice).
    short = algorithms.build("all-reduce", 12, "mpich:reduce-scatter-allgather", numel=7)
    assert short.n_chunks == 1 and short.name == "mpich_recursive_doubling_all_reduce"
    assert algorithms.build("all-reduce", 12, "mpich:reduce-scatter-allgather", numel=8).n_chunks == 8
    small, large = 5 * 26214, 5 * 26215  # 524,280 B and 524,300 B of fp32: either side of 512 KiB
    assert algorithms.build("reduce-scatter", 5, "mpich:noncommutative", numel=small, itemsize=4).name == \
        "mpich_recursive_halving_reduce_scatter"
    assert algorithms.build("reduce-scatter", 5, "mpich:noncommutative", numel=large, itemsize=4).name == \
        "mpich_pairwise_reduce_scatter"
    assert algorithms.build("all-gather", 6, "mpich:recursive-doubling", numel=6 * 3413, itemsize=4).name == \
        "mpich_brucks_all_gather"  # 81,912 B < 80 KiB
    assert algorithms.build("all-gather", 6, "mpich:recursive-doubling", numel=6 * 3414, itemsize=4).name == \
        "mpich_ring_all_gather"


def test_sized_entries_ask_for_the_buffer():
    with pytest.raises(ValueError, match="give numel="):
        algorithms.build("all-reduce", 4, "mpich:ring")
    with pytest.raises(ValueError, match="give itemsize="):
        algorithms.build("all-reduce", 4, "mpich:default", numel=10)


def test_tree_formula_typed_from_its_docstring():
    """mpich:tree's α-β formula, 2·⌈log2 N⌉·(α + S·β) (a binomial reduce to rank 0 then a broadcast of the whole
    buffer): ⌈log2 N⌉ = 0, 1, 2, 3, 3, 4 on 1, 2, 4, 5, 8, 9 ranks."""
    from fractions import Fraction
    a, b, s = Fraction(7), Fraction(1, 3), 8192
    for n, log in ((1, 0), (2, 1), (4, 2), (5, 3), (8, 3), (9, 4)):
        assert algorithms.cost("all-reduce", "mpich:tree", n, s, a, b) == 2 * log * (a + s * b), n


def _rows(schedule):
    """The schedule's rows as a sorted list of (step, src, dst, chunk, op)."""
    return sorted(tuple(int(v) for v in row) for row in schedule.table)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_brucks_receives_from_r_plus_pof2_and_only_the_remainder_at_the_last_step(n):
    """allgather_intra_brucks.c 58-90: while pof2 <= N/2 rank r receives pof2 blocks r+pof2 .. from r+pof2; then,
    for N not a power of two, N - pof2 blocks (not pof2) from r+pof2: N-1 blocks per rank in all, all copies."""
    from ringemu.schedule import COPY
    want, step, pof2 = [], 0, 1
    while pof2 <= n // 2:
        want += [(step, (r + pof2) % n, r, (r + pof2 + b) % n, COPY) for r in range(n) for b in range(pof2)]
        step, pof2 = step + 1, pof2 * 2
    want += [(step, (r + pof2) % n, r, (r + pof2 + b) % n, COPY) for r in range(n) for b in range(n - pof2)]
    schedule = algorithms.build("all-gather", n, "mpich:brucks", numel=3 * n)
    assert _rows(schedule) == sorted(want) and schedule.partition == tuple(range(0, 3 * n + 1, 3))
    ledger = CommLedger()
    ringemu.all_gather(VirtualBuffer((n, 3 * n), "float32"), algorithm="mpich:brucks", ledger=ledger)
    assert [t.sent.bytes for t in ledger.per_rank()] == [4 * 3 * (n - 1)] * n


@pytest.mark.parametrize("n, numel, want", [(4, 5, [32, 28, 32, 28]), (6, 5, [20, 52, 20, 48, 32, 28])])
def test_rabenseifner_lower_rank_keeps_the_lower_half_bytes_per_rank(n, numel, want):
    """allreduce_intra_reduce_scatter_allgather.c 129-239, worked by hand: cnts = [2, 1, 1, 1] for S = 5, p = 4;
    new rank j sends S - |H_j| + |H_j| - |Q_j| + |Q_j| + |H_j| = S + |H_j| elements, with H_j the half it keeps
    (newrank < newdst keeps the lower one: 3 elements for j = 0, 2; 2 for j = 1, 3); for N = 6 even ranks 0, 2 fold
    their S into 1, 3 and 1, 3 send the S back; fp32."""
    ledger = CommLedger()
    ringemu.all_reduce(VirtualBuffer((n, numel), "float32"), algorithm="mpich:reduce-scatter-allgather",
                       ledger=ledger)
    assert [t.sent.bytes for t in ledger.per_rank()] == want


def test_recursive_doubling_reduce_scatter_exchanges_with_r_xor_mask_on_nine_ranks():
    """reduce_scatter_block_intra_recursive_doubling.c 78-203 for N = 9: at mask 1, 2, 4 every rank r < 8 gets from
    dst = r ^ mask the blocks outside [dst_tree_root, dst_tree_root + mask) (rank 8 has no partner, and no rank of
    its subtree has data to forward); at mask 8 ranks 0 and 8 exchange and rank 0 forwards 8's blocks 0..7 to
    1..7, which the module doc models as sent by 8 itself."""
    from ringemu.schedule import ADD
    n, want = 9, []
    for i in range(3):
        mask = 1 << i
        for r in range(8):
            root = ((r ^ mask) >> i) << i
            want += [(i, r ^ mask, r, b, ADD) for b in range(n) if not root <= b < root + mask]
    want += [(3, 8, r, b, ADD) for r in range(8) for b in range(8)] + [(3, 0, 8, 8, ADD)]
    assert _rows(algorithms.build("reduce-scatter", n, "mpich:recursive-doubling", numel=2 * n)) == sorted(want)


def test_knomial_tree_children_follow_treeutil_for_k_2_and_3():
    """treeutil.c, MPII_Treeutil_tree_knomial_1_init, worked by hand: maxstep = number of base-k digits of N-1;
    a node found at step s gets children crank = r+1, += k^(maxstep-i-1) for i = s .. maxstep-1, j = 1 .. k-1."""
    from ringemu.algorithms.mpich_allreduce import knomial_tree
    assert knomial_tree(8) == [[1, 5, 7], [2, 4], [3], [], [], [6], [], []]
    assert knomial_tree(9, 3) == [[1, 4, 7, 8], [2, 3], [], [], [5, 6], [], [], [], []]
    assert knomial_tree(5, 3) == [[1, 4], [2, 3], [], [], []]


def test_the_exchange_flag_says_whether_a_rank_sends_a_chunk_it_receives_in_the_same_step():
    # Schedule.exchange (and _mpich._is_exchange's doc): True exactly when, in some step, some (rank, chunk) is
    # both a source and a destination; the oracle reads the rows directly (N = 1 moves nothing: left out)
    for c, name in ENTRIES:
        for n in range(2, 13):
            schedule = algorithms.build(c, n, name, numel=3 * n + 1 if c == "all-reduce" else 3 * n, itemsize=4)
            sent, received = set(), set()
            for step, src, dst, chunk, _ in schedule.table.tolist():
                sent.add((step, src, chunk))
                received.add((step, dst, chunk))
            assert schedule.exchange == bool(sent & received), (c, name, n)


def test_the_automatic_choices_switch_exactly_at_generic_json_thresholds():
    # maint/tuning/coll/mpir/generic.json (5.0.x): allreduce avg_msg_size<=8 or count<pow2 -> recursive doubling;
    # allgather comm_size=pow2 total_msg_size<524288 -> recursive doubling, comm_size=any total<81920 -> brucks
    def name(c, n, numel, itemsize=4):
        return algorithms.build(c, n, "mpich:default", numel=numel, itemsize=itemsize).name
    rd, rsag = "mpich_recursive_doubling_all_reduce", "mpich_rsag_all_reduce"
    assert name("all-reduce", 2, 2) == rd and name("all-reduce", 2, 1, 8) == rd  # 8 B, count >= pof2
    assert name("all-reduce", 2, 3) == rsag and name("all-reduce", 2, 4) == rsag  # 12 B, 16 B
    assert name("all-reduce", 4, 4) == rsag and name("all-reduce", 4, 3, 8) == rd  # count = pof2, count < pof2
    assert name("all-gather", 4, 131071) == "mpich_recursive_doubling_all_gather"  # 524,284 B
    assert name("all-gather", 4, 131072) == "mpich_ring_all_gather"  # 524,288 B
    assert name("all-gather", 5, 20479) == "mpich_brucks_all_gather"  # 81,916 B
    assert name("all-gather", 5, 20480) == "mpich_ring_all_gather"  # 81,920 B
    assert algorithms.build("all-gather", 5, "mpich:recursive-doubling", numel=20480, itemsize=4).name == \
        "mpich_ring_all_gather"


def test_the_whole_buffer_doubling_is_one_chunk_of_the_s_elements():
    """Recursive doubling swaps whole buffers (allreduce_intra_recursive_doubling.c 101-132): the automatic choice
    and the S < pof2 fallback cut S elements into one chunk, and say which S they were cut for."""
    defaults = [algorithms.build("all-reduce", n, "mpich:default", numel=s, itemsize=4) for n, s in ((2, 2), (5, 1))]
    fallbacks = [algorithms.build("all-reduce", n, "mpich:reduce-scatter-allgather", numel=s) for n, s in
                 ((12, 7), (5, 3), (8, 1))]
    for schedule, numel in zip(defaults + fallbacks, (2, 1, 7, 3, 1)):
        assert schedule.n_chunks == 1 and schedule.partition == (0, numel) and schedule.numel == numel


def test_the_rules_name_the_entries_they_choose():
    # _mpich's rules return the catalog name (less "mpich:") of the algorithm generic.json selects
    from ringemu.algorithms._mpich import all_gather_rule, allreduce_rule, reduce_scatter_rule
    assert [allreduce_rule(4, s, 4) for s in (2, 3, 4)] == ["recursive-doubling"] * 2 + ["reduce-scatter-allgather"]
    assert [reduce_scatter_rule(4, s, 4) for s in (131071, 131072)] == ["recursive-halving", "pairwise"]
    assert [all_gather_rule(6, s, 4) for s in (20479, 20480)] == ["brucks", "ring"]
    for c, rule in (("all-reduce", allreduce_rule), ("reduce-scatter", reduce_scatter_rule),
                    ("all-gather", all_gather_rule)):
        for n, s in ((4, 2), (4, 10 ** 6), (6, 100), (6, 10 ** 6)):
            assert "mpich:" + rule(n, s, 4) in algorithms.names(c)


def test_default_costs_switch_at_the_same_thresholds():
    """Thakur et al. 2005 §4 formulas (the entries' docstrings) at the thresholds, N = 4 or 5, α = 7, β = 1/3:
    all-reduce doubling 2(α+Sβ) up to 8 B, else 4α + 2·3/4·Sβ; reduce-scatter halving 2α + 3/4·Sβ below 512 KiB,
    else pairwise 3α + 3/4·Sβ; all-gather log 2α (N = 4) / 3α (N = 5) + (N-1)/N·Sβ below 512 KiB / 80 KiB, else
    the ring (N-1)α + (N-1)/N·Sβ."""
    from fractions import Fraction
    a, b = Fraction(7), Fraction(1, 3)

    def cost(c, n, s):
        return algorithms.cost(c, "mpich:default", n, s, a, b)
    assert cost("all-reduce", 4, 8) == 2 * (a + 8 * b)
    assert cost("all-reduce", 4, 9) == 4 * a + Fraction(3, 2) * 9 * b
    assert cost("reduce-scatter", 4, 524287) == 2 * a + Fraction(3, 4) * 524287 * b
    assert cost("reduce-scatter", 4, 524288) == 3 * a + Fraction(3, 4) * 524288 * b
    assert cost("all-gather", 4, 524287) == 2 * a + Fraction(3, 4) * 524287 * b
    assert cost("all-gather", 4, 524288) == 3 * a + Fraction(3, 4) * 524288 * b
    assert cost("all-gather", 5, 81919) == 3 * a + Fraction(4, 5) * 81919 * b
    assert cost("all-gather", 5, 81920) == 4 * a + Fraction(4, 5) * 81920 * b
