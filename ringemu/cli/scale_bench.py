"""Scale measurements: what a collective costs inside the emulated world, size-only runs as N and units grow, and
the public collectives beside the kernel they call. Used by ``ringemu bench --scale`` and ``benchmarks/run.py``.

Every figure is the minimum over interleaved rounds (the variants take turns, so a machine shared with other
work slows them alike), and only ratios measured in one run are compared. Size-only points run
``ringemu memory`` in a child process each, whose wall time and peak resident memory are read from the kernel's
accounting of that child (``os.wait4``), start-up included.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from .. import algorithms, collectives
from ..worlds.emulator import EmulatedWorld
from ..direct import run_direct
from ..execute import run_schedule
from ..partition import layout_for

__all__ = ["world_latency", "size_only_point", "size_only_grid", "api_vs_kernel", "LESSON_UNIT_PARAMS"]

LESSON_UNIT_PARAMS = 434_000_000  # parameters per unit: the lesson's 27.8e9-parameter model as 64 layers


def _best(calls: dict, rounds: int) -> dict:
    """{name: min seconds over ``rounds`` interleaved rounds} of zero-argument callables returning seconds."""
    best = {k: float("inf") for k in calls}
    for _ in range(rounds):
        for k, f in calls.items():
            best[k] = min(best[k], f())
    return best


def world_latency(n_ranks: int, numel: int = 64, calls: int = 50, rounds: int = 15,
                  schedulers=("greenlet", "threads")) -> dict:
    """Seconds per fp32 all-reduce of ``numel`` elements on ``n_ranks`` ranks: called directly on an (N, S) world,
    and from per-rank code in an EmulatedWorld under each scheduler (``calls`` collectives per world run)."""
    world = np.ones((n_ranks, numel), np.float32)
    rows = [world[r].copy() for r in range(n_ranks)]

    def direct() -> float:
        t = time.perf_counter()
        for _ in range(calls):
            collectives.all_reduce(world)
        return (time.perf_counter() - t) / calls

    def emulated(scheduler: str):
        em = EmulatedWorld(n_ranks, scheduler=scheduler)

        def body(comm):
            for _ in range(calls):
                comm.all_reduce(rows[comm.rank])

        def once() -> float:
            t = time.perf_counter()
            em.run(body)
            return (time.perf_counter() - t) / calls
        return once

    variants = {"direct": direct, **{s: emulated(s) for s in schedulers}}
    for f in variants.values():
        f()  # warm-up: kernels loaded, caches filled
    best = _best(variants, rounds)
    return {"ranks": n_ranks, "numel": numel, "calls": calls, "rounds": rounds, "seconds": best,
            "x_direct": {k: v / best["direct"] for k, v in best.items()}}


# Runs the command line in the child, then reports the child's own peak resident memory: VmHWM of
# /proc/self/status, the high-water mark of this process image (rusage's maxrss would include the parent's pages
# the child held between fork and exec).
_CHILD = """import sys
from ringemu.cli import main
status = main(sys.argv[1:])
try:
    hwm = [line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')][0]
except (OSError, IndexError):
    hwm = '-1'
sys.stderr.write('VmHWM_kB ' + hwm + chr(10))
sys.exit(status)
"""


def size_only_point(n_ranks: int, n_units: int, unit_params: int = LESSON_UNIT_PARAMS, timeout: float = 600) -> dict:
    """``ringemu memory --units <n_units × unit_params> --ranks N --json`` in a child process: wall seconds, CPU
    seconds and peak resident bytes of that process (``None`` where /proc is missing), start-up included."""
    units = ",".join([str(unit_params)] * n_units)
    cmd = [sys.executable, "-c", _CHILD, "memory", "--units", units, "--ranks", str(n_ranks), "--json"]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        proc.returncode = 0  # reaped above; keep Popen from waiting again
    wall = time.perf_counter() - t
    err = proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"ringemu memory failed for N = {n_ranks}, {n_units} units: {err[-300:]}")
    hwm = [int(line.split()[1]) for line in err.splitlines() if line.startswith("VmHWM_kB ")]
    return {"ranks": n_ranks, "units": n_units, "unit_params": unit_params, "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": hwm[0] * 1024 if hwm and hwm[0] >= 0 else None}


def size_only_grid(ranks=(8, 64, 1024), unit_counts=(1, 64, 1024)) -> list[dict]:
    """:func:`size_only_point` for every (N, units) pair."""
    return [size_only_point(n, u) for n in ranks for u in unit_counts]


def api_vs_kernel(n_ranks: int = 8, numel: int = 1 << 22, rounds: int = 7) -> dict:
    """Seconds of ring all-reduce on an (N, S) fp32 world: the direct kernel in place on the world's rows (what
    ``all_reduce(world, out=world)`` runs), the world kernel in place, the public call into a reused ``out``
    buffer, a fresh public call, and ``np.copyto`` of the world (a floor of any call that must leave the input
    intact). Ratios are to the direct kernel in place."""
    world = np.ones((n_ranks, numel), np.float32)
    out, kernel_world, copy_target = np.empty_like(world), world.copy(), np.empty_like(world)
    schedule = algorithms.build("all-reduce", n_ranks)
    rows, layout = list(kernel_world), layout_for(schedule, numel)

    def timed(f):
        def once() -> float:
            t = time.perf_counter()
            f()
            return time.perf_counter() - t
        return once

    calls = {"kernel in place": timed(lambda: run_direct(schedule, layout, rows, rows)),
             "world kernel in place": timed(lambda: run_schedule(schedule, kernel_world)),
             "all_reduce(out=)": timed(lambda: collectives.all_reduce(world, out=out)),
             "all_reduce fresh": timed(lambda: collectives.all_reduce(world)),
             "np.copyto": timed(lambda: np.copyto(copy_target, world))}
    for f in calls.values():
        f()
    best = _best(calls, rounds)
    return {"ranks": n_ranks, "numel": numel, "world_bytes": world.nbytes, "seconds": best,
            "x_kernel": {k: v / best["kernel in place"] for k, v in best.items()}}
