"""``explain`` (what ``ringemu trace --fault`` prints) and the detectors' whole findings (ringemu.faults.locate), and
the link layer's helpers (ringemu.faults.link), checked on schedules worked by hand."""
import numpy as np
import pytest

from ringemu.algorithms import build
from ringemu.blocks import integer_blocks
from ringemu.dtypes import resolve_dtype
from ringemu.faults.locate import explain
from ringemu.faults.report import _numel, _world
from ringemu.faults.spec import Fault

# -- explain: worked on the ring all-reduce of 4 ranks ------------------------------------------------------------
RING_AR_4 = build("all-reduce", 4, "ring")  # step s: rank r sends chunk (r - s - 1) mod 4 to rank r + 1
BLOCKS = integer_blocks(4, 4, 0, "int32")
HEAD = "(steps here are 0-based, as in --fault; the walk above counts them from 1)"


def test_explain_a_corruption_that_reaches_every_rank():
    """Step 1: rank 1 sends chunk 3 to rank 2, corrupted; step 2 forwards the wrong sum 2 -> 3 (rank 3 then holds
    chunk 3 reduced); the all-gather copies it 3 -> 0, 0 -> 1, 1 -> 2 in steps 3, 4, 5."""
    fault = Fault("corrupt", 1, src=1, dst=2, bits=(4,))
    lines, wrong = explain(RING_AR_4, BLOCKS, [fault])
    assert lines == [
        "faults: corrupt:step=1,src=1,dst=2,bit=4", HEAD,
        "  checksum   step 1, link 1->2: message 1->2 chunk 3 at step 1: CRC-32 mismatch",
        "  provenance nothing found",
        "  values     step 1, link 1->2: step 1: values wrong at (rank, chunk) [(2, 3)]",
        "entered at step 1: rank 2 chunk 3",
        "  after step 1: wrong at r2c3",
        "  after step 2: wrong at r2c3 r3c3",
        "  after step 3: wrong at r0c3 r2c3 r3c3",
        "  after step 4: wrong at r0c3 r1c3 r2c3 r3c3",
        "  after step 5: wrong at r0c3 r1c3 r2c3 r3c3",
        "reached ranks [0, 1, 2, 3], chunks [3]; the result is wrong at (rank, chunk) [(0, 3), (1, 3), (2, 3), (3, 3)]"]
    assert wrong == {1: {(2, 3)}, 2: {(2, 3), (3, 3)}, 3: {(0, 3), (2, 3), (3, 3)},
                     4: {(0, 3), (1, 3), (2, 3), (3, 3)}, 5: {(0, 3), (1, 3), (2, 3), (3, 3)}}


def test_explain_a_misroute_to_the_next_rank_that_heals():
    """Chunk 3 of step 1 (rank 1's partial sum x0 + x1) goes to rank 3 instead of rank 2: rank 3 holds x0 + x1 + x3
    and rank 2 misses it. At step 2 rank 2 sends x2 to rank 3, which then holds the full sum: the misroute skipped
    one hop of the ring. Only rank 2's stale chunk 3 stays wrong, until the last all-gather copy overwrites it."""
    lines, wrong = explain(RING_AR_4, BLOCKS, [Fault("misroute", 1, src=1, dst=2, to=3)])
    assert lines == [
        "faults: misroute:step=1,src=1,dst=2,to=3", HEAD,
        "  checksum   step 1, link 1->2: message 1->2 chunk 3 at step 1: arrived at rank 3",
        "  provenance step 1, link 1->2: step 1: contributions wrong at (rank, chunk) [(2, 3), (3, 3)]",
        "  values     step 1, link 1->2: step 1: values wrong at (rank, chunk) [(2, 3), (3, 3)]",
        "entered at step 1: rank 2 chunk 3, rank 3 chunk 3",
        "  after step 1: wrong at r2c3 r3c3",
        "  after step 2: wrong at r2c3",
        "  after step 3: wrong at r2c3",
        "  after step 4: wrong at r2c3",
        "reached ranks [2, 3], chunks [3]; the result is right"]
    assert wrong == {1: {(2, 3), (3, 3)}, 2: {(2, 3)}, 3: {(2, 3)}, 4: {(2, 3)}}


def test_explain_two_faults_that_cancel_in_the_result():
    """Ring reduce-scatter of 4 ranks: flipping bit 31 adds 2^31 (mod 2^32); flipped on 0 -> 1 at step 0 and again on
    the forwarded sum 1 -> 2 at step 1, chunk 3 reaches its owner right, and only rank 1's partial sum stays wrong
    (it is not part of the result)."""
    schedule = build("reduce-scatter", 4, "ring")
    faults = [Fault("corrupt", 0, src=0, dst=1, bits=(31,)), Fault("corrupt", 1, src=1, dst=2, bits=(31,))]
    lines, wrong = explain(schedule, BLOCKS, faults)
    assert lines[0] == "faults: corrupt:step=0,src=0,dst=1,bit=31; corrupt:step=1,src=1,dst=2,bit=31"
    assert lines[-1] == "reached ranks [1], chunks [3]; the result is right"
    assert wrong == {0: {(1, 3)}, 1: {(1, 3)}, 2: {(1, 3)}}


def test_explain_a_fault_no_value_shows():
    """A duplicated copy (step 4 is an all-gather step: rank 1 copies chunk 0 to rank 2, twice) leaves every
    buffer's bits as they were: only the checksums see it, and the walk stops there."""
    lines, wrong = explain(RING_AR_4, BLOCKS, [Fault("duplicate", 4, src=1, dst=2)])
    assert lines == [
        "faults: duplicate:step=4,src=1,dst=2", HEAD,
        "  checksum   step 4, link 1->2: message 1->2 chunk 0 at step 4: arrived twice",
        "  provenance nothing found",
        "  values     nothing found",
        "the values never differed from the fault-free run (e.g. a duplicated copy, or a bit the rounding erased): "
        "only the checksums see this fault"]
    assert wrong == {}


def test_explain_names_several_links_in_the_plural():
    """Two drops in one step: the values detector blames both links; explain writes "links a->b, c->d"."""
    faults = [Fault("drop", 0, src=0, dst=1), Fault("drop", 0, src=2, dst=3)]
    lines, _ = explain(RING_AR_4, BLOCKS, faults)
    values = [line for line in lines if line.startswith("  values")]
    assert values == ["  values     step 0, links 0->1, 2->3: step 0: values wrong at (rank, chunk) [(1, 3), (3, 1)]"]


# -- the detectors' findings in full, where several transfers add into one cell in one step ----------------------
def _multi_add_rows(schedule):
    """Rows (index) of ADD transfers that share their (step, receiver, chunk) with another ADD."""
    from collections import Counter
    from ringemu.schedule import COPY
    rows = schedule.table.tolist()
    keys = Counter((s, d, c) for s, _, d, c, op in rows if op != COPY)
    return [i for i, (s, _, d, c, op) in enumerate(rows) if op != COPY and keys[(s, d, c)] > 1]


@pytest.mark.parametrize("collective, name", [("reduce-scatter", "naive"), ("all-reduce", "tree"),
                                              ("reduce-scatter", "double-binary-tree"),
                                              ("reduce-scatter", "xla-cpu:in-process")])
def test_integer_drops_and_duplicates_among_several_adds_are_located_exactly(collective, name):
    """Integer blocks, one of several additions into one cell lost or applied twice: provenance names the link
    whose contributions are missing (or held twice) and values the link whose payload is the difference, each
    that link alone, at that step, in that cell."""
    from ringemu.faults.locate import detect, located, observe
    schedule = build(collective, 5, name, numel=_numel(5), itemsize=4)
    world = _world(schedule, resolve_dtype("int32"), np.random.default_rng(4))
    rows = _multi_add_rows(schedule)
    assert rows
    for i in rows[:6]:
        step, src, dst, chunk, _ = schedule.table[i].tolist()
        for kind in ("drop", "duplicate"):
            fault = Fault(kind, step, src=src, dst=dst, chunk=chunk)
            obs = observe(schedule, world, [fault])
            for d in ("checksum", "provenance", "values"):
                finding = detect(obs, d)
                assert finding.detector == d and located(finding, fault), (kind, d, fault, finding)
                assert finding.cells == ((dst, chunk),), (kind, d, finding)


def test_observing_a_corrupted_exponent_never_raises_whatever_the_callers_float_state():
    """Flipping the top exponent bit of fp32 turns a normal number into one near 2^128 or a tiny one: the sums
    after it overflow to inf and inf - inf is NaN. Observing and replaying the run must ignore that even where
    the caller made every floating-point exception an error; the values detector still finds the step."""
    from ringemu.faults.locate import detect, observe
    schedule = build("all-reduce", 4, "ring")
    world = np.full((4, 4), 3.0e38, np.float32)
    fault = Fault("corrupt", 1, src=1, dst=2, bits=(30,))
    with np.errstate(all="raise"):
        obs = observe(schedule, world, [fault])
        finding = detect(obs, "values")
    assert finding.step == 1 and finding.links == ((1, 2),)


# -- the link layer's two helpers ---------------------------------------------------------------------------------
def test_flip_bits_flips_exactly_the_named_bits_of_one_element_and_bounds_both():
    from ringemu.faults.link import flip_bits
    from ringemu.faults.spec import FaultSpecError
    for dtype, width in ((np.uint8, 8), (np.float16, 16), (np.int32, 32), (np.float64, 64)):
        payload = np.zeros(3, dtype)
        out = flip_bits(payload, Fault("corrupt", 0, src=0, dst=1, elem=2, bits=(0, width - 1)))
        raw = out.view(f"u{np.dtype(dtype).itemsize}")
        assert raw.tolist() == [0, 0, 1 | (1 << (width - 1))] and not payload.any()  # a copy; the input kept
        with pytest.raises(FaultSpecError, match=rf"a message holds 3 elements of {width} bits \(elem < 3, "
                                                 rf"bit < {width}\)"):
            flip_bits(payload, Fault("corrupt", 0, src=0, dst=1, elem=3, bits=(0,)))
        if width < 64:
            with pytest.raises(FaultSpecError, match=f"bit < {width}"):
                flip_bits(payload, Fault("corrupt", 0, src=0, dst=1, bits=(width,)))


def test_a_fault_hits_the_first_message_of_its_step_it_matches():
    from ringemu.faults.link import first_match
    rows = [(0, 0, 1, 3, 1), (0, 0, 1, 2, 1), (0, 1, 2, 0, 1)]
    assert [first_match(rows, i, Fault("drop", 0, src=0, dst=1)) for i in range(3)] == [True, False, False]
    assert [first_match(rows, i, Fault("drop", 0, src=0, dst=1, chunk=2)) for i in range(3)] == [False, True, False]
    assert not any(first_match(rows, i, Fault("drop", 0, src=2, dst=0)) for i in range(3))


def test_the_output_detector_names_the_wrong_result_cells_and_no_step():
    from ringemu.faults.locate import detect, observe
    obs = observe(RING_AR_4, BLOCKS, [Fault("corrupt", 1, src=1, dst=2, bits=(4,))])
    finding = detect(obs, "output")
    assert finding.detector == "output" and finding.step is None and finding.links == ()
    assert finding.cells == ((0, 3), (1, 3), (2, 3), (3, 3))
    assert finding.note == "result wrong at (rank, chunk) [(0, 3), (1, 3), (2, 3), (3, 3)]"
    healed = observe(RING_AR_4, BLOCKS, [Fault("misroute", 1, src=1, dst=2, to=3)])  # see the misroute above
    assert detect(healed, "output") is None
