"""Wall time of one emulated training step per ZeRO stage, against the memory-bandwidth floor of what it must touch.

Setup: N ranks (default 8), Ψ = 2^24 parameters in four units of 2^22 (zero_stages.model's tied MLP, width
2048, micro-batch 4), bf16, real numbers, all ranks as threads of this process. Measured in one run, per stage:

* step: the run's workload is wrapped so that rank 0 notes the clock when each step begins; a step is the
  interval from its beginning to the next one's. The stage code is unchanged. ``--steps K`` runs K + 1 steps and
  reports the fastest and the median of the K intervals (the first one includes page faults and compiling);
  the last step, which also ends the run and copies the final states, is not timed;
* collectives alone: one step's collectives replayed from that run's CommLedger (same operations, labels,
  sizes and dtype, on zero-filled buffers) through the same EmulatedWorld, without model or optimizer work, and
  the same collectives called directly on (N, S) worlds (``collectives_x_direct``: the world's cost over that);
* model alone: every rank's forward and backward of one step (the job's own workload on N threads: the
  matmuls, the fp32 expansion of the 16-bit weights, the gradient fold and its rounding to 16 bits);
* optimizer alone: every rank's OptimizerShard update of its parts (average, Adam, 16-bit rounding) on N
  threads, as the stage runs it;
  (each of the three: the fastest of three runs).

Bandwidth floor (bytes the step must touch, at this machine's STREAM rates measured in the same run with
``ringemu.cli.bench.stream_rates`` on every core: copy counts 2 bytes moved per byte copied, in-place add
a += b counts 3):

* each collective of the step: ``ringemu.cli.bench.floor_bytes``, the least traffic that produces the ring's
  end state (reduce-scatter (2N−1)·S·e and all-reduce 2N·S·e at the add rate, all-gather N·S·e at the copy
  rate; S the padded elements per rank, e the element size);
  the step's collectives alone are compared with their part of the floor too (``collectives_x_floor``, in the
  world, and ``collectives_direct_x_floor``, called directly);
* the optimizer: 28 B per updated parameter at the add rate: read the reduced 16-bit gradient (2 B), read and
  write the fp32 master, m and v (24 B), write the new 16-bit weight (2 B). DP updates Ψ parameters on every
  rank (N·Ψ in all), each ZeRO stage Ψ/N per rank (Ψ in all).

The model's forward and backward are compute (BLAS matmuls; the same on every stage but ZeRO-3's gathers), not
in the floor: they are reported beside it, with the ratio of the step without them, (step − model) / floor.

Usage: ``python benchmarks/zero_step.py [--ranks 8] [--log2-params 24] [--units 4] [--steps 3] [--json]``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import threading
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the N rank threads already share the cores; before numpy

import numpy as np  # noqa: E402

from ringemu.worlds.emulator import EmulatedWorld  # noqa: E402
from ringemu.cli.bench import floor_bytes, stream_rates  # noqa: E402
from ringemu.dtypes import resolve_dtype  # noqa: E402
from ringemu.memory import MemoryLedger  # noqa: E402
from zero_stages import STAGES, run_job, training_job  # noqa: E402
from zero_stages.buffers import Arena  # noqa: E402
from zero_stages.optimizer import OptimizerShard  # noqa: E402

_OPS = {"ring_reduce_scatter": "reduce_scatter", "ring_all_gather": "all_gather", "ring_all_reduce": "all_reduce"}
_FLOOR_OPS = {"ring_reduce_scatter": "reduce-scatter", "ring_all_gather": "all-gather",
              "ring_all_reduce": "all-reduce"}
OPTIMIZER_BYTES = 2 + 6 * 4 + 2  # per updated parameter: gradient16 in; master, m, v in and out; weight16 out


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


def on_threads(fn, n: int) -> float:
    """Seconds to run fn(rank) for every rank at once, one thread per rank."""
    workers = [threading.Thread(target=fn, args=(r,)) for r in range(n)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


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


def replay_direct(records, n_ranks: int) -> float:
    """Seconds to run the same collectives on (N, S) zero-filled worlds through ``ringemu.collectives`` directly
    (no ranks, no rendezvous): what :func:`replay_collectives` costs without the emulated world."""
    import ringemu
    calls = [(_OPS[r.schedule.name], r.layout, resolve_dtype(r.dtype), r.label) for r in records]
    worlds = [(op, np.zeros((n_ranks, layout.numel), dtype), layout) for op, layout, dtype, _ in calls]
    start = time.perf_counter()
    for op, world, layout in worlds:
        if op == "all_gather":
            ringemu.all_gather([world[r, layout.payload_slice(r)] for r in range(n_ranks)])
        else:
            getattr(ringemu, op)(world)
    return time.perf_counter() - start


def model_alone(job) -> float:
    """Seconds for every rank's forward and backward of one step (the job's workload), ranks on threads."""
    units, wire, n = job.flat.units(), job.wire, job.flat.n_ranks
    weights16 = [job.init_unit(u).astype(wire) for u in units]
    out16 = [[np.ones(s, wire) for s in job.flat.unit_sizes] for _ in range(n)]  # mapped before the clock

    def rank_fn(rank):
        arena = Arena(MemoryLedger(n), rank)
        ctx = job.workload.begin_step(arena, 0, rank)
        for u in units:
            ctx.forward(u, weights16[u])
        for u in reversed(units):
            ctx.backward(u, weights16[u], out16[rank][u], 1.0)
        ctx.end()

    return on_threads(rank_fn, n)


def optimizer_alone(job, stage: str) -> float:
    """Seconds for every rank's update of its parts (the whole units for DP, its shards for ZeRO) and their
    rounding to 16 bits, ranks on threads: the second of two updates (the first maps the states' memory)."""
    flat, units, n = job.flat, job.flat.units(), job.flat.n_ranks
    shards = []
    for rank in range(n):
        if stage == "dp":
            parts, numel = [slice(0, s) for s in flat.unit_sizes], list(flat.unit_sizes)
        else:
            parts, numel = [flat.shard_slice(u, rank) for u in units], [flat.shard_numel(u) for u in units]
        opt = OptimizerShard(Arena(MemoryLedger(n), rank), parts, numel, job.init_unit, job.adam)
        grads = [np.full(p.stop - p.start, 0.25, job.wire) for p in parts]
        shards.append((opt, grads))

    def rank_fn(rank):
        opt, grads = shards[rank]
        opt.next_step()
        for u in units:
            opt.update(u, grads[u], n, 1.0)
            opt.weights16(u, job.wire)

    on_threads(rank_fn, n)
    return on_threads(rank_fn, n)


def collectives_floor(records, n: int, stream: dict) -> tuple[int, float]:
    """(bytes, seconds) of the step's collectives alone at their floor (module doc)."""
    total_bytes, seconds = 0, 0.0
    for r in records:
        nbytes, rate = floor_bytes(_FLOOR_OPS[r.schedule.name], n, r.layout.padded_numel, r.itemsize)
        total_bytes += nbytes
        seconds += nbytes / stream[f"{rate}_Bps"]
    return total_bytes, seconds


def floor_of(stage: str, records, n: int, psi: int, stream: dict) -> tuple[int, float]:
    """(bytes, seconds) of the step's bandwidth floor (module doc)."""
    total_bytes, seconds = collectives_floor(records, n, stream)
    updated = psi * n if stage == "dp" else psi
    total_bytes += OPTIMIZER_BYTES * updated
    seconds += OPTIMIZER_BYTES * updated / stream["add_Bps"]
    return total_bytes, seconds


def time_stage(stage: str, n: int, steps: int, units, width: int, stream: dict) -> dict:
    job = training_job(n, steps + 1, "bf16", 0, "model", units, width=width, record_history=False)
    stamps: list[float] = []
    report = run_job(stage, dataclasses.replace(job, workload=StampedWorkload(job.workload, stamps)))
    step_times = np.diff(stamps)  # steps intervals: the last step (which ends the run) is not timed
    one_step = report.comm.records[:len(report.comm.records) // (steps + 1)]
    comm = min(replay_collectives(one_step, n) for _ in range(3))
    direct = min(replay_direct(one_step, n) for _ in range(3))
    model = min(model_alone(job) for _ in range(3))
    optimizer = min(optimizer_alone(job, stage) for _ in range(3))
    psi = sum(units)
    fbytes, floor_s = floor_of(stage, one_step, n, psi, stream)
    _, comm_floor_s = collectives_floor(one_step, n, stream)
    step = float(step_times.min())
    return {"stage": stage, "step_s_min": step, "step_s_median": float(np.median(step_times)),
            "step_s_mean": float(step_times.mean()), "collectives_s": comm, "collectives": len(one_step),
            "collectives_direct_s": direct, "collectives_x_direct": comm / direct,
            "collectives_floor_s": comm_floor_s, "collectives_x_floor": comm / comm_floor_s,
            "collectives_direct_x_floor": direct / comm_floor_s,
            "model_s": model, "optimizer_s": optimizer, "floor_bytes": fbytes, "floor_s": floor_s,
            "x_floor": step / floor_s, "x_floor_without_model": (step - model) / floor_s,
            "traffic_sent_bytes_per_rank_per_step": report.traffic_sent_bytes_per_rank[0] // (steps + 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--log2-params", type=int, default=24)
    p.add_argument("--units", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.steps < 1 or args.ranks < 1 or args.units < 1:
        p.error("--steps, --ranks and --units must be >= 1")
    psi = 2 ** args.log2_params
    units = (psi // args.units,) * args.units
    width = int(np.ceil(np.sqrt(units[0])))
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    stream = stream_rates(256 << 20, 5, threads)
    rates = {"copy_Bps": stream["copy_Bps"], "add_Bps": stream["add_Bps"], "threads": threads}
    rows = [time_stage(s, args.ranks, args.steps, units, width, rates) for s in STAGES]
    if args.json:
        print(json.dumps({"ranks": args.ranks, "psi": psi, "unit_sizes": list(units), "width": width,
                          "stream": rates, "rows": rows}))
        return
    print(f"N = {args.ranks}, Ψ = {psi:,} in {args.units} units, width {width}, bf16; STREAM ({threads} threads): "
          f"copy {rates['copy_Bps'] / 1e9:.1f} GB/s, in-place add {rates['add_Bps'] / 1e9:.1f} GB/s")
    print(f"seconds per training step (fastest and median of {args.steps}); collectives, model (forward+backward) "
          f"and optimizer alone (fastest of 3)")
    print(f"{'stage':<6} {'step':>7} {'median':>7} {'collect.':>9} {'model':>7} {'optim.':>7} {'floor':>7} "
          f"{'floor MB':>9} {'×floor':>7} {'×floor w/o model':>17}")
    for r in rows:
        print(f"{r['stage']:<6} {r['step_s_min']:>7.3f} {r['step_s_median']:>7.3f} {r['collectives_s']:>9.3f} "
              f"{r['model_s']:>7.3f} {r['optimizer_s']:>7.3f} {r['floor_s']:>7.3f} {r['floor_bytes'] / 1e6:>9.0f} "
              f"{r['x_floor']:>7.1f} {r['x_floor_without_model']:>17.1f}")
    print("collectives inside the emulated world / the same collectives called directly: " + ", ".join(
        f"{r['stage']} {r['collectives_x_direct']:.2f}× ({r['collectives_s'] * 1e3:.1f} / "
        f"{r['collectives_direct_s'] * 1e3:.1f} ms)" for r in rows))
    print("collectives (in the world / direct) against their floor: " + ", ".join(
        f"{r['stage']} {r['collectives_x_floor']:.2f}× / {r['collectives_direct_x_floor']:.2f}× "
        f"(floor {r['collectives_floor_s'] * 1e3:.1f} ms)" for r in rows))


if __name__ == "__main__":
    main()
