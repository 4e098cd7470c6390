"""A schedule that carries its own partition (uneven, empty or many chunks) runs, counts and traces as the
engine it models would: the bits of a plain transfer-by-transfer walk, every mode alike, and exactly the chunk
lengths it sends on the wire (no padding), for real and size-only buffers alike."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringemu import CommLedger, VirtualBuffer, all_gather, all_reduce, check_provenance, reduce_scatter
from ringemu.algorithms._steps import from_transfers
from ringemu.layout import ChunkLayout
from ringemu.partition import Partition, layout_for
from ringemu.trace import trace_schedule


def uneven_ring(n: int, bounds: list[int]):
    """A ring all-reduce over ``len(bounds) - 1`` chunks of any lengths: chunk c starts at rank c mod n and
    travels n - 1 hops adding, then n - 1 hops copying (the study's Open MPI ring, on any partition)."""
    chunks = len(bounds) - 1
    steps = [[(((c + s) % n), ((c + s + 1) % n), c, "add") for c in range(chunks)] for s in range(n - 1)]
    steps += [[(((c + n - 1 + s) % n), ((c + n + s) % n), c, "copy") for c in range(chunks)] for s in range(n - 1)]
    return from_transfers("uneven_ring", n, bounds, steps, "all", "reduced-all")


def walk(bounds, schedule, world):
    """The schedule transfer by transfer in numpy: sources send what they held at the start of the step."""
    rows = [r.copy() for r in world]
    for step in schedule.steps():
        sent = [(t, rows[t.src][bounds[t.chunk]:bounds[t.chunk + 1]].copy()) for t in step]
        for t, value in sent:
            lo, hi = bounds[t.chunk], bounds[t.chunk + 1]
            rows[t.dst][lo:hi] = value if t.op == "copy" else rows[t.dst][lo:hi] + value
    return np.stack(rows)


@st.composite
def partitioned(draw):
    n = draw(st.integers(2, 7))
    lengths = draw(st.lists(st.integers(0, 9), min_size=n, max_size=3 * n))  # empty chunks allowed
    bounds = [0] + list(np.cumsum(lengths).tolist())
    return n, bounds


@given(partitioned(), st.sampled_from(["float32", "float64"]), st.integers(0, 2 ** 31))
def test_every_mode_gives_the_bits_of_a_plain_walk(case, dtype, seed):
    n, bounds = case
    schedule = uneven_ring(n, bounds)
    check_provenance(schedule)
    world = np.random.default_rng(seed).standard_normal((n, bounds[-1])).astype(dtype)
    want = walk(bounds, schedule, world)
    for mode in ("fused", "step", "reference"):
        got = all_reduce(world, schedule=schedule, mode=mode)
        assert got.tobytes() == want.tobytes(), mode


@given(partitioned(), st.sampled_from(["float32", "float64", "bfloat16"]))
def test_the_ledger_counts_each_chunks_own_length_and_no_padding(case, dtype):
    n, bounds = case
    schedule = uneven_ring(n, bounds)
    real, counted = CommLedger(), CommLedger()
    world = np.ones((n, bounds[-1]), dtype=np.float32).astype(np.dtype(dtype) if dtype != "bfloat16" else
                                                               __import__("ml_dtypes").bfloat16)
    all_reduce(world, schedule=schedule, ledger=real)
    all_reduce(VirtualBuffer((n, bounds[-1]), world.dtype), schedule=schedule, ledger=counted)
    lengths = np.diff(bounds)
    sent = [0] * n  # expected: every transfer's chunk length, summed per sender, read off the schedule's steps
    for step in schedule.steps():
        for t in step:
            sent[t.src] += int(lengths[t.chunk])
    for ledger in (real, counted):
        per_rank = ledger.per_rank()
        assert [r.sent.elements for r in per_rank] == sent
        assert [r.sent.bytes for r in per_rank] == [e * world.dtype.itemsize for e in sent]
        assert all(r.sent.padding_elements == 0 for r in per_rank)
        assert sum(t.elements for t in ledger.per_link().values()) == sum(sent)
        assert ledger.total().elements == sum(sent)


def test_a_schedule_cut_for_one_size_refuses_another():
    schedule = uneven_ring(3, [0, 2, 3, 7])
    with pytest.raises(ValueError, match="built for 7 elements per rank; got 8"):
        all_reduce(np.zeros((3, 8), dtype=np.float32), schedule=schedule)


def test_reduce_scatter_and_all_gather_orders_hand_out_the_textbook_shards():
    # shards of ChunkLayout(10, 3): [0, 4), [4, 8), [8, 10); the chunks cut them finer and unevenly
    bounds = [0, 1, 4, 6, 8, 10]
    n = 3
    owner = [0, 0, 1, 1, 2]
    steps = [[(r, (r + 1) % n, c, "add") for c in range(5) for r in [(owner[c] + 1 + s) % n]] for s in range(n - 1)]
    rs = from_transfers("rs", n, bounds, steps, "all", "reduced-own")
    check_provenance(rs)
    world = np.arange(30, dtype=np.int64).reshape(n, 10)
    shards = reduce_scatter(world, schedule=rs)
    total = world.sum(axis=0)  # expected: integer sums are exact in any order
    assert [s.tolist() for s in shards] == [total[0:4].tolist(), total[4:8].tolist(), total[8:10].tolist()]
    ag_steps = [[((owner[c] + s) % n, (owner[c] + s + 1) % n, c, "copy") for c in range(5)] for s in range(n - 1)]
    ag = from_transfers("ag", n, bounds, ag_steps, "own", "gathered")
    check_provenance(ag)
    gathered = all_gather([world[0, 0:4], world[1, 4:8], world[2, 8:10]], schedule=ag)
    assert gathered.tolist() == [np.concatenate([world[0, 0:4], world[1, 4:8], world[2, 8:10]]).tolist()] * n


def test_chunks_that_cross_a_shard_bound_are_refused_for_shard_orders():
    with pytest.raises(ValueError, match="crosses a shard bound"):
        Partition([0, 5, 10], 3, aligned=True)  # ChunkLayout(10, 3) shards end at 4 and 8


def test_the_trace_walks_a_partitioned_schedule():
    schedule = uneven_ring(3, [0, 1, 1, 4])  # an empty chunk in the middle
    world = np.arange(12, dtype=np.int32).reshape(3, 4)
    trace = trace_schedule(schedule, world)
    assert trace.layout == layout_for(schedule, 4)
    assert np.array_equal(trace.layout.unpad(trace.final), np.tile(world.sum(axis=0), (3, 1)))


def test_the_textbook_layout_is_unchanged_for_schedules_without_a_partition():
    from ringemu.algorithms import build
    schedule = build("all-reduce", 4)
    assert schedule.partition is None and layout_for(schedule, 10) == ChunkLayout(10, 4, 4)
