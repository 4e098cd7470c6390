"""The lesson page's exercises: five questions of the lesson whose answers are read from the runs embedded in
the same page (memory reports, the stepper's CommLedger, size-only stage runs on gloo's collectives), never typed
in. Each carries its kind, which tells the page how to read an answer: ``stage`` (a stage name), ``bytes`` (a
number of bytes, units allowed), ``gb`` (GB = 10^9 B, right when it rounds to the printed value) or ``ratio``
(``3/2``, ``1.5``, ``1.5×``, ``150 %``).
"""
from __future__ import annotations

from fractions import Fraction

from ringemu.units import format_gb

from ..api import run_size_only
from .memory_grid import STAGE_LABELS

__all__ = ["exercises", "KINDS"]

KINDS = ("stage", "bytes", "gb", "ratio")
FIT_N = 64  # "which stage first fits at N = 64?" (the lesson drags N from 8 to 64 and 1,024)


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def exercises(memory: dict, stepper: dict, comm: dict) -> list[dict]:
    """The questions, each with ``answer`` (what a right reply must equal), ``answer_text`` and ``why`` read from
    ``memory`` (the memory panel), ``stepper`` (the ring's CommLedger totals) and ``comm`` (the stage runs)."""
    n = comm["n_ranks"]
    anchor = memory["presets"][0]
    out = []
    point = anchor["points"].get(f"{FIT_N}|off")
    if point is not None:  # grids without N = 64 (the tests' small ones) skip this question
        first = next((s for s in point["stages"] if s["model_states_fit"]), None)
        out.append({"id": "fits64", "kind": "stage", "answer": first["id"] if first else "none",
                    "answer_text": STAGE_LABELS[first["id"]]["en"] if first else "none",
                    "params": {"n": FIT_N, "gb": memory["card_gb"]},
                    "why": {s["id"]: s["model_states_gb"] for s in point["stages"]}})
    ring = stepper["algorithms"]["ring"]
    sent = ring["totals"]["rank_sent"][0]
    out.append({"id": "ring_bytes", "kind": "bytes", "answer": sent, "answer_text": f"{sent:,} B",
                "params": {"n": ring["n_ranks"], "s": ring["numel"], "dtype": ring["dtype"],
                           "itemsize": ring["itemsize"], "chunk": ring["chunk_size"]}})
    room = anchor["headroom"].get(str(anchor["default_n"]))
    if room is not None:
        out.append({"id": "headroom", "kind": "gb", "answer": room["bytes"], "answer_text": f"{room['gb']} GB",
                    "places": 1, "params": {"n": anchor["default_n"], "card": memory["card_gb"],
                                            "states": room["zero3_states_gb"]},
                    "why": {a["recompute"]: a["gb"] for a in room["activations"]}})
    ring_ratio = next(s["ratio_to_dp"] for s in comm["stages"] if s["id"] == "zero3")
    out.append({"id": "zero3_ratio", "kind": "ratio", "answer": ring_ratio, "answer_text": ring_ratio,
                "params": {"n": n}})
    dp, z3 = (run_size_only(s, n, psi=comm["psi"], algorithm="gloo:ring") for s in ("dp", "zero3"))
    ratio = Fraction(max(z3.traffic_sent_elements_per_rank), max(dp.traffic_sent_elements_per_rank))  # busiest rank
    rs = max(z3.traffic_by_label["grad_reduce_scatter"]["sent_bytes_per_rank"])
    ar = max(dp.traffic_sent_bytes_per_rank)
    out.append({"id": "gloo_ratio", "kind": "ratio", "answer": str(ratio), "answer_text": str(ratio),
                "params": {"n": n}, "why": {"rs_gb": format_gb(rs), "ar_gb": format_gb(ar),
                                            "rs_over_ar": _fraction_text(Fraction(rs, ar))}})
    return out
