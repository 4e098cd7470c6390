"""How the source prints a value: rounding rules as data, applied to exact values.

A rule compares an exact value (a ``fractions.Fraction``, a bool, a tuple, a frozenset) with the text the
source prints. Rounding happens only here, and only on exact rationals: ``round_half_up`` never goes through
a float. Every rule also renders a value the way the source would print it, for the report.

Rules:

* :class:`Decimals` — the value divided by a unit (GB = 10^9 B, GiB = 2^30 B, %, s, ...) rounded half-up to a
  fixed number of decimals; the printed number is read as an exact decimal (thousands separators allowed), so
  ``"120"`` matches 120.0 under one decimal.
* :class:`Exactly` — the value equals the printed number exactly (``"1.5"``, ``"1/3"``, ``"16,384"``).
* :class:`About` — ``≈ target`` within a stated relative tolerance.
* :class:`Stated` — the printed words state a value (a bool, a set of stage names, a tuple); equality.
* :class:`Between` — the value lies in a closed interval the printed words state.
* :class:`AllEqual` — a tuple of values measured at several settings is constant and positive.
* :class:`FormulaOfN` — a printed formula in N, evaluated exactly at the given N.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from ringemu.units import GB, GIB, MIB, round_half_up  # GB = 10^9 B, the lesson's GB (数字口径: GB = 10⁹ 字节)

__all__ = ["Rule", "Decimals", "Exactly", "About", "Stated", "Between", "AllEqual", "FormulaOfN", "Percent",
           "round_half_up", "parse_number", "decimal_str", "GB", "GIB", "MIB"]

_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def parse_number(text: str) -> Fraction:
    """The first number in ``text`` as an exact Fraction: ``"3,500 GB"`` → 3500, ``"1/3"`` → 1/3."""
    match = _NUMBER.search(text)
    if match is None:
        raise ValueError(f"printed value {text!r} contains no number")
    return Fraction(match.group().replace(",", ""))


def decimal_str(value: Fraction, digits: int = 15) -> str:
    """An exact value as decimal text: all digits when it terminates within ``digits`` decimals, else
    ``digits`` significant digits followed by ``…``."""
    value = Fraction(value)
    sign, value = ("-" if value < 0 else ""), abs(value)
    whole, rest = divmod(value.numerator, value.denominator)
    out, places = [], 0
    while rest and places < digits:
        rest *= 10
        d, rest = divmod(rest, value.denominator)
        out.append(str(d))
        places += 1
    text = f"{whole:,}" + ("." + "".join(out) if out else "")
    return sign + text + ("…" if rest else "")


class Rule:
    """Base class: ``matches(value, printed)`` and ``render(value)``; ``describe()`` states the rule."""

    def matches(self, value, printed: str) -> bool:
        raise NotImplementedError

    def render(self, value) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def unrounded(self, value) -> str:
        """The value before rounding, in the unit the source prints."""
        return self.render(value)


@dataclass(frozen=True)
class Decimals(Rule):
    """``value / unit`` rounded half-up to ``places`` decimals equals the printed number."""

    places: int
    unit: int | Fraction = 1
    unit_name: str = ""

    def scaled(self, value) -> Fraction:
        return round_half_up(Fraction(value) / Fraction(self.unit), self.places)

    def matches(self, value, printed: str) -> bool:
        return isinstance(value, (int, Fraction)) and not isinstance(value, bool) \
            and self.scaled(value) == parse_number(printed)

    def render(self, value) -> str:
        number = self.scaled(value)
        text = f"{float(number):,.{self.places}f}" if abs(number) < 10 ** 15 else decimal_str(number)
        return f"{text} {self.unit_name}".strip() if self.unit_name not in ("%", "×") else text + self.unit_name

    def unrounded(self, value) -> str:
        text = decimal_str(Fraction(value) / Fraction(self.unit), 9)
        return f"{text} {self.unit_name}".strip() if self.unit_name not in ("%", "×") else text + self.unit_name

    def describe(self) -> str:
        unit = f" {self.unit_name} (1 {self.unit_name} = {self.unit})" if self.unit_name else ""
        return f"{self.places} decimal(s){unit}, ties away from zero"


def Percent(places: int) -> Decimals:  # noqa: N802 - a rule constructor
    """Percent with ``places`` decimals."""
    return Decimals(places, Fraction(1, 100), "%")


@dataclass(frozen=True)
class Exactly(Rule):
    """The value equals the printed number exactly."""

    unit_name: str = ""

    def matches(self, value, printed: str) -> bool:
        return isinstance(value, (int, Fraction)) and not isinstance(value, bool) \
            and Fraction(value) == parse_number(printed)

    def render(self, value) -> str:
        value = Fraction(value)
        text = f"{value.numerator:,}" if value.denominator == 1 else \
            (decimal_str(value, 6) if "…" not in decimal_str(value, 6) else str(value))
        return text + self.unit_name

    def describe(self) -> str:
        return "exact equality with the printed number"


@dataclass(frozen=True)
class About(Rule):
    """``≈ target``: |value − target| ≤ rel_tol · target (target read from the printed text)."""

    rel_tol: Fraction

    def matches(self, value, printed: str) -> bool:
        target = parse_number(printed)
        return isinstance(value, (int, Fraction)) and abs(Fraction(value) - target) <= self.rel_tol * abs(target)

    def render(self, value) -> str:
        return decimal_str(Fraction(value), 4)

    def describe(self) -> str:
        return f"≈: within {decimal_str(self.rel_tol * 100)} % of the printed value (relative)"


@dataclass(frozen=True)
class Stated(Rule):
    """The printed words state ``value`` exactly (a bool, a frozenset of names, a tuple of numbers)."""

    value: object

    def matches(self, value, printed: str) -> bool:
        return type(value) is type(self.value) and value == self.value

    def render(self, value) -> str:
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, frozenset):
            return "{" + ", ".join(sorted(map(str, value))) + "}" if value else "{}"
        if isinstance(value, tuple):
            return " : ".join(f"{Fraction(v).numerator:,}" if Fraction(v).denominator == 1
                              else str(v) for v in value)
        return str(value)

    def describe(self) -> str:
        return f"the printed words state {self.render(self.value)}"


@dataclass(frozen=True)
class Between(Rule):
    """``low ≤ value ≤ high``, the interval the printed words state."""

    low: Fraction
    high: Fraction

    def matches(self, value, printed: str) -> bool:
        return isinstance(value, (int, Fraction)) and self.low <= Fraction(value) <= self.high

    def render(self, value) -> str:
        return decimal_str(Fraction(value), 4)

    def describe(self) -> str:
        return f"within [{self.low}, {self.high}]"


@dataclass(frozen=True)
class AllEqual(Rule):
    """A tuple of measurements (one per setting, e.g. per N) that is constant and positive."""

    settings: tuple

    def matches(self, value, printed: str) -> bool:
        return isinstance(value, tuple) and len(value) == len(self.settings) and len(set(value)) == 1 \
            and value[0] > 0

    def render(self, value) -> str:
        if isinstance(value, tuple) and len(set(value)) == 1:
            return f"{decimal_str(Fraction(value[0]))} each"
        return ", ".join(decimal_str(Fraction(v)) for v in value)

    def describe(self) -> str:
        return f"equal and > 0 at every one of {self.settings}"


@dataclass(frozen=True)
class FormulaOfN(Rule):
    """A printed formula in N: the value is a tuple of exact numbers at ``ns``, equal to ``formula(n)``."""

    formula: Callable[[int], Fraction]
    ns: tuple[int, ...]

    def matches(self, value, printed: str) -> bool:
        return isinstance(value, tuple) and value == tuple(Fraction(self.formula(n)) for n in self.ns)

    def render(self, value) -> str:
        return ", ".join(str(v) for v in value)

    def describe(self) -> str:
        return f"the printed formula evaluated exactly at N = {', '.join(map(str, self.ns))}"
