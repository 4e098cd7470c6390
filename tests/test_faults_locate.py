"""Detecting and locating faults without being told them (ringemu.faults.locate), the report, and the CLI."""
import json

import numpy as np
from hypothesis import given

from ringemu.cli import main
from ringemu.faults.locate import DETECTORS, detect, explain, located, observe
from ringemu.faults.spec import Fault
from ringemu.faults.report import markdown, run_trials
from ringemu.provenance import initial_provenance, run_provenance
from ringemu.schedule import COPY

from strategies_faults import faulty_runs


@given(faulty_runs())
def test_the_checksums_locate_every_message_fault(case):
    schedule, world, fault, _, mode = case
    finding = detect(observe(schedule, world, [fault], mode), "checksum")
    assert located(finding, fault), (fault, finding)


@given(faulty_runs())
def test_the_other_detectors_never_blame_a_wrong_step_or_miss_the_link(case):
    """Whatever provenance and values find is at the fault's step and includes its link: a detector may miss a
    fault that left no trace in what it reads, but it never points elsewhere."""
    schedule, world, fault, _, mode = case
    obs = observe(schedule, world, [fault], mode)
    for d in ("provenance", "values"):
        finding = detect(obs, d)
        if finding is not None:
            assert finding.step == fault.step and fault.link in finding.links, (d, fault, finding)


@given(faulty_runs(kinds=("drop", "misroute")))
def test_provenance_sees_every_drop_and_misroute_of_a_message_that_mattered(case):
    """A lost message leaves its receiver without contributions the schedule promised; a misrouted one too —
    unless the message was redundant, a copy of contributions the receiver already held (no algorithm of the
    registry sends one today; if one did, nothing but the message accounting could tell)."""
    schedule, world, fault, row, mode = case
    finding = detect(observe(schedule, world, [fault], mode), "provenance")
    _, history = run_provenance(schedule, record_steps=True)
    before = history[fault.step - 1] if fault.step else initial_provenance(schedule)
    _, _, _, chunk, op = schedule.table[row].tolist()
    redundant = op == COPY and before[fault.dst][chunk] == before[fault.src][chunk]
    if fault.kind == "misroute":
        redundant = redundant and before[fault.to][chunk] == before[fault.src][chunk]
    if not redundant:
        assert finding is not None and finding.step == fault.step


@given(faulty_runs(kinds=("corrupt",)))
def test_values_see_every_integer_corruption(case):
    """Integer addition is injective in each addend, so a flipped bit always changes the receiver's cell:
    conservation of the column sums catches it at its step."""
    schedule, world, fault, _, mode = case
    if world.dtype != np.int32:
        return
    finding = detect(observe(schedule, world, [fault], mode), "values")
    assert finding is not None and finding.step == fault.step


def test_a_clean_run_has_no_findings():
    from ringemu.algorithms import REGISTRY
    from ringemu.blocks import integer_blocks
    schedule = REGISTRY[("all-reduce", "ring")].build(5)
    obs = observe(schedule, integer_blocks(5, 20, 0, "int32"), [], "fused")
    assert all(detect(obs, d) is None for d in DETECTORS)


def test_explain_shows_where_the_value_entered_and_spread():
    from ringemu.algorithms import REGISTRY
    from ringemu.blocks import integer_blocks
    schedule = REGISTRY[("all-reduce", "ring")].build(4)
    fault = Fault("corrupt", 1, src=1, dst=2, bits=(4,))
    lines, wrong = explain(schedule, integer_blocks(4, 4, 0, "int32"), [fault])
    # ring all-reduce on 4 ranks: at step 1 rank 1 sends chunk 3 to rank 2 (chunk r - step mod N); the wrong sum
    # is forwarded 2->3 at step 2, and from step 3 on the all-gather copies it to every rank
    assert wrong[1] == {(2, 3)} and wrong[2] == {(2, 3), (3, 3)} and len(wrong[5]) == 4
    assert any(line.startswith("entered at step 1: rank 2 chunk 3") for line in lines)


def test_report_counts_every_kind_algorithm_and_mode():
    rows = run_trials(trials=1, dtypes=("int32",), ranks=(4,))
    ints = [r for r in rows if r["kind"] != "stop"]
    assert all(any(r[d]["located"] for d in DETECTORS) for r in ints)
    assert all(r["found"] and r["located"] for r in rows if r["kind"] == "stop")
    assert {r["mode"] for r in rows} == {"fused", "step", "reference"}
    assert "| corrupt | all-reduce | fused |" in markdown(rows) and "| corrupt | ring | " in markdown(rows)


def test_cli_trace_with_a_fault(capsys):
    assert main(["trace", "--op", "all-reduce", "--ranks", "4", "--numel", "4", "--fault",
                 "corrupt:step=1,src=1,dst=2,bit=4"]) == 0
    out = capsys.readouterr().out
    assert "entered at step 1: rank 2 chunk 3" in out and "!" in out
    assert main(["trace", "--op", "all-reduce", "--ranks", "4", "--numel", "4", "--json", "--fault",
                 "drop:step=0,src=0,dst=1"]) == 0
    assert json.loads(capsys.readouterr().out)["faults"]["wrong_cells"]["0"] == [[1, 3]]


def test_cli_run_fails_in_one_line_or_verifies_no(capsys):
    args = ["run", "--op", "reduce-scatter", "--ranks", "4", "--numel", "9", "--dtype", "int32"]
    assert main(args + ["--fault", "duplicate:step=1,src=0,dst=1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "message duplicated" in err and "link 0->1" in err
    assert main(args + ["--fault", "duplicate:step=1,src=0,dst=1", "--no-checksums"]) == 1
    assert "verified: NO" in capsys.readouterr().out
    assert main(args + ["--fault", "stop:step=1,rank=9"]) == 2
    assert "rank=9 is not a rank" in capsys.readouterr().err
    assert main(args + ["--fault", "drop:label=nope,step=1,src=0,dst=1"]) == 2
    assert "never fired" in capsys.readouterr().err
    assert main(args + ["--no-checksums"]) == 2
    assert "--no-checksums needs --fault" in capsys.readouterr().err


def test_faults_command_refuses_bad_counts_in_one_line(capsys):
    assert main(["faults", "--trials", "0"]) == 2
    assert main(["faults", "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "--trials must be" in err and "--seed must be" in err
