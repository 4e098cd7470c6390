"""Units and the one rounding rule used when printing: GB = 10^9 bytes, rounded half-up in exact arithmetic.

The lesson prints GB with one decimal and ties rounded away from zero (0.35 GB prints as 0.4 GB). Values stay
exact (ints and ``fractions.Fraction``) until here; this module turns them into text and nothing else.
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np

__all__ = ["GB", "GIB", "MIB", "round_half_up", "format_decimal", "format_gb", "MAX_PLACES"]

GB = 10 ** 9  # the lesson's GB: 10^9 bytes
GIB = 2 ** 30  # GiB: 2^30 bytes
MIB = 2 ** 20  # MiB: 2^20 bytes
MAX_PLACES = 100  # decimals a printed number may ask for


def _exact(value: object, name: str) -> Fraction:
    """``value`` (an int, a Fraction, or a finite float) as a Fraction; else a TypeError/ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Rational, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be an exact number (int or Fraction); got {value!r} ({type(value).__name__})")
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if isinstance(value, (np.integer, np.floating)):  # Fraction takes Python numbers only
        value = value.item()
    return Fraction(value)


def _places(places: object) -> int:
    if isinstance(places, bool) or not isinstance(places, (int, np.integer)):
        raise TypeError(f"places must be an integer >= 0 and <= {MAX_PLACES}; got {places!r}")
    if not 0 <= places <= MAX_PLACES:
        raise ValueError(f"places must be an integer >= 0 and <= {MAX_PLACES}; got {places}")
    return int(places)


def round_half_up(value, places: int) -> Fraction:
    """``value`` rounded to ``places`` decimals, ties away from zero, in exact arithmetic."""
    value, places = _exact(value, "value"), _places(places)
    scale = Fraction(10) ** places
    rounded = (abs(value) * scale + Fraction(1, 2)).__floor__()
    return (rounded if value >= 0 else -rounded) / scale


def format_decimal(value, places: int) -> str:
    """``value`` rounded half-up to ``places`` decimals, with thousands separators: ``3,500.5``."""
    rounded = round_half_up(value, places)
    sign = "-" if rounded < 0 else ""
    scaled = abs(rounded) * 10 ** places  # an integer after rounding
    whole, frac = divmod(int(scaled), 10 ** places)
    return f"{sign}{whole:,}" + (f".{frac:0{places}d}" if places else "")


def format_gb(nbytes, places: int = 1) -> str:
    """Bytes as GB (10^9 B) with ``places`` decimals, rounded half-up: ``format_gb(97234997832) == "97.2"``."""
    return format_decimal(_exact(nbytes, "nbytes") / GB, places)
