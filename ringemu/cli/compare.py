"""``ringemu compare``: every catalog algorithm for one collective on one topology, side by side.

One row per algorithm that supports N (steps, messages, bytes per rank, bytes on the slowest link class, modelled
α-β time, busbw), the fastest marked; a line names the algorithms that do not support N and why. ``--sweep`` runs
the sizes 1, 2, 4, ... up to ``--numel`` and prints where the fastest algorithm changes. Bad input raises
ValueError/TypeError, which :func:`ringemu.cli.main` prints as one line with exit status 2.
"""
from __future__ import annotations

import json
from fractions import Fraction

from ..algorithms import COLLECTIVES
from ..compare import Comparison, Sweep, compare, sweep, sweep_sizes
from ..topology import CONTENTIONS, INFINIBAND, NCCL_BASE_LATENCY, NVLINK, LinkClass, Topology, parse_decimal
from ..units import GB, format_decimal

__all__ = ["register", "cmd_compare", "topology_from_args", "format_seconds"]

_US = Fraction(1, 10 ** 6)


def register(subparsers) -> None:
    """Add ``compare`` to the ``ringemu`` dispatcher."""
    p = subparsers.add_parser("compare", help="every algorithm of a collective on one topology: bytes and α-β time")
    p.add_argument("--op", required=True, choices=list(COLLECTIVES), help="the collective")
    p.add_argument("--ranks", type=int, required=True, help="number of ranks N >= 1")
    p.add_argument("--numel", type=int, required=True, help="elements per rank S >= 0 (with --sweep: the largest)")
    p.add_argument("--nodes", type=int, default=1, help="nodes; must divide --ranks (default 1)")
    p.add_argument("--dtype", default="bf16", help="element type (default bf16, the lesson's 16-bit gradients)")
    p.add_argument("--intra-bandwidth", metavar="GBPS", default=str(NVLINK.bandwidth / GB),
                   help=f"bandwidth inside a node, GB/s per direction (default {NVLINK.bandwidth / GB}, NVLink)")
    p.add_argument("--inter-bandwidth", metavar="GBPS", default=str(INFINIBAND.bandwidth / GB),
                   help=f"bandwidth between nodes, GB/s (default {INFINIBAND.bandwidth / GB}, InfiniBand)")
    p.add_argument("--intra-latency-us", metavar="US", default=_decimal(NVLINK.latency / _US),
                   help=f"latency α inside a node, µs per message (default {_decimal(NVLINK.latency / _US)})")
    p.add_argument("--inter-latency-us", metavar="US", default=_decimal(INFINIBAND.latency / _US),
                   help=f"latency α between nodes, µs (default {_decimal(INFINIBAND.latency / _US)})")
    p.add_argument("--launch-latency-us", metavar="US", default=_decimal(NCCL_BASE_LATENCY / _US),
                   help=f"latency once per collective call, µs (default {_decimal(NCCL_BASE_LATENCY / _US)}: NCCL's "
                        f"baseLatencies for ring and tree, Simple protocol, src/graph/tuning.cc)")
    p.add_argument("--contention", choices=CONTENTIONS, default="port",
                   help="port: a rank's sends (receives) in a step share one port per class (default); "
                        "link: every ordered pair has its own link")
    p.add_argument("--sweep", action="store_true", help="sizes 1, 2, 4, ... up to --numel; where the fastest changes")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_compare)


def _decimal(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else format(float(value), "g")


def topology_from_args(args) -> Topology:
    """The :class:`Topology` of the command line (GB/s and µs turned into B/s and s, exactly)."""
    def link(base: LinkClass, bandwidth: str, latency: str, which: str) -> LinkClass:
        gbps = parse_decimal(bandwidth, f"--{which}-bandwidth")
        us = parse_decimal(latency, f"--{which}-latency-us")
        if gbps <= 0:
            raise ValueError(f"--{which}-bandwidth must be > 0 GB/s; got {bandwidth}")
        return LinkClass(base.name, gbps * GB, us * _US)

    return Topology.from_nodes(args.ranks, args.nodes,
                               intra=link(NVLINK, args.intra_bandwidth, args.intra_latency_us, "intra"),
                               inter=link(INFINIBAND, args.inter_bandwidth, args.inter_latency_us, "inter"),
                               contention=args.contention,
                               launch=_launch(args.launch_latency_us))


def _launch(text: str) -> Fraction:
    us = parse_decimal(text, "--launch-latency-us")
    if us < 0:
        raise ValueError(f"--launch-latency-us must be >= 0 µs; got {text}")
    return us * _US


def _significant(value: Fraction, digits: int = 4) -> str:
    """``value`` (>= 0) with ``digits`` significant digits, rounded half-up exactly: 1.945, 851.0, 0.03470."""
    if value == 0:
        return "0"
    places = digits - 1
    while value * 10 ** places >= 10 ** digits:
        places -= 1
    while value * 10 ** places < 10 ** (digits - 1):
        places += 1
    return format_decimal(value, max(places, 0))


def format_seconds(seconds: Fraction) -> str:
    """Four significant digits in s, ms, µs or ns, rounded half-up exactly: ``1.945 s``, ``126.0 µs``; ``0 s``."""
    if seconds == 0:
        return "0 s"
    for unit, scale in (("s", 1), ("ms", 10 ** 3), ("µs", 10 ** 6)):
        if seconds * scale >= 1:
            return f"{_significant(seconds * scale)} {unit}"
    return f"{_significant(seconds * 10 ** 9)} ns"


def cmd_compare(args) -> int:
    topology = topology_from_args(args)
    if args.sweep:
        result = sweep(args.op, topology, sweep_sizes(args.numel), args.dtype)
        print(json.dumps(result.as_dict()) if args.json else "\n".join(_sweep_lines(result)))
    else:
        result = compare(args.op, topology, args.numel, args.dtype)
        print(json.dumps(result.as_dict()) if args.json else "\n".join(_table_lines(result)))
    return 0


def _where(topology: Topology) -> str:
    classes = ", ".join(f"{c.name} {format_decimal(c.bandwidth / GB, 1)} GB/s α {_decimal(c.latency / _US)} µs"
                        for c in topology.classes()) or "no links"
    return (f"{topology.n_ranks:,} ranks = {topology.n_nodes:,} nodes × {topology.ranks_per_node:,} ({classes}; "
            f"{topology.contention} contention)")


def _render(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(header)] + [line(r) for r in rows]


def _unsupported_line(unsupported) -> list[str]:
    if not unsupported:
        return []
    return ["not run on this N: " + "; ".join(f"{name} ({why})" for name, why in unsupported)]


def _table_lines(c: Comparison) -> list[str]:
    slowest = c.topology.slowest()
    fastest = set(c.fastest)
    head = ["algorithm", "steps", "messages", "max B/rank", "total B",
            f"B on {slowest.name if slowest else '-'}", "modelled time", "busbw GB/s"]
    rows = [[("* " if r.name in fastest else "  ") + r.name, f"{r.steps:,}", f"{r.messages:,}",
             f"{r.max_rank_bytes:,}", f"{r.total_bytes:,}", f"{r.slowest_class_bytes:,}", format_seconds(r.seconds),
             "-" if r.busbw is None else _significant(r.busbw / GB)] for r in c.rows]
    lines = [f"{c.collective} of {c.numel:,} {c.dtype} elements per rank on {_where(c.topology)}", ""]
    lines += _render(head, rows)
    lines += ["", f"fastest (*): {', '.join(c.fastest) or '-'}; busbw = S/time × {c.bus_factor} (nccl-tests bus "
                  f"factor, from the {c.collective} ring's ledger)"]
    return lines + _unsupported_line(c.unsupported)


def _sweep_lines(s: Sweep) -> list[str]:
    names = list(s.points[0].seconds) if s.points else []
    head = ["S (elements)"] + names + ["fastest"]
    rows = [[f"{p.numel:,}"] + [format_seconds(p.seconds[a]) for a in names] + [p.fastest] for p in s.points]
    lines = [f"{s.collective}, modelled time per algorithm, {s.dtype}, on {_where(s.topology)}", ""]
    lines += _render(head, rows) + [""]
    if not s.crossovers:
        lines.append("crossover: none in this range (one algorithm is fastest throughout)")
    for x in s.crossovers:
        lines.append(f"crossover: {x.before} ({s.steps[x.before]} steps) is fastest up to S = {x.numel:,}, "
                     f"{x.after} ({s.steps[x.after]} steps) from S = {x.numel + 1:,}")
    return lines + _unsupported_line(s.unsupported)
