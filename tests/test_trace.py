"""The trace: every step from the schedule, each rank's buffer after it, and each chunk's provenance."""
import json

import numpy as np
import pytest
from hypothesis import given

from ringemu import collectives
from ringemu.provenance import run_provenance
from ringemu.reference import run_schedule_reference
from ringemu.algorithms import schedule_for
from ringemu.schedule import Schedule
from ringemu.testing import shards_of
from ringemu.trace import MAX_NUMEL, MAX_RANKS, format_ranks, trace_collective, trace_schedule
from strategies import float_worlds, integer_worlds, ops


def prefix(schedule: Schedule, steps: int) -> Schedule:
    """The first ``steps`` steps of ``schedule`` as a schedule of its own."""
    table = schedule.table[schedule.table[:, 0] < steps]
    return Schedule("prefix", schedule.n_ranks, schedule.n_chunks, steps, table, schedule.initial, schedule.final)


@given(op=ops(), world=float_worlds(max_ranks=8, max_numel=24))
def test_each_step_equals_the_reference_run_of_the_steps_so_far(op, world):
    n, numel = world.shape
    schedule = schedule_for(op, n)
    trace = trace_schedule(schedule, world)
    assert len(trace.steps) == schedule.n_steps
    readable = schedule.steps()
    for s, step in enumerate(trace.steps):
        assert step.step == s and step.transfers == readable[s]
        state = trace.initial.buffers.copy()
        run_schedule_reference(prefix(schedule, s + 1), state)
        np.testing.assert_array_equal(step.buffers.view(f"u{world.dtype.itemsize}"),
                                      state.view(f"u{world.dtype.itemsize}"))


@given(op=ops(), world=integer_worlds(max_ranks=8, max_numel=24))
def test_final_state_is_the_collective_result(op, world):
    n, numel = world.shape
    final = trace_schedule(schedule_for(op, n), world).final[:, :numel]
    if op == "all-gather":
        np.testing.assert_array_equal(final, collectives.all_gather(shards_of(world)))
    elif op == "reduce-scatter":
        chunks = collectives.reduce_scatter(world)
        trace = trace_schedule(schedule_for(op, n), world)
        size = trace.layout.chunk_size
        for r, chunk in enumerate(chunks):
            np.testing.assert_array_equal(trace.final[r, r * size:r * size + chunk.size], chunk)
    else:
        run = collectives.all_reduce if op == "all-reduce" else collectives.naive_all_reduce
        np.testing.assert_array_equal(final, run(world))


@given(op=ops(), world=integer_worlds(max_ranks=8, max_numel=16))
def test_provenance_is_the_symbolic_run(op, world):
    schedule = schedule_for(op, world.shape[0])
    trace = trace_schedule(schedule, world)
    _, history = run_provenance(schedule, record_steps=True)
    for step, masks in zip(trace.steps, history):
        assert [[sum(1 << r for r in cell) for cell in row] for row in step.provenance] == masks


def test_all_gather_starts_with_own_chunk_only():
    world = np.arange(1, 13, dtype=np.int32).reshape(3, 4)  # chunks of 2: [1 2][3 4], [5 6][7 8], ...
    trace = trace_schedule(schedule_for("all-gather", 3), world)
    assert trace.initial.buffers.tolist() == [[1, 2, 0, 0, 0, 0], [0, 0, 7, 8, 0, 0], [0, 0, 0, 0, 0, 0]]
    assert trace.final[:, :4].tolist() == [[1, 2, 7, 8]] * 3  # rank 2's chunk 2 is all padding


def test_render_of_a_small_reduce_scatter():
    world = np.array([[1, 2], [10, 20]], dtype=np.int32)
    text = trace_schedule(schedule_for("reduce-scatter", 2), world).render()
    # by hand: one step; rank 0 sends chunk 1 (2) to rank 1, rank 1 sends chunk 0 (10) to rank 0; both add
    assert text.splitlines() == [
        "ring_reduce_scatter: 2 ranks, 2 elements of int32 per rank, 2 chunks of 1, 1 step",
        "",
        "before step 1",
        "        chunk 0   chunk 1",
        "rank 0  [1] {0}   [2] {0}",
        "rank 1  [10] {1}  [20] {1}",
        "",
        "step 1/1, reduce-scatter (the receiver adds): 0->1 c1, 1->0 c0",
        "        chunk 0      chunk 1",
        "rank 0  [11] {all}*  [2] {0}",
        "rank 1  [10] {1}     [22] {all}*",
    ]


def test_render_marks_padding_and_empty_chunks():
    text = trace_collective("all-gather", 3, 4).render()
    assert "[_ _] {2}" in text and "·" in text
    assert "step 2/2, all-gather (the receiver copies)" in text
    naive = trace_collective("naive-all-reduce", 3, 2).render()
    assert "reduce to rank 0 (the receiver adds): 1->0 c0, 2->0 c0" in naive
    assert "broadcast from rank 0 (the receiver copies): 0->1 c0, 0->2 c0" in naive


def test_json_dict_round_trips():
    trace = trace_collective("all-reduce", 4, 6, "bf16", seed=3)
    d = json.loads(json.dumps(trace.as_dict()))
    assert (d["schedule"], d["n_ranks"], d["numel"], d["dtype"], d["chunk_size"], d["padding"]) == \
        ("ring_all_reduce", 4, 6, "bf16", 2, 2)
    assert len(d["steps"]) == d["n_steps"] == 6
    assert d["steps"][0]["transfers"][0] == {"src": 0, "dst": 1, "chunk": 3, "op": "add"}
    assert d["steps"][-1]["buffers"] == [trace.final[0, :6].astype(float).astype(int).tolist()] * 4
    assert d["steps"][-1]["provenance"] == [[[0, 1, 2, 3]] * 4] * 4


def test_format_ranks():
    assert format_ranks(frozenset({0, 1, 2, 7}), 8) == "{7,0-2}"  # wraps: ring order 7, 0, 1, 2
    assert format_ranks(frozenset({1, 2, 5}), 8) == "{1-2,5}"
    assert format_ranks(frozenset({0, 3, 4, 6, 7}), 8) == "{6-7,0,3-4}"
    assert format_ranks(frozenset(range(8)), 8) == "{all}"
    assert format_ranks(frozenset({0}), 1) == "{0}"
    assert format_ranks(frozenset(), 4) == "{}"


@pytest.mark.parametrize("n, numel", [(MAX_RANKS + 1, 4), (4, MAX_NUMEL + 1)])
def test_large_traces_are_refused(n, numel):
    with pytest.raises(ValueError, match="a trace is for small runs"):
        trace_collective("all-reduce", n, numel)
    with pytest.raises(ValueError, match="a trace is for small runs"):
        trace_schedule(schedule_for("all-reduce", n), np.zeros((n, numel), np.float32))


def test_bad_inputs():
    with pytest.raises(ValueError, match="world has 3 rows but ring_all_reduce runs on 4 ranks"):
        trace_schedule(schedule_for("all-reduce", 4), np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="world must be a 2-D numpy array"):
        trace_schedule(schedule_for("all-reduce", 4), [[1, 2]])
    with pytest.raises(ValueError, match="op must be one of"):
        trace_collective("broadcast", 4, 4)
