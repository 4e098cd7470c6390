"""What a person looks at. Every view reads a :class:`~ringemu.trace.Trace`, a ledger or a JSON-ready report and
nothing else; no view computes a number that a run did not produce.

* :mod:`ringemu.views.stepper` — a traced collective and its CommLedger as step-by-step data (cells, provenance,
  transfers, cumulative byte counters per rank and per link);
* :mod:`ringemu.views.html` — the self-contained offline page (inline CSS, SVG, plain JavaScript, data embedded as
  ``<script type="application/json">``) and the notebook fragments;
* :mod:`ringemu.views.plot` — matplotlib charts (the optional ``[plot]`` extra) with byte-identical SVG output.
"""
from .html import page_html, stepper_fragment, external_urls, embedded_json
from .stepper import stepper_data, trace_algorithm

__all__ = ["page_html", "stepper_fragment", "external_urls", "embedded_json", "stepper_data", "trace_algorithm"]
