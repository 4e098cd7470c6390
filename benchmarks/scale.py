"""The scale section of the performance suite: size-only runs as N and the unit count grow, the emulated world's
per-collective cost beside a direct call and torch's threaded process group, a hypothesis parity run's rate, the
public collectives beside the kernel, and the tuned kernel constants re-checked on this machine.

Usage::

    python benchmarks/scale.py [--json FILE] [--quick]

or as the ``scale`` section of ``python benchmarks/run.py``. All ratios are measured side by side in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

from ringemu import algorithms  # noqa: E402
from ringemu.execute import default_tile, run_schedule  # noqa: E402
from ringemu.cli.scale_bench import LESSON_UNIT_PARAMS, api_vs_kernel, size_only_point, world_latency  # noqa: E402

__all__ = ["scale_section", "render_scale"]


def torch_threaded(n: int, numel: int = 64, repeats: int = 15) -> float | None:
    """Seconds per all-reduce in torch's threaded process group, or None (reason printed) if it cannot run."""
    cmd = [sys.executable, str(HERE / "peers" / "torch_threaded.py"), "--ranks", str(n), "--numel", str(numel),
           "--repeats", str(repeats)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print("  torch threaded process group: timed out", file=sys.stderr)
        return None
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode or not lines:
        print(f"  torch threaded process group: skipped ({done.stderr.strip()[-200:]})", file=sys.stderr)
        return None
    return json.loads(lines[-1])["seconds"]


def parity_rate(examples: int = 150, max_ranks: int = 8) -> dict:
    """A hypothesis run of ZeRO-3 against DP (default model, 2 steps, N drawn from 1..max_ranks, random seeds):
    examples per second of wall and of CPU time."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from zero_stages.api import train
    from zero_stages.report import parity_with_dp

    train("zero3", max_ranks, 2)  # warm-up: kernels loaded
    ran = [0]

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(n=st.integers(1, max_ranks), seed=st.integers(0, 2 ** 32 - 1))
    def parity(n, seed):
        ran[0] += 1
        assert parity_with_dp(train("zero3", n, 2, seed=seed), train("dp", n, 2, seed=seed))

    wall, cpu = time.perf_counter(), time.process_time()
    parity()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"examples": ran[0], "examples_per_s_wall": ran[0] / wall, "examples_per_s_cpu": ran[0] / cpu}


def lesson_grid(unit_count: int = 64) -> dict:
    """Every stage's size-only run for N = 1, 2, 4, ..., 1024 with the lesson's model in ``unit_count`` units."""
    from zero_stages.api import run_size_only
    from zero_stages.memory.closed_forms import STAGES

    units = [LESSON_UNIT_PARAMS] * unit_count
    t = time.perf_counter()
    for k in range(11):
        for stage in STAGES:
            run_size_only(stage, 2 ** k, unit_sizes=units)
    return {"units": unit_count, "ranks": [2 ** k for k in range(11)], "stages": list(STAGES),
            "wall_s": time.perf_counter() - t}


def tuned_constants(n: int = 8, numel: int = 1 << 22, rounds: int = 5) -> dict:
    """In-place fused all-reduce at N = n, S = numel fp32 under tiles around the default, streaming stores on
    and off, and 1 or 2 threads: seconds each (min over interleaved rounds) and the ratio to the defaults."""
    schedule = algorithms.build("all-reduce", n)
    world = np.ones((n, numel), np.float32)
    base_tile = default_tile(4)
    variants = {"defaults": {}}
    for tile in (base_tile // 2, base_tile * 2, base_tile * 4):
        variants[f"tile {tile}"] = {"tile": tile}
    variants["streaming off"] = {"streaming": False}
    variants["streaming on"] = {"streaming": True}
    variants["threads 1"] = {"threads": 1}
    variants["threads 2"] = {"threads": 2}
    best = {k: float("inf") for k in variants}
    for _ in range(rounds):
        for k, kw in variants.items():
            t = time.perf_counter()
            run_schedule(schedule, world, **kw)
            best[k] = min(best[k], time.perf_counter() - t)
    return {"ranks": n, "numel": numel, "default_tile": base_tile, "seconds": best,
            "x_defaults": {k: v / best["defaults"] for k, v in best.items()}}


def scale_section(quick: bool = False) -> dict:
    """Everything above; ``quick`` shrinks every size to a smoke run."""
    out = {"load_average_start": os.getloadavg()}
    ranks = (8, 64) if quick else (8, 16, 32, 64, 128, 256, 512, 1024)
    unit_counts = (1, 4) if quick else (1, 4, 16, 64, 256, 1024)
    print("== scale: size-only `ringemu memory` (child processes; 434,000,000-parameter units) ==", flush=True)
    grid = []
    for n in ranks:
        for u in unit_counts:
            grid.append(size_only_point(n, u))
            print(f"  N = {n:>4}, {u:>4} units: {grid[-1]['wall_s']:6.2f} s wall, {grid[-1]['cpu_s']:6.2f} s CPU, "
                  f"{(grid[-1]['peak_rss_bytes'] or 0) / 1e6:6.0f} MB peak RSS", flush=True)
    out["size_only_grid"] = grid
    out["lesson_grid"] = lesson_grid(4 if quick else 64)
    print(f"  whole lesson grid (N = 1..1024, 4 stages, {out['lesson_grid']['units']} units): "
          f"{out['lesson_grid']['wall_s']:.2f} s", flush=True)

    print("== scale: one all-reduce of 64 fp32 per rank, per call ==", flush=True)
    out["latency"] = []
    for n in (8, 32):
        row = world_latency(n, rounds=5 if quick else 15)
        row["torch_threaded_s"] = None if quick else torch_threaded(n)
        out["latency"].append(row)
        s = row["seconds"]
        torch_text = f", torch threaded PG {row['torch_threaded_s'] * 1e6:.0f} µs" if row["torch_threaded_s"] else ""
        print(f"  N = {n}: direct {s['direct'] * 1e6:.0f} µs, EmulatedWorld greenlet {s['greenlet'] * 1e6:.0f} µs "
              f"({row['x_direct']['greenlet']:.2f}×), threads {s['threads'] * 1e6:.0f} µs "
              f"({row['x_direct']['threads']:.2f}×){torch_text}", flush=True)

    print("== scale: hypothesis parity run, ZeRO-3 vs DP, N <= 8, default model, 2 steps ==", flush=True)
    out["parity"] = parity_rate(20 if quick else 150)
    print(f"  {out['parity']['examples']} examples: {out['parity']['examples_per_s_wall']:.0f}/s wall, "
          f"{out['parity']['examples_per_s_cpu']:.0f}/s of CPU time", flush=True)

    print("== scale: public all_reduce beside the in-place kernel ==", flush=True)
    out["api"] = api_vs_kernel(8, 1 << (14 if quick else 22), 3 if quick else 7)
    for k, v in out["api"]["seconds"].items():
        print(f"  {k:<18} {v * 1e3:8.1f} ms  {out['api']['x_kernel'][k]:.2f}× kernel", flush=True)

    print("== scale: tuned constants, in-place fused all-reduce ==", flush=True)
    out["constants"] = tuned_constants(8, 1 << (14 if quick else 22), 2 if quick else 5)
    print("  " + ", ".join(f"{k} {v:.2f}×" for k, v in out["constants"]["x_defaults"].items()), flush=True)
    out["load_average_end"] = os.getloadavg()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    out = scale_section(args.quick)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
