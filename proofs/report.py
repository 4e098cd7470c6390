"""Evaluate the catalog and present it: a text table (ID, statement, printed, exact, run, status) and JSON.

Exact values are shown before rounding, in the unit the source prints (the ``printed`` column shows the
source's rounding); JSON carries every number as an exact fraction string and a decimal string.
"""
from __future__ import annotations

import textwrap
from collections import Counter
from fractions import Fraction

from .catalog import CLAIMS, select
from .claim import STATUSES, Claim, Result, evaluate
from .rounding import decimal_str
from .runs import RunContext

__all__ = ["prove", "summary", "render_table", "to_json", "value_json"]

_WIDTHS = {"id": 4, "statement": 44, "part": 16, "printed": 18, "exact": 20, "run": 20, "check": 5}


def prove(ids=None, context: RunContext | None = None, catalog=None, bar=None) -> list[Result]:
    """Evaluate the selected claims (all by default) with one shared :class:`RunContext`; ``bar`` (a progress
    bar, :func:`ringemu.progress.progress_bar`) advances by one per claim."""
    context = context if context is not None else RunContext()
    claims = select(ids) if catalog is None else select(ids, catalog)
    results = []
    for claim in claims:
        if bar is not None:
            bar.set_postfix_str(claim.id)
        results.append(evaluate(claim, context))
        if bar is not None:
            bar.update()
    return results


def summary(results: list[Result]) -> dict[str, int]:
    counts = Counter(r.status for r in results)
    return {s: counts.get(s, 0) for s in STATUSES}


def summary_line(results: list[Result]) -> str:
    counts = summary(results)
    listed = sum(1 for r in results if r.claim in CLAIMS)
    extra = len(results) - listed
    where = f"{_plural(listed, 'claim')} of claims.md" + (
        f" + {_plural(extra, 'lesson statement')} outside it" if extra else "")
    return (f"{where}: {counts['pass']} pass, {counts['fail']} fail, {counts['not-checkable']} not checkable"
            f" — {'OK' if counts['fail'] == 0 else 'FAILED'}")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def value_json(value):
    """A check's value for JSON: numbers as ``{"fraction", "decimal"}``, others as plain JSON."""
    if value is None:
        return None
    if isinstance(value, bool):
        return {"value": value}
    if isinstance(value, (int, Fraction)):
        value = Fraction(value)
        return {"fraction": str(value), "decimal": decimal_str(value, 15).replace(",", "")}
    if isinstance(value, frozenset):
        return {"value": sorted(map(str, value))}
    if isinstance(value, tuple):
        return {"value": [value_json(v) for v in value]}
    return {"value": str(value)}


def _cell(result_part, which: str) -> str:
    value = getattr(result_part, which)
    if value is None:
        return "—"
    return result_part.part.rule.unrounded(value)


def _rows(result: Result) -> list[list[str]]:
    claim: Claim = result.claim
    status = result.status
    statement = textwrap.wrap(claim.statement, _WIDTHS["statement"])
    if result.parts:
        cells = [[p.part.label, p.part.printed, _cell(p, "exact"), _cell(p, "run"),
                  "ok" if p.status == "pass" else "FAIL"] for p in result.parts]
    else:
        cells = [["—", claim.note or "—", "—", "—", "—"]]
    if claim.assumptions:
        statement += textwrap.wrap("[assumes: " + "; ".join(claim.assumptions) + "]", _WIDTHS["statement"])
    if claim.note and result.parts:
        statement += textwrap.wrap(f"[note: {claim.note}]", _WIDTHS["statement"])
    if result.message and status != "pass":
        statement += textwrap.wrap(f"[{status}: {result.message}]", _WIDTHS["statement"])
    n = max(len(cells), len(statement))
    rows = []
    for i in range(n):
        c = cells[i] if i < len(cells) else ["", "", "", "", ""]
        rows.append([claim.id if i == 0 else "", statement[i] if i < len(statement) else "", *c,
                     status if i == 0 else ""])
    return rows


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def render_table(results: list[Result]) -> str:
    """The report as a plain-text table with a summary line."""
    header = ["ID", "statement", "part", "printed", "exact", "run", "check", "status"]
    widths = list(_WIDTHS.values()) + [13]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for result in results:
        for row in _rows(result):
            lines.append("  ".join(_fit(c, w).ljust(w) if k != 1 else c.ljust(w)
                                   for k, (c, w) in enumerate(zip(row, widths))).rstrip())
        lines.append("")
    lines.append(summary_line(results))
    return "\n".join(lines)


def _part_json(p) -> dict:
    rule = p.part.rule
    return {
        "label": p.part.label, "printed": p.part.printed, "rule": rule.describe(), "checks": p.part.checks,
        "why_single_check": p.part.why_single or None,
        "exact": value_json(p.exact), "run": value_json(p.run),
        "exact_as_printed": rule.render(p.exact) if p.exact is not None else None,
        "run_as_printed": rule.render(p.run) if p.run is not None else None,
        "status": p.status, "why": p.why or None,
    }


def to_json(results: list[Result]) -> dict:
    """``{"claims": [...], "summary": {...}}``; each claim has id, status, printed, exact, run (one entry per
    printed value: a fraction and a decimal, or null where that check does not apply), and the details."""
    claims = []
    for r in results:
        c = r.claim
        parts = [_part_json(p) for p in r.parts]
        claims.append({
            "id": c.id, "status": r.status, "statement": c.statement, "source": c.source,
            "listed_in_claims_md": c in CLAIMS,
            "printed": c.printed,
            "exact": [p["exact"] for p in parts] if parts and any(p["exact"] for p in parts) else None,
            "run": [p["run"] for p in parts] if parts and any(p["run"] for p in parts) else None,
            "assumptions": list(c.assumptions), "note": c.note or None,
            "reason": r.message or None, "parts": parts,
        })
    return {"claims": claims, "summary": summary(results), "ok": summary(results)["fail"] == 0}
