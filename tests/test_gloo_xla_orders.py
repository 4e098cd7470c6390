"""gloo:ring, xla-cpu:in-process, nccl:ring and nccl:tree: the registry's orders of torch 2.13's gloo, XLA CPU and
NCCL 2.30.7 (modelled from source), without the engines.

Properties, for drawn N and buffer sizes: every entry proves its postcondition (check_provenance); the fused, step
and reference modes give the same bits; the ledger's bytes per rank are the chunk lengths each rank sends, read
from the schedule table independently; the sums equal formulas written here from the engines' sources (gloo: block
b is ``x[b] + (x[b+1] + (... + x[b-1]))``; XLA: ``((+0 + x0) + x1) + ...``, bf16 in fp32 rounded once). The live
engines are compared in benchmarks/engines/gloo.py and xla.py (tests/test_engines.py).
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringemu import collectives
from ringemu.algorithms import COLLECTIVES, REGISTRY, algorithm, build
from ringemu.dtypes import BFLOAT16
from ringemu.ledger import CommLedger
from ringemu.partition import layout_for
from ringemu.provenance import check_provenance
from ringemu.virtual import VirtualBuffer

ENTRIES = ("gloo:ring", "xla-cpu:in-process")  # nccl_ring and nccl_tree are not registered yet: built directly
KEYS = sorted(k for k in REGISTRY if k[1] in ENTRIES)  # (collective, name): NCCL's are all-reduce orders
FLOATS = (np.float32, np.float64, np.float16, BFLOAT16)


def _world(n, numel, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, numel)) * np.exp2(rng.integers(-8, 9, (n, numel)))).astype(dtype)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def _run(collective, world, name, mode="fused"):
    n, numel = world.shape
    if collective == "all-gather":
        shard = -(-numel // n) if numel else 0
        return collectives.all_gather([world[r, r * shard:(r + 1) * shard].copy() for r in range(n)], algorithm=name,
                                      mode=mode)
    fn = collectives.all_reduce if collective == "all-reduce" else collectives.reduce_scatter
    return fn(world, algorithm=name, mode=mode)


@given(key=st.sampled_from(KEYS), n=st.integers(1, 16), numel=st.integers(0, 600), itemsize=st.sampled_from((2, 4, 8)))
def test_every_entry_proves_its_postcondition(key, n, numel, itemsize):
    collective, name = key
    # Property: the schedule leaves what its collective promises, for any N and S (empty chunks hold nothing)
    check_provenance(build(collective, n, name, numel=numel, itemsize=itemsize))


@given(key=st.sampled_from(KEYS), n=st.integers(1, 9), numel=st.integers(0, 300), dtype=st.sampled_from(FLOATS),
       seed=st.integers(0, 2 ** 16))
def test_fused_step_and_reference_modes_give_the_same_bits(key, n, numel, dtype, seed):
    collective, name = key
    # Property: the three executions of one schedule agree bit for bit on every rank
    world = _world(n, numel, dtype, seed)
    results = [_run(collective, world, name, mode) for mode in ("fused", "step", "reference")]
    for other in results[1:]:
        assert [_bits(a) for a in other] == [_bits(a) for a in results[0]]


@given(key=st.sampled_from(KEYS), n=st.integers(1, 16), numel=st.integers(0, 5000), itemsize=st.sampled_from((2, 4, 8)))
def test_ledger_bytes_per_rank_are_the_chunk_lengths_sent(key, n, numel, itemsize):
    collective, name = key
    # Property: a rank's bytes are the lengths (from the partition's bounds) of the chunks in its rows of the
    # table, times the element size; no padding is sent
    schedule = build(collective, n, name, numel=numel, itemsize=itemsize)
    ledger = CommLedger()
    ledger.record(schedule, layout_for(schedule, numel), {2: "fp16", 4: "fp32", 8: "fp64"}[itemsize], "x",
                  size_only=True)
    lengths = np.diff(np.asarray(schedule.partition))
    table = schedule.table
    for traffic in ledger.per_rank():
        rows = table[table[:, 1] == traffic.rank]
        assert traffic.sent.bytes == int(lengths[rows[:, 3]].sum()) * itemsize
        into = table[table[:, 2] == traffic.rank]
        assert traffic.received.bytes == int(lengths[into[:, 3]].sum()) * itemsize
    assert ledger.total().padding_bytes == 0


def _gloo_blocks(n, numel, itemsize):
    """Rank blocks of gloo's all-reduce from its segment formula (gloo/allreduce.cc), written out here."""
    total = numel * itemsize
    segments = -(-max(-(-total // ((1 << 20) // itemsize * itemsize)), 2 * n) // n) * n
    per_block = segments // n * (-(-(-(-total // segments)) // itemsize))  # elements: P segments, bytes rounded up
    return [(min(numel, b * per_block), min(numel, (b + 1) * per_block)) for b in range(n)]


def test_gloo_blocks_worked_by_hand():
    # from gloo/allreduce.cc's formula, by hand: 4003 fp32 on 4 ranks: 16012 B / 8 segments = 2001.5 -> 2004 B
    # = 501 elements, 2 segments per block
    p = build("all-reduce", 4, "gloo:ring", numel=4003, itemsize=4).partition
    assert p[::2] == (0, 1002, 2004, 3006, 4003) and len(p) == 9
    # 7 fp32 on 3 ranks: 28 B / 6 -> 8 B = 2 elements: blocks of 4, the last empty
    assert build("all-reduce", 3, "gloo:ring", numel=7, itemsize=4).partition == (0, 2, 4, 6, 7, 7, 7)
    # 5,000,003 bf16 on 4 ranks: 10,000,006 B -> 10 segments of <= 1 MiB -> 12; 833,334 B each, 3 per block
    assert build("all-reduce", 4, "gloo:ring", numel=5_000_003, itemsize=2).partition[::3] == (
        0, 1_250_001, 2_500_002, 3_750_003, 5_000_003)
    # 2N MiB is the cap's edge: N = 2, fp32, 4 MiB = 4 segments (4 steps); one element more: 6 segments
    assert build("all-reduce", 2, "gloo:ring", numel=1 << 20, itemsize=4).n_steps == 4
    assert build("all-reduce", 2, "gloo:ring", numel=(1 << 20) + 1, itemsize=4).n_steps == 6


@given(n=st.integers(1, 9), numel=st.integers(0, 400), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2 ** 16))
def test_gloo_sums_block_b_from_rank_b_minus_1_down_to_b(n, numel, dtype, seed):
    # Property (gloo/allreduce.cc ring(): segments travel r -> r-1): block b = x[b] + (x[b+1] + (... + x[b-1])),
    # 16-bit types in fp32 rounded per add; reduce-scatter is the same all-reduce's shard
    world = _world(n, numel, dtype, seed)
    want = np.empty(numel, dtype)
    wide = np.float64 if dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        for b, (lo, hi) in enumerate(_gloo_blocks(n, numel, np.dtype(dtype).itemsize)):
            acc = world[(b - 1) % n, lo:hi]
            for k in range(2, n + 1):
                acc = (world[(b - k) % n, lo:hi].astype(wide) + acc.astype(wide)).astype(dtype)
            want[lo:hi] = acc
    got = collectives.all_reduce(world, algorithm="gloo:ring")
    assert all(_bits(row) == _bits(want) for row in got)
    shard = -(-numel // n) if numel else 0
    shards = collectives.reduce_scatter(world, algorithm="gloo:ring")
    assert [_bits(s) for s in shards] == [_bits(want[r * shard:(r + 1) * shard]) for r in range(n)]


@given(n=st.integers(1, 9), numel=st.integers(0, 300), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2 ** 16),
       zeros=st.booleans())
def test_xla_sums_in_rank_order_from_plus_zero(n, numel, dtype, seed, zeros):
    # Property (in_process_communicator.cc: acc = T(0); acc += in[j] for j in rank order): fp16 rounds every add,
    # bf16 is summed in fp32 and rounded once (the compiled HLO's convert -> f32 all-reduce -> convert)
    world = _world(n, numel, dtype, seed)
    if zeros:
        world[:, ::2] = -0.0  # a sum from +0 gives +0.0 there
    wide = np.float64 if dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        acc = np.zeros(numel, wide)
        for row in world:
            acc = acc + row.astype(wide)
            if dtype == np.float16:
                acc = acc.astype(dtype).astype(wide)
        want = acc.astype(dtype)
    assert all(_bits(row) == _bits(want) for row in collectives.all_reduce(world, algorithm="xla-cpu:in-process"))
    shard = -(-numel // n) if numel else 0
    shards = collectives.reduce_scatter(world, algorithm="xla-cpu:in-process")
    assert [_bits(s) for s in shards] == [_bits(want[r * shard:(r + 1) * shard]) for r in range(n)]


def test_xla_moves_bf16_as_fp32_and_semantics_are_written_down():
    # expected bytes: XLA's all-reduce sends (N-1)·S elements from rank 0, S from every other rank, 4 B each in bf16
    ledger = CommLedger()
    collectives.all_reduce(VirtualBuffer((4, 100), BFLOAT16), ledger=ledger, algorithm="xla-cpu:in-process")
    assert [t.sent.bytes for t in ledger.per_rank()] == [3 * 100 * 4, 400, 400, 400]
    assert algorithm("all-reduce", "gloo:ring").average is None
    assert algorithm("all-reduce", "xla-cpu:in-process").average == "divide"


@pytest.mark.parametrize("key", KEYS)
def test_a_billion_elements_are_only_bounds(key):
    # size-only counting builds engine orders for large S: the partition is bounds and the table stays small
    # (16 ranks, 10^9 fp32: gloo's all-reduce has 3,824 segments of <= 1 MiB, 16 per step, 2·15·239 steps;
    schedule = build(key[0], 16, key[1], numel=10 ** 9, itemsize=4)
    assert schedule.partition[-1] == 10 ** 9 and schedule.n_transfers <= 16 * 2 * 15 * 239


@given(n=st.integers(1, 9), numel=st.integers(0, 200), seed=st.integers(0, 2 ** 16))
def test_nccl_sums_chunk_c_along_the_forward_ring_and_its_tree_children_in_order(n, numel, seed):
    # Property (all_reduce.h runRing: chunk c from position c+1 round to c, acc = own + received): one loop of N
    # chunks of alignUp(ceil(S/N), 4) fp32 elements for S < 2 MiB, summed ((x[c+1] + x[c+2]) + ...) + x[c]
    world = _world(n, numel, np.float32, seed)
    size = -(-(-(-numel // n)) // 4) * 4
    want = np.empty(numel, np.float32)
    with np.errstate(all="ignore"):
        for c in range(n):
            lo, hi = min(numel, c * size), min(numel, (c + 1) * size)
            acc = world[(c + 1) % n, lo:hi]
            for k in range(2, n + 1):
                acc = world[(c + k) % n, lo:hi] + acc
            want[lo:hi] = acc
    from ringemu.algorithms.nccl_ring import nccl_ring_all_reduce
    schedule = nccl_ring_all_reduce(n, numel, 4)
    check_provenance(schedule)
    assert all(_bits(row) == _bits(want) for row in collectives.all_reduce(world, schedule=schedule))


@pytest.mark.parametrize("collective", ["reduce-scatter", "all-gather"])
def test_xla_direct_formula_typed_from_its_docstring(collective):
    """XLA's in-process reduce-scatter and all-gather are priced as one direct exchange: α + (N-1)/N·S·β on N > 1
    ranks (every rank sends its N-1 foreign shards at once), 0 on one rank."""
    from fractions import Fraction
    from ringemu.algorithms import cost
    a, b, s = Fraction(7), Fraction(1, 3), 8192
    assert cost(collective, "xla-cpu:in-process", 1, s, a, b) == 0
    for n in (2, 3, 4, 5, 8):
        assert cost(collective, "xla-cpu:in-process", n, s, a, b) == a + Fraction(n - 1, n) * s * b, n


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("name", ["gloo:ring", "xla-cpu:in-process"])
def test_gloo_and_xla_move_no_empty_chunk(collective, name):
    """Their modules' docs: gloo's 0-byte messages for empty halves move nothing and are left out, and XLA's
    "message" is a chunk one buffer reads from another, so an empty shard (S < N, or a short last shard) costs
    neither a transfer nor an α in the ledger."""
    for n in (2, 3, 4, 5, 8):
        for numel in (0, 1, 2, n - 1, n + 1, 2 * n + 1):
            s = build(collective, n, name, numel=numel, itemsize=4)
            sizes = np.diff(np.asarray(s.partition))
            assert not (sizes[s.table[:, 3]] == 0).any(), (n, numel)


def test_gloo_all_gather_on_3_ranks_worked_by_hand():
    """gloo/allgather.cc as the module doc states it: each shard of ChunkLayout(S, N) cut in two halves (the first
    len // 2 elements), and in step i rank r sends half i & 1 of block (r - i // 2) mod N to r + 1, for 2(N-1)
    steps; chunk 2b + h is half h of block b. S = 7 on 3 ranks: shards 3, 3, 1, so halves [0,1) [1,3) [3,4) [4,6)
    [6,6) [6,7); the empty half (chunk 4) is never sent. S = 20: shards 7, 7, 6 cut 3 | 4, 3 | 4, 3 | 3."""
    s = build("all-gather", 3, "gloo:ring", numel=7, itemsize=4)
    assert s.partition == (0, 1, 3, 4, 6, 6, 7) and s.n_steps == 4
    rows = sorted((st, src, dst, c) for st, src, dst, c, _ in s.table.tolist())
    assert rows == sorted([(0, 0, 1, 0), (0, 1, 2, 2),                  # step 0: half 0 of one's own block
                           (1, 0, 1, 1), (1, 1, 2, 3), (1, 2, 0, 5),    # step 1: half 1 of one's own block
                           (2, 1, 2, 0), (2, 2, 0, 2),                  # step 2: half 0 of block r - 1
                           (3, 0, 1, 5), (3, 1, 2, 1), (3, 2, 0, 3)])   # step 3: half 1 of block r - 1
    assert build("all-gather", 3, "gloo:ring", numel=20, itemsize=4).partition == (0, 3, 7, 10, 14, 17, 20)


def test_xla_all_reduce_on_3_ranks_worked_by_hand():
    """AllReduceOp as the module doc states it: chunk p of ceil(S/N) elements; step 1 every rank r > 0 sends each
    chunk to rank 0, which adds them in rank order; step 2 rank 0 sends every chunk to every other rank. S = 4 on 3
    ranks: chunks [0,2) [2,4) [4,4); the empty third chunk moves nothing."""
    from ringemu.schedule import ADD, COPY
    s = build("all-reduce", 3, "xla-cpu:in-process", numel=4, itemsize=4)
    assert s.partition == (0, 2, 4, 4) and s.n_steps == 2
    assert [tuple(r) for r in s.table.tolist()] == [
        (0, 1, 0, 0, ADD), (0, 2, 0, 0, ADD), (0, 1, 0, 1, ADD), (0, 2, 0, 1, ADD),
        (1, 0, 1, 0, COPY), (1, 0, 2, 0, COPY), (1, 0, 1, 1, COPY), (1, 0, 2, 1, COPY)]


def test_gloo_segments_follow_allreduce_cc_for_tiny_caps_and_huge_buffers():
    """gloo/allreduce.cc ring(), in size_t: maxSegmentBytes = elementSize * max(1, maxSegmentSize / elementSize),
    numSegments = roundUp(max(ceil(totalBytes / maxSegmentBytes), 2N), N), segmentBytes = roundUp(ceil(totalBytes
    / numSegments), elementSize); (segments, segments per rank, segment bytes), exact at any size."""
    from ringemu.algorithms.gloo import gloo_segments
    # a 4 B cap, fp32: one element a segment; 40 B -> 10 segments (>= 2N = 4, N | 10), 5 per rank, 4 B each
    assert gloo_segments(2, 10, 4, max_segment_bytes=4) == (10, 5, 4)
    # a cap under one element (3 B, fp64): max(1, 3 / 8) keeps one element, 8 B; 80 B -> 10 segments of 8 B
    assert gloo_segments(2, 10, 8, max_segment_bytes=3) == (10, 5, 8)
    # 3 ranks, 3·2^56 + 4 B under a 2^62 B cap: 2N = 6 segments of ceil((3·2^56 + 4) / 6) = 2^55 + 1 -> 2^55 + 4 B
    got = gloo_segments(3, 3 * 2 ** 54 + 1, 4, max_segment_bytes=2 ** 62)
    assert got == (6, 2, 2 ** 55 + 4) and all(type(v) is int for v in got)


@pytest.mark.parametrize("numel", [1, 10, 4003, 5_000_003])
def test_gloo_on_one_rank_is_one_chunk_and_no_message(numel):
    """gloo/allreduce.cc allreduce(): "Simple circuit if there is only a single process": context->size == 1
    reduces the local inputs and returns before ring() cuts any segment, so one chunk and nothing sent."""
    for itemsize in (2, 4):
        for collective in ("all-reduce", "reduce-scatter"):
            s = build(collective, 1, "gloo:ring", numel=numel, itemsize=itemsize)
            assert s.partition == (0, numel) and s.n_steps == 0 and s.n_transfers == 0, (collective, itemsize)


def test_gloo_all_gather_bounds_stay_exact_integers_past_two_to_the_53():
    """Size-only counting takes any S (DESIGN.md: counts are exact ints): S = 2^56 + 3 on 2 ranks has shards of
    ceil(S/2) = 2^55 + 2 and 2^55 + 1 elements, cut at len // 2 (gloo/allgather.cc, module doc): 2^54 + 1 | 2^54 + 1
    and 2^54 | 2^54 + 1; float64 bounds would round these. Step i: rank r sends half i & 1 of its own block."""
    from ringemu.schedule import COPY
    s = build("all-gather", 2, "gloo:ring", numel=2 ** 56 + 3, itemsize=4)
    assert s.partition == (0, 2 ** 54 + 1, 2 ** 55 + 2, 2 ** 55 + 2 ** 54 + 2, 2 ** 56 + 3)
    assert sorted(map(tuple, s.table.tolist())) == [(0, 0, 1, 0, COPY), (0, 1, 0, 2, COPY),
                                                   (1, 0, 1, 1, COPY), (1, 1, 0, 3, COPY)]
