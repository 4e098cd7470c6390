"""A traced collective as step-by-step data for a stepper: what every cell holds, whose contributions it has,
which transfers run, and the bytes every rank and link has carried so far.

Values and provenance come from the :class:`~ringemu.trace.Trace` (the schedule executed one step at a time by
the kernels). Byte counters come from a :class:`~ringemu.ledger.CommLedger`: each step's transfers are recorded as
a one-step schedule in a ledger of their own, and the counters are running sums of those ledgers' per-rank and
per-link traffic; the last step's counters are checked here against the ledger of the whole run, so the page can
never show totals the ledger does not hold. Counts are Python ints.
"""
from __future__ import annotations

import math

import numpy as np

from ..algorithms import algorithm
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..schedule import Schedule

__all__ = ["stepper_data", "provenance_text"]


def provenance_text(ranks) -> str:
    """Whose contributions a chunk holds, as ``r0+r1+r3``; ``·`` for none."""
    return "+".join(f"r{r}" for r in sorted(ranks)) or "·"


def _step_ledger(schedule: Schedule, rows: np.ndarray, layout: ChunkLayout, dtype) -> CommLedger:
    one = rows.copy()
    one[:, 0] = 0
    ledger = CommLedger()
    ledger.record(schedule.with_rows(f"{schedule.name}[step]", 1, one), layout, dtype, "step")
    return ledger


def _ring_positions(n: int, radius: float = 90.0, centre: float = 110.0) -> list[tuple[float, float]]:
    """Where rank r sits on a circle (SVG user units), rank 0 at the top, clockwise."""
    return [(round(centre + radius * math.sin(2 * math.pi * r / n), 2),
             round(centre - radius * math.cos(2 * math.pi * r / n), 2)) for r in range(n)]


def _arrow(a, b, gap: float = 17.0) -> dict:
    """An arrow from circle a to circle b, shortened by ``gap`` at both ends, with a label point beside it."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    d = math.hypot(dx, dy) or 1.0
    ux, uy = dx / d, dy / d
    return {"ax1": round(a[0] + ux * gap, 2), "ay1": round(a[1] + uy * gap, 2), "ax2": round(b[0] - ux * gap, 2),
            "ay2": round(b[1] - uy * gap, 2), "lx": round((a[0] + b[0]) / 2 - uy * 10, 2),
            "ly": round((a[1] + b[1]) / 2 + ux * 10, 2)}


def _cells(state, layout: ChunkLayout, n: int, received: set) -> list[list[dict]]:
    out = []
    for r in range(n):
        row = []
        for c in range(layout.n_chunks):
            lo = layout.start(c)
            prov = state.provenance[r][c]
            values = state.buffers[r, lo:lo + layout.payload(c)]
            shown = [int(v) for v in values.tolist()] if prov else None
            row.append({"values": shown, "value_text": " ".join(map(str, shown)) if shown is not None else "",
                        "prov": sorted(prov), "prov_text": provenance_text(prov), "count": len(prov),
                        "received": (r, c) in received})
        out.append(row)
    return out


def stepper_data(trace: "Trace", ledger: CommLedger, *, collective: str | None = None,
                 algorithm_name: str | None = None, inputs: np.ndarray | None = None) -> dict:
    """The JSON-ready stepper data of ``trace``; ``ledger`` holds the same schedule run as a whole (one record).

    Per step (index 0 is the state before the first step): phase, transfers with arrow coordinates, every cell's
    values / provenance, and cumulative sent and received bytes per rank and bytes per directed link. ``totals``
    are the whole run's ledger figures; the last step's counters equal them (checked here).
    """
    sched, lay = trace.schedule, trace.layout
    n = sched.n_ranks
    if len(ledger.records) != 1 or ledger.records[0].schedule.table.shape != sched.table.shape:
        raise ValueError("ledger must hold exactly the traced schedule, run once")
    pos = _ring_positions(n)
    links = sorted(ledger.per_link())
    sent, recv, link_bytes = [0] * n, [0] * n, dict.fromkeys(links, 0)
    bounds = sched.step_bounds()
    steps = [{"step": 0, "phase": "initial", "transfers": [], "cells": _cells(trace.initial, lay, n, set()),
              "rank_sent": list(sent), "rank_recv": list(recv), "links": [0] * len(links)}]
    for s, state in enumerate(trace.steps):
        step_ledger = _step_ledger(sched, sched.table[bounds[s]:bounds[s + 1]], lay, trace.dtype)
        for t in step_ledger.per_rank():
            sent[t.rank] += t.sent.bytes
            recv[t.rank] += t.received.bytes
        for link, t in step_ledger.per_link().items():
            link_bytes[link] += t.bytes
        transfers = [{"src": t.src, "dst": t.dst, "chunk": t.chunk, "op": t.op, **_arrow(pos[t.src], pos[t.dst])}
                     for t in state.transfers]
        received = {(t.dst, t.chunk) for t in state.transfers}
        steps.append({"step": s + 1, "phase": state.phase, "transfers": transfers,
                      "cells": _cells(state, lay, n, received), "rank_sent": list(sent), "rank_recv": list(recv),
                      "links": [link_bytes[k] for k in links]})
    for st in steps:
        for key in ("rank_sent", "rank_recv", "links"):
            st[f"{key}_text"] = [f"{v:,}" for v in st[key]]
    whole = ledger.per_rank()
    totals = {"rank_sent": [t.sent.bytes for t in whole], "rank_recv": [t.received.bytes for t in whole],
              "links": [ledger.per_link()[k].bytes for k in links], "total_bytes": ledger.total().bytes}
    totals.update(rank_sent_text=[f"{v:,}" for v in totals["rank_sent"]], total_text=f"{totals['total_bytes']:,}")
    last = steps[-1]
    if (last["rank_sent"], last["rank_recv"], last["links"]) != (totals["rank_sent"], totals["rank_recv"],
                                                                  totals["links"]):
        raise AssertionError("step-by-step counters do not add up to the whole run's ledger")
    out = {
        "key": (f"{collective}-{algorithm_name}" if collective and algorithm_name else sched.name).replace(" ", "_"),
        "label": algorithm_name or sched.name, "schedule": sched.name, "collective": collective, "algorithm": algorithm_name, "n_ranks": n,
        "n_chunks": lay.n_chunks, "chunk_size": lay.chunk_size, "numel": lay.numel, "dtype": str(trace.dtype),
        "n_steps": sched.n_steps, "itemsize": ledger.records[0].itemsize,
        "positions": [list(p) for p in pos], "links": [list(k) for k in links], "steps": steps, "totals": totals,
        "trace": trace.as_dict(),
    }
    if collective is not None and algorithm_name is not None:
        entry = algorithm(collective, algorithm_name)
        out.update(summary=entry.summary, source=entry.source, engines=entry.engines)
    if inputs is not None:
        out["numpy_sum"] = [int(v) for v in inputs.sum(axis=0, dtype=np.int64).tolist()]
        out["numpy_sum_text"] = " ".join(map(str, out["numpy_sum"]))
        final = lay.unpad(trace.final)
        out["final_rows_equal_numpy"] = [bool(np.array_equal(row.astype(np.int64), inputs.sum(axis=0, dtype=np.int64)))
                                         for row in final] if sched.final == "reduced-all" else None
        out["all_equal"] = bool(out["final_rows_equal_numpy"]) and all(out["final_rows_equal_numpy"])
    return out
