"""Argument checks every module shares: integers, rank counts, element counts, seconds, typed numbers, work bounds,
and whether an integer world's sum over ranks fits its dtype.

Each check returns the value normalised (a Python ``int`` or ``float``) or raises ``TypeError`` (wrong type) or
``ValueError`` (out of range) with a message that names the argument and says what is allowed, e.g.
``n_ranks must be an integer >= 1, got 0``. ``bool`` is never an integer here, and numpy integers are accepted
(and returned as Python ints, so that counts stay exact).

Numbers typed by a person (``--bandwidth 1e999999999``) are parsed with :mod:`decimal` and compared against their
bounds *before* they become exact fractions (:func:`parse_number`), so that no input makes the parser build a
10^999999999-digit integer. Work bounds (:func:`check_budget`) refuse runs whose cost in time or memory would be
absurd, before anything is allocated.
"""
from __future__ import annotations

import math
import operator
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np

__all__ = ["MAX_NUMEL", "SMALLEST", "is_integer", "check_int", "check_integer_sum", "check_n_ranks", "check_numel", "check_timeout",
           "parse_number", "check_budget", "check_choice"]

MAX_NUMEL = 2 ** 63 - 1  # offsets and counts are aggregated in int64 arrays
SMALLEST = Decimal("1e-30")  # the smallest nonzero magnitude parse_number accepts


def is_integer(value: object) -> bool:
    """True for Python and numpy integers, False for ``bool`` and everything else."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(value: object, name: str, minimum: int | None = None, maximum: int | None = None,
              why: str = "") -> int:
    """``value`` as an int, or a clear error unless it is an integer in [``minimum``, ``maximum``] (either bound
    may be None). ``why`` is said in parentheses after the range."""
    allowed = "an integer"
    if minimum is not None:
        allowed += f" >= {minimum}"
    if maximum is not None:
        allowed += f" and <= {maximum:_}" if minimum is not None else f" <= {maximum:_}"
    if why:
        allowed += f" ({why})"
    if not is_integer(value):
        raise TypeError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return operator.index(value)


def check_n_ranks(n_ranks: object, name: str = "n_ranks") -> int:
    """A rank count: an integer >= 1."""
    return check_int(n_ranks, name, minimum=1)


def check_numel(numel: object, name: str = "numel") -> int:
    """An element (or byte) count: an integer >= 0 and below 2**63."""
    n = check_int(numel, name, minimum=0)
    if n > MAX_NUMEL:
        raise ValueError(f"{name} must be below 2**63 (counts are aggregated in int64), got {n}")
    return n


def check_timeout(timeout: object, name: str = "timeout", allow_none: bool = False) -> float | None:
    """A finite number of seconds > 0 as a float (or None where ``allow_none``)."""
    if timeout is None and allow_none:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)) \
            or not math.isfinite(timeout) or not timeout > 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0{', or None' if allow_none else ''}; "
                         f"got {timeout!r}")
    return float(timeout)


def parse_number(text: object, name: str, minimum, maximum, *, minimum_allowed: bool = True,
                 unit: str = "") -> Fraction:
    """``text`` (a decimal string such as ``"40.5"`` or ``"1e3"``) as an exact Fraction in the interval from
    ``minimum`` to ``maximum`` (``maximum`` included; ``minimum`` included iff ``minimum_allowed``).

    The bounds are checked on the :class:`~decimal.Decimal` first, so huge or tiny exponents are refused at once.
    """
    if isinstance(text, bool) or not isinstance(text, (str, int, Decimal)):
        raise TypeError(f"{name} must be a decimal number; got {text!r} ({type(text).__name__})")
    lo, hi = Decimal(str(minimum)), Decimal(str(maximum))
    low_side = ">=" if minimum_allowed else ">"
    allowed = f"{low_side} {minimum} and <= {maximum}" + (f" {unit}" if unit else "")
    try:
        value = Decimal(text.strip() if isinstance(text, str) else text)
    except (InvalidOperation, ValueError):
        raise ValueError(f"{name} must be a number {allowed}; got {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"{name} must be a finite number {allowed}; got {text!r}")
    if value < lo or (value == lo and not minimum_allowed):
        raise ValueError(f"{name} must be {allowed}; got {text}")
    if value > hi:
        raise ValueError(f"{name} must be {allowed}; got {text}")
    if value != 0 and abs(value) < SMALLEST:  # would need a 10^30+-digit denominator; no physical quantity here
        raise ValueError(f"{name} must be {allowed}, and at least {SMALLEST} in size unless 0; got {text}")
    return Fraction(value)


def check_budget(cost: int, limit: int, what: str, why: str) -> None:
    """Refuse a run whose ``cost`` (an exact integer, e.g. ranks² × units) exceeds ``limit``: a ValueError that
    states the formula ``what``, the limit and ``why`` it exists."""
    if cost > limit:
        raise ValueError(f"{what} must be <= {limit:,} ({why}); got {cost:,}")


def check_choice(value: object, name: str, choices) -> object:
    """``value`` if it is one of ``choices``; else a ValueError listing them."""
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return value


def check_integer_sum(world, name: str = "world") -> None:
    """Raise ValueError if an integer world's sum over ranks does not fit its dtype (floats pass). ``world``: an
    (N, S) array or a list of N equal 1-D arrays (summed row by row: no world-sized copy is made)."""
    rows = list(world) if isinstance(world, np.ndarray) and world.ndim == 2 else world
    if not len(rows) or rows[0].dtype.kind != "i" or rows[0].size == 0:
        return
    dtype = rows[0].dtype
    info = np.iinfo(dtype)
    if dtype.itemsize <= 4:  # exact in int64: N·2^31 < 2^63
        total = np.zeros(rows[0].size, dtype=np.int64)
        for row in rows:
            np.add(total, row, out=total)
        bad = np.flatnonzero((total > info.max) | (total < info.min))
    else:  # a float64 screen (relative error < N·2^-53), then exact Python integers where it is close
        approx = np.zeros(rows[0].size, dtype=np.float64)
        for row in rows:
            np.add(approx, row, out=approx)
        suspect = np.flatnonzero(np.abs(approx) >= 2.0 ** 62)
        bad = [j for j in suspect if not info.min <= sum(int(r[j]) for r in rows) <= info.max]
    if len(bad):
        j = int(bad[0])
        raise ValueError(f"{name}: the sum over ranks of element {j} is {sum(int(r[j]) for r in rows)}, "
                         f"outside {dtype} [{info.min}, {info.max}]; use a wider dtype or smaller values")
