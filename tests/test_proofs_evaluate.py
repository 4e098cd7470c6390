"""The evaluation rule's verdicts and the words the report prints for them: a part declares its checks (and why it
has only one), a failed part says which check failed and how, a check that raised is said once, and a value is
printed exactly (a repeating decimal with its fraction)."""
from fractions import Fraction

import pytest

from proofs.claim import Claim, NotAvailable, NotCheckableHere, Part, evaluate, value_text
from proofs.rounding import GB, Decimals, Exactly, Stated

GB1 = Decimals(1, GB, "GB")
VALUE = Fraction(444_502_847_232)  # DP's per-rank model states of the anchor on 8 ranks: prints 444.5 GB


def _claim(exact, run, checks="both", printed="444.5 GB", rule=GB1, labels=("p",)):
    why = "" if checks == "both" else "one check only"
    parts = tuple(Part(label, printed, rule, checks, why) for label in labels)
    return Claim("T1", "test claim", "test", parts, exact, run)


def test_a_part_declares_its_checks_and_why_it_has_one():
    with pytest.raises(ValueError) as err:
        Part("x", "1", Exactly(), "some")
    assert str(err.value) == "checks must be one of both, exact-only, run-only; got 'some'"
    with pytest.raises(ValueError) as err:
        Part("x", "1", Exactly(), "run-only")
    assert str(err.value) == "part 'x' declares run-only without saying why (why_single)"
    wants = {c: (Part("x", "1", Exactly(), c, "w").wants_exact, Part("x", "1", Exactly(), c, "w").wants_run)
             for c in ("both", "exact-only", "run-only")}
    assert wants == {"both": (True, True), "exact-only": (True, False), "run-only": (False, True)}


def test_a_claim_has_parts_or_a_reason():
    with pytest.raises(ValueError) as err:
        Claim("T9", "s", "src")
    assert str(err.value) == "claim T9 has no parts and is not declared not-checkable"
    reasoned = Claim("T9", "s", "src", not_checkable="measured on hardware", note="12 s")
    assert reasoned.printed == "12 s"
    result = evaluate(reasoned)
    assert (result.status, result.message, result.parts) == ("not-checkable", "measured on hardware", ())
    assert _claim(None, None, labels=("a", "b")).printed == "444.5 GB / 444.5 GB"


def test_values_are_printed_exactly():
    assert value_text(None) == "—" and value_text(Fraction(1, 8)) == "0.125" and value_text(7) == "7"
    assert value_text(Fraction(16384)) == "16,384" and value_text(Fraction(1, 3)) == "0.333333… (= 1/3)"
    assert value_text(True, Stated(True)) == "yes" and value_text(True) == "True"
    assert value_text((1, 2)) == "(1, 2)" and value_text((1, 2), Stated(())) == "1 : 2"


@pytest.mark.parametrize("exact, run, checks, printed, message", [
    (lambda: (VALUE,), lambda ctx: (Fraction(444_510_000_000),), "both", "444.5 GB",
     "p: run 444,510,000,000 ≠ exact 444,502,847,232"),
    (lambda: (VALUE,), lambda ctx: (VALUE,), "both", "444.6 GB",
     "p: exact value 444,502,847,232 rounds to 444.5 GB, printed 444.6 GB"),
    (None, lambda ctx: (VALUE,), "run-only", "444.6 GB", "p: run value 444,502,847,232 rounds to 444.5 GB, printed "
                                                         "444.6 GB"),
    (None, lambda ctx: (VALUE,), "both", "444.5 GB", "p: no exact value"),
    (lambda: (None,), None, "exact-only", "444.5 GB", "p: no exact value (declared exact-only)"),
    (lambda: (VALUE,), None, "both", "444.5 GB", "p: no run value; a single check is not enough unless declared"),
    (None, lambda ctx: (None,), "run-only", "444.5 GB", "p: no run value (declared run-only)"),
    (lambda: (1.5,), None, "exact-only", "444.5 GB", "p: exact: inexact value 1.5 (float); checks must return ints "
                                                     "or Fractions"),
    (lambda: (VALUE,), lambda ctx: ((1.0, 2),), "both", "444.5 GB", "p: run: inexact value (1.0, 2) (contains "
                                                                    "floats)"),
])
def test_a_failed_part_says_which_check_failed_and_how(exact, run, checks, printed, message):
    result = evaluate(_claim(exact, run, checks, printed))
    assert (result.status, result.message) == ("fail", message)
    assert [p.status for p in result.parts] == ["fail"]


def test_a_passing_claim_carries_both_values():
    result = evaluate(_claim(lambda: (VALUE,), lambda ctx: (VALUE,)))
    assert (result.status, result.message) == ("pass", "")
    assert [(p.exact, p.run, p.status, p.why) for p in result.parts] == [(VALUE, VALUE, "pass", "")]


def test_the_run_check_gets_the_context():
    seen = []
    evaluate(_claim(lambda: (VALUE,), lambda ctx: seen.append(ctx) or (VALUE,)), context="ctx")
    assert seen == ["ctx"]


def test_a_check_that_raised_is_said_once_for_all_its_parts():
    """A broken check fails every part that needed it, and the report says why once, without a part label."""
    result = evaluate(_claim(lambda: 1 / 0, lambda ctx: (VALUE, VALUE), labels=("a", "b")))
    assert result.status == "fail" and result.message == "exact check raised ZeroDivisionError: division by zero"
    assert [p.why for p in result.parts] == [result.message] * 2

    def missing(ctx):
        raise NotAvailable("zero_stages.run_size_only is not available")
    result = evaluate(_claim(lambda: (VALUE,), missing))
    assert result.message == "run check raised NotAvailable: zero_stages.run_size_only is not available"
    result = evaluate(_claim(lambda: (VALUE, VALUE), None, "exact-only"))
    assert result.message == "exact check returned 2 values for 1 parts"


def test_distinct_failures_are_listed_by_part():
    result = evaluate(_claim(lambda: (VALUE, VALUE), lambda ctx: (VALUE, Fraction(1)), labels=("a", "b")))
    assert result.message == "b: run 1 ≠ exact 444,502,847,232"
    result = evaluate(_claim(lambda: (VALUE, VALUE), lambda ctx: (Fraction(2), Fraction(1)), labels=("a", "b")))
    assert result.message == "a: run 2 ≠ exact 444,502,847,232; b: run 1 ≠ exact 444,502,847,232"


@pytest.mark.parametrize("where", ["exact", "run"])
def test_a_missing_engine_makes_the_claim_not_checkable_and_says_which_check(where):
    def absent(*args):
        raise NotCheckableHere("PyTorch is not installed")
    exact, run = (absent, lambda ctx: (VALUE,)) if where == "exact" else (lambda: (VALUE,), absent)
    result = evaluate(_claim(exact, run))
    assert (result.status, result.message) == ("not-checkable", f"{where}: PyTorch is not installed")


def test_stated_values_are_printed_as_the_rule_renders_them():
    """A tuple the words state is printed the rule's way (``1 : 2``), in the mismatch and in the rounding
    message alike."""
    stated = Stated((1, 2))
    result = evaluate(_claim(lambda: ((1, 2),), lambda ctx: ((1, 3),), printed="1 : 2", rule=stated))
    assert result.message == "p: run 1 : 3 ≠ exact 1 : 2"
    result = evaluate(_claim(lambda: ((1, 3),), None, "exact-only", printed="1 : 2", rule=stated))
    assert result.message == "p: exact value 1 : 3 rounds to 1 : 3, printed 1 : 2"


def test_every_result_names_its_claim_and_both_broken_checks():
    """The result carries the claim it judged, whatever the verdict; two broken checks are both said, once."""
    for claim in (_claim(lambda: (VALUE,), lambda ctx: (VALUE,)), Claim("T3", "s", "src", not_checkable="why"),
                  _claim(lambda: (VALUE,), lambda ctx: (_ for _ in ()).throw(NotCheckableHere("no torch")))):
        assert evaluate(claim).claim is claim
    result = evaluate(_claim(lambda: 1 / 0, lambda ctx: {}[0], labels=("a", "b")))
    assert result.message == "exact check raised ZeroDivisionError: division by zero; run check raised KeyError: 0"
