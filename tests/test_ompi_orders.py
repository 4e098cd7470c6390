"""Open MPI 5.0's orders (``ompi:*``): postconditions, one result in every kernel mode, and bytes that are the
chunk lengths each rank sends. Bits against the running engine: benchmarks/engines/ompi.py (tests/test_engines.py).
"""
import numpy as np
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
