"""Bytes a real engine put on the wire, next to the ledger's modelled count.

The ledger counts what the ring schedule moves (payload and padding, :mod:`ringemu.ledger`). What gloo really
sends depends on its own algorithms, its message headers and TCP/IP. Two observations are taken around each
workload:

* **socket bytes per rank**: the growth of ``wchar`` in ``/proc/self/io`` of each rank process, i.e. the bytes
  the process handed to ``write``/``writev`` (gloo's TCP transport writes its messages, header included, with
  ``writev``). Nothing else writes during a workload, so this is the rank's application-level sent bytes.
* **interface bytes**: ``tx_bytes`` and ``tx_packets`` of the loopback device in ``/proc/self/net/dev``. The run
  happens in a private network namespace (``unshare -n``, which needs root or user namespaces), so the ranks'
  own traffic is the only traffic on that ``lo``. These bytes include each packet's headers (14 B link + 20 B
  IPv4 + 32 B TCP with timestamps) and the pure ACK packets.

Each workload is bracketed by barriers so that no rank starts before rank 0 has read the counters and rank 0
reads them again only after every rank has received everything (barrier, read, barrier, workload, barrier,
read, barrier). The bracket alone (two barriers, workload ``barrier``) is measured the same way and
subtracted; ``rounds`` repetitions are averaged exactly (``Fraction``). :func:`measure_wire` starts the
namespace and the ranks itself and returns a JSON-ready dict; ``python -m zero_stages.torch.wire_bytes --ranks 4
--numel 1048576 --json`` prints it. Workloads: the collectives of one step on one flat buffer (``dp``,
``zero3``, ``reduce_scatter``, ...) or one training step of the project's stage modules (``stage:zero3``).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

from ringemu.algorithms import COLLECTIVES
from ringemu.worlds.base import NATIVE, communicator_algorithms
from ringemu.dtypes import resolve_dtype
from ringemu.ledger import CommLedger

__all__ = ["WORKLOADS", "STAGE_PREFIX", "measure_wire", "measure_here", "read_lo", "read_wchar"]

STAGE_PREFIX = "stage:"  # workload "stage:zero3": one training step of that stage module

# workload -> collectives per step on a flat buffer of numel elements (label, op); ZeRO §7, lesson claim C2
WORKLOADS = {
    "barrier": (),
    # one collective alone, named as the Communicator method: reduce_scatter ("rs"), all_gather, all_reduce
    **{c.replace("-", "_"): (("".join(w[0] for w in c.split("-")), c.replace("-", "_")),) for c in COLLECTIVES},
    "dp": (("grad_all_reduce", "all_reduce"),),  # DP, ZeRO-1, ZeRO-2: 2Ψ
    "zero3": (("param_all_gather_fwd", "all_gather"), ("param_all_gather_bwd", "all_gather"),
              ("grad_reduce_scatter", "reduce_scatter")),  # ZeRO-3: 3Ψ
}


def read_lo() -> tuple[int, int]:
    """(tx_bytes, tx_packets) of this network namespace's loopback device, from ``/proc/self/net/dev``."""
    with open("/proc/self/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                fields = rest.split()
                return int(fields[8]), int(fields[9])  # transmit bytes, packets (columns 9 and 10)
    raise ValueError("no loopback device in /proc/self/net/dev")


def read_wchar() -> int:
    """Bytes this process has passed to write-type system calls (``wchar`` of ``/proc/self/io``)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    raise ValueError("no wchar in /proc/self/io")


def _run_workload(comm, name: str, full: np.ndarray, shard: np.ndarray, job) -> None:
    if name.startswith(STAGE_PREFIX):
        from ..api import RANK_FUNCTIONS

        RANK_FUNCTIONS[name[len(STAGE_PREFIX):]](comm, copy.deepcopy(job))  # fresh memory ledger each round
        return
    for label, op in WORKLOADS[name]:
        if op == "all_gather":
            comm.all_gather(shard, full.shape[0], label)
        else:
            getattr(comm, op)(full, label)


def _workload_rank(comm, workloads: list[str], numel: int, dtype: str, rounds: int, seed: int, jobs: dict):
    """Per-rank body: for each workload, ``rounds`` times: counters read around the workload (module doc).

    Returns ``{workload: [(lo bytes, lo packets, socket bytes, modelled bytes of all ranks), ...]}``; the
    modelled bytes come from this rank's communicator ledger, filled by the same calls.
    """
    import torch.distributed as dist

    rng = np.random.default_rng([seed, comm.rank])
    dt = resolve_dtype(dtype)
    full = rng.integers(-8, 9, size=numel).astype(dt)  # small integers: exact sums in every dtype
    shard = full[comm.layout(numel).payload_slice(comm.rank)]
    out = {}
    for name in workloads:
        samples = []
        for _ in range(rounds):
            comm.ledger = CommLedger()
            dist.barrier()  # A: the previous round is over everywhere
            lo0, w0 = read_lo(), read_wchar()
            dist.barrier()  # B: no rank starts before rank 0 has read
            _run_workload(comm, name, full, shard, jobs.get(name))
            dist.barrier()  # C: every byte of the workload has been received
            lo1, w1 = read_lo(), read_wchar()
            dist.barrier()  # D: no rank starts the next round before rank 0 has read
            samples.append((lo1[0] - lo0[0], lo1[1] - lo0[1], w1 - w0, comm.ledger.total().bytes))
        out[name] = samples
    return out


def _stage_jobs(workloads, n_ranks: int, numel: int, dtype: str, seed: int) -> dict:
    """One training step of each ``stage:NAME`` workload: integer-block gradients, one unit of ``numel``."""
    stages = [w for w in workloads if w.startswith(STAGE_PREFIX)]
    if not stages:
        return {}
    from ..api import training_job

    return {w: training_job(n_ranks, 1, dtype, seed, "blocks", [numel]) for w in stages}


def measure_here(n_ranks: int, numel: int, dtype: str = "bf16", workloads=("dp", "zero3"), rounds: int = 3,
                 algorithm: str = NATIVE, timeout: float = 300.0, seed: int = 0) -> dict:
    """Run the workloads on N gloo ranks in *this* network namespace and compare with the ledger.

    Workloads are the names in :data:`WORKLOADS` (the collectives of one step on one flat buffer of ``numel``
    elements) or ``stage:dp`` … ``stage:zero3`` (one training step of the project's stage module itself, one
    unit of ``numel`` parameters, integer-block gradients; its 16-bit type must be bf16 or fp16).
    Interface counts are only meaningful if nothing else uses this namespace's loopback (see
    :func:`measure_wire`). Returns a JSON-ready dict (module doc); exact ratios are strings of Fractions.
    """
    from ringemu.worlds.torch_launch import TorchWorld

    stages = ("dp", "zero1", "zero2", "zero3")
    known = list(WORKLOADS) + [STAGE_PREFIX + s for s in stages]
    unknown = [w for w in workloads if w not in known]
    if unknown:
        raise ValueError(f"workloads must be among {', '.join(known)}; got {unknown}")
    names = ["barrier"] + [w for w in workloads if w != "barrier"]
    jobs = _stage_jobs(names, n_ranks, numel, dtype, seed)
    world = TorchWorld(n_ranks, algorithm=algorithm, timeout=timeout)
    per_rank = world.run(_workload_rank, names, numel, dtype, rounds, seed, jobs)
    base_lo = _mean([s[0] for s in per_rank[0]["barrier"]])
    base_pk = _mean([s[1] for s in per_rank[0]["barrier"]])
    base_w = [_mean([s[2] for s in r["barrier"]]) for r in per_rank]
    result = {"n_ranks": n_ranks, "numel": numel, "dtype": dtype, "algorithm": algorithm, "rounds": rounds,
              "barrier_bytes_on_lo": str(base_lo), "workloads": {}}
    for name in names[1:]:
        modelled = per_rank[0][name][0][3]  # every round makes the same calls
        lo = _mean([s[0] for s in per_rank[0][name]]) - base_lo
        packets = _mean([s[1] for s in per_rank[0][name]]) - base_pk
        sock = [_mean([s[2] for s in r[name]]) - base_w[k] for k, r in enumerate(per_rank)]
        result["workloads"][name] = {
            "modelled_bytes_total": modelled,
            "modelled_bytes_per_rank": str(Fraction(modelled, n_ranks)),
            "socket_bytes_per_rank": [str(b) for b in sock],
            "socket_bytes_total": str(sum(sock, Fraction(0))),
            "lo_bytes_total": str(lo),
            "lo_packets_total": str(packets),
            "socket_over_modelled": str(sum(sock, Fraction(0)) / modelled) if modelled else None,
            "lo_over_modelled": str(lo / modelled) if modelled else None,
        }
    w = result["workloads"]
    for dp, z3 in (("dp", "zero3"), (STAGE_PREFIX + "dp", STAGE_PREFIX + "zero3")):
        if dp in w and z3 in w:
            key = "stage_modules" if z3.startswith(STAGE_PREFIX) else "collectives"
            result.setdefault("zero3_over_dp", {})[key] = {
                k: str(Fraction(w[z3][k]) / Fraction(w[dp][k]))
                for k in ("modelled_bytes_total", "socket_bytes_total", "lo_bytes_total")}
    return result


def _mean(values) -> Fraction:
    return Fraction(sum(values), len(values))


def measure_wire(n_ranks: int, numel: int, dtype: str = "bf16", workloads=("dp", "zero3"), rounds: int = 3,
                 algorithm: str = NATIVE, timeout: float = 300.0, seed: int = 0) -> dict:
    """:func:`measure_here` inside a fresh private network namespace (``unshare -n``, loopback brought up).

    Raises ValueError, with the system's reason, if the namespace cannot be created (no root, no user
    namespaces) or the run fails.
    """
    from ringemu.checks import check_timeout

    timeout = check_timeout(timeout)
    command = [sys.executable, "-m", "zero_stages.torch.wire_bytes", "--here", "--json", "--ranks", str(n_ranks),
               "--numel", str(numel), "--dtype", str(dtype), "--rounds", str(rounds), "--algorithm", str(algorithm),
               "--timeout", repr(timeout), "--seed", str(seed), "--workloads", *map(str, workloads)]
    # The arguments reach the shell as its positional parameters ("$@"), never as text it parses.
    argv = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    try:
        done = subprocess.run(argv, capture_output=True, text=True,
                              timeout=timeout + 60, env=os.environ)
    except FileNotFoundError as exc:
        raise ValueError(f"cannot measure wire bytes: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise ValueError(f"wire measurement did not finish within {timeout + 60:g} s") from exc
    if done.returncode != 0:
        raise ValueError(f"wire measurement failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def render(result: dict) -> str:
    """The measurement as a short table: per workload, modelled vs observed bytes (exact fractions, 2 decimals)."""
    lines = [f"{result['n_ranks']} ranks, {result['numel']:,} {result['dtype']} elements, {result['algorithm']} "
             f"collectives, mean of {result['rounds']} rounds (the barrier bracket subtracted)",
             f"{'workload':<18} {'ledger B/rank':>16} {'socket writes B/rank (max)':>28} {'lo B total':>16} "
             f"{'sockets / ledger':>17}"]
    for name, w in result["workloads"].items():
        sock = max(Fraction(b) for b in w["socket_bytes_per_rank"])
        ratio = w["socket_over_modelled"]
        lines.append(f"{name:<18} {float(Fraction(w['modelled_bytes_per_rank'])):>16,.2f} {float(sock):>28,.2f} "
                     f"{float(Fraction(w['lo_bytes_total'])):>16,.2f} "
                     f"{'-' if ratio is None else f'{float(Fraction(ratio)):.6f}':>17}")
    for key, ratios in result.get("zero3_over_dp", {}).items():
        lines.append(f"ZeRO-3 / DP ({key}): ledger {ratios['modelled_bytes_total']}, sockets "
                     f"{float(Fraction(ratios['socket_bytes_total'])):.6f}, lo "
                     f"{float(Fraction(ratios['lo_bytes_total'])):.6f}")
    return "\n".join(lines)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m zero_stages.torch.wire_bytes",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=4, help="number of rank processes N (default 4)")
    parser.add_argument("--numel", type=int, default=1 << 20,
                        help="elements of the flat buffer the collectives move (default 1048576)")
    parser.add_argument("--dtype", default="bf16", help="element type: int32 int64 fp16 bf16 fp32 fp64 (default bf16)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="repetitions of each workload, averaged exactly (default 3)")
    parser.add_argument("--algorithm", choices=(NATIVE, *communicator_algorithms()), default=NATIVE,
                        help=f"the engine's own collectives ({NATIVE}, default) or a schedule of ringemu's registry "
                             f"over send/recv")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds before the run is declared hung and its processes killed (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the buffers and of stage workloads (default 0)")
    parser.add_argument("--workloads", nargs="+", default=["dp", "zero3"], metavar="NAME",
                        help=f"what to measure: {', '.join(n for n in WORKLOADS if n != 'barrier')}, or "
                             f"{STAGE_PREFIX}STAGE for one training step of a stage module (default dp zero3)")
    parser.add_argument("--here", action="store_true",
                        help="measure in the current network namespace (no unshare; other traffic on lo counts)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on one line")
    return parser


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    from . import wire_bytes as module  # not __main__: the ranks unpickle functions by module name
    fn = module.measure_here if args.here else module.measure_wire
    try:
        result = fn(args.ranks, args.numel, args.dtype, tuple(args.workloads), args.rounds, args.algorithm,
                    args.timeout, args.seed)
    except (ValueError, TypeError) as exc:
        print(f"wire_bytes: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
