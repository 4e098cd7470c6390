"""The core ``ringemu`` subcommands: ``demo``, ``run``, ``trace`` and ``count``.

* ``demo`` — the lesson's ring experiment on 8 ranks: the reduce-scatter then all-gather walk, each rank's
  traffic, and a check that every rank ends with the direct sum.
* ``run`` — one collective on fixed-seed integer blocks; ``verified`` means the result equals an independent
  ``numpy.sum`` of the inputs (the concatenated shards for all-gather); ``--save`` writes inputs and outputs.
* ``trace`` — the step-by-step walk of any collective on a small buffer.
* ``count`` — traffic only, on size-only buffers, at any size (the lesson's Ψ = 27,781,427,952); with
  ``--bandwidth`` the α-β time.

Each handler returns the exit status: 0, or 1 when a run could not be verified. Bad input raises
ValueError/TypeError, which :func:`ringemu.cli.main` turns into one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .. import collectives
from ..blocks import check_integer_blocks, integer_blocks, value_bound
from ..dtypes import dtype_name, resolve_dtype
from ..checks import check_n_ranks, check_numel, parse_number
from ..faults.locate import explain
from ..faults.plan import FaultPlan, as_plan
from ..faults.spec import check_fault, parse_fault
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..algorithms import names, op_names, resolve_op
from ..memory_guard import check_fits, collective_run_bytes
from ..testing import run_op, shards_of
from ..trace import MAX_NUMEL as TRACE_MAX_NUMEL, MAX_RANKS as TRACE_MAX_RANKS, trace_collective
from ..units import GB, format_gb
from ..virtual import VirtualBuffer

__all__ = ["register", "cmd_demo", "cmd_run", "cmd_trace", "cmd_count", "run_collective", "count_collective",
           "check_save_path", "MAX_RUN_RANKS", "MAX_BANDWIDTH_GBPS", "MAX_LATENCY_US"]

MAX_RUN_ELEMENTS = 2 ** 28  # N·S for `run` (real data): 1 GiB of fp32 inputs, plus padded copy and outputs
MAX_RUN_RANKS = 1024  # `run` builds the schedule table, 2N(N-1) rows of 40 B: 84 MB at N = 1024
MAX_BANDWIDTH_GBPS = 10 ** 9  # GB/s: a billion times a fast link; beyond it the α-β time says nothing
MAX_LATENCY_US = 10 ** 12  # µs: about 11.6 days per step
MAX_COUNT_RANKS = 4096  # `count` walks the real schedule: 2N(N-1) transfers of 40 B each = 1.3 GB at N = 4096


def register(subparsers) -> None:
    """Add ``demo``, ``run``, ``trace`` and ``count`` to the ``ringemu`` dispatcher."""
    ops = list(op_names())
    p = subparsers.add_parser("demo", help="the lesson's ring all-reduce on 8 ranks, step by step")
    p.add_argument("--ranks", type=int, default=8, help="number of ranks N (default 8)")
    p.add_argument("--numel", type=int, default=8, help="elements per rank (default 8: one per chunk)")
    p.add_argument("--seed", type=int, default=0, help="seed of the integer blocks (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_demo)

    p = subparsers.add_parser("run", help="run one collective on fixed-seed integer blocks and verify it")
    _common(p, ops)
    p.add_argument("--seed", type=int, default=0, help="seed of the integer blocks (default 0)")
    p.add_argument("--mode", choices=("fused", "step", "reference"), default="fused", help="kernel path")
    p.add_argument("--save", metavar="FILE.npz", help="write inputs, outputs and the expected sum to FILE.npz")
    _fault_flags(p)
    p.add_argument("--no-checksums", action="store_true",
                   help="let faulty messages through unchecked (the result is then verified against numpy.sum)")
    p.set_defaults(handler=cmd_run)

    p = subparsers.add_parser("trace", help="step-by-step walk of a collective on a small buffer")
    _common(p, ops, dtype_default="int32")
    p.add_argument("--seed", type=int, default=0, help="seed of the integer blocks (default 0)")
    _fault_flags(p)
    p.set_defaults(handler=cmd_trace)

    p = subparsers.add_parser("count", help="traffic of a collective at any size (size-only buffers)")
    _common(p, ops)
    p.add_argument("--bandwidth", metavar="GBPS", help="link bandwidth in GB/s (10^9 B/s) for the α-β time")
    p.add_argument("--latency-us", metavar="US", default=None,
                   help="per-step latency α in microseconds, with --bandwidth (default 0)")
    p.set_defaults(handler=cmd_count)


def _fault_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fault", action="append", metavar="SPEC", default=[],
                   help="inject a fault, e.g. corrupt:step=1,src=0,dst=1,bit=3 (grammar: docs/faults.md); repeatable")


def _common(p: argparse.ArgumentParser, ops: list[str], dtype_default: str | None = None) -> None:
    p.add_argument("--op", required=True, choices=ops, help="the collective")
    p.add_argument("--algorithm", choices=names(), default=None,
                   help="the algorithm, from the catalog (default: ring; `ringemu compare` lists them)")
    p.add_argument("--ranks", type=int, required=True, help="number of ranks N >= 1")
    p.add_argument("--numel", type=int, required=True, help="elements per rank S >= 0")
    p.add_argument("--dtype", default=dtype_default, required=dtype_default is None,
                   help="int32 int64 fp16 bf16 fp32 fp64 (numpy spellings accepted)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


# -- run ---------------------------------------------------------------------------------------------------------
def run_collective(op: str, n_ranks: int, numel: int, dtype: object, seed: int, mode: str = "fused",
                   algorithm: str | None = None, faults=None):
    """Run ``op`` by ``algorithm`` (:func:`ringemu.algorithms.resolve_op`) on :func:`~ringemu.blocks.integer_blocks`;
    return (inputs, outputs, expected, verified, ledger).

    ``outputs`` is a list of N per-rank arrays. ``expected`` is computed independently of the schedule:
    ``numpy.sum`` over ranks in int64 / float64 (exact for integer blocks), or for all-gather the concatenated
    shards. ``verified`` is True iff every rank's output equals its part of ``expected`` exactly.
    """
    n, s, dt = check_n_ranks(n_ranks, "ranks"), check_numel(numel), resolve_dtype(dtype)
    collective, algorithm = resolve_op(op, algorithm)
    if n * s > MAX_RUN_ELEMENTS:
        raise ValueError(f"ranks·numel must be <= {MAX_RUN_ELEMENTS:,} for a run with real data; got {n * s:,} "
                         f"(use `ringemu count` for traffic at any size)")
    hint = (f"ringemu count --op {op} --algorithm {algorithm} --ranks {n} --numel {s} --dtype {dtype_name(dt)}"
            if n <= MAX_COUNT_RANKS else
            f"ringemu count (at most {MAX_COUNT_RANKS} ranks: it walks the same N² schedule)")
    check_fits(collective_run_bytes(collective, n, s, dt.itemsize, algorithm),
               f"{op} on {n:,} ranks of {s:,} elements", hint)
    if n > MAX_RUN_RANKS:
        raise ValueError(f"ranks must be <= {MAX_RUN_RANKS} for a run with real data (its schedule's table grows as "
                         f"N²); got {n} (use `ringemu count` for traffic at up to {MAX_COUNT_RANKS} ranks)")
    inputs = integer_blocks(n, s, seed, dt)
    check_integer_blocks(inputs, "inputs")  # the promise the independent sum relies on
    wide = np.int64 if dt.kind == "i" else np.float64  # exact for every integer block (blocks.EXACT_LIMITS)
    layout, ledger = ChunkLayout(s, n), CommLedger()
    if collective == "all-gather":
        expected = np.concatenate([x.astype(wide) for x in shards_of(inputs)])
    else:
        expected = np.sum(inputs.astype(wide), axis=0)
    plan = as_plan(faults)
    outputs = list(run_op(collective, inputs, algorithm=algorithm, ledger=ledger, mode=mode, faults=plan))
    if plan is not None and plan.unfired():
        raise ValueError(f"--fault {plan.unfired()[0]} never fired: the collective is labelled "
                         f"{', '.join(plan.labels_seen())} (drop label= or use that one)")
    if collective == "reduce-scatter":
        verified = all(np.array_equal(out.astype(wide), expected[layout.payload_slice(r)])
                       for r, out in enumerate(outputs))
    else:
        verified = all(np.array_equal(out.astype(wide), expected) for out in outputs)
    return inputs, outputs, expected, verified, ledger


def cmd_run(args) -> int:
    if args.save is not None:
        check_save_path(args.save)
    if args.no_checksums and not args.fault:
        raise ValueError("--no-checksums needs --fault (without faults there is nothing to check)")
    faults = FaultPlan(tuple(args.fault), checksums=not args.no_checksums) if args.fault else None
    inputs, outputs, expected, verified, ledger = run_collective(args.op, args.ranks, args.numel, args.dtype,
                                                                 args.seed, args.mode, args.algorithm, faults)
    name = dtype_name(args.dtype)
    algorithm = resolve_op(args.op, args.algorithm)[1]
    saved = _save(args.save, args, inputs, outputs, expected) if args.save else None
    if args.json:
        out = {"op": args.op, "algorithm": algorithm, "ranks": args.ranks, "numel": args.numel, "dtype": name,
               "seed": args.seed, "mode": args.mode, "verified": verified, "saved": saved}
        out.update(_summary(ledger))
        print(json.dumps(out))
    else:
        print(f"{args.op} ({algorithm}) on {args.ranks} ranks: {args.numel:,} {name} elements per rank (integer "
              f"blocks, seed {args.seed}, mode {args.mode})")
        against = "the concatenated shards" if args.op == "all-gather" else "numpy.sum of the inputs"
        print(f"verified: {'yes' if verified else 'NO'} (every rank's result equals {against}, exactly)")
        print(*_traffic_lines(ledger), sep="\n")
        if saved:
            print(f"saved: {saved}")
    return 0 if verified else 1


def check_save_path(path: str) -> Path:
    """``--save``'s path: it must end in ``.npz`` (the file written is exactly that path) and its folder exist."""
    target = Path(path)
    if target.suffix != ".npz" or target.name == ".npz":
        raise ValueError(f"--save must be a file name ending in .npz (nothing else is written); got {path!r}")
    if target.is_dir():
        raise ValueError(f"--save must be a file, not a directory; got {path!r}")
    if not target.parent.is_dir():
        raise ValueError(f"--save: directory {str(target.parent)!r} does not exist")
    return target


def _save(path: str, args, inputs, outputs, expected) -> str:
    """Write the run to ``path`` (.npz). bf16 arrays are stored as float32 (exact: bf16 ⊂ fp32), since .npz
    cannot name ml_dtypes' bfloat16."""
    def storable(a: np.ndarray) -> np.ndarray:
        return a.astype(np.float32) if dtype_name(a.dtype) == "bf16" else a

    n, s = inputs.shape
    layout = ChunkLayout(s, n)
    if resolve_op(args.op)[0] == "reduce-scatter":  # (N, ceil(S/N)): row r is rank r's chunk, zero after its payload
        out = np.zeros((n, layout.chunk_size), dtype=inputs.dtype)
        for r, chunk in enumerate(outputs):
            out[r, :chunk.size] = chunk
    else:
        out = np.stack(outputs)
    with open(path, "wb") as fh:  # exactly this path (np.savez would append .npz to a bare name)
        np.savez(fh, inputs=storable(inputs), outputs=storable(out), expected=expected,
                 output_numel=np.array([o.size for o in outputs], dtype=np.int64),
                 dtype=np.array(dtype_name(inputs.dtype)), op=np.array(args.op),
                 seed=np.array(args.seed, dtype=np.int64))
    return path


# -- trace -------------------------------------------------------------------------------------------------------
def cmd_trace(args) -> int:
    faults = [parse_fault(spec) for spec in args.fault]
    trace = trace_collective(args.op, args.ranks, args.numel, args.dtype, args.seed, algorithm=args.algorithm,
                             faults=faults or None)
    if not faults:
        print(json.dumps(trace.as_dict()) if args.json else trace.render())
        return 0
    schedule = trace.schedule
    for f in faults:
        check_fault(f, schedule, f.label or schedule.name)
    stops = [f for f in faults if f.kind == "stop"]
    if stops:  # the watchdog's error, as the collective would raise it
        FaultPlan(tuple(stops)).run(schedule, trace.initial.buffers.copy(), "step", stops[0].label or args.op)
    lines, wrong = explain(schedule, trace.initial.buffers, faults)
    if args.json:
        out = trace.as_dict()
        out["faults"] = {"report": lines, "wrong_cells": {str(s): sorted(c) for s, c in wrong.items()}}
        print(json.dumps(out))
    else:
        print(trace.render(wrong))
        print("\n" + "\n".join(lines) + "\n(! marks a cell that differs from the fault-free run)")
    return 0


# -- count -------------------------------------------------------------------------------------------------------
def count_collective(op: str, n_ranks: int, numel: int, dtype: object, algorithm: str | None = None) -> CommLedger:
    """Count ``op`` by ``algorithm`` on size-only buffers (:class:`~ringemu.virtual.VirtualBuffer`): no data,
    exact traffic."""
    n, s = check_n_ranks(n_ranks, "ranks"), check_numel(numel)
    collective, algorithm = resolve_op(op, algorithm)
    if n > MAX_COUNT_RANKS:
        raise ValueError(f"ranks must be <= {MAX_COUNT_RANKS} for count (it walks every transfer of the schedule, "
                         f"2N(N-1) for all-reduce); got {n}")
    ledger = CommLedger()
    run_op(collective, VirtualBuffer((n, s), dtype), algorithm=algorithm, ledger=ledger)
    return ledger


def cmd_count(args) -> int:
    ledger = count_collective(args.op, args.ranks, args.numel, args.dtype, args.algorithm)
    name = dtype_name(args.dtype)
    algorithm = resolve_op(args.op, args.algorithm)[1]
    seconds = None
    if args.latency_us is not None and args.bandwidth is None:
        raise ValueError("--latency-us needs --bandwidth (the α-β time uses both)")
    if args.bandwidth is not None:
        bandwidth = parse_number(args.bandwidth, "--bandwidth", 0, MAX_BANDWIDTH_GBPS, minimum_allowed=False,
                                 unit="GB/s")
        latency = parse_number("0" if args.latency_us is None else args.latency_us, "--latency-us", 0,
                               MAX_LATENCY_US, unit="µs")
        seconds = ledger.alpha_beta_time(bandwidth * GB, latency / 10 ** 6)
    if args.json:
        out = {"op": args.op, "algorithm": algorithm, "ranks": args.ranks, "numel": args.numel, "dtype": name}
        out.update(_summary(ledger))
        if seconds is not None:
            out.update({"bandwidth_GBps": str(bandwidth), "latency_us": str(latency),
                        "alpha_beta_seconds": float(seconds), "alpha_beta_seconds_exact": str(seconds)})
        print(json.dumps(out))
        return 0
    print(f"{args.op} ({algorithm}) on {args.ranks:,} ranks: {args.numel:,} {name} elements per rank (size-only: "
          f"counted, no data)")
    print(*_traffic_lines(ledger), sep="\n")
    if seconds is not None:
        print(f"α-β time at {bandwidth} GB/s per link, latency {latency} µs per step: {float(seconds):.4g} s "
              f"(= {seconds} s)")
    return 0


# -- demo --------------------------------------------------------------------------------------------------------
def cmd_demo(args) -> int:
    n, s = check_n_ranks(args.ranks, "--ranks"), check_numel(args.numel, "--numel")
    if n > TRACE_MAX_RANKS or s > TRACE_MAX_NUMEL:  # the demo prints every step's grid: teaching sizes only
        raise ValueError(f"demo shows every step, so it is for small rings: --ranks must be at most "
                         f"{TRACE_MAX_RANKS} and --numel at most {TRACE_MAX_NUMEL}; got --ranks {n} --numel {s} "
                         f"(`ringemu run` or `ringemu count` take any size)")
    trace = trace_collective("all-reduce", n, s, "int32", args.seed, max_abs=9)  # single-digit inputs
    inputs = integer_blocks(n, s, args.seed, "int32", max_abs=min(9, value_bound(n, "int32")))
    ledger = CommLedger()
    result = collectives.all_reduce(inputs, ledger=ledger)  # the fast path, checked against the trace
    direct = np.sum(inputs.astype(np.int64), axis=0)
    verified = bool(np.array_equal(result.astype(np.int64), np.broadcast_to(direct, result.shape))
                    and np.array_equal(trace.final[:, :s], result))
    if args.json:
        print(json.dumps({"ranks": n, "numel": s, "dtype": "int32", "seed": args.seed, "verified": verified,
                          "result": result[0].tolist(), "direct_sum": direct.tolist(),
                          "traffic": _summary(ledger), "trace": trace.as_dict()}))
        return 0 if verified else 1
    print(f"Ring all-reduce on {n} ranks = reduce-scatter ({n - 1} steps) then all-gather ({n - 1} steps).")
    print(f"Each rank starts with {s} whole numbers (seed {args.seed}). A cell shows a chunk's values and, in braces,")
    print("the ranks whose numbers it already holds; * marks the chunk a rank has just received.\n")
    print(trace.render())
    print("\ntraffic (every element each rank puts on the wire):")
    print(*_traffic_lines(ledger), sep="\n")
    chunk = ChunkLayout(s, n).chunk_size
    print(f"closed form: each rank sends 2(N-1)·ceil(S/N) = 2·{n - 1}·{chunk} = {2 * (n - 1) * chunk} elements, "
          f"about 2(N-1)/N of its buffer")
    print(f"\nresult on every rank: {result[0].tolist()}")
    print(f"direct sum (numpy):   {direct.tolist()}")
    print("equal on every rank: " + ("yes" if verified else "NO"))
    return 0 if verified else 1


# -- shared output -----------------------------------------------------------------------------------------------
def _summary(ledger: CommLedger) -> dict:
    """The ledger's JSON summary plus the busiest rank's bytes; ``per_rank`` has the keys ``rank``,
    ``sent_elements``, ``sent_bytes``, ``received_elements``, ``received_bytes`` (and messages, padding)."""
    out = ledger.summary()
    out.pop("labels", None)
    out["max_sent_bytes_per_rank"] = ledger.max_sent_bytes_per_rank()
    return out


def _gb(nbytes: int) -> str:
    """`` (97.2 GB)`` for sizes of at least 0.1 GB (rounded once, exactly, as the lesson prints); else empty."""
    return f" ({format_gb(nbytes)} GB)" if nbytes >= GB // 10 else ""


def _traffic_lines(ledger: CommLedger) -> list[str]:
    total = ledger.total()
    lines = [f"steps: {ledger.n_steps()}, messages: {total.messages:,}, sent in all: {total.elements:,} elements"
             f" = {total.bytes:,} B{_gb(total.bytes)}, of which padding {total.padding_bytes:,} B",
             f"bus bandwidth factor (nccl-tests): {ledger.bus_bandwidth_factor()}"]
    groups: list[list] = []  # runs of consecutive ranks with identical traffic
    for t in ledger.per_rank():
        key = (t.sent.elements, t.sent.bytes, t.received.elements, t.received.bytes)
        if groups and groups[-1][1] == key:
            groups[-1][0].append(t.rank)
        else:
            groups.append([[t.rank], key])
    for ranks, (se, sb, re, rb) in groups:
        who = f"rank {ranks[0]} sends" if len(ranks) == 1 else f"ranks {ranks[0]}-{ranks[-1]} each send"
        lines.append(f"{who} {se:,} elements = {sb:,} B{_gb(sb)} and receive{'s' if len(ranks) == 1 else ''} "
                     f"{re:,} elements = {rb:,} B{_gb(rb)}")
    return lines
