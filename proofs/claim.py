"""A claim of the lesson as a checked proposition, and the rule that decides its status.

A :class:`Claim` has one or more printed values (:class:`Part`), each with its rounding rule
(:mod:`proofs.rounding`) and its declared checks:

* ``"both"`` — an exact closed form (``fractions.Fraction``) and a run of the project's own code; the part
  passes only when the two values are equal as exact numbers *and* each, rounded by the rule, gives the
  printed value;
* ``"exact-only"`` / ``"run-only"`` — one check, declared with the reason there is no second one.

A part declared ``"both"`` that gets only one value fails: a claim never passes on fewer checks than it
declares. A check that returns a float fails (values must be exact). A claim with ``not_checkable`` set has no
checks at all and is reported ``not-checkable`` with its reason, never ``pass``.

Status of a claim: ``not-checkable`` if declared so (or if a check raises :class:`NotCheckableHere`, e.g. an
optional engine that is not installed), else ``fail`` if any part fails, else ``pass``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from .rounding import Rule, decimal_str

__all__ = ["Part", "Claim", "PartResult", "Result", "NotAvailable", "NotCheckableHere", "CHECKS", "STATUSES",
           "evaluate", "value_text"]

CHECKS = ("both", "exact-only", "run-only")
STATUSES = ("pass", "fail", "not-checkable")


class NotAvailable(RuntimeError):
    """A run check whose code is missing: the claim fails (it is not excused)."""


class NotCheckableHere(RuntimeError):
    """A check that needs something outside the project that is absent here (e.g. PyTorch for C7)."""


@dataclass(frozen=True)
class Part:
    """One printed value of a claim: ``printed`` as the source prints it, compared by ``rule``."""

    label: str
    printed: str
    rule: Rule
    checks: str = "both"
    why_single: str = ""  # why a single check is all there is (required unless checks == "both")

    def __post_init__(self) -> None:
        if self.checks not in CHECKS:
            raise ValueError(f"checks must be one of {', '.join(CHECKS)}; got {self.checks!r}")
        if self.checks != "both" and not self.why_single:
            raise ValueError(f"part {self.label!r} declares {self.checks} without saying why (why_single)")

    @property
    def wants_exact(self) -> bool:
        return self.checks in ("both", "exact-only")

    @property
    def wants_run(self) -> bool:
        return self.checks in ("both", "run-only")


@dataclass(frozen=True)
class Claim:
    """One claim. ``exact()`` and ``run(context)`` return one value per part (``None`` where a part has no
    such check). ``assumptions`` are what the lesson does not print but the check needs."""

    id: str
    statement: str
    source: str
    parts: tuple[Part, ...] = ()
    exact: Callable[[], tuple] | None = None
    run: Callable[[object], tuple] | None = None
    assumptions: tuple[str, ...] = ()
    not_checkable: str = ""  # the reason, for a claim with no possible check here
    note: str = ""

    def __post_init__(self) -> None:
        if not self.not_checkable and not self.parts:
            raise ValueError(f"claim {self.id} has no parts and is not declared not-checkable")

    @property
    def printed(self) -> str:
        return " / ".join(p.printed for p in self.parts) if self.parts else self.note


@dataclass(frozen=True)
class PartResult:
    part: Part
    exact: object
    run: object
    status: str
    why: str = ""


@dataclass(frozen=True)
class Result:
    claim: Claim
    status: str
    parts: tuple[PartResult, ...] = ()
    message: str = ""
    extra: dict = field(default_factory=dict)


def value_text(value, rule: Rule | None = None) -> str:
    """Human text of a value: a Fraction as ``decimal (= p/q)``; others through the rule."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, Fraction)):
        return rule.render(value) if rule is not None else str(value)
    value = Fraction(value)
    text = decimal_str(value)
    return text if value.denominator == 1 or "…" not in text else f"{decimal_str(value, 6)} (= {value})"


def _bad_type(value) -> str:
    if isinstance(value, float):
        return f"inexact value {value!r} (float); checks must return ints or Fractions"
    if isinstance(value, tuple) and any(isinstance(v, float) for v in value):
        return f"inexact value {value!r} (contains floats)"
    return ""


def _values(fn, args, n_parts: int, what: str) -> tuple[tuple | None, str, bool]:
    """Call a check; return (values, error message, not-checkable flag)."""
    if fn is None:
        return None, "", False
    try:
        values = tuple(fn(*args))
    except NotCheckableHere as exc:
        return None, f"{what}: {exc}", True
    except Exception as exc:  # a broken check is a failed claim, never a crash of the report
        return None, f"{what} check raised {type(exc).__name__}: {exc}", False
    if len(values) != n_parts:
        return None, f"{what} check returned {len(values)} values for {n_parts} parts", False
    return values, "", False


def _judge(part: Part, exact, run) -> tuple[str, str]:
    for name, value in (("exact", exact), ("run", run)):
        bad = _bad_type(value)
        if bad:
            return "fail", f"{name}: {bad}"
    if part.wants_exact and exact is None:
        return "fail", "no exact value" + ("" if part.checks == "both" else " (declared exact-only)")
    if part.wants_run and run is None:
        return "fail", "no run value" + ("; a single check is not enough unless declared"
                                         if part.checks == "both" else " (declared run-only)")
    if exact is not None and run is not None and exact != run:
        return "fail", f"run {value_text(run, part.rule)} ≠ exact {value_text(exact, part.rule)}"
    for name, value in (("exact", exact), ("run", run)):
        if value is not None and not part.rule.matches(value, part.printed):
            return "fail", (f"{name} value {value_text(value, part.rule)} rounds to "
                            f"{part.rule.render(value)}, printed {part.printed}")
    return "pass", ""


def evaluate(claim: Claim, context=None) -> Result:
    """Run the claim's checks and decide its status (see the module docstring)."""
    if claim.not_checkable:
        return Result(claim, "not-checkable", message=claim.not_checkable)
    n = len(claim.parts)
    exact, exact_err, exact_nc = _values(claim.exact, (), n, "exact")
    run, run_err, run_nc = _values(claim.run, (context,), n, "run")
    if exact_nc or run_nc:
        return Result(claim, "not-checkable", message=exact_err or run_err)
    check_errors = "; ".join(m for m in (exact_err, run_err) if m)  # a check that raised: said once
    parts = []
    for i, part in enumerate(claim.parts):
        e = exact[i] if exact is not None else None
        r = run[i] if run is not None else None
        status, why = _judge(part, e, r)
        if status == "fail" and check_errors and (e is None or r is None):
            why = check_errors
        parts.append(PartResult(part, e, r, status, why))
    status = "fail" if any(p.status == "fail" for p in parts) else "pass"
    message = "; ".join(dict.fromkeys(p.why if p.why == check_errors else f"{p.part.label}: {p.why}"
                                      for p in parts if p.why))
    return Result(claim, status, tuple(parts), message)
