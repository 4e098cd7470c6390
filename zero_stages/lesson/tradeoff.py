"""The lesson page's algorithm trade-off: the catalog's modelled time of one all-reduce against the message size
on the lesson's cluster, from :func:`ringemu.compare.sweep` (α-β per step, NVLink inside a node and InfiniBand
between nodes at the lesson's 160 and 50 GB/s), with the sizes where the fastest algorithm changes.

Every point's time is the sweep's; every point's bytes are the CommLedger of that algorithm's schedule run on
size-only buffers of that size (the busiest rank's sent bytes), never a formula. Chart geometry (log–log, SVG
user units = CSS px) is fixed here, so the page's script only places what it finds.
"""
from __future__ import annotations

import math
from fractions import Fraction

from ringemu import CommLedger, VirtualBuffer, all_reduce
from ringemu.compare import sweep, sweep_sizes
from ringemu.topology import Topology

__all__ = ["tradeoff_panel", "LESSON_CLUSTER"]

LESSON_CLUSTER = (64, 8)  # ranks, nodes: 8 nodes of 8 cards (README, "Compare the algorithms on a cluster")
_CHART = {"width": 640, "height": 330, "left": 78, "right": 620, "top": 14, "bottom": 284}


def _seconds_text(t: Fraction) -> str:
    """A time as the compare table prints it: µs, ms or s with four significant digits."""
    for unit, scale in (("s", 1), ("ms", 10 ** 3), ("µs", 10 ** 6)):
        if t * scale >= 1 or unit == "µs":
            return f"{float(t * scale):.4g} {unit}"
    raise AssertionError("unreachable")


def _bytes(n_ranks: int, numel: int, dtype: str, name: str) -> int:
    ledger = CommLedger()
    all_reduce(VirtualBuffer((n_ranks, numel), dtype), ledger=ledger, algorithm=name)
    return ledger.max_sent_bytes_per_rank()


def tradeoff_panel(max_numel: int, dtype: str = "bf16", cluster: tuple[int, int] = LESSON_CLUSTER) -> dict:
    """Sizes 1, 2, 4, … ``max_numel`` elements per rank (and ``max_numel``); per algorithm the modelled time and
    the ledger's bytes at each size; the crossovers; and the chart's points."""
    n_ranks, n_nodes = cluster
    result = sweep("all-reduce", Topology.from_nodes(n_ranks, n_nodes), sweep_sizes(max_numel), dtype)
    names = list(result.points[0].seconds)
    c = _CHART
    xs = [math.log10(p.numel) for p in result.points]
    times = [float(t) for p in result.points for t in p.seconds.values() if t > 0]
    y_lo, y_hi = math.floor(math.log10(min(times))), math.ceil(math.log10(max(times)))

    def x_of(numel: int) -> float:
        span = (xs[-1] - xs[0]) or 1.0
        return round(c["left"] + (math.log10(numel) - xs[0]) / span * (c["right"] - c["left"]), 2)

    def y_of(t: Fraction) -> float:
        return round(c["bottom"] - (math.log10(float(t)) - y_lo) / ((y_hi - y_lo) or 1) * (c["bottom"] - c["top"]), 2)

    series = []
    for name in names:
        points = []
        for p in result.points:
            t = p.seconds[name]
            nbytes = _bytes(n_ranks, p.numel, dtype, name)
            points.append({"numel": p.numel, "numel_text": f"{p.numel:,}", "seconds": float(t),
                           "time_text": _seconds_text(t), "bytes": nbytes, "bytes_text": f"{nbytes:,}",
                           "x": x_of(p.numel), "y": y_of(t), "fastest": p.fastest == name})
        series.append({"name": name, "steps": result.steps[name], "points": points})
    crossovers = [{"numel": x.numel, "numel_text": f"{x.numel:,}", "before": x.before, "after": x.after,
                   "x": x_of(x.numel)} for x in result.crossovers]
    x_ticks = [{"x": x_of(10 ** k), "text": f"10^{k}"} for k in range(math.ceil(xs[0]), math.floor(xs[-1]) + 1)]
    y_ticks = [{"y": y_of(Fraction(10) ** k), "text": _seconds_text(Fraction(10) ** k)} for k in range(y_lo, y_hi + 1)]
    return {"n_ranks": n_ranks, "n_nodes": n_nodes, "dtype": dtype, "max_numel": max_numel,
            "series": series, "crossovers": crossovers, "chart": dict(c, x_ticks=x_ticks, y_ticks=y_ticks),
            "unsupported": [list(u) for u in result.unsupported]}
