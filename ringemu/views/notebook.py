"""Notebook views: HTML tables and the stepper fragment, for ``_repr_html_`` methods.

Front-ends that run no scripts still show the static parts (tables, and the stepper's static SVG of the final
state). Numbers are printed as the objects hold them (exact ints with separators; GB via
:func:`ringemu.units.format_gb`).
"""
from __future__ import annotations

import html

__all__ = ["table_html", "trace_html"]


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def table_html(caption: str, headers: list[str], rows: list[list], note: str = "") -> str:
    """A plain HTML table (numbers right-aligned, ints with thousands separators)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td style="text-align:right">{_cell(v)}</td>' for v in row) + "</tr>"
                   for row in rows)
    tail = f"<p><small>{html.escape(note)}</small></p>" if note else ""
    return (f"<div><table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{tail}</div>")


def trace_html(trace, lang: str = "en") -> str:
    """A :class:`~ringemu.trace.Trace` as the interactive stepper plus a static SVG of its final state; the
    counters come from a CommLedger holding the traced schedule."""
    from ..ledger import CommLedger
    from .html import stepper_fragment
    from .stepper import stepper_data
    ledger = CommLedger()
    ledger.record(trace.schedule, trace.layout, trace.dtype, trace.schedule.name)
    inputs = trace.layout.unpad(trace.initial.buffers) if trace.schedule.initial == "all" else None
    if inputs is not None and inputs.dtype.kind not in "iu":
        inputs = None  # numpy's sum is compared only for integer blocks, where it is exact
    return stepper_fragment(stepper_data(trace, ledger, inputs=inputs), lang)
