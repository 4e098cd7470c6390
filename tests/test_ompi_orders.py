"""Open MPI 5.0's orders (``ompi:*``): postconditions, one result in every kernel mode, and bytes that are the
chunk lengths each rank sends. Bits against the running engine: benchmarks/engines/ompi.py (tests/test_engines.py).
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ringemu
from ringemu import algorithms
from ringemu.ledger import CommLedger
from ringemu.provenance import check_provenance
from ringemu.virtual import VirtualBuffer

OMPI = sorted(key for key in algorithms.REGISTRY if key[1].startswith("ompi:"))
FUNCTIONS = {"all-reduce": ringemu.all_reduce, "reduce-scatter": ringemu.reduce_scatter,
             "all-gather": ringemu.all_gather}


def _entries(n):
    return [k for k in OMPI if algorithms.REGISTRY[k].unsupported(n) is None]


def _run(collective, name, world, mode, ledger=None):
    n, numel = world.shape
    if collective == "all-gather":
        lay = ringemu.ChunkLayout(numel, n)
        shards = [world[r][lay.payload_slice(r)].copy() for r in range(n)]
        return np.asarray(ringemu.all_gather(shards, algorithm=name, mode=mode, ledger=ledger))
    out = FUNCTIONS[collective](world.copy(), algorithm=name, mode=mode, ledger=ledger)
    return out if collective == "all-reduce" else np.concatenate([np.asarray(s) for s in out])


@st.composite
def cases(draw):
    n = draw(st.integers(1, 16), label="n")
    collective, name = draw(st.sampled_from(_entries(n)), label="entry")
    numel = draw(st.one_of(st.integers(0, 3 * n + 2), st.integers(0, 400)), label="numel")
    dtype = draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    return collective, name, n, numel, dtype


@given(cases())
def test_every_entry_proves_its_postcondition(case):
    # the symbolic run: every rank ends with what the collective promises, no contribution added twice
    collective, name, n, numel, dtype = case
    check_provenance(algorithms.build(collective, n, name, numel=numel, itemsize=np.dtype(dtype).itemsize))


@given(cases(), st.integers(0, 2 ** 32 - 1))
def test_fused_step_and_reference_modes_give_the_same_bits(case, seed):
    collective, name, n, numel, dtype = case
    world = np.random.default_rng(seed).standard_normal((n, numel)).astype(dtype)
    results = [_run(collective, name, world, mode) for mode in ("fused", "step", "reference")]
    assert results[0].tobytes() == results[1].tobytes() == results[2].tobytes()


@given(cases())
def test_the_ledgers_bytes_per_rank_are_the_chunk_lengths_each_rank_sends(case):
    # expected: from the schedule's table and partition, summed here row by row (not by the ledger's code)
    collective, name, n, numel, dtype = case
    itemsize = np.dtype(dtype).itemsize
    schedule = algorithms.build(collective, n, name, numel=numel, itemsize=itemsize)
    bounds = schedule.partition or (0,) * (schedule.n_chunks + 1)  # S = 0: the textbook layout of empty chunks
    sent = [0] * n
    received = [0] * n
    for _, src, dst, chunk, _ in schedule.table.tolist():
        sent[src] += (bounds[chunk + 1] - bounds[chunk]) * itemsize
        received[dst] += (bounds[chunk + 1] - bounds[chunk]) * itemsize
    ledger = CommLedger()
    FUNCTIONS[collective](VirtualBuffer((n, numel), dtype), algorithm=name, ledger=ledger)
    assert [t.sent.bytes for t in ledger.per_rank()] == sent
    assert [t.received.bytes for t in ledger.per_rank()] == received
    assert ledger.total().padding_bytes == 0


def test_the_ring_cuts_blocks_early_long():
    # Open MPI's COLL_BASE_COMPUTE_BLOCKCOUNT: the first S mod N blocks one element longer (examples from the
    # engine's source, checked against mpirun in benchmarks/engines/ompi.py); the textbook cut would be 3, 3, 3, 1
    sizes = {(4, 10): [3, 3, 2, 2], (4, 997): [250, 249, 249, 249], (6, 997): [167, 166, 166, 166, 166, 166]}
    for (n, numel), want in sizes.items():
        bounds = algorithms.build("all-reduce", n, "ompi:ring", numel=numel, itemsize=4).partition
        assert list(np.diff(bounds)) == want


def test_count_below_n_falls_back_as_the_engine_does():
    # coll_base_allreduce.c: ring with count < N runs recursive doubling; Rabenseifner with count < pof2 basic linear
    ring = algorithms.build("all-reduce", 5, "ompi:ring", numel=4, itemsize=4)
    rd = algorithms.build("all-reduce", 5, "ompi:recursive-doubling", numel=4, itemsize=4)
    assert np.array_equal(ring.table, rd.table)
    rab = algorithms.build("all-reduce", 8, "ompi:rabenseifner", numel=7, itemsize=4)
    linear = algorithms.build("all-reduce", 8, "ompi:basic-linear", numel=7, itemsize=4)
    assert np.array_equal(rab.table, linear.table)


def test_a_billion_elements_are_counted_from_bounds_alone():
    # rank r of Open MPI's ring sends every block but b_{r+1} (reduce-scatter) and every block but b_{r+2}
    # (all-gather); block sizes by COLL_BASE_COMPUTE_BLOCKCOUNT, computed here by hand
    n, numel = 16, 10 ** 9 + 7
    early, split = numel // n + 1, numel % n
    size = [early if b < split else early - 1 for b in range(n)]
    ledger = CommLedger()
    ringemu.all_reduce(VirtualBuffer((n, numel), "fp32"), algorithm="ompi:ring", ledger=ledger)
    want = [4 * (2 * numel - size[(r + 1) % n] - size[(r + 2) % n]) for r in range(n)]
    assert [t.sent.bytes for t in ledger.per_rank()] == want


def test_default_follows_the_fixed_rules():
    # coll_tuned_decision_fixed.c, all-reduce on 4 <= N < 8: < 16 B ring, < 8192 B recursive doubling, else
    # Rabenseifner (thresholds typed from the source)
    for numel, want in ((3, "ompi:ring"), (4, "ompi:recursive-doubling"), (2047, "ompi:recursive-doubling"),
                        (2048, "ompi:rabenseifner")):
        got = algorithms.build("all-reduce", 6, "ompi:default", numel=numel, itemsize=4)
        assert np.array_equal(got.table, algorithms.build("all-reduce", 6, want, numel=numel, itemsize=4).table)


@given(st.integers(1, 16), st.integers(0, 300), st.integers(0, 2 ** 32 - 1))
def test_recursive_doubling_is_the_plain_entrys_order(n, numel, seed):
    # both fold even ranks 2i < 2(N - p) into 2i + 1 and exchange whole vectors (coll_base_allreduce.c; MPICH's
    # standard reduction in the plain entry): the same adds, so the same bits
    world = np.random.default_rng(seed).standard_normal((n, numel)).astype(np.float32)
    plain = ringemu.all_reduce(world.copy(), algorithm="recursive-doubling")
    assert ringemu.all_reduce(world.copy(), algorithm="ompi:recursive-doubling").tobytes() == plain.tobytes()


def test_nonoverlapping_formula_typed_from_its_docstring():
    """ompi:nonoverlapping's α-β formula, 2·⌈log2 N⌉·(α + S·β) (a binomial reduce then a binomial broadcast,
    Thakur, Rabenseifner & Gropp 2005, §4.2 and §4.5): ⌈log2 N⌉ = 0, 1, 2, 3, 3, 4 on 1, 2, 4, 5, 8, 9 ranks."""
    from fractions import Fraction
    a, b, s = Fraction(7), Fraction(1, 3), 8192
    for n, log in ((1, 0), (2, 1), (4, 2), (5, 3), (8, 3), (9, 4)):
        assert algorithms.cost("all-reduce", "ompi:nonoverlapping", n, s, a, b) == 2 * log * (a + s * b), n


def test_small_buffers_fall_back_as_coll_base_allreduce_does():
    """ompi/mca/coll/base/coll_base_allreduce.c: the ring and the segmented ring switch to recursive doubling when
    count < comm_size, Rabenseifner (allreduce_intra_redscat_allgather) to the basic linear all-reduce when count <
    nprocs_pof2; at the threshold itself they run as named. Checked on 2..9 ranks by the schedule's name."""
    from ringemu.algorithms import build
    for n in range(2, 10):
        pof2 = 1 << (n.bit_length() - 1)
        for entry in ("ompi:ring", "ompi:segmented-ring"):
            assert build("all-reduce", n, entry, numel=n - 1, itemsize=4).name == "ompi_recursive_doubling_all_reduce"
            assert build("all-reduce", n, entry, numel=n, itemsize=4).name == "ompi_ring_all_reduce"
        assert build("all-reduce", n, "ompi:rabenseifner", numel=pof2 - 1, itemsize=4).name == \
            "ompi_basic_linear_all_reduce"
        assert build("all-reduce", n, "ompi:rabenseifner", numel=pof2, itemsize=4).name == "ompi_rabenseifner_all_reduce"


# coll_tuned_decision_fixed.c (v5.0.10), ompi_coll_tuned_reduce_intra_dec_fixed, commutative branch, typed from the
# source: (N, total_dsize) -> algorithm id on each side of every bound (1 linear, 2 chain, 3 pipeline, 4 binary,
# 5 binomial; 7 with too few elements falls back to linear)
_REDUCE_RULES = [
    (3, 8, 4), (3, 15, 4), (3, 16, 3), (3, 31, 3), (3, 32, 1), (3, 262143, 1), (3, 262144, 3), (3, 524287, 3),
    (3, 524288, 2), (3, 1048575, 2), (3, 1048576, 3), (2, 4096, 1),
    (5, 4095, 4), (5, 4096, 2), (5, 65535, 2), (5, 65536, 5), (5, 262143, 5), (5, 262144, 1), (5, 524287, 1),
    (5, 524288, 5), (5, 1048575, 5), (5, 1048576, 1), (7, 10 ** 7, 1),
    (8, 8191, 4), (8, 8192, 5), (15, 10 ** 6, 5), (16, 4095, 4), (16, 4096, 5), (31, 4095, 4), (31, 4096, 5),
]


def test_reduce_decision_follows_the_fixed_rules_on_each_side_of_every_bound():
    """reduce_algorithm(N, bytes, count) is the id the table above (typed from the engine's source) gives."""
    from ringemu.algorithms.ompi_reduce import reduce_algorithm
    for n, nbytes, want in _REDUCE_RULES:
        assert reduce_algorithm(n, nbytes, nbytes // 4) == want, (n, nbytes)


def test_reduce_scatter_gather_choice_falls_back_to_linear_only_below_pof2_elements():
    """coll_base_reduce.c, ompi_coll_base_reduce_intra_redscat_gather: nprocs_pof2 < 2 or count < nprocs_pof2 runs
    basic linear (1); otherwise the reduce-scatter-gather itself runs, which is not modelled (refused)."""
    from ringemu.algorithms.ompi_reduce import reduce_algorithm
    assert [reduce_algorithm(n, 4, 1) for n in (1, 2, 3)] == [1, 1, 1]  # count 1 < pof2 = 2 (N = 1: pof2 = 1)
    assert reduce_algorithm(1, 6, 3) == 1
    for n, nbytes, count in ((2, 4, 2), (3, 6, 3), (3, 7, 7)):  # count >= pof2 = 2
        with pytest.raises(ValueError, match="reduce-scatter-gather reduce .* is not modelled"):
            reduce_algorithm(n, nbytes, count)


def test_reduce_decision_refuses_32_ranks_and_more():
    """The commutative fixed rules are transcribed for N < 32 only (ompi_reduce.MAX_RANKS, module doc)."""
    from ringemu.algorithms.ompi_reduce import reduce_algorithm, tree_children
    for n in (32, 33):
        with pytest.raises(ValueError, match=f"modelled for n_ranks < 32; got {n}"):
            reduce_algorithm(n, 8192, 2048)
    with pytest.raises(AssertionError, match="no tree for reduce algorithm 1"):
        tree_children(1, 4)  # linear is no tree (reduce_to_root runs it itself)


def test_all_gather_default_reads_one_blocks_bytes_and_runs_two_procs_on_two_ranks():
    """coll_tuned_decision_fixed.c, ompi_coll_tuned_allgather_intra_dec_fixed: total_dsize = dsize·scount (one
    block); N == 2: 6 (two procs); 32 <= N < 64: < 1024 B recursive doubling (3), else neighbor exchange (5)."""
    from ringemu.algorithms.ompi_decision import default_choice
    assert [default_choice("all-gather", 2, b) for b in (0, 4, 10 ** 7)] == [6, 6, 6]
    for numel, want in ((32 * 255, "ompi:recursive-doubling"), (32 * 256, "ompi:neighbor-exchange")):  # 1020, 1024 B
        got = algorithms.build("all-gather", 32, "ompi:default", numel=numel, itemsize=4)
        assert np.array_equal(got.table, algorithms.build("all-gather", 32, want, numel=numel, itemsize=4).table)


def test_all_gather_schedules_are_named_after_the_order_they_run():
    """Each Open MPI all-gather names its order exactly (what `ringemu trace` shows): ompi_<order>_all_gather, the
    registry's name with '_' for '-'; a fallback names the order that ran (coll_base_allgather.c: recursive
    doubling on N not a power of two runs Bruck, neighbor exchange on odd N the ring)."""
    for order in ("ring", "bruck", "recursive-doubling", "neighbor-exchange"):
        s = algorithms.build("all-gather", 4, f"ompi:{order}", numel=8, itemsize=4)
        assert s.name == f"ompi_{order.replace('-', '_')}_all_gather"
    assert algorithms.build("all-gather", 3, "ompi:recursive-doubling", numel=6, itemsize=4).name == \
        "ompi_bruck_all_gather"
    assert algorithms.build("all-gather", 5, "ompi:neighbor-exchange", numel=5, itemsize=4).name == \
        "ompi_ring_all_gather"
    from ringemu.algorithms.ompi_allgather import ompi_ag_two_procs
    assert ompi_ag_two_procs(2, numel=4).name == "ompi_two_procs_all_gather"


def test_default_orders_take_fp32_when_no_itemsize_is_given():
    """Every ompi_default_* builder's itemsize defaults to 4 B (fp32): at sizes where 4 B and 5 B elements fall on
    either side of a fixed-rule bound (coll_tuned_decision_fixed.c: N < 4 all-reduce 4096 B, reduce-scatter
    65536 B; 32 <= N < 64 all-gather 1024 B a block) the default is the 4 B choice."""
    from ringemu.algorithms import ompi_decision as d
    for builder, n, numel in ((d.ompi_default_all_reduce, 3, 1000), (d.ompi_default_reduce_scatter, 3, 15000),
                              (d.ompi_default_all_gather, 32, 32 * 255)):
        four, five = builder(n, numel=numel, itemsize=4), builder(n, numel=numel, itemsize=5)
        assert not np.array_equal(four.table, five.table) or four.n_steps != five.n_steps  # the bound is crossed
        assert np.array_equal(builder(n, numel=numel).table, four.table)


def test_default_on_two_ranks_is_the_rules_choice_not_the_one_rank_case():
    """N = 2, 400 B: all-reduce's first row (N < 4) gives recursive doubling (3) from 8 B to 4096 B; 4 B: ring (4).
    The default builds that order and names itself ompi_default_all_reduce; on one rank it sends nothing."""
    for numel, order in ((100, "ompi:recursive-doubling"), (1, "ompi:ring")):
        got = algorithms.build("all-reduce", 2, "ompi:default", numel=numel, itemsize=4)
        want = algorithms.build("all-reduce", 2, order, numel=numel, itemsize=4)
        assert got.name == "ompi_default_all_reduce" and np.array_equal(got.table, want.table), order
    for collective in ("all-reduce", "reduce-scatter", "all-gather"):
        one = algorithms.build(collective, 1, "ompi:default", numel=10, itemsize=4)
        assert one.n_steps == 0 and one.name == f"ompi_default_{collective.replace('-', '_')}"


def test_default_builds_its_choice_with_the_same_numel_and_itemsize():
    """ompi:default is the chosen entry called with the caller's numel and itemsize: on an empty buffer the chosen
    nonoverlapping reduce-scatter's pattern (one element per block, its reduce picked by those bytes) depends on
    the itemsize, so 1000 B elements must reach it (N = 5, the rule for N < 8 below 8 B)."""
    for itemsize in (1, 4, 1000):
        got = algorithms.build("reduce-scatter", 5, "ompi:default", numel=0, itemsize=itemsize)
        want = algorithms.build("reduce-scatter", 5, "ompi:nonoverlapping", numel=0, itemsize=itemsize)
        assert np.array_equal(got.table, want.table), itemsize


def test_default_costs_nothing_on_one_rank_and_reads_one_block_for_all_gather():
    """One rank: no message, cost 0. All-gather's rule reads one block, S/N bytes (module doc): N = 32, S = 32000 B
    is 1000 B a block, recursive doubling (< 1024 B): 5α + 31/32·S·β, not neighbor exchange's 16α + ..."""
    for collective in ("all-reduce", "reduce-scatter", "all-gather"):
        assert algorithms.cost(collective, "ompi:default", 1, 4096, 1, 1) == 0
    assert algorithms.cost("all-gather", "ompi:default", 32, 32000, 1, 0) == 5
    assert algorithms.cost("all-gather", "ompi:default", 32, 32 * 1024, 1, 0) == 16


def test_default_is_refused_from_the_first_n_whose_rules_pick_nonoverlapping():
    """all-reduce picks nonoverlapping (2) from N = 128 (N < 256 below 131072 B), reduce-scatter (1) from N = 32
    (N < 64 below 64 B); its reduce is modelled for N < 32 only, so the default is refused from there on."""
    reason = "the nonoverlapping choice's reduce (tuned's reduce decision) is modelled for N < 32"
    for collective, first in (("all-reduce", 128), ("reduce-scatter", 32)):
        unsupported = algorithms.REGISTRY[(collective, "ompi:default")].unsupported
        assert unsupported(first - 1) is None and unsupported(first) == reason and unsupported(4096) == reason
    assert algorithms.REGISTRY[("all-gather", "ompi:default")].unsupported(4096) is None


def test_nonoverlapping_reduce_scatter_takes_fp32_when_no_itemsize_is_given():
    """Its reduce is picked by N and S·itemsize bytes (coll_tuned_decision_fixed.c, commutative reduce: N = 5 runs
    binary below 4096 B, chain from 4096 B): 1000 elements are 4000 B in fp32 but 5000 B at 5 B each, so the
    default itemsize, 4 B, shows in the tree."""
    from ringemu.algorithms.ompi_reduce_scatter import ompi_rs_nonoverlapping
    four, five = (ompi_rs_nonoverlapping(5, numel=1000, itemsize=k) for k in (4, 5))
    assert not np.array_equal(four.table, five.table)
    assert np.array_equal(ompi_rs_nonoverlapping(5, numel=1000).table, four.table)


def test_rabenseifner_checks_the_count_before_the_rank_count():
    """coll_base_allreduce.c v5.0.10, ompi_coll_base_allreduce_intra_redscat_allgather (line 991): count <
    nprocs_pof2 runs basic linear before anything else, so one rank (pof2 = 1) with count 0 falls back too, and with
    count 1 runs Rabenseifner's code, which sends nothing."""
    empty = algorithms.build("all-reduce", 1, "ompi:rabenseifner", numel=0, itemsize=4)
    one = algorithms.build("all-reduce", 1, "ompi:rabenseifner", numel=1, itemsize=4)
    assert (empty.name, empty.n_steps) == ("ompi_basic_linear_all_reduce", 0)
    assert (one.name, one.n_steps) == ("ompi_rabenseifner_all_reduce", 0)
