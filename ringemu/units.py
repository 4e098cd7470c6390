"""Units and the one rounding rule used when printing: GB = 10^9 bytes, rounded half-up in exact arithmetic.

The lesson prints GB with one decimal and ties rounded away from zero (0.35 GB prints as 0.4 GB). Values stay
exact (ints and ``fractions.Fraction``) until here; this module turns them into text and nothing else.
"""
from __future__ import annotations

from fractions import Fraction

__all__ = ["GB", "GIB", "MIB", "round_half_up", "format_decimal", "format_gb"]

GB = 10 ** 9  # the lesson's GB: 10^9 bytes
GIB = 2 ** 30  # GiB: 2^30 bytes
MIB = 2 ** 20  # MiB: 2^20 bytes


def round_half_up(value, places: int) -> Fraction:
    """``value`` rounded to ``places`` decimals, ties away from zero, in exact arithmetic."""
    value = Fraction(value)
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
    return format_decimal(Fraction(nbytes) / GB, places)
