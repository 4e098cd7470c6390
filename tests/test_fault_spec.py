"""The fault vocabulary word for word: the grammar's refusals name the spec, the field and what is allowed; a
fault that does not fit a schedule lists what the step does send; the watchdog names who stopped and who was
released; a plan counts calls per label and for any label. Expected schedules are worked by hand: a ring
all-reduce on N ranks sends chunk (r − s − 1) mod N from r to r + 1 at step s of its 2(N − 1); Rabenseifner's
all-reduce on 8 ranks pairs rank r with r xor 4, 2, 1, then 1, 2, 4."""
import numpy as np
import pytest

from ringemu import algorithms
from ringemu.blocks import integer_blocks
from ringemu.faults import plan as plan_module
from ringemu.faults.plan import FaultPlan, as_plan, sub_schedule
from ringemu.faults.spec import CollectiveFault, Fault, FaultSpecError, RankStopped, parse_fault, with_step

RING4 = "that step sends: 0->1 c1, 1->2 c2, 2->3 c3, 3->0 c0"  # step 2 of the ring all-reduce on 4 ranks


def _refusal(spec):
    with pytest.raises(ValueError) as err:
        parse_fault(spec)
    return str(err.value)


@pytest.mark.parametrize("spec, message", [
    ("explode:step=1", "fault spec 'explode:step=1' must start with one of drop:, corrupt:, duplicate:, misroute:, "
                       "stop:"),
    ("drop:step=,src=0,dst=1", "fault spec 'drop:step=,src=0,dst=1': 'step=' must be KEY=VALUE"),
    ("drop:step=0,src=x,dst=1", "fault spec 'drop:step=0,src=x,dst=1': src must be an integer >= 0; got 'x'"),
    ("corrupt:step=0,src=0,dst=1,bit=1+y", "fault spec 'corrupt:step=0,src=0,dst=1,bit=1+y': bit must be an integer "
                                           ">= 0; got 'y'"),
    ("drop:step=1,src=0,dst=1,colour=red", "fault spec 'drop:step=1,src=0,dst=1,colour=red': unknown field 'colour' "
                                           "(allowed: label, bit, call, step, src, dst, chunk, elem, to, rank)"),
    ("drop:step=" + "1" + "0" * 18 + ",src=0,dst=1", "fault spec 'drop:step=1" + "0" * 18 + ",src=0,dst=1': step "
                                                     "must be an integer >= 0; got '1" + "0" * 18 + "'"),
])
def test_grammar_refusals_quote_the_spec_and_say_what_is_allowed(spec, message):
    """Each refusal names the whole spec, the field, and the allowed form; integers have at most 18 digits
    (every one below 2^63)."""
    assert _refusal(spec) == message


def test_the_largest_integer_of_the_grammar_is_accepted():
    """18 digits is the most a field may have: 999,999,999,999,999,999 parses."""
    assert parse_fault("drop:step=" + "9" * 18 + ",src=0,dst=1").step == 10 ** 18 - 1


def test_a_label_may_hold_colons_and_equals_signs():
    """Only the first ':' ends the kind and only the first '=' ends a key: a label such as ``lr=1e-3:grads``
    is kept whole, and the spec round-trips."""
    f = parse_fault("drop:label=lr=1e-3:grads,step=0,src=0,dst=1")
    assert f.label == "lr=1e-3:grads" and parse_fault(f.spec()) == f


def test_a_spec_must_be_text():
    with pytest.raises(TypeError) as err:
        parse_fault(b"drop:step=1")
    assert str(err.value) == "fault spec must be a str; got bytes"
    with pytest.raises(TypeError) as err:
        as_plan(5)
    assert str(err.value) == "faults must be None, a FaultPlan, or a list of Fault objects or spec strings; got int"


def test_a_collective_fault_starts_with_no_restored_states():
    """``states`` is an empty mapping for callers that roll back to fill in."""
    fault = CollectiveFault("m", "x", 1, (0,))
    assert fault.states == {} and fault.ranks == (0,) and fault.link is None


def test_with_step_moves_the_fault_and_nothing_else():
    f = parse_fault("corrupt:label=g,step=0,src=1,dst=2,bit=3,elem=2")
    assert with_step(f, 5) == Fault("corrupt", 5, label="g", src=1, dst=2, bits=(3,), elem=2) and f.step == 0


@pytest.mark.parametrize("spec, message", [
    ("drop:step=2,src=1,dst=3", f"fault drop:step=2,src=1,dst=3: no message 1->3 at step 2 of 'grads' "
                                f"(ring_all_reduce); {RING4}"),
    ("drop:step=2,src=0,dst=1,chunk=3", f"fault drop:step=2,src=0,dst=1,chunk=3: no message 0->1 of chunk 3 at step 2 "
                                        f"of 'grads' (ring_all_reduce); {RING4}"),
    ("drop:step=0,src=1,dst=3", "fault drop:step=0,src=1,dst=3: no message 1->3 at step 0 of 'grads' "
                                "(ring_all_reduce); that step sends: 0->1 c3, 1->2 c0, 2->3 c1, 3->0 c2"),
    ("drop:step=6,src=0,dst=1", "fault drop:step=6,src=0,dst=1: 'grads' (ring_all_reduce) has steps 0..5"),
])
def test_a_fault_the_schedule_lacks_is_named_with_what_it_has(spec, message):
    """Checked when it fires, in the collective that carries the label: the error names the label and lists
    the messages of that step (link and chunk), or the steps there are."""
    schedule = algorithms.build("all-reduce", 4, "ring")
    with pytest.raises(FaultSpecError) as err:
        FaultPlan((spec,)).run(schedule, integer_blocks(4, 8, 0, "int32"), "fused", "grads")
    assert str(err.value) == message


@pytest.mark.parametrize("ranks, released, words", [
    ((0,), [2, 4], "rank 0 stopped: {where} cannot finish; the watchdog released ranks [2, 4] that waited for its "
                   "messages (no partial result)"),
    ((0, 2), [4, 6], "ranks 0, 2 stopped: {where} cannot finish; the watchdog released ranks [4, 6] that waited for "
                     "their messages (no partial result)"),
])
def test_the_watchdog_releases_exactly_the_ranks_still_waiting(ranks, released, words):
    """Stopped at step 4 of Rabenseifner's all-reduce on 8 ranks, rank 0 still owes steps 4 and 5 to ranks 2 and
    4 (not 1, its partner at steps 2 and 3, already served); ranks 0 and 2 together owe 4 and 6 (each other's
    messages are nobody's wait)."""
    schedule = algorithms.build("all-reduce", 8, "halving-doubling")
    plan = FaultPlan(tuple(Fault("stop", 4, rank=r) for r in ranks))
    with pytest.raises(RankStopped) as err:
        plan.run(schedule, integer_blocks(8, 16, 0, "int32"), "fused", "grads")
    where = "collective 'grads' (rabenseifner_all_reduce, 8 ranks), step 4 of 0..5"
    assert str(err.value) == words.format(where=where)
    assert (err.value.label, err.value.step, err.value.ranks) == ("grads", 4, ranks)


def test_calls_are_counted_per_label_and_for_any_label():
    """A labelled fault fires at that label's call K, an unlabelled one at the run's K-th collective call of any
    label, each exactly once."""
    plan = FaultPlan((Fault("drop", 0, label="b", src=0, dst=1), Fault("drop", 0, call=1, src=0, dst=1)))
    fired = [[str(f) for f in plan.take(label)] for label in ("a", "b", "a", "b")]
    assert fired == [[], ["drop:label=b,step=0,src=0,dst=1", "drop:call=1,step=0,src=0,dst=1"], [], []]
    assert plan.labels_seen() == ["a", "b"]


def test_without_a_firing_fault_the_callers_mode_reaches_the_kernels():
    """A plan whose faults do not fire runs the schedule exactly as asked, mode included (an unknown mode is
    refused by the executor as it would be without a plan)."""
    schedule = algorithms.build("all-reduce", 4, "ring")
    with pytest.raises(ValueError, match="mode must be one of fused, step, reference; got 'bogus'"):
        FaultPlan(("drop:label=other,step=0,src=0,dst=1",)).run(schedule, integer_blocks(4, 8, 0, "int32"), "bogus",
                                                               "grads")


def test_a_sub_schedule_is_named_by_its_steps():
    """Steps [1, 3) of a schedule: two steps, renumbered from 0, named ``NAME[steps 1..2]``."""
    schedule = algorithms.build("all-reduce", 4, "ring")
    part = sub_schedule(schedule, 1, 3)
    assert part.name == "ring_all_reduce[steps 1..2]" and part.n_steps == 2
    assert sorted(set(part.table[:, 0].tolist())) == [0, 1]


@pytest.mark.parametrize("make, message", [
    (lambda: Fault("explode", 0), "fault kind must be one of drop, corrupt, duplicate, misroute, stop; got 'explode'"),
    (lambda: Fault("drop", -1, src=0, dst=1), "fault field step must be an integer >= 0; got -1"),
    (lambda: Fault("drop", 0, src=True, dst=1), "fault field src must be an integer >= 0; got True"),
    (lambda: Fault("drop", 0, src=1.5, dst=1), "fault field src must be an integer >= 0; got 1.5"),
    (lambda: Fault("corrupt", 0, src=0, dst=1, bits=[1]), "fault field bit must be integers >= 0; got [1]"),
    (lambda: Fault("corrupt", 0, src=0, dst=1, bits=(1.5,)), "fault field bit must be integers >= 0; got (1.5,)"),
    (lambda: Fault("corrupt", 0, src=0, dst=1, bits=(True,)), "fault field bit must be integers >= 0; got (True,)"),
    (lambda: Fault("corrupt", 0, src=0, dst=1, bits=(-1,)), "fault field bit must be integers >= 0; got (-1,)"),
    (lambda: Fault("drop", 0, label="", src=0, dst=1), "fault field label must be a non-empty str; got ''"),
    (lambda: Fault("drop", 0, label=5, src=0, dst=1), "fault field label must be a non-empty str; got 5"),
    (lambda: Fault("misroute", 0), "fault misroute needs src, dst, to (grammar: misroute:step=...,src=...,dst=...,"
                                   "to=...)"),
    (lambda: Fault("drop", 0, src=0, dst=1, to=2), "fault drop does not take to"),
    (lambda: Fault("duplicate", 0, src=0, dst=1, rank=3), "fault duplicate does not take rank"),
    (lambda: Fault("stop", 0, rank=1, src=0, chunk=1), "fault stop does not take src, chunk"),
])
def test_a_fault_record_refuses_fields_out_of_its_kind(make, message):
    """Integers >= 0 (no bool, no float), bits a tuple of such, a non-empty label, exactly the fields the kind
    needs (a message fault has its link, a stop its rank), nothing the kind does not use."""
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def test_numpy_integers_are_fields_too():
    assert Fault("drop", np.int64(2), src=np.int32(0), dst=1).step == 2


def test_world_checks_name_the_missing_rank_and_the_one_rank_world():
    """Ranks are 0..N−1 (rank N is none); with one rank nothing is sent, so any fault is refused."""
    FaultPlan(("stop:step=0,rank=3",)).check_world(4)
    with pytest.raises(FaultSpecError) as err:
        FaultPlan(("stop:step=0,rank=4",)).check_world(4)
    assert str(err.value) == "fault stop:step=0,rank=4: rank=4 is not a rank (ranks 0..3)"
    with pytest.raises(FaultSpecError) as err:
        FaultPlan(("drop:step=0,src=0,dst=0",)).check_world(1)
    assert str(err.value) == ("fault drop:step=0,src=0,dst=0: with N = 1 no collective sends a message, so no fault "
                              "can fire")


def test_a_plan_takes_faults_and_specs_only():
    with pytest.raises(TypeError) as err:
        FaultPlan(("drop:step=0,src=0,dst=1", 3.5))
    assert str(err.value) == "faults must be Fault objects or spec strings; got float"


@pytest.mark.parametrize("step, kernel_runs", [
    (None, [("ring_all_reduce", 6)]),
    (0, [("ring_all_reduce[steps 1..5]", 5)]),
    (2, [("ring_all_reduce[steps 0..1]", 2), ("ring_all_reduce[steps 3..5]", 3)]),
    (5, [("ring_all_reduce[steps 0..4]", 5)]),
])
def test_the_kernels_run_exactly_the_steps_around_the_faulty_one(monkeypatch, step, kernel_runs):
    """The faulty step runs message by message; the kernels run the steps before and after it, each range once
    and never an empty one, in the caller's mode."""
    calls = []
    real = plan_module.run_schedule

    def recorded(schedule, world, mode="fused"):
        calls.append((schedule.name, schedule.n_steps, mode))
        return real(schedule, world, mode)
    monkeypatch.setattr(plan_module, "run_schedule", recorded)
    faults = () if step is None else (f"drop:step={step},src=0,dst=1",)
    plan = FaultPlan(faults, checksums=False)
    plan.run(algorithms.build("all-reduce", 4, "ring"), integer_blocks(4, 8, 0, "int32"), "step", "grads")
    assert calls == [(name, n, "step") for name, n in kernel_runs]
    if step is not None:
        assert [str(f) for f, _, _ in plan.fired] == [f"drop:step={step},src=0,dst=1"] and not plan.unfired()
