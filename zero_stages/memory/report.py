"""Per-rank memory of the four stages from size-only runs, with two verdicts named plainly.

For one (model, N, activations) this runs every stage's own code on size-only buffers
(:func:`~zero_stages.api.run_size_only`) and reads the MemoryLedger the ranks wrote:

* ``model_state_bytes_per_rank``: 16-bit weights and gradients, fp32 master, m, v held between steps (ZeRO §5.1);
* ``at_peak_by_category``: what the busiest rank held, category by category, at the moment its total peaked
  (model states + activations + buffers in flight: gathered parameters and communication buffers); these sum
  exactly to ``peak_bytes``;
* two verdicts against the card: ``model_states_fit`` (the lesson's reading, claim M6: model states alone under
  the card) and ``peak_fits`` (the peak per rank, activations and buffers in flight included).

Nothing is computed from a formula here; the closed forms live in :mod:`zero_stages.memory.closed_forms` and
:mod:`zero_stages.memory.activations`. Bytes are ints; the card is an exact ``Fraction`` of bytes.
"""
from __future__ import annotations

from fractions import Fraction

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.memory import CATEGORIES, MODEL_STATE_CATEGORIES
from ringemu.units import GB

from .activations import ActivationShape
from ..api import run_size_only
from .closed_forms import BEYOND_STAGES, STAGES

__all__ = ["BUFFER_CATEGORIES", "CARD_80GB", "MemoryReport", "stage_memory", "memory_report", "first_fits"]

BUFFER_CATEGORIES = ("gathered", "comm_buffer")  # buffers in flight (ZeRO-R §6: temporary buffers)
CARD_80GB = 80 * GB  # bytes; the lesson's card


class MemoryReport(dict):
    """The JSON-ready dict of :func:`memory_report`, shown in notebooks as a table."""

    def _repr_html_(self) -> str:
        from ringemu.units import format_gb
        from ringemu.views.notebook import table_html
        rows = [[r["name"], format_gb(max(r["model_state_bytes_per_rank"])), r["model_states_fit"],
                 format_gb(max(r["activation_peak_bytes_per_rank"])), format_gb(r["buffer_bytes_at_peak"]),
                 format_gb(r["peak_bytes"]), r["peak_fits"]] for r in self["stages"]]
        return table_html(f"Ψ = {self['params']:,}, N = {self['ranks']}, card {format_gb(Fraction(self['card_bytes']))} "
                          f"GB (GB = 10^9 B)", ["stage", "model states GB", "states fit", "activations GB",
                                                "buffers GB", "peak GB", "peak fits"], rows,
                          "states fit: model states alone under the card (claim M6); peak fits: model states + "
                          "activations + buffers in flight at the rank's peak")


def stage_memory(report, card_bytes) -> dict:
    """One stage's row, read from its StageReport's per-rank ledger rows (the busiest rank where per-rank
    figures differ)."""
    card = Fraction(card_bytes)
    peaks = report.peak_bytes_per_rank
    busiest = max(range(len(peaks)), key=peaks.__getitem__)
    at_peak = {c: report.memory_by_category_per_rank[busiest][c]["at_peak"] for c in CATEGORIES}
    states = max(report.model_state_bytes_per_rank)
    return {
        "name": report.name,
        "model_state_bytes_per_rank": report.model_state_bytes_per_rank,
        "model_state_padding_bytes_per_rank": report.model_state_padding_bytes_per_rank,
        "model_state_by_category": {c: report.memory_by_category_per_rank[busiest][c]["current"]
                                    for c in MODEL_STATE_CATEGORIES},
        "activation_peak_bytes_per_rank": report.activation_peak_bytes_per_rank,
        "buffer_bytes_at_peak": sum(at_peak[c] for c in BUFFER_CATEGORIES),
        "at_peak_by_category": at_peak,
        "peak_bytes_per_rank": peaks,
        "peak_bytes": peaks[busiest],
        "traffic_sent_bytes_per_rank": report.traffic_sent_bytes_per_rank,
        "traffic_sent_elements_per_rank": report.traffic_sent_elements_per_rank,
        "model_states_fit": states <= card,
        "peak_fits": peaks[busiest] <= card,
        "ranks_per_node": report.ranks_per_node,
        "bytes_per_link_class_per_rank": report.link_bytes_per_rank,  # {intra_node, inter_node, pcie} sent
        "host_model_state_bytes_per_rank": report.host_model_state_bytes_per_rank,  # offload: on the host
    }


def memory_report(n_ranks: int, psi: int | None = None, unit_sizes=None, activations: ActivationShape | None = None,
                  card_bytes=CARD_80GB, wire_dtype: str = "bf16", stages=None,
                  algorithm: str = DEFAULT_ALGORITHM, ranks_per_node: int | None = None) -> "MemoryReport":
    """Every stage's :func:`stage_memory` row for one setting (collectives by ``algorithm``), plus the setting
    (JSON-ready). ``stages`` defaults to the lesson's four, and with ``ranks_per_node`` (K ranks per node) to
    those and hsdp, zeropp and offload; every row's bytes are split per link class on that mesh."""
    units = list(unit_sizes) if unit_sizes is not None else None
    if stages is None:
        stages = STAGES if ranks_per_node is None else STAGES + BEYOND_STAGES
    rows = [stage_memory(run_size_only(s, n_ranks, psi=psi, unit_sizes=units, wire_dtype=wire_dtype,
                                       activations=activations, algorithm=algorithm, ranks_per_node=ranks_per_node),
                         card_bytes) for s in stages]
    total = sum(units) if units is not None else psi
    return MemoryReport(params=total, unit_sizes=units or [total], ranks=n_ranks, dtype=wire_dtype, algorithm=algorithm,
                        card_bytes=str(Fraction(card_bytes)),
                        activations=activations.as_dict() if activations else None, stages=rows)


def first_fits(reports: dict[int, dict], verdict: str = "model_states_fit") -> dict[str, int | None]:
    """Per stage, the smallest N among ``reports`` ({N: memory_report}) whose ``verdict`` holds; None if none."""
    out: dict[str, int | None] = {}
    for n in sorted(reports):
        for row in reports[n]["stages"]:
            out.setdefault(row["name"], None)
            if out[row["name"]] is None and row[verdict]:
                out[row["name"]] = n
    return out
