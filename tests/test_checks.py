"""The shared argument checks word for word: each bound inclusive or exclusive as documented, each message naming
the argument, the allowed range (with its unit and reason) and the value given; ``bool`` is never a number,
numpy numbers are, and what comes back is a plain Python int, float or exact Fraction."""
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from ringemu import checks


def _message(error, call, *args, **kwargs):
    with pytest.raises(error) as err:
        call(*args, **kwargs)
    return str(err.value)


def test_integers_are_ints_and_numpy_ints_never_bools():
    assert checks.is_integer(3) and checks.is_integer(np.int8(3)) and checks.is_integer(np.uint64(3))
    assert not any(checks.is_integer(v) for v in (True, np.bool_(True), 3.0, "3", None))
    got = checks.check_int(np.int64(7), "x", minimum=7, maximum=7)
    assert got == 7 and type(got) is int


@pytest.mark.parametrize("value, kwargs, error, message", [
    (0, dict(minimum=1), ValueError, "x must be an integer >= 1, got 0"),
    (5, dict(maximum=4), ValueError, "x must be an integer <= 4, got 5"),
    (1001, dict(minimum=1, maximum=1000), ValueError, "x must be an integer >= 1 and <= 1_000, got 1001"),
    (0, dict(minimum=1, why="a rank count"), ValueError, "x must be an integer >= 1 (a rank count), got 0"),
    (1.5, dict(minimum=1), TypeError, "x must be an integer >= 1, got 1.5 (float)"),
    (True, dict(), TypeError, "x must be an integer, got True (bool)"),
])
def test_check_int_states_the_range_and_the_value(value, kwargs, error, message):
    assert _message(error, checks.check_int, value, "x", **kwargs) == message


def test_counts_and_rank_counts_name_themselves_by_default():
    """A rank count is >= 1; an element count >= 0 and below 2^63 (int64 aggregation), 2^63 − 1 included."""
    assert _message(ValueError, checks.check_n_ranks, 0) == "n_ranks must be an integer >= 1, got 0"
    assert checks.check_numel(2 ** 63 - 1) == 2 ** 63 - 1 and checks.check_numel(0) == 0
    assert _message(ValueError, checks.check_numel, 2 ** 63) == ("numel must be below 2**63 (counts are aggregated "
                                                                 "in int64), got 9223372036854775808")
    assert _message(ValueError, checks.check_numel, -1) == "numel must be an integer >= 0, got -1"


def test_a_timeout_is_a_finite_positive_number_of_seconds():
    assert checks.check_timeout(None, allow_none=True) is None
    assert checks.check_timeout(np.float32(0.5)) == 0.5 and type(checks.check_timeout(np.int64(2))) is float
    for bad in (None, 0, -1, float("inf"), float("nan"), True, "1"):
        assert _message(ValueError, checks.check_timeout, bad) == f"timeout must be a finite number of seconds > 0; " \
                                                                  f"got {bad!r}"
    assert _message(ValueError, checks.check_timeout, 0, "wait", allow_none=True) == \
        "wait must be a finite number of seconds > 0, or None; got 0"


def test_parse_number_is_exact_and_keeps_its_bounds():
    """Decimal text, an int or a Decimal becomes the exact Fraction; the maximum is included, the minimum too
    unless excluded, and 10^-30 is the smallest nonzero magnitude."""
    p = checks.parse_number
    assert p("40.5", "bw", 0, 100) == Fraction(81, 2) and p(" 1e2 ", "bw", 0, 100) == 100
    assert p(5, "bw", 0, 100) == 5 and p(Decimal("2.5"), "bw", 0, 100) == Fraction(5, 2)
    assert p("0", "bw", 0, 100) == 0 and p("1e-30", "bw", 0, 100) == Fraction(1, 10 ** 30)
    assert p("-1", "t", -1, 1) == -1 and p("1", "t", -1, 1) == 1


@pytest.mark.parametrize("text, kwargs, message", [
    ("abc", dict(unit="GB/s"), "bw must be a number >= 0 and <= 100 GB/s; got 'abc'"),
    ("inf", dict(), "bw must be a finite number >= 0 and <= 100; got 'inf'"),
    ("nan", dict(), "bw must be a finite number >= 0 and <= 100; got 'nan'"),
    ("-1", dict(), "bw must be >= 0 and <= 100; got -1"),
    ("0", dict(minimum_allowed=False), "bw must be > 0 and <= 100; got 0"),
    ("100.5", dict(), "bw must be >= 0 and <= 100; got 100.5"),
    ("1e999999999", dict(), "bw must be >= 0 and <= 100; got 1e999999999"),
    ("1e-31", dict(), "bw must be >= 0 and <= 100, and at least 1E-30 in size unless 0; got 1e-31"),
])
def test_parse_number_refusals_state_the_interval(text, kwargs, message):
    assert _message(ValueError, checks.parse_number, text, "bw", 0, 100, **kwargs) == message


def test_parse_number_refuses_what_is_not_text_or_an_integer():
    assert _message(TypeError, checks.parse_number, True, "bw", 0, 1) == "bw must be a decimal number; got True (bool)"
    assert _message(TypeError, checks.parse_number, 0.5, "bw", 0, 1) == "bw must be a decimal number; got 0.5 (float)"
    assert _message(ValueError, checks.parse_number, "-1e-31", "t", -1, 1) == \
        "t must be >= -1 and <= 1, and at least 1E-30 in size unless 0; got -1e-31"


def test_a_budget_is_inclusive_and_states_its_reason():
    checks.check_budget(1000, 1000, "N²·U", "time")
    assert _message(ValueError, checks.check_budget, 1001, 1000, "N²·U", "time") == \
        "N²·U must be <= 1,000 (time); got 1,001"


def test_a_choice_is_one_of_the_named_strings():
    assert checks.check_choice("b", "mode", iter(("a", "b"))) == "b"
    assert _message(ValueError, checks.check_choice, "c", "mode", ("a", "b")) == "mode must be one of a, b; got 'c'"
    assert _message(ValueError, checks.check_choice, 1, "k", ("1", "2")) == "k must be one of 1, 2; got 1"


def test_check_integer_sum_refuses_the_first_element_whose_sum_leaves_the_dtype():
    """int32: rank sums are exact in int64; element 1 sums to 2^31 (one past int32's maximum), element 2 to -2^31 - 1;
    the message names the first, its exact sum and the dtype's range. A world as one array and as rows alike."""
    from ringemu.checks import check_integer_sum
    world = np.array([[1, 2 ** 30, -2 ** 30, 5], [1, 2 ** 30, -2 ** 30 - 1, 5]], dtype=np.int32)
    for given in (world, list(world)):
        with pytest.raises(ValueError, match=r"^world: the sum over ranks of element 1 is 2147483648, outside int32 "
                                             r"\[-2147483648, 2147483647\]; use a wider dtype or smaller values$"):
            check_integer_sum(given)
    world[:, 1] = [2 ** 30, 2 ** 30 - 1]  # 2^31 - 1: the maximum, allowed
    with pytest.raises(ValueError, match=r"^blocks: the sum over ranks of element 2 is -2147483649"):
        check_integer_sum(world, "blocks")
    world[1, 2] = -2 ** 30  # -2^31: the minimum, allowed
    check_integer_sum(world)
    small = np.array([[100, -100], [27, -28]], dtype=np.int8)
    check_integer_sum(small)  # 127 and -128: int8's bounds
    small[1, 0] = 28
    with pytest.raises(ValueError, match="element 0 is 128, outside int8"):
        check_integer_sum(small)


def test_check_integer_sum_is_exact_at_int64s_bounds():
    """int64 sums are screened in float64 and checked exactly where they come near 2^62: 2^62 + (2^62 - 1) is int64's
    maximum, 2^62 + 2^62 one past it; -2^62 - 2^62 is its minimum."""
    from ringemu.checks import check_integer_sum
    top = np.array([[2 ** 62, -2 ** 62, 7], [2 ** 62 - 1, -2 ** 62, 8]], dtype=np.int64)
    check_integer_sum(top)
    top[1, 0] = 2 ** 62
    with pytest.raises(ValueError, match=r"element 0 is 9223372036854775808, outside int64 \[-9223372036854775808, "
                                         r"9223372036854775807\]"):
        check_integer_sum(top)
    top[1, 0], top[1, 1] = 0, -2 ** 62 - 1 + 1
    check_integer_sum(top)
    three = [np.array([-2 ** 62], np.int64), np.array([-2 ** 62], np.int64), np.array([-1], np.int64)]
    with pytest.raises(ValueError, match="element 0 is -9223372036854775809"):
        check_integer_sum(three)


def test_check_integer_sum_lets_floats_and_empty_worlds_pass():
    from ringemu.checks import check_integer_sum
    check_integer_sum(np.full((2, 3), 3e38, np.float32))  # floats overflow to inf by IEEE 754, not an error here
    check_integer_sum(np.zeros((2, 0), np.int32))
    check_integer_sum([])
    check_integer_sum(np.zeros((0, 4), np.int8))
