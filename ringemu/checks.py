"""Argument checks shared by the library and the CLI: one place for "what is allowed" and its error text.

Every check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, outside what is allowed)
whose message names the argument and states what is allowed; :func:`ringemu.cli.main` prints it as one line.

Numbers typed by a person (``--bandwidth 1e999999999``) are parsed with :mod:`decimal` and compared against their
bounds *before* they become exact fractions, so that no input makes the parser build a 10^999999999-digit integer.
Work bounds (:func:`check_budget`) refuse runs whose cost in time or memory would be absurd, before anything is
allocated.
"""
from __future__ import annotations

from decimal import Decimal, InvalidOperation
from fractions import Fraction

__all__ = ["parse_number", "check_budget", "check_choice", "SMALLEST"]

SMALLEST = Decimal("1e-30")  # the smallest nonzero magnitude parse_number accepts


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
