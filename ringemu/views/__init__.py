"""What a person looks at. Every view reads a :class:`~ringemu.trace.Trace`, a ledger or a JSON-ready report and
nothing else; no view computes a number that a run did not produce.

* :mod:`ringemu.views.stepper` — a traced collective and its CommLedger as step-by-step data (cells, provenance,
  transfers, cumulative byte counters per rank and per link);
* :mod:`ringemu.views.html` — the self-contained offline page (inline CSS, SVG, plain JavaScript, data embedded as
  ``<script type="application/json">``) and the notebook fragments;
* :mod:`ringemu.views.plot` — matplotlib charts (the optional ``[plot]`` extra) with byte-identical SVG output.

Views import only data modules (ledger, layout, schedule, units, the algorithm registry) and never a module
that produces a trace or report: a producer that wants to show itself in a notebook (``Trace._repr_html_``) imports
its view, and the arrow runs producer -> view -> data with no way back. That is why the views sit below the
collectives and the trace in the layer order, though a person meets them last.
"""
from .html import page_html, stepper_fragment, external_urls, embedded_json
from .stepper import stepper_data

__all__ = ["page_html", "stepper_fragment", "external_urls", "embedded_json", "stepper_data"]
