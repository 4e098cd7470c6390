"""Wall time of one emulated training step per ZeRO stage, next to the time of its collectives alone.

Setup: N ranks (default 8), Ψ = 2^24 parameters in four units of 2^22 (zero_stages.model's tied MLP, width
2048, micro-batch 4), bf16, real numbers. For each stage:

* step time = (time of a run of K + 1 steps − time of a run of 1 step) / K, so that allocation and
  initialization are left out;
* collectives alone = one step's collectives replayed from that run's CommLedger (same operations, labels,
  sizes and dtype, on zero-filled buffers) through the same EmulatedWorld, without model or optimizer work.

Usage: ``python benchmarks/zero_step.py [--ranks 8] [--log2-params 24] [--units 4] [--steps 2] [--json]``.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # N rank threads already share the cores; before numpy loads

import numpy as np  # noqa: E402

from ringemu.backends.emulator import EmulatedWorld  # noqa: E402
from ringemu.dtypes import resolve_dtype  # noqa: E402
from zero_stages import STAGES, train  # noqa: E402

_OPS = {"ring_reduce_scatter": "reduce_scatter", "ring_all_gather": "all_gather", "ring_all_reduce": "all_reduce"}


def replay_collectives(records, n_ranks: int, mode: str = "fused") -> float:
    """Seconds to run ``records``' collectives again on zero-filled buffers, every rank at once."""
    calls = [(_OPS[r.schedule.name], r.layout, resolve_dtype(r.dtype), r.label) for r in records]

    def rank_fn(comm):
        for op, layout, dtype, label in calls:
            if op == "all_gather":
                comm.all_gather(np.zeros(layout.payload(comm.rank), dtype), layout.numel, label=label)
            else:
                getattr(comm, op)(np.zeros(layout.numel, dtype), label=label)

    start = time.perf_counter()
    EmulatedWorld(n_ranks, None, mode=mode).run(rank_fn)
    return time.perf_counter() - start


def timed_train(stage, n, steps, units, width):
    start = time.perf_counter()
    report = train(stage, n, steps, "bf16", 0, "model", units, width=width, record_history=False)
    return time.perf_counter() - start, report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--log2-params", type=int, default=24)
    p.add_argument("--units", type=int, default=4)
    p.add_argument("--steps", type=int, default=1, help="K: extra steps timed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    psi = 2 ** args.log2_params
    units = (psi // args.units,) * args.units
    width = int(np.ceil(np.sqrt(units[0])))
    rows = []
    for stage in STAGES:
        t1, one = timed_train(stage, args.ranks, 1, units, width)
        tk, _ = timed_train(stage, args.ranks, 1 + args.steps, units, width)
        step = (tk - t1) / args.steps
        comm = replay_collectives(one.comm.records, args.ranks)
        rows.append({"stage": stage, "step_s": step, "collectives_s": comm,
                     "traffic_sent_bytes_per_rank": one.traffic_sent_bytes_per_rank[0],
                     "collectives": len(one.comm.records)})
    if args.json:
        print(json.dumps({"ranks": args.ranks, "psi": psi, "unit_sizes": list(units), "width": width, "rows": rows}))
        return
    print(f"N = {args.ranks}, Ψ = {psi:,} in {args.units} units, width {width}, bf16, one training step")
    print(f"{'stage':<6} {'step s':>8} {'collectives s':>14} {'share':>6} {'calls':>6} {'sent B/rank':>14}")
    for r in rows:
        print(f"{r['stage']:<6} {r['step_s']:>8.3f} {r['collectives_s']:>14.3f} {r['collectives_s'] / r['step_s']:>6.0%} "
              f"{r['collectives']:>6} {r['traffic_sent_bytes_per_rank']:>14,}")


if __name__ == "__main__":
    main()
