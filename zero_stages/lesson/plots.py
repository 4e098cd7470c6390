"""``ringemu plot memory|traffic``: per-rank memory and traffic of the four stages against N (1 … 1,024), from
size-only runs (:func:`~zero_stages.memory.report.memory_report`), drawn by :mod:`ringemu.views.plot`.

* memory: model states per rank (``--measure states``, the lesson's reading, claim M6) or the peak per rank
  (``--measure peak``: model states + activations + buffers in flight), the card's line, and for each stage the
  first N of the grid at which it fits, annotated at that point from the same reports;
* traffic: bytes the busiest rank sends per step (ZeRO §7: 2(N−1)/N·Ψ·2 B, 3(N−1)/N·Ψ·2 B for ZeRO-3); with
  ``--algorithms``, DP's gradient all-reduce of Ψ 16-bit elements by every all-reduce algorithm of the catalog
  (``ringemu.algorithms.names``), each counted by its CommLedger on size-only buffers, where it supports N.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from ringemu import CommLedger, VirtualBuffer, all_reduce
from ringemu.algorithms import algorithm, names
from ringemu.units import GB, format_decimal
from ringemu.views.plot import Chart, save

from .memory_grid import RANKS_GRID, STAGE_LABELS
from ..memory.report import first_fits, memory_report

__all__ = ["register", "plot_command", "memory_chart", "traffic_chart", "algorithm_traffic_chart", "MEASURES"]

MEASURES = {"states": ("model_states_fit", "model states per rank"), "peak": ("peak_fits", "peak per rank")}


def _value(row: dict, measure: str) -> int:
    return max(row["model_state_bytes_per_rank"]) if measure == "states" else row["peak_bytes"]


def memory_chart(reports: dict[int, dict], measure: str = "states") -> Chart:
    """Per-rank memory against N for every stage, the card line and the first-fit notes, from ``reports``
    ({N: memory_report})."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}")
    verdict, what = MEASURES[measure]
    ns = sorted(reports)
    first = reports[ns[0]]
    card = Fraction(first["card_bytes"])
    series, notes = {}, []
    fits = first_fits(reports, verdict)
    for i, row in enumerate(first["stages"]):
        name = STAGE_LABELS[row["name"]]["en"]
        series[name] = (ns, [_value(reports[n]["stages"][i], measure) for n in ns])
        n_fit = fits[row["name"]]
        if n_fit is not None:
            y = _value(reports[n_fit]["stages"][i], measure)
            notes.append((row["name"], n_fit, y, f"{name} fits from N = {n_fit:,}"))
    psi = first["params"]
    card_gb = format_decimal(card / GB, 1).removesuffix(".0")
    return Chart(title=f"{what}, Ψ = {psi:,} ({first['dtype']}, size-only runs)", xlabel="N (ranks)",
                 ylabel=f"{what} (GB = 10^9 B)", series=series, hlines=[(float(card), f"{card_gb} GB card")],
                 notes=notes, logy=True, yscale=GB, yunit=" GB")


def traffic_chart(reports: dict[int, dict]) -> Chart:
    """Bytes the busiest rank sends per step against N for every stage, from ``reports``."""
    ns = sorted(reports)
    first = reports[ns[0]]
    series = {STAGE_LABELS[row["name"]]["en"]: (ns, [max(reports[n]["stages"][i]["traffic_sent_bytes_per_rank"])
                                                     for n in ns])
              for i, row in enumerate(first["stages"])}
    return Chart(title=f"traffic per rank per step, Ψ = {first['params']:,} ({first['dtype']}, ring)",
                 xlabel="N (ranks)", ylabel="bytes sent per rank per step (GB = 10^9 B)", series=series,
                 yscale=GB, yunit=" GB")


def algorithm_traffic_chart(psi: int, ranks=RANKS_GRID, wire_dtype: str = "bf16") -> Chart:
    """Bytes the busiest rank sends in one all-reduce of Ψ elements, per catalog algorithm, against N; each point
    is a CommLedger filled by the algorithm's schedule on a size-only world (skipped where N is unsupported)."""
    series = {}
    for name in names("all-reduce"):
        xs, ys = [], []
        for n in ranks:
            if algorithm("all-reduce", name).unsupported(n) is None:
                ledger = CommLedger()
                all_reduce(VirtualBuffer((n, psi), wire_dtype), ledger=ledger, algorithm=name)
                xs.append(n)
                ys.append(ledger.max_sent_bytes_per_rank())
        series[name] = (xs, ys)
    return Chart(title=f"all-reduce of Ψ = {psi:,} ({wire_dtype}) by algorithm, size-only CommLedgers",
                 xlabel="N (ranks)", ylabel="bytes sent by the busiest rank (GB = 10^9 B)", series=series,
                 logy=True, yscale=GB, yunit=" GB")


def register(subparsers) -> None:
    from ..cli.arguments import add_activation_arguments, card_gb, integer, unit_list
    from ..flat import MAX_PSI
    p = subparsers.add_parser("plot", help="per-rank memory or traffic of the four stages against N (needs the "
                                           "[plot] extra: matplotlib)")
    p.add_argument("what", choices=("memory", "traffic"))
    p.add_argument("-o", "--output", required=True, help="FILE.png or FILE.svg")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--params", type=integer(1, MAX_PSI), help="Ψ, the parameter count, as one unit")
    size.add_argument("--units", type=unit_list, help="Ψ as unit (layer) sizes, comma-separated")
    size.add_argument("--anchor", action="store_true", help="the lesson's anchor as layer sizes (assumed split)")
    p.add_argument("--gpu-gb", type=card_gb, default=Decimal(80), help="card memory in GB; default 80")
    p.add_argument("--measure", choices=tuple(MEASURES), default="states",
                   help="memory: model states per rank (default) or the peak per rank")
    p.add_argument("--algorithms", action="store_true",
                   help="traffic: DP's all-reduce by every algorithm of the catalog instead of the four stages "
                        "(--params only)")
    add_activation_arguments(p)
    p.set_defaults(handler=plot_command)


def plot_command(args) -> int:
    from ..cli.arguments import activation_shape, model_size
    if not str(args.output).lower().endswith((".png", ".svg")):
        raise ValueError(f"-o must name a .png or .svg file; got {args.output!r}")
    _, size = model_size(args)
    if args.algorithms:
        if args.what != "traffic" or "psi" not in size:
            raise ValueError("--algorithms draws traffic for --params only (one all-reduce of Ψ elements)")
        path = save(algorithm_traffic_chart(size["psi"]), args.output)
        print(f"wrote {path}")
        return 0
    shape = activation_shape(args)
    card = Fraction(args.gpu_gb) * GB
    reports = {n: memory_report(n, activations=shape, card_bytes=card, **size) for n in RANKS_GRID}
    chart = memory_chart(reports, args.measure) if args.what == "memory" else traffic_chart(reports)
    path = save(chart, args.output)
    print(f"wrote {path}" + "".join(f"\n  {text}" for _, _, _, text in chart.notes))
    return 0
