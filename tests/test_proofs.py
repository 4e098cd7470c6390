"""The claims catalog: IDs equal claims.md's, rounding rules, and the evaluation rule (when a claim passes)."""
import os
import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs import CATALOG, CLAIM_IDS, CLAIMS, EXTRAS, Claim, NotAvailable, NotCheckableHere, Part, evaluate
from proofs.claims_map import contiguous_rank_loads, zigzag_rank_loads
from proofs.exact import PSI_ANCHOR, model_state_bytes
from proofs.ids import claims_md_path, read_claim_ids
from proofs.rounding import GB, About, Decimals, Exactly, Stated, decimal_str, parse_number, round_half_up

_NUMBER_TEXT = re.compile(r"\d[\d,]*(?:\.\d+)?")  # a printed number: 3,500 / 444.5


# -- the catalog's IDs ---------------------------------------------------------------------------------------
def test_catalog_ids_are_unique_and_equal_the_pinned_list():
    ids = [c.id for c in CLAIMS]
    assert ids == list(CLAIM_IDS)
    all_ids = [c.id for c in CATALOG]
    assert len(all_ids) == len(set(all_ids))


def test_catalog_ids_equal_claims_md():
    """The catalog holds exactly the IDs of the claims list shipped in the package (proofs/claims.md)."""
    listed = read_claim_ids(claims_md_path().read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)) == len(CLAIM_IDS)
    assert set(listed) == {c.id for c in CLAIMS} == set(CLAIM_IDS)


def test_shipped_claims_md_matches_the_workspace_copy():
    """Where the workspace's claims list exists, the copy shipped in the package lists the same IDs in the same
    order. The source is ``RINGEMU_CLAIMS_SOURCE`` if set (then it must exist: ``.ci/run`` sets it when
    ``../shared/claims.md`` is there), else ``../shared/claims.md`` from the repository root if present; a clean
    clone has neither, and then there is nothing to compare with."""
    named = os.environ.get("RINGEMU_CLAIMS_SOURCE")
    shared = Path(named) if named else Path(__file__).resolve().parents[1].parent / "shared" / "claims.md"
    if not shared.exists():
        if named:
            pytest.fail(f"RINGEMU_CLAIMS_SOURCE={named} does not exist")
        pytest.skip(f"{shared} is not present (a clean clone); set RINGEMU_CLAIMS_SOURCE to compare")
    shipped = read_claim_ids(claims_md_path().read_text(encoding="utf-8"))
    assert read_claim_ids(shared.read_text(encoding="utf-8")) == shipped


def test_statements_outside_claims_md_are_marked_and_never_reuse_an_id():
    for claim in EXTRAS:
        assert claim.id.startswith("X") and claim.id not in CLAIM_IDS
    for claim in CATALOG:
        assert claim.statement and claim.source
        if claim.not_checkable:
            assert not claim.parts and len(claim.not_checkable) > 20  # a reason, not a placeholder


def test_single_check_parts_say_why():
    for claim in CLAIMS:
        for part in claim.parts:
            if part.checks != "both":
                assert part.why_single
    with pytest.raises(ValueError, match="why_single"):
        Part("x", "1", Exactly(), "exact-only")


def test_m9_states_its_assumption():
    m9 = next(c for c in CLAIMS if c.id == "M9")
    text = " ".join(m9.assumptions)
    assert "34·s·b·h·L" in text and "2·s·b·h·L" in text and "h = 5,120" in text and "L = 64" in text


def test_every_decimal_rule_rounds_to_the_places_the_source_prints():
    # one principle for all claims: round to as many decimals as the printed value shows
    for claim in CLAIMS:
        for part in claim.parts:
            if isinstance(part.rule, Decimals):
                number = _NUMBER_TEXT.search(part.printed).group()
                shown = len(number.split(".")[1]) if "." in number else 0
                assert part.rule.places == shown, (claim.id, part.printed)


# -- rounding rules ------------------------------------------------------------------------------------------
def test_round_half_up_examples():
    # ties go away from zero; values from the lesson's own figures
    assert round_half_up(Fraction(21875, 1000), 1) == Fraction(219, 10)   # 7/32 = 21.875 %
    assert round_half_up(Fraction(5, 2), 0) == 3
    assert round_half_up(Fraction(-5, 2), 0) == -3
    assert round_half_up(Fraction(444_502_847_232, GB), 1) == Fraction(4445, 10)


@given(st.fractions(), st.integers(0, 6))
def test_round_half_up_is_within_half_a_unit(x, places):
    r = round_half_up(x, places)
    assert abs(r - x) <= Fraction(1, 2) / 10 ** places
    assert (r * 10 ** places).denominator == 1


def test_parse_number_and_decimal_str():
    assert parse_number("3,500 GB") == 3500
    assert parse_number("≈ 1/3") == Fraction(1, 3)
    assert parse_number("2(N−1)/N·Ψ") == 2
    assert decimal_str(Fraction(1, 8)) == "0.125"
    assert decimal_str(Fraction(1, 3), 4) == "0.3333…"
    with pytest.raises(ValueError, match="no number"):
        parse_number("bitwise equal")


def test_rules_match_and_reject():
    gb1 = Decimals(1, GB, "GB")
    assert gb1.matches(Fraction(120 * GB), "120 GB")          # "120" printed, one decimal: 120.0
    assert gb1.matches(Fraction(31_406_250_000), "31.4 GB")
    assert not gb1.matches(Fraction(31_406_250_000), "31.5 GB")
    assert not gb1.matches(True, "1 GB")                       # a bool is not a byte count
    assert Exactly().matches(Fraction(3, 2), "1.5×") and not Exactly().matches(Fraction(149, 100), "1.5×")
    assert About(Fraction(1, 10)).matches(Fraction(5, 16), "≈ 1/3")
    assert not About(Fraction(1, 20)).matches(Fraction(5, 16), "≈ 1/3")  # 6.25 % off
    assert Stated(False).matches(False, "does not fit") and not Stated(False).matches(0, "does not fit")


# -- the evaluation rule -------------------------------------------------------------------------------------
_GB1 = Decimals(1, GB, "GB")


def _claim(exact, run, checks="both", printed="444.5 GB"):
    why = "" if checks == "both" else "test"
    return Claim("T1", "test claim", "test", (Part("p", printed, _GB1, checks, why),), exact, run)


def test_pass_needs_equal_exact_and_run_both_rounding_to_the_printed_value():
    value = model_state_bytes("dp", PSI_ANCHOR, 8)
    assert evaluate(_claim(lambda: (value,), lambda ctx: (value,))).status == "pass"
    # equal rounding but unequal exact values: fail (444.502… vs 444.510 GB both print 444.5)
    result = evaluate(_claim(lambda: (value,), lambda ctx: (Fraction(444_510_000_000),)))
    assert result.status == "fail" and "≠" in result.message
    # equal values that do not round to the printed one: fail
    assert evaluate(_claim(lambda: (value,), lambda ctx: (value,), printed="444.6 GB")).status == "fail"


def test_a_single_check_passes_only_when_declared():
    value = model_state_bytes("dp", PSI_ANCHOR, 8)
    assert evaluate(_claim(lambda: (value,), None)).status == "fail"
    assert evaluate(_claim(None, lambda ctx: (value,))).status == "fail"
    assert evaluate(_claim(lambda: (value,), lambda ctx: (None,))).status == "fail"
    assert evaluate(_claim(lambda: (value,), None, "exact-only")).status == "pass"
    assert evaluate(_claim(None, lambda ctx: (value,), "run-only")).status == "pass"


def test_missing_code_fails_and_missing_engine_is_not_checkable():
    value = model_state_bytes("dp", PSI_ANCHOR, 8)

    def missing(ctx):
        raise NotAvailable("zero_stages.run_size_only is not available")

    def no_engine(ctx):
        raise NotCheckableHere("PyTorch is not installed")
    result = evaluate(_claim(lambda: (value,), missing))
    assert result.status == "fail" and "not available" in result.message
    assert evaluate(_claim(lambda: (value,), no_engine)).status == "not-checkable"


def test_inexact_values_and_broken_checks_fail():
    value = model_state_bytes("dp", PSI_ANCHOR, 8)
    assert evaluate(_claim(lambda: (float(value),), None, "exact-only")).status == "fail"
    assert evaluate(_claim(lambda: (value, value), None, "exact-only")).status == "fail"  # wrong arity
    assert evaluate(_claim(lambda: 1 / 0, None, "exact-only")).status == "fail"


def test_not_checkable_is_never_pass():
    claim = Claim("T2", "a measured number", "paper", not_checkable="reported, not derivable here")
    assert evaluate(claim).status == "not-checkable"
    for claim in CATALOG:
        if claim.not_checkable:
            assert evaluate(claim).status == "not-checkable"


# -- exact-only claims bite: perturbing the printed value fails them ----------------------------------------
def _perturbed(part: Part) -> list[str]:
    """Printed texts one unit off in the last printed place (or a different stated value)."""
    rule = part.rule
    if isinstance(rule, Decimals):
        n, step = parse_number(part.printed), Fraction(1, 10 ** rule.places)
        return [f"{decimal_str(n + d)}" for d in (step, -step)]
    if isinstance(rule, Exactly):
        n = parse_number(part.printed)
        return [decimal_str(n + 1) if n.denominator == 1 else str(n * 2)]
    return []


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.id.startswith("E")], ids=lambda c: c.id)
def test_exact_only_claims_fail_when_the_printed_value_is_perturbed(claim):
    assert evaluate(claim).status == "pass"
    perturbed_any = False
    for i, part in enumerate(claim.parts):
        for text in _perturbed(part):
            parts = claim.parts[:i] + (replace(part, printed=text),) + claim.parts[i + 1:]
            assert evaluate(replace(claim, parts=parts)).status == "fail", (claim.id, text)
            perturbed_any = True
        if isinstance(part.rule, Stated):
            bad = replace(part, rule=Stated(tuple(v + 1 for v in part.rule.value)))
            parts = claim.parts[:i] + (bad,) + claim.parts[i + 1:]
            assert evaluate(replace(claim, parts=parts)).status == "fail"
            perturbed_any = True
    assert perturbed_any or isinstance(claim.parts[0].rule, About)


def test_e6_tolerance_bites():
    e6 = next(c for c in CLAIMS if c.id == "E6")
    tight = replace(e6.parts[0], rule=About(Fraction(1, 20)))
    assert evaluate(replace(e6, parts=(tight,))).status == "fail"


def test_causal_load_examples():
    # the lesson's own figures: 10 : 26 : 42 : 58 contiguous, 34 each zig-zag (136 block pairs over 4 ranks)
    assert contiguous_rank_loads(16, 4) == (10, 26, 42, 58)
    assert zigzag_rank_loads(16, 4) == (34, 34, 34, 34)


@given(st.integers(1, 8), st.integers(1, 6))
def test_zigzag_always_balances_causal_load(ranks, per_chunk):
    blocks = 2 * ranks * per_chunk
    loads = zigzag_rank_loads(blocks, ranks)
    assert len(set(loads)) == 1 and sum(loads) == blocks * (blocks + 1) // 2
