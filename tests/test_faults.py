"""Faults as data (ringemu.faults.plan): the grammar, what each fault does to a schedule, the link layer's checks,
the watchdog, and that no fault leaves a partial result or touches the caller's buffers."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringemu import collectives
from ringemu.algorithms import REGISTRY
from ringemu.worlds.emulator import EmulatedWorld, RankFailure
from ringemu.blocks import integer_blocks
from ringemu.execute import run_schedule
from ringemu.faults.plan import FaultPlan, as_plan, sub_schedule
from ringemu.faults.spec import Fault, MessageFault, RankStopped, parse_fault
from ringemu.layout import ChunkLayout
from ringemu.reference import run_schedule_reference
from ringemu.schedule import Schedule
from strategies_faults import faulty_runs



# -- grammar -----------------------------------------------------------------------------------------------------
def test_spec_round_trips():
    for spec in ("corrupt:label=grad_reduce_scatter,step=3,src=2,dst=3,bit=30",
                 "stop:label=param_all_gather_bwd,step=2,rank=5", "misroute:call=4,step=0,src=1,dst=2,to=0",
                 "corrupt:step=1,src=0,dst=1,chunk=2,bit=1+7,elem=3", "drop:step=0,src=0,dst=1",
                 "duplicate:label=x,step=9,src=4,dst=5"):
        assert parse_fault(spec).spec() == spec
        assert parse_fault(parse_fault(spec).spec()) == parse_fault(spec)


@pytest.mark.parametrize("spec, words", [
    ("explode:step=1", "must start with one of"), ("corrupt:step=1,src=0,dst=1", "needs bit"),
    ("drop:src=0,dst=1", "needs step"), ("drop:step=-1,src=0,dst=1", "integer >= 0"),
    ("drop:step=1,src=0,dst=1,colour=red", "unknown field 'colour'"), ("drop:step=1,src=0,dst=1,src=2", "twice"),
    ("stop:step=1", "needs rank"), ("drop:step=1,src=0,dst=1,bit=3", "does not take bit"),
    ("misroute:step=1,src=0,dst=1,to=1", "own destination"), ("drop:step", "KEY=VALUE"),
    ("stop:step=1,rank=2,src=1", "does not take src"), ("stop:step=1,rank=2,chunk=0", "does not take chunk"), ("drop:step=99999999999999999999,src=0,dst=1", "integer"),
])
def test_bad_specs_are_named(spec, words):
    with pytest.raises(ValueError, match=words):
        parse_fault(spec)


def test_bad_faults_argument():
    with pytest.raises(TypeError, match="faults must be"):
        as_plan(3.5)
    with pytest.raises(TypeError, match="spec must be a str"):
        parse_fault(b"drop:step=1")


def test_a_fault_that_does_not_fit_the_schedule_is_named():
    world = integer_blocks(4, 8, 0, "int32")
    with pytest.raises(ValueError, match=r"no message 1->3 at step 2 .* that step sends: 0->1 c1"):
        collectives.all_reduce(world, faults="drop:step=2,src=1,dst=3")
    with pytest.raises(ValueError, match=r"has steps 0\.\.5"):
        collectives.all_reduce(world, faults="drop:step=6,src=1,dst=2")
    with pytest.raises(ValueError, match=r"rank=7 is not a rank"):
        collectives.all_reduce(world, faults="stop:step=1,rank=7")
    with pytest.raises(ValueError, match=r"bit < 32"):
        collectives.all_reduce(world, faults="corrupt:step=1,src=1,dst=2,bit=32")
    with pytest.raises(ValueError, match="size-only"):
        from ringemu.virtual import VirtualBuffer
        collectives.all_reduce(VirtualBuffer((4, 8), "int32"), faults="drop:step=1,src=1,dst=2")


# -- what a fault does: checked against the reference run of an edited table -------------------------------------
def _edited(schedule: Schedule, fault: Fault, row: int) -> Schedule:
    """The schedule with the faulty message edited into its table: dropped (row removed), duplicated (row
    repeated) or misrouted (dst replaced). run_schedule_reference executes such a table with the schedule
    semantics — an oracle independent of ringemu.faults.plan."""
    table = np.array(schedule.table)
    if fault.kind == "drop":
        table = np.delete(table, row, axis=0)
    elif fault.kind == "duplicate":
        table = np.insert(table, row + 1, table[row], axis=0)
    elif fault.kind == "misroute":
        table[row, 2] = fault.to
    return Schedule("edited", schedule.n_ranks, schedule.n_chunks, schedule.n_steps, table, schedule.initial,
                    schedule.final)


@given(faulty_runs())
def test_message_faults_match_the_edited_schedule_and_the_link_layer_names_them(case):
    schedule, world, fault, row, mode = case
    if fault.kind == "corrupt":
        bounds = schedule.step_bounds()
        rows = schedule.table[bounds[fault.step]:bounds[fault.step + 1]]
        sends = ((rows[:, 1] == fault.src) & (rows[:, 3] == fault.chunk)).sum()
        receives = ((rows[:, 2] == fault.src) & (rows[:, 3] == fault.chunk)).any()
        # oracle: flip the bit in the sender's buffer for the one step (valid when it sends that chunk once and
        # does not itself add into it in that step, as both partners of an exchange schedule do)
        if sends != 1 or receives or fault.chunk is None:
            return
        want = world.copy()
        run_schedule_reference(sub_schedule(schedule, 0, fault.step), want)
        chunk = world.shape[1] // schedule.n_chunks
        bits = want.view(np.uint32 if want.dtype.itemsize == 4 else np.uint16)
        pos = (fault.src, fault.chunk * chunk + fault.elem)
        bits[pos] ^= bits.dtype.type(1) << bits.dtype.type(fault.bits[0])
        run_schedule_reference(sub_schedule(schedule, fault.step, fault.step + 1), want)
        bits[pos] ^= bits.dtype.type(1) << bits.dtype.type(fault.bits[0])  # the sender's own copy was not hit
        if fault.step + 1 < schedule.n_steps:
            run_schedule_reference(sub_schedule(schedule, fault.step + 1, schedule.n_steps), want)
    else:
        want = world.copy()
        run_schedule_reference(_edited(schedule, fault, row), want)
    got = world.copy()
    FaultPlan((fault,), checksums=False).run(schedule, got, mode, "x")
    assert got.view(np.uint8).tobytes() == want.view(np.uint8).tobytes()

    checked = world.copy()
    with pytest.raises(MessageFault) as info:
        FaultPlan((fault,)).run(schedule, checked, mode, "x")
    assert info.value.link == (fault.src, fault.dst) and info.value.step == fault.step and info.value.label == "x"
    assert f"link {fault.src}->{fault.dst}" in str(info.value) and f"step {fault.step} " in str(info.value)


@given(faulty_runs(kinds=("drop",)), st.integers(0, 5))
def test_stopped_rank_fails_the_collective_naming_rank_collective_and_step(case, rank):
    schedule, world, _, _, mode = case
    rank %= schedule.n_ranks
    step = schedule.n_steps - 1
    with pytest.raises(RankStopped) as info:
        FaultPlan((Fault("stop", step, rank=rank),)).run(schedule, world.copy(), mode, "grads")
    text = str(info.value)
    assert info.value.ranks == (rank,) and info.value.step == step
    assert f"rank {rank} stopped" in text and "'grads'" in text and f"step {step} " in text


def test_no_fault_path_is_the_kernels_alone_and_untouched_by_a_plan_that_does_not_fire():
    world = integer_blocks(5, 23, 3, "int32")
    clean = collectives.all_reduce(world)
    plan = FaultPlan(("drop:label=other,step=0,src=0,dst=1",))
    assert np.array_equal(collectives.all_reduce(world, faults=plan), clean)
    assert plan.unfired() and plan.labels_seen() == ["all_reduce"]


@pytest.mark.parametrize("call", ["reduce_scatter", "all_gather", "all_reduce", "naive_all_reduce"])
def test_a_failed_collective_leaves_the_inputs_alone(call):
    world = integer_blocks(4, 9, 1, "int32")
    before = world.copy()
    arg = [world[r, ChunkLayout(9, 4).payload_slice(r)] for r in range(4)] if call == "all_gather" else world
    with pytest.raises(RankStopped):
        getattr(collectives, call)(arg, faults="stop:step=0,rank=1")
    assert np.array_equal(world, before)


def test_each_fault_fires_once_at_its_call():
    world = integer_blocks(4, 8, 0, "int32")
    plan = FaultPlan(("drop:label=g,call=1,step=0,src=0,dst=1",))
    collectives.all_reduce(world, faults=plan, label="g")  # call 0: clean
    with pytest.raises(MessageFault):
        collectives.all_reduce(world, faults=plan, label="g")
    collectives.all_reduce(world, faults=plan, label="g")  # call 2: clean again
    assert [f.kind for f, _, _ in plan.fired] == ["drop"] and not plan.unfired()


def test_emulated_world_names_the_fault_not_rank_zero():
    def body(comm):
        return comm.reduce_scatter(np.arange(8, dtype=np.int32) + comm.rank, label="grads")

    with pytest.raises(RankFailure, match=r"rank 2 stopped: collective 'grads' .* step 1 ") as info:
        EmulatedWorld(4, faults="stop:label=grads,step=1,rank=2").run(body)
    assert isinstance(info.value.__cause__, RankStopped)
    with pytest.raises(RankFailure, match=r"message corrupted: collective 'grads'.*link 0->1"):
        EmulatedWorld(4, faults="corrupt:step=0,src=0,dst=1,bit=0").run(body)


def test_sub_schedules_compose_to_the_whole():
    schedule = REGISTRY[("all-reduce", "ring")].build(5)
    world = integer_blocks(5, 20, 2, "int32")
    whole, parts = world.copy(), world.copy()
    run_schedule(schedule, whole)
    for lo, hi in ((0, 3), (3, 4), (4, 8)):
        run_schedule(sub_schedule(schedule, lo, hi), parts)
    assert np.array_equal(whole, parts)


def test_the_ledger_carries_the_faulty_steps_message_records():
    from ringemu.ledger import CommLedger
    ledger = CommLedger()
    with pytest.raises(MessageFault):
        collectives.all_reduce(integer_blocks(4, 8, 0, "int32"), ledger=ledger,
                               faults="corrupt:step=1,src=0,dst=1,bit=2")
    # ring all-reduce on 4 ranks sends 4 messages per step, one per link r -> r+1
    assert [(m.step, m.src, m.dst) for m in ledger.messages] == [(1, r, (r + 1) % 4) for r in range(4)]
    bad = [m for m in ledger.messages if m.sent_crc != m.received_crc]
    assert [(m.src, m.dst) for m in bad] == [(0, 1)]
    clean = CommLedger()
    collectives.all_reduce(integer_blocks(4, 8, 0, "int32"), ledger=clean)
    assert clean.messages == []
