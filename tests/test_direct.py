"""The direct path (ringemu.direct): a collective run over every rank's own buffer gives the bits of the world
kernels' step-by-step run, for every order of the registry, in place or not; it refuses overlapping buffers and
declines (leaving everything untouched) the schedules it cannot express.

The reference of every comparison is :func:`ringemu.execute.run_schedule` in ``step`` mode on the padded world of
the schedule's layout: the faithful transfer-by-transfer ring, itself checked against plain numpy in
tests/test_execute_modes.py."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringemu import algorithms, collectives, per_rank
from ringemu.direct import program, run_direct
from ringemu.execute import run_schedule
from ringemu.layout import ChunkLayout
from ringemu.ledger import CommLedger
from ringemu.partition import layout_for
from ringemu.direct.kernels import GROUP, MAX_CHAIN
from ringemu.schedule import COPY, Schedule

DTYPES = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32)
CASES = [(c, name) for c in algorithms.COLLECTIVES for name in algorithms.names(c)]


def _built(collective, name, n, numel, dtype):
    try:
        return algorithms.build(collective, n, name, numel=numel, itemsize=np.dtype(dtype).itemsize)
    except ValueError:  # an order that does not exist on n ranks (e.g. powers of two only)
        return None


def _step_reference(schedule, layout, collective, world):
    """What the step-by-step world kernel leaves: every rank's result (the shards, for a reduce-scatter)."""
    n, numel = world.shape
    shard_map = ChunkLayout(numel, n)
    padded = np.zeros((n, layout.padded_numel), dtype=world.dtype)
    if collective == "all-gather":
        for r in range(n):
            layout.place_shard(padded[r], r, world[r, shard_map.payload_slice(r)])
    else:
        layout.pad(world, padded)
    run_schedule(schedule, padded, "step")
    if collective == "reduce-scatter":
        return [np.array(layout.shard(padded[r], r)) for r in range(n)]
    return list(layout.unpad(padded))


@given(case=st.sampled_from(CASES), n=st.integers(1, 9), numel=st.integers(0, 300),
       dtype=st.sampled_from(DTYPES), in_place=st.booleans(), threads=st.integers(1, 3),
       tile=st.sampled_from([None, 1, 7, 64]), seed=st.integers(0, 2 ** 16))
def test_direct_equals_the_step_by_step_world_run(case, n, numel, dtype, in_place, threads, tile, seed):
    """Property: for every registry order, N, S, dtype, tile and thread count, the direct path's results are
    bit for bit the step-by-step world run's, in place (outputs on the inputs' memory) and into fresh buffers."""
    collective, name = case
    schedule = _built(collective, name, n, numel, dtype)
    if schedule is None:
        return
    layout = layout_for(schedule, numel)
    world = (np.random.default_rng(seed).standard_normal((n, numel)) * 100).astype(dtype)
    want = _step_reference(schedule, layout, collective, world)
    shard_map = ChunkLayout(numel, n)
    starts = [shard_map.payload_slice(r).start for r in range(n)]
    work = world.copy()
    if collective == "all-gather":
        inputs = [work[r, shard_map.payload_slice(r)] for r in range(n)]
        outputs = list(work) if in_place else [np.full(numel, 7, dtype=dtype) for _ in range(n)]
        done = run_direct(schedule, layout, inputs, outputs, input_offsets=starts, threads=threads, tile=tile)
    elif collective == "reduce-scatter":
        outputs = [(work[r] if in_place else np.zeros(numel, dtype))[shard_map.payload_slice(r)] for r in range(n)]
        done = run_direct(schedule, layout, list(work), outputs, shard_results=True, output_offsets=starts,
                          threads=threads, tile=tile)
    else:
        outputs = list(work) if in_place else [np.full(numel, 7, dtype=dtype) for _ in range(n)]
        done = run_direct(schedule, layout, list(work), outputs, threads=threads, tile=tile)
    assert done, f"{collective} {name}: the direct path declined a registry order"
    for r in range(n):
        assert outputs[r].tobytes() == want[r].tobytes(), f"{collective} {name} N={n} S={numel}: rank {r} differs"


@given(n=st.integers(2, 8), numel=st.integers(1, 200), seed=st.integers(0, 2 ** 16),
       name=st.sampled_from(algorithms.names("all-reduce")))
def test_public_collectives_on_lists_equal_the_world_path(n, numel, seed, name):
    """Property: per-rank lists (the direct path, no world buffer) and mode="step" (the world kernels) give the
    same bits through the public API; the inputs are left unchanged."""
    rows = [np.random.default_rng(seed + r).standard_normal(numel).astype(np.float32) for r in range(n)]
    before = [r.copy() for r in rows]
    for fused, step in ((collectives.all_reduce(rows, algorithm=name), collectives.all_reduce(rows, algorithm=name,
                                                                                                mode="step")),):
        assert np.asarray(fused).tobytes() == np.asarray(step).tobytes()
    for r, b in zip(rows, before):
        assert r.tobytes() == b.tobytes()


def test_reduce_into_writes_only_the_shards_and_runs_in_place():
    """reduce_into: each output is the reduce-scatter's shard (checked against the world path); in place, an
    all-reduce leaves the sum in the inputs themselves."""
    n, numel = 4, 10
    rows = [np.arange(numel, dtype=np.float32) * (r + 1) for r in range(n)]
    shards = [np.empty(ChunkLayout(numel, n).shard_payload(r), np.float32) for r in range(n)]
    per_rank.reduce_into("reduce-scatter", rows, shards)
    for got, want in zip(shards, collectives.reduce_scatter(rows, mode="step")):
        assert got.tobytes() == np.asarray(want).tobytes()
    work = [r.copy() for r in rows]
    per_rank.reduce_into("all-reduce", work, work)
    want = np.arange(numel, dtype=np.float32) * 10  # 1 + 2 + 3 + 4 times each value, exact in fp32
    assert all(w.tobytes() == want.tobytes() for w in work)
    with pytest.raises(ValueError, match="collective must be one of"):
        per_rank.reduce_into("all-gather", rows, rows)
    with pytest.raises(ValueError, match="lengths"):
        per_rank.reduce_into("reduce-scatter", rows, rows)


def test_overlapping_buffers_are_refused_and_nothing_is_written():
    """An output that overlaps another rank's buffer (not in place) is a ValueError, before any write."""
    schedule = algorithms.build("all-reduce", 2, "ring")
    layout = layout_for(schedule, 8)
    memory = np.arange(12, dtype=np.float32)
    inputs = [memory[0:8], memory[4:12]]
    outputs = [np.zeros(8, np.float32), memory[2:10]]
    with pytest.raises(ValueError, match="overlaps"):
        run_direct(schedule, layout, inputs, outputs)
    assert memory.tolist() == list(range(12)) and not outputs[0].any()


def test_inputs_may_alias_each_other_outputs_may_not():
    """One array passed as every rank's input is only read: the sum is N times it. Two ranks' outputs on one
    memory, in place or not, and an output on another rank's input are refused before any write."""
    schedule = algorithms.build("all-reduce", 4, "ring")
    layout = layout_for(schedule, 6)
    x = np.arange(6, dtype=np.float32)
    outputs = [np.zeros(6, np.float32) for _ in range(4)]
    assert run_direct(schedule, layout, [x] * 4, outputs)
    assert all(o.tolist() == (4 * x).tolist() for o in outputs) and x.tolist() == list(range(6))
    assert collectives.all_reduce([x] * 4)[2].tolist() == (4 * x).tolist()
    shared = np.zeros(6, np.float32)
    with pytest.raises(ValueError, match="overlaps another output"):
        run_direct(schedule, layout, [x] * 4, [shared, shared, outputs[2], outputs[3]])
    with pytest.raises(ValueError, match="overlaps another output"):
        run_direct(schedule, layout, [shared] * 4, [shared] * 4)  # "in place" on one buffer for every rank
    rows = np.ones((4, 6), np.float32)
    with pytest.raises(ValueError, match="overlaps another output or an input"):
        run_direct(schedule, layout, list(rows), [outputs[0], outputs[1], rows[0], outputs[3]])
    assert not shared.any() and rows.tolist() == np.ones((4, 6)).tolist()


def test_a_schedule_whose_result_no_input_holds_is_declined():
    """A hand-made all-reduce that forgets rank 1's chunk 0 of an all-gather start: rank 1 keeps a value no input
    holds, so program() is None and run_direct returns False without writing; the public API then uses the
    world kernels (zeros for what no rank sent)."""
    table = np.array([[0, 0, 1, 1, COPY]], dtype=np.int64)  # only chunk 1 is sent
    schedule = Schedule("partial-gather", 2, 2, 1, table, "own", "gathered")
    layout = layout_for(schedule, 4)
    assert program(schedule, layout, False, False) is None
    outputs = [np.full(4, 9, np.float32), np.full(4, 9, np.float32)]
    assert not run_direct(schedule, layout, [np.ones(2, np.float32), np.ones(2, np.float32)], outputs,
                          input_offsets=[0, 2])
    assert all((o == 9).all() for o in outputs)


def test_the_ring_needs_two_slots_and_writes_each_result_once():
    """The liveness pass and the grouping: the ring's partial sums live in one slot (plus the spare the grouping
    rotates), its N-1 additions per chunk run as ceil((N-1) / (MAX_CHAIN+1)) passes, an all-reduce writes every
    rank's every chunk exactly once, and a reduce-scatter only the owner's chunk (N writes in all)."""
    n = 8
    for collective, shard_results, writes in (("all-reduce", False, n * n), ("reduce-scatter", True, n)):
        schedule = algorithms.build(collective, n, "ring")
        prog = program(schedule, layout_for(schedule, 64), shard_results, in_place=True)
        assert prog.n_slots == 2
        assert prog.writes.shape[0] == writes
        groups = prog.ops[prog.ops[:, 0] == GROUP]
        assert len(groups) == n * -(-(n - 1) // (MAX_CHAIN + 1))
        assert int((groups[:, 4] + 1).sum()) == n * (n - 1)  # every addition, once


@given(case=st.sampled_from(CASES), n=st.integers(1, 8), numel=st.integers(0, 64), seed=st.integers(0, 99))
def test_the_ledger_counts_the_same_traffic_on_both_paths(case, n, numel, seed):
    """Property: the direct path changes how memory is touched, never what crosses a virtual link: a fused call
    (direct) and a step-mode call (world kernels) of the same collective leave equal per-link and per-step
    records, and equal results."""
    collective, name = case
    if _built(collective, name, n, numel, np.float32) is None:
        return
    world = np.random.default_rng(seed).standard_normal((n, numel)).astype(np.float32)
    shard_map = ChunkLayout(numel, n)
    results, ledgers = [], []
    for mode in ("fused", "step"):
        ledger = CommLedger()
        if collective == "all-gather":
            got = collectives.all_gather([world[r, shard_map.payload_slice(r)].copy() for r in range(n)],
                                         ledger=ledger, mode=mode, algorithm=name)
        elif collective == "reduce-scatter":
            got = collectives.reduce_scatter(list(world), ledger=ledger, mode=mode, algorithm=name)
        else:
            got = collectives.all_reduce(world, ledger=ledger, mode=mode, algorithm=name)
        results.append(np.concatenate([np.ravel(g) for g in got]) if len(got) else np.zeros(0))
        ledgers.append(ledger)
    assert results[0].tobytes() == results[1].tobytes()
    assert ledgers[0].per_link() == ledgers[1].per_link()
    assert ledgers[0].per_step() == ledgers[1].per_step()


def test_the_planner_compiles_once_whatever_the_schedule(monkeypatch):
    """The planner's kernel sees one numba signature for every schedule: an empty table (one rank) gives the same
    writable C-contiguous int64 columns as a full one, so a world warmed on 4 ranks never compiles again on 1 (a
    compile inside a hypothesis example is seconds past any deadline). The arrays each call receives are checked
    (with the JIT on or off), and with the JIT on, the dispatcher's signatures."""
    from ringemu._jit import JIT_ENABLED
    from ringemu.direct import kernels as kernels_direct
    plan_direct, seen = kernels_direct.plan_direct, []

    def recording(*args):
        seen.append([(a.dtype, a.flags.writeable, a.flags.c_contiguous) for a in args if isinstance(a, np.ndarray)])
        return plan_direct(*args)

    monkeypatch.setattr(kernels_direct, "plan_direct", recording)
    for n in (1, 4, 1, 2):
        schedule = algorithms.build("all-reduce", n, "ring")
        schedule.__dict__.pop("_direct_programs", None)  # the program cache would skip the planner
        assert program(schedule, layout_for(schedule, 8), False, False) is not None
    assert len(seen) == 4 and all(flags == seen[1] for flags in seen), seen
    assert all(writeable and contiguous for _, writeable, contiguous in seen[0]), seen[0]
    if JIT_ENABLED:
        assert len(plan_direct.signatures) == 1, plan_direct.signatures
