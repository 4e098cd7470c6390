"""``ringemu memory``: the size-only table of per-rank memory (model states, activations, buffers in flight) and
traffic of the four stages, read from the stages' own ledgers on size-only buffers.

GB = 10^9 bytes, printed with one decimal rounded half-up as the lesson prints them
(:func:`ringemu.units.format_gb`); JSON carries the exact integers. Flags are checked as they are parsed.
"""
from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction

from ringemu.units import GB, format_gb

from ..memory.anchor import ANCHOR_UNITS_ASSUMPTION
from ..api import MAX_SIZE_ONLY_RANKS
from .arguments import (activation_shape, add_activation_arguments, algorithm_argument, card_gb,
                        integer, model_size, ranks_per_node_argument, unit_list)
from ..flat import MAX_PSI
from ..memory.report import memory_report
from ..precision import WIRE_DTYPES

__all__ = ["register_memory", "memory_command"]

def register_memory(subparsers) -> None:
    """Add ``memory`` to the ``ringemu`` dispatcher."""
    m = subparsers.add_parser("memory", help="size-only memory (model states, activations, buffers in flight) and "
                                             "traffic per rank of the four stages")
    size = m.add_mutually_exclusive_group(required=True)
    size.add_argument("--params", type=integer(1, MAX_PSI),
                      help=f"Ψ, the parameter count (1 to {MAX_PSI:_} = 2^61 - 1), as one unit")
    size.add_argument("--units", type=unit_list,
                      help="Ψ as unit (layer) sizes, comma-separated: each unit is sharded and, in ZeRO-3, gathered "
                           "on its own, so the peak shows the largest units in flight")
    size.add_argument("--anchor", action="store_true",
                      help="the lesson's anchor (Ψ = 27,781,427,952) as layer sizes: embedding, 64 layers of "
                           "372,000,000, output head (an assumed split, printed)")
    m.add_argument("--ranks", type=integer(1, MAX_SIZE_ONLY_RANKS), required=True,
                   help=f"N, the data-parallel degree (1 to {MAX_SIZE_ONLY_RANKS})")
    m.add_argument("--gpu-gb", type=card_gb, default=Decimal(80),
                   help="card memory in GB (10^9 B), a decimal number; default 80")
    m.add_argument("--dtype", choices=WIRE_DTYPES, default="bf16",
                   help="16-bit weight and gradient type; both are 2 B, so the bytes are the same (default bf16)")
    add_activation_arguments(m)
    algorithm_argument(m)
    ranks_per_node_argument(m)
    m.add_argument("--json", action="store_true", help="print one JSON object on one line")
    m.set_defaults(handler=memory_command)


def memory_command(args) -> int:
    card = Fraction(args.gpu_gb) * GB  # bytes, exact
    activations = activation_shape(args)
    units, size = model_size(args)
    if args.ranks_per_node is not None and args.ranks % args.ranks_per_node:
        raise ValueError(f"--ranks-per-node must divide --ranks; got {args.ranks_per_node} for {args.ranks} ranks")
    out = memory_report(args.ranks, activations=activations, card_bytes=card, wire_dtype=args.dtype,
                        algorithm=args.algorithm, ranks_per_node=args.ranks_per_node, **size)
    out["gpu_gb"] = f"{args.gpu_gb:f}"
    assumptions = ([ANCHOR_UNITS_ASSUMPTION] if args.anchor else []) + \
        (activations.assumptions() if activations else ["no activations counted (give --seq, --batch, --hidden, "
                                                        "--layers)"])
    out["assumptions"] = assumptions
    for row in out["stages"]:
        row["model_state_gb"] = format_gb(max(row["model_state_bytes_per_rank"]))
        row["peak_gb"] = format_gb(row["peak_bytes"])
        row["traffic_gb"] = format_gb(max(row["traffic_sent_bytes_per_rank"]))
    if args.json:
        print(json.dumps(out))
        return 0
    psi = out["params"]
    shape = f" in {len(units)} units" if units else ""
    print(f"Ψ = {psi:,} parameters{shape}, N = {args.ranks} ranks, {args.dtype}, {args.algorithm} collectives, "
          f"card {args.gpu_gb:f} GB (GB = 10^9 B); model states per rank (fp32 master + m + v = 12 B, 16-bit weight and gradient 2 B each)")
    for line in assumptions:
        print(f"assumes: {line}")
    print(f"{'stage':<6} {'model states B/rank':>20} {'GB':>7} {'states fit':>10} {'activations B':>16} "
          f"{'buffers B':>15} {'peak B/rank':>18} {'GB':>7} {'peak fits':>9} {'traffic B/rank/step':>20} {'GB':>7}")
    for r in out["stages"]:
        print(f"{r['name']:<6} {max(r['model_state_bytes_per_rank']):>20,} {r['model_state_gb']:>7} "
              f"{'yes' if r['model_states_fit'] else 'no':>10} {max(r['activation_peak_bytes_per_rank']):>16,} "
              f"{r['buffer_bytes_at_peak']:>15,} {r['peak_bytes']:>18,} {r['peak_gb']:>7} "
              f"{'yes' if r['peak_fits'] else 'no':>9} {max(r['traffic_sent_bytes_per_rank']):>20,} "
              f"{r['traffic_gb']:>7}")
    if args.ranks_per_node is not None:
        _print_link_classes(out, args.ranks_per_node)
    print("states fit: model states alone under the card (the lesson's reading, claim M6). peak fits: the peak per "
          "rank under the card, i.e. model states + activations + buffers in flight (gathered parameters, gradient "
          "buckets, the fp32 averaged gradient of one unit) at the moment the rank's total peaked"
          + ("" if units else "; Ψ is one unit here, so ZeRO-3 gathers all of it at once: give --units or --anchor "
                              "for per-layer peaks (lesson claim M10)"))
    return 0


def _print_link_classes(out: dict, k: int) -> None:
    """Bytes per link class per step of the busiest rank (NVLink inside a node, InfiniBand across, PCIe to the
    host), and offload's host memory."""
    print(f"bytes sent per rank per step by link class, K = {k} ranks per node (busiest rank of each class)")
    print(f"{'stage':<8} {'intra-node B':>18} {'inter-node B':>18} {'PCIe B':>18} {'host states B/rank':>19}")
    for r in out["stages"]:
        per = r["bytes_per_link_class_per_rank"]
        host = max(r["host_model_state_bytes_per_rank"], default=0)
        print(f"{r['name']:<8} {max(d['intra_node'] for d in per):>18,} {max(d['inter_node'] for d in per):>18,} "
              f"{max(d['pcie'] for d in per):>18,} {host:>19,}")
