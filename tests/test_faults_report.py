"""The fault report (ringemu.faults.report: the tables of docs/faults.md), checked against rows worked by hand;
explain and the detectors' findings are in tests/test_faults_explain.py."""
import numpy as np
import pytest

from ringemu.algorithms import REGISTRY, build
from ringemu.blocks import integer_blocks
from ringemu.dtypes import resolve_dtype
from ringemu.execute import MODES
from ringemu.faults.locate import DETECTORS
from ringemu.faults.report import _draw, _numel, _stop_trial, _world, bit_classes, markdown, run_trials, summary
from ringemu.faults.spec import KINDS, Fault, parse_fault
from ringemu.partition import layout_for


# -- bit classes: the storage fields of IEEE 754-2008 Table 3.5 (binary16/32/64) and bfloat16 --------------------
@pytest.mark.parametrize("dtype, fraction, exponent", [("fp16", 10, 5), ("bf16", 7, 8), ("fp32", 23, 8),
                                                        ("fp64", 52, 11)])
def test_bit_classes_follow_the_storage_fields(dtype, fraction, exponent):
    """Bits 0 .. t-1 are the trailing significand (its lower floor(t/2) bits "mantissa low"), then w exponent bits,
    then the sign: t and w as the standard gives them, not as the code computes them."""
    want = (["mantissa low"] * (fraction // 2) + ["mantissa high"] * (fraction - fraction // 2)
            + ["exponent"] * exponent + ["sign"])
    assert bit_classes(dtype) == want


@pytest.mark.parametrize("dtype, width", [("int32", 32), ("int64", 64)])
def test_integer_bit_classes_are_halves(dtype, width):
    assert bit_classes(dtype) == ["low"] * (width // 2) + ["high"] * (width // 2)


# -- the tables, from rows written by hand ------------------------------------------------------------------------
def _msg(kind, collective="all-reduce", algorithm="ring", mode="fused", dtype="int32", found=(), located=(),
         bit_class=None):
    row = {"collective": collective, "algorithm": algorithm, "n_ranks": 4, "dtype": dtype, "mode": mode,
           "kind": kind, "fault": f"{kind}:step=0,src=0,dst=1"}
    for d in DETECTORS:
        row[d] = {"found": d in found, "located": d in located}
    if bit_class:
        row["bit_class"] = bit_class
    return row


def _stop(found, located, collective="all-reduce", algorithm="ring", mode="fused", dtype="int32"):
    return {"collective": collective, "algorithm": algorithm, "n_ranks": 4, "dtype": dtype, "mode": mode,
            "kind": "stop", "fault": "stop:step=0,rank=1", "found": found, "located": located}


ROWS = [
    _msg("corrupt", found=("checksum", "values", "output"), located=("checksum",)),
    _msg("corrupt", found=("checksum", "output"), located=("checksum",)),
    _msg("drop", mode="step", found=("checksum", "provenance", "values", "output"),
         located=("checksum", "provenance", "values")),
    _msg("drop", collective="reduce-scatter", algorithm="tree", found=()),
    _stop(True, True),
    _stop(True, False, algorithm="tree"),
    _msg("corrupt", dtype="fp32", found=("checksum",), located=("checksum",), bit_class="mantissa low"),
    _msg("corrupt", dtype="fp32", found=("checksum", "values", "output"), located=("checksum", "values"),
         bit_class="exponent"),
    _msg("corrupt", dtype="fp32", found=("checksum", "output"), located=("checksum",), bit_class="mantissa low"),
    _msg("corrupt", dtype="bf16", found=("checksum", "output"), located=("checksum",), bit_class="mantissa low"),
    _msg("duplicate", dtype="bf16", found=("checksum",), located=("checksum",)),
]


def test_markdown_tables_count_the_rows_written_by_hand():
    """Each cell is found/located out of tried, counted here from ROWS by hand: e.g. the two int32 corruptions of
    the ring all-reduce in fused mode were both found and located by the checksums, one found by the values
    detector and located by none but the checksums, both changed the output."""
    text = markdown(ROWS)
    assert text.split("\n") == [
        "### Integer blocks (int32), every algorithm pooled", "",
        "| kind | collective | mode | tried | checksum | provenance | values | output changed | any detector |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
        "| drop | all-reduce | step | 1 | 1/1 | 1/1 | 1/1 | 1 | 1/1 |",
        "| drop | reduce-scatter | fused | 1 | 0/0 | 0/0 | 0/0 | 0 | 0/0 |",
        "| corrupt | all-reduce | fused | 2 | 2/2 | 0/0 | 1/0 | 2 | 2/2 |",
        "| stop | all-reduce | fused | 2 | — | — | — | — | watchdog 2/1 |",
        "",
        "### Integer blocks (int32), per algorithm (all collectives and modes pooled)", "",
        "| kind | algorithm | tried | checksum | provenance | values | output changed | any detector |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        "| drop | ring | 1 | 1/1 | 1/1 | 1/1 | 1 | 1/1 |",
        "| drop | tree | 1 | 0/0 | 0/0 | 0/0 | 0 | 0/0 |",
        "| corrupt | ring | 2 | 2/2 | 0/0 | 1/0 | 2 | 2/2 |",
        "| stop | ring | 1 | — | — | — | — | watchdog 1/1 |",
        "| stop | tree | 1 | — | — | — | — | watchdog 1/0 |",
        "",
        "### Floats (fp32 and bf16, standard normal inputs), every algorithm and mode pooled", "",
        "| kind | collective | dtype | tried | checksum | provenance | values | output changed | any detector |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
        "| corrupt | all-reduce | bf16 | 1 | 1/1 | 0/0 | 0/0 | 1 | 1/1 |",
        "| corrupt | all-reduce | fp32 | 3 | 3/3 | 0/0 | 1/1 | 2 | 3/3 |",
        "| duplicate | all-reduce | bf16 | 1 | 1/1 | 0/0 | 0/0 | 0 | 1/1 |",
        "",
        "### Float corruptions the values detector cannot see, by corrupted bit", "",
        "| dtype | bit class | tried | values missed | output unchanged |", "|---|---|---:|---:|---:|",
        "| bf16 | mantissa low | 1 | 1 | 0 |",
        "| fp32 | exponent | 1 | 0 | 0 |",
        "| fp32 | mantissa low | 2 | 2 | 1 |",
        ""]


def test_markdown_leaves_out_the_tables_without_rows():
    ints = markdown([r for r in ROWS if r["dtype"] == "int32"])
    assert "### Floats" not in ints and "### Float corruptions" not in ints and ints.count("### ") == 2
    floats = markdown([r for r in ROWS if r["dtype"] != "int32" and r["kind"] != "corrupt"])
    assert floats.count("### ") == 1 and "### Float corruptions" not in floats
    assert markdown([]) == ""


def test_summary_counts_the_rows_written_by_hand():
    """Integer message faults: 4 (2 corruptions, 2 drops), 3 found and located by some detector (the drop of the
    tree found by none); stops: 2 of every dtype, 1 located."""
    assert summary(ROWS) == {"trials": 11, "integer_any_found": [3, 4], "integer_any_located": [3, 4],
                             "stop_located": [1, 2]}
    partly = [_msg("drop", found=("output",))]
    assert summary(partly) == {"trials": 1, "integer_any_found": [1, 1], "integer_any_located": [0, 1],
                               "stop_located": [0, 0]}


# -- the trials' inputs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [4, 5])
def test_the_trials_numel_pads_the_last_shard_by_one_element(n):
    """The module's choice of numel (4N - 1): the plain layout (N chunks) and the split one (2 per shard) both pad
    by exactly one element, so the last shard is short and no chunk is padding only."""
    for name in ("ring", "bidirectional-ring"):
        layout = layout_for(build("all-reduce", n, name), _numel(n))
        assert layout.numel == 4 * n - 1 and layout.padded_numel - layout.numel == 1, name


def test_an_integer_world_is_the_seeded_blocks_padded():
    schedule = build("all-reduce", 4, "ring")
    world = _world(schedule, resolve_dtype("int32"), np.random.default_rng(7))
    seed = int(np.random.default_rng(7).integers(2 ** 31))  # the world draws its blocks' seed below 2^31
    blocks = integer_blocks(4, 15, seed, "int32")
    assert world.dtype == np.int32 and world.shape == (4, 16)
    assert np.array_equal(world[:, :15], blocks) and not world[:, 15].any()


def test_an_int64_world_is_drawn_as_int64_blocks():
    """Integer blocks are drawn per dtype (their bound depends on it): an int64 world is not int32 blocks widened."""
    world = _world(build("all-reduce", 4, "ring"), resolve_dtype("int64"), np.random.default_rng(7))
    seed = int(np.random.default_rng(7).integers(2 ** 31))
    assert world.dtype == np.int64 and np.array_equal(world[:, :15], integer_blocks(4, 15, seed, "int64"))


def test_a_float_world_is_standard_normals_in_the_dtype():
    schedule = build("reduce-scatter", 5, "ring")
    dtype = resolve_dtype("bf16")
    world = _world(schedule, dtype, np.random.default_rng(3))
    want = np.random.default_rng(3).standard_normal((5, 19)).astype(dtype)
    assert world.dtype == dtype and world.shape == (5, 20)
    assert np.array_equal(world[:, :19].view(np.uint16), want.view(np.uint16))


def test_an_all_gather_world_holds_only_each_ranks_own_chunk():
    schedule = build("all-gather", 4, "ring")
    world = _world(schedule, resolve_dtype("int32"), np.random.default_rng(1))
    layout = layout_for(schedule, 15)
    seed = int(np.random.default_rng(1).integers(2 ** 31))
    blocks = layout.pad(integer_blocks(4, 15, seed, "int32"), np.empty((4, 16), np.int32))
    for r in range(4):
        own = slice(layout.start(r), layout.start(r + 1))
        assert np.array_equal(world[r, own], blocks[r, own])
        rest = np.ones(16, bool)
        rest[own] = False
        assert not world[r, rest].any(), r


@pytest.mark.parametrize("collective, name", [("all-reduce", "ring"), ("reduce-scatter", "ompi:ring"),
                                              ("all-gather", "recursive-doubling")])
def test_drawn_faults_name_a_message_of_their_step(collective, name):
    """Every drawn message fault is one row of its step (link and chunk); a corruption's element lies in the
    chunk's payload (an engine's partition: its own length) and its bit in the element's storage; a misroute
    goes to a rank other than the receiver; a stop names a rank."""
    rng = np.random.default_rng(11)
    for dtype in map(resolve_dtype, ("int32", "bf16")):
        schedule = build(collective, 5, name, numel=_numel(5), itemsize=dtype.itemsize)
        layout = layout_for(schedule, _numel(5))
        bounds = schedule.step_bounds()
        for kind in KINDS:
            for _ in range(20):
                fault = _draw(kind, schedule, dtype, rng)
                assert fault.kind == kind and 0 <= fault.step < schedule.n_steps
                if kind == "stop":
                    assert 0 <= fault.rank < 5
                    continue
                rows = schedule.table[bounds[fault.step]:bounds[fault.step + 1]].tolist()
                assert [fault.src, fault.dst, fault.chunk] in [row[1:4] for row in rows], fault
                if kind == "corrupt":
                    width = layout.payload(fault.chunk) if schedule.partition else layout.chunk_size
                    assert 0 <= fault.elem < width and 0 <= fault.bits[0] < 8 * dtype.itemsize
                if kind == "misroute":
                    assert fault.to != fault.dst and 0 <= fault.to < 5


def test_every_stop_a_trial_can_draw_is_found_and_located():
    """Every order of the registry at N = 5, every step and every rank: the collective raises RankStopped naming
    that rank and step."""
    for (collective, name), entry in REGISTRY.items():
        schedule = build(collective, 5, name, numel=_numel(5), itemsize=4)
        world = _world(schedule, resolve_dtype("int32"), np.random.default_rng(0))
        for step in range(schedule.n_steps):
            for rank in range(5):
                assert _stop_trial(schedule, world, Fault("stop", step, rank=rank), "fused") == (True, True), (
                    collective, name, step, rank)


# -- run_trials: which trials it runs ------------------------------------------------------------------------------
def test_run_trials_runs_every_supported_order_kind_and_mode_once_per_trial():
    class Bar:
        updates = 0

        def update(self):
            Bar.updates += 1
    rows = run_trials(trials=1, seed=5, dtypes=("int32",), ranks=(5,), bar=Bar())
    supported = {key for key, entry in REGISTRY.items() if entry.unsupported(5) is None}
    assert Bar.updates == len(REGISTRY)
    assert len(rows) == len(supported) * len(KINDS) * len(MODES)
    assert {(r["collective"], r["algorithm"]) for r in rows} == supported
    for r in rows:
        assert r["n_ranks"] == 5 and r["dtype"] == "int32" and r["mode"] in MODES and r["kind"] in KINDS
        fault = parse_fault(r["fault"])
        schedule = build(r["collective"], 5, r["algorithm"], numel=_numel(5), itemsize=4)
        assert fault.kind == r["kind"] and fault.step < schedule.n_steps
        if r["kind"] == "stop":
            assert r["found"] and r["located"], r
            continue
        bounds = schedule.step_bounds()
        rows_of_step = schedule.table[bounds[fault.step]:bounds[fault.step + 1]].tolist()
        assert [fault.src, fault.dst, fault.chunk] in [row[1:4] for row in rows_of_step], r
        assert r["checksum"] == {"found": True, "located": True}, r  # the checksums see every message fault
        assert r["output"]["located"] is False  # the output detector names no step
        if r["kind"] == "corrupt":
            assert r["bit_class"] == bit_classes("int32")[fault.bits[0]]
        else:
            assert "bit_class" not in r


def test_run_trials_defaults_are_the_commands():
    """``ringemu faults`` with no flags and ``run_trials()`` run the same trials (6 per cell, seed 0)."""
    import argparse
    import inspect
    from ringemu.cli.faults import register
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["faults"])
    defaults = inspect.signature(run_trials).parameters
    assert (args.trials, args.seed) == (defaults["trials"].default, defaults["seed"].default) == (6, 0)


def test_run_trials_ignores_the_floating_point_state_it_is_called_in():
    """Corrupted exponents make infinities and NaNs on purpose: run_trials must not raise even where the caller
    has made every floating-point exception an error."""
    with np.errstate(all="raise"):
        rows = run_trials(trials=2, seed=1, dtypes=("bf16",), ranks=(4,))
    assert rows and all(r["dtype"] == "bf16" for r in rows)


def test_run_trials_follows_its_seed():
    one = run_trials(trials=1, seed=2, dtypes=("fp32",), ranks=(4,))
    assert run_trials(trials=1, seed=2, dtypes=("fp32",), ranks=(4,)) == one
    assert [r["fault"] for r in run_trials(trials=1, seed=3, dtypes=("fp32",), ranks=(4,))] != [r["fault"]
                                                                                                 for r in one]
    assert len(run_trials(trials=2, seed=2, dtypes=("fp32",), ranks=(4,))) == 2 * len(one)
