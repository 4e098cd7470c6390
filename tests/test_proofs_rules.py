"""The exact side of the claims and the rules that compare it with printed text: closed forms worked by hand from
their sources (ZeRO §5.1 and §7.2, Figure 1; the lesson's figures), and each rule's verdict, rendering and
description as the report prints them."""
from fractions import Fraction

import pytest

from proofs import exact
from proofs.ids import claims_md_path, read_claim_ids
from proofs.rounding import (GB, AllEqual, About, Between, Decimals, Exactly, FormulaOfN, Percent, Rule, Stated,
                             decimal_str, parse_number)


# -- closed forms --------------------------------------------------------------------------------------------
def test_figure_1_model_states_per_stage():
    """ZeRO Figure 1 (Ψ = 7.5B, N = 64, K = 12): 16Ψ = 120 GB, 4Ψ + 12Ψ/64 = 31.40625 GB, 2Ψ + 14Ψ/64 =
    16.640625 GB, 16Ψ/64 = 1.875 GB (64 divides 7.5·10^9, so padding changes nothing)."""
    expected = {"dp": 120 * GB, "zero1": Fraction(3140625, 100000) * GB, "zero2": Fraction(16640625, 10 ** 6) * GB,
                "zero3": Fraction(1875, 1000) * GB}
    for stage, value in expected.items():
        assert exact.model_state_bytes(stage, 7_500_000_000, 64) == value
        assert exact.model_state_bytes(stage, 7_500_000_000, 64, padded=False) == value


def test_a_shard_is_the_rings_padded_chunk():
    """Ψ = 10 on 4 ranks: the ring's chunk is ⌈10/4⌉ = 3 elements, unpadded 10/4 = 5/2; the sharded stages
    count the padded shard (ZeRO-3: 16 B × 3 = 48, ZeRO-2: 2·10 + 14·3 = 62) unless told otherwise."""
    assert exact.shard(10, 4) == 3 and exact.shard(10, 4, padded=False) == Fraction(5, 2)
    assert exact.shard(8, 4) == 2 == exact.shard(8, 4, padded=False)
    assert exact.model_state_bytes("zero3", 10, 4) == 48
    assert exact.model_state_bytes("zero2", 10, 4) == 62
    assert exact.model_state_bytes("zero2", 10, 4, padded=False) == 20 + 14 * Fraction(5, 2)


def test_the_floor_is_what_sharding_never_removes():
    """N → ∞ leaves the replicated bytes per parameter: DP 2 + 2 + 12 = 16, ZeRO-1 4, ZeRO-2 2, ZeRO-3 0."""
    assert [exact.floor_bytes_per_param(s) for s in exact.STAGE_NAMES] == [16, 4, 2, 0]


def test_traffic_per_step_by_stage():
    """ZeRO §7.2: DP, P_os, P_os+g move 2Ψ per step, P_os+g+p 3Ψ; on a ring of 4 with Ψ = 10 a rank sends
    c·(N−1)·⌈Ψ/N⌉ = 18 (c = 2) or 27 (c = 3) elements; an all-reduce 2(N−1) messages of 3 = 18; the naive sum
    at rank 0 receives (N−1)·Ψ = 30."""
    assert [exact.traffic_coefficient(s) for s in exact.STAGE_NAMES] == [2, 2, 2, 3]
    assert [exact.ring_sent_elements(s, 10, 4) for s in exact.STAGE_NAMES] == [18, 18, 18, 27]
    assert exact.ring_all_reduce_sent_elements(10, 4) == 18
    assert exact.naive_root_received_elements(10, 4) == 30


@pytest.mark.parametrize("fn", [exact.model_state_bytes, exact.floor_bytes_per_param, exact.traffic_coefficient,
                                exact.ring_sent_elements])
def test_an_unknown_stage_is_refused_by_name(fn):
    """A stage that is none of the four is a ValueError naming the four and the value given."""
    args = {"model_state_bytes": (10, 4), "ring_sent_elements": (10, 4)}.get(fn.__name__, ())
    with pytest.raises(ValueError, match=r"^stage must be one of dp, zero1, zero2, zero3; got 'zero4'$"):
        fn("zero4", *args)


def test_anchor_activations_are_the_lessons_numbers():
    """Lesson (M9): s = 4,096, b = 1 with h = 5,120, L = 64: selective 34·s·b·h·L = 45,634,027,520 B (45.6 GB),
    full recomputation 2·s·b·h·L = 2,684,354,560 B (2.7 GB); other shapes by the same formulas."""
    assert exact.selective_activation_bytes() == 45_634_027_520
    assert exact.full_recompute_activation_bytes() == 2_684_354_560
    assert exact.selective_activation_bytes(2, 3, 5, 7) == 34 * 210
    assert exact.full_recompute_activation_bytes(2, 3, 5, 7) == 2 * 210


def test_the_claims_list_is_the_packaged_file():
    """claims.md ships beside the package's modules, and its table rows give the IDs in order."""
    path = claims_md_path()
    assert path.name == "claims.md" and path.parent.name == "proofs" and path.is_file()
    assert read_claim_ids("| M1 | a |\n| x | b |\n|C2| c |\ntext | E3 |\n") == ["M1", "C2"]


# -- printed numbers -----------------------------------------------------------------------------------------
def test_parse_number_reads_signs_separators_and_fractions():
    """The first number in the text, exactly: signs, thousands separators, decimals and a/b."""
    assert parse_number("−x -3 GB") == -3 and parse_number("+2.5") == Fraction(5, 2)
    assert parse_number("12,345.5 GB") == Fraction(24691, 2) and parse_number("a 22/7 b 1") == Fraction(22, 7)
    with pytest.raises(ValueError, match=r"^printed value 'bitwise equal' contains no number$"):
        parse_number("bitwise equal")


def test_decimal_str_is_exact_until_it_must_cut():
    """Every digit of a terminating value; otherwise ``digits`` decimals and an ellipsis; sign and separators."""
    assert decimal_str(Fraction(-1, 8)) == "-0.125" and decimal_str(0) == "0"
    assert decimal_str(Fraction(2469135, 2)) == "1,234,567.5"
    assert decimal_str(Fraction(1, 3)) == "0." + "3" * 15 + "…"
    assert decimal_str(Fraction(1, 1024), 10) == "0.0009765625" and decimal_str(Fraction(1, 1024), 9) == "0.000976562…"


# -- the rules -----------------------------------------------------------------------------------------------
def test_the_base_rule_states_nothing():
    """A rule must say how it matches, renders and describes itself; the base class does not guess."""
    for call in (lambda r: r.matches(1, "1"), lambda r: r.render(1), lambda r: r.describe(), lambda r: r.unrounded(1)):
        with pytest.raises(NotImplementedError):
            call(Rule())


def test_decimals_render_and_state_themselves():
    """The report prints the rounded value in the source's unit (a space before a word unit, none before % and
    ×), the unrounded value to 9 decimals, and the rule with its unit's size."""
    gb1 = Decimals(1, GB, "GB")
    assert gb1.render(Fraction(444_502_847_232)) == "444.5 GB"
    assert gb1.unrounded(Fraction(444_502_847_232)) == "444.502847232 GB"
    assert gb1.unrounded(Fraction(GB, 3)) == "0.333333333… GB"
    assert gb1.describe() == "1 decimal(s) GB (1 GB = 1000000000), ties away from zero"
    assert Decimals(2).describe() == "2 decimal(s), ties away from zero" and Decimals(0).render(5) == "5"
    pct = Percent(1)
    assert pct == Decimals(1, Fraction(1, 100), "%")
    assert pct.render(Fraction(7, 32)) == "21.9%" and pct.unrounded(Fraction(7, 32)) == "21.875%"
    assert Decimals(2, 1, "×").render(Fraction(3, 2)) == "1.50×" and Decimals(2, 1, "×").unrounded(2) == "2×"


def test_decimals_render_huge_values_without_a_float():
    """At 10^15 and beyond a float has lost the cents: the value is written exactly (either sign)."""
    big = 3 * 10 ** 15 + Fraction(1, 100)
    assert Decimals(2).render(big) == "3,000,000,000,000,000.01"
    assert Decimals(2).render(-big) == "-3,000,000,000,000,000.01"
    assert Decimals(0).render(999_999_999_999_999) == "999,999,999,999,999"


def test_decimals_match_numbers_only():
    """A byte count matches its rounded printed value; a bool, a string or a tuple is no byte count."""
    gb1 = Decimals(1, GB, "GB")
    assert gb1.matches(444_502_847_232, "444.5 GB") and not gb1.matches(444_502_847_232, "444.6 GB")
    for value in (True, "444.5", (444_502_847_232,)):
        assert not gb1.matches(value, "444.5 GB")


def test_exactly_renders_whole_short_and_repeating_values():
    """Whole numbers with separators, decimals of up to 6 places, otherwise the fraction; the unit appended."""
    assert Exactly().render(Fraction(16384)) == "16,384" and Exactly("×").render(Fraction(3, 2)) == "1.5×"
    assert Exactly().render(Fraction(1, 64)) == "0.015625" and Exactly().render(Fraction(1, 128)) == "1/128"
    assert Exactly().render(Fraction(1, 3)) == "1/3"
    assert Exactly().describe() == "exact equality with the printed number"
    assert Exactly().matches(16384, "16,384") and not Exactly().matches(True, "1")
    assert not Exactly().matches("1", "1")


def test_about_is_a_closed_relative_interval():
    """|value − target| ≤ tol·|target|, the bound included, for either sign of the target; numbers only."""
    about = About(Fraction(1, 10))
    assert about.matches(Fraction(11, 10), "1") and about.matches(Fraction(9, 10), "1")
    assert not about.matches(Fraction(111, 100), "1")
    assert about.matches(Fraction(-21, 20), "-1") and not about.matches(Fraction(-6, 5), "-1")
    assert not about.matches("1", "1")
    assert about.render(Fraction(5, 16)) == "0.3125" and about.render(Fraction(1, 3)) == "0.3333…"
    assert About(Fraction(1, 20)).describe() == "≈: within 5 % of the printed value (relative)"


def test_stated_values_render_as_words():
    """yes/no, a set in sorted braces, a tuple joined by colons (whole numbers with separators)."""
    assert Stated(True).render(True) == "yes" and Stated(True).render(False) == "no"
    assert Stated(frozenset()).render(frozenset({"zero1", "dp"})) == "{dp, zero1}"
    assert Stated(frozenset()).render(frozenset()) == "{}"
    assert Stated(()).render((16384, Fraction(1, 2), 2)) == "16,384 : 1/2 : 2"
    assert Stated("x").render("fits") == "fits"
    assert Stated(False).describe() == "the printed words state no"
    assert Stated((1, 2)).matches((1, 2), "") and not Stated((1, 2)).matches([1, 2], "")


def test_between_is_closed_at_both_ends():
    """low ≤ value ≤ high: both ends in, beyond either out; numbers only."""
    rule = Between(Fraction(1, 2), Fraction(3))
    assert rule.matches(Fraction(1, 2), "") and rule.matches(3, "") and rule.matches(1, "")
    assert not rule.matches(Fraction(49, 100), "") and not rule.matches(Fraction(301, 100), "")
    assert not rule.matches("1", "")
    assert rule.render(Fraction(2, 3)) == "0.6666…" and rule.describe() == "within [1/2, 3]"


def test_all_equal_needs_one_positive_value_per_setting():
    """A constant, positive tuple with one value per setting; a zero, a differing value, a short tuple or a list
    fails."""
    rule = AllEqual((2, 4, 8))
    assert rule.matches((5, 5, 5), "")
    for value in ((0, 0, 0), (5, 5, 6), (5, 5), [5, 5, 5]):
        assert not rule.matches(value, "")
    assert rule.render((Fraction(5, 2),) * 3) == "2.5 each" and rule.render((1, Fraction(1, 2))) == "1, 0.5"
    assert rule.describe() == "equal and > 0 at every one of (2, 4, 8)"


def test_formula_of_n_is_evaluated_exactly_at_each_n():
    """The measured tuple equals the formula at every N, exactly; a list or a rounded value fails."""
    rule = FormulaOfN(lambda n: Fraction(2 * (n - 1), n), (2, 4))
    assert rule.matches((1, Fraction(3, 2)), "") and not rule.matches([1, Fraction(3, 2)], "")
    assert not rule.matches((1, Fraction(149, 100)), "")
    assert rule.render((1, Fraction(3, 2))) == "1, 3/2"
    assert rule.describe() == "the printed formula evaluated exactly at N = 2, 4"


def test_rules_without_rounding_print_the_value_itself_as_unrounded():
    """Only Decimals rounds; every other rule's "before rounding" text is its rendering of the value."""
    assert Exactly().unrounded(Fraction(3, 2)) == "1.5" and About(Fraction(1, 10)).unrounded(Fraction(1, 3)) == \
        "0.3333…"
    assert AllEqual((2,)).unrounded((3,)) == "3 each"


def test_decimals_keep_their_places_below_10_to_the_15_and_write_exactly_from_there():
    """Below 10^15 the fixed decimals the source prints (trailing zeros too); from 10^15 on the exact digits."""
    assert Decimals(2).render(1000) == "1,000.00" and Decimals(1).render(Fraction(1, 2)) == "0.5"
    assert Decimals(2).render(10 ** 15) == "1,000,000,000,000,000"


def test_one_setting_is_trivially_constant():
    """A single measurement is constant; it must still be > 0 (1 is)."""
    assert AllEqual((8,)).matches((5,), "") and AllEqual((8,)).render((5,)) == "5 each"
    assert AllEqual((2, 4)).matches((1, 1), "") and not AllEqual((8,)).matches((0,), "")
