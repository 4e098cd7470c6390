"""Wall time of one emulated training step per ZeRO stage, next to the time of its collectives alone.

Setup: N ranks (default 8), Ψ = 2^24 parameters in four units of 2^22 (zero_stages.model's tied MLP, width
2048, micro-batch 4), bf16, real numbers, all ranks as threads of this process. For each stage:

* step time: the run's workload is wrapped so that rank 0 notes the clock when each step begins; a step is the
  interval from its beginning to the next one's (the last one ends when the run returns). The stage code is
  unchanged; the fastest of K steps (default 3) is reported, with their mean;
* collectives alone: one step's collectives replayed from that run's CommLedger (same operations, labels,
  sizes and dtype, on zero-filled buffers) through the same EmulatedWorld, without model or optimizer work;
  the fastest of three replays.

Usage: ``python benchmarks/zero_step.py [--ranks 8] [--log2-params 24] [--units 4] [--steps 3] [--json]``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the N rank threads already share the cores; before numpy

import numpy as np  # noqa: E402

from ringemu.backends.emulator import EmulatedWorld  # noqa: E402
from ringemu.dtypes import resolve_dtype  # noqa: E402
from zero_stages import STAGES, run_job, training_job  # noqa: E402

_OPS = {"ring_reduce_scatter": "reduce_scatter", "ring_all_gather": "all_gather", "ring_all_reduce": "all_reduce"}


@dataclasses.dataclass(frozen=True)
class StampedWorkload:
    """The job's workload, plus rank 0's clock at the start of every step (appended to ``stamps``)."""

    inner: object
    stamps: list

    def init_unit(self, unit):
        return self.inner.init_unit(unit)

    def begin_step(self, arena, step, rank):
        if rank == 0:
            self.stamps.append(time.perf_counter())
        return self.inner.begin_step(arena, step, rank)


def replay_collectives(records, n_ranks: int) -> float:
    """Seconds to run ``records``' collectives again on zero-filled buffers, every rank at once."""
    calls = [(_OPS[r.schedule.name], r.layout, resolve_dtype(r.dtype), r.label) for r in records]

    def rank_fn(comm):
        for op, layout, dtype, label in calls:
            if op == "all_gather":
                comm.all_gather(np.zeros(layout.payload(comm.rank), dtype), layout.numel, label=label)
            else:
                getattr(comm, op)(np.zeros(layout.numel, dtype), label=label)

    start = time.perf_counter()
    EmulatedWorld(n_ranks).run(rank_fn)
    return time.perf_counter() - start


def time_stage(stage: str, n: int, steps: int, units, width: int) -> dict:
    job = training_job(n, steps, "bf16", 0, "model", units, width=width, record_history=False)
    stamps: list[float] = []
    report = run_job(stage, dataclasses.replace(job, workload=StampedWorkload(job.workload, stamps)))
    stamps.append(time.perf_counter())
    step_times = np.diff(stamps)
    one_step = report.comm.records[:len(report.comm.records) // steps]
    comm = min(replay_collectives(one_step, n) for _ in range(3))
    return {"stage": stage, "step_s_min": float(step_times.min()), "step_s_mean": float(step_times.mean()),
            "collectives_s": comm, "collectives": len(one_step),
            "traffic_sent_bytes_per_rank_per_step": report.traffic_sent_bytes_per_rank[0] // steps}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--log2-params", type=int, default=24)
    p.add_argument("--units", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    psi = 2 ** args.log2_params
    units = (psi // args.units,) * args.units
    width = int(np.ceil(np.sqrt(units[0])))
    rows = [time_stage(s, args.ranks, args.steps, units, width) for s in STAGES]
    if args.json:
        print(json.dumps({"ranks": args.ranks, "psi": psi, "unit_sizes": list(units), "width": width, "rows": rows}))
        return
    print(f"N = {args.ranks}, Ψ = {psi:,} in {args.units} units, width {width}, bf16; seconds per training step "
          f"(fastest of {args.steps}, mean) and its collectives alone (fastest of 3)")
    print(f"{'stage':<6} {'step s':>8} {'mean s':>8} {'collectives s':>14} {'share':>6} {'calls':>6} "
          f"{'sent B/rank':>14}")
    for r in rows:
        print(f"{r['stage']:<6} {r['step_s_min']:>8.3f} {r['step_s_mean']:>8.3f} {r['collectives_s']:>14.3f} "
              f"{r['collectives_s'] / r['step_s_min']:>6.0%} {r['collectives']:>6} "
              f"{r['traffic_sent_bytes_per_rank_per_step']:>14,}")


if __name__ == "__main__":
    main()
