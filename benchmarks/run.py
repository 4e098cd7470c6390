"""ringemu's performance suite: every target of docs/performance.md measured in one run on this machine.

Usage::

    python benchmarks/run.py [--json results.json] [--repeats 5] [--no-peers] [--no-zero]
    python benchmarks/run.py --quick          # smoke run for CI: small sizes, no peers, a few seconds
    python benchmarks/run.py --only-scale     # the scale section (benchmarks/scale.py) and its targets

One run times, on the same data and machine: the STREAM floor, ringemu's direct path (what the public collectives
run in fused mode) and the world kernels' fused and step modes, a per-rank numpy loop
(ringemu.cli.bench), then the peers that are installed, each in its own processes (benchmarks/peers/:
torch.distributed gloo, JAX host devices, mpi4py), an N sweep of all-reduce, the 16-bit wire types, size-only
counting, start-up, the ZeRO training step (benchmarks/zero_step.py) and peak memory. It prints the tables and
the targets with their ratios, and writes everything as JSON with ``--json``. The scale section
(benchmarks/scale.py) adds size-only runs as N and units grow, the emulated world's per-collective cost, a parity
run's rate, the public collectives beside the kernel and the tuned constants.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

import ringemu
from ringemu.cli.bench import SHORT, bench_collectives, render, time_it

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engines._common import engine_python  # noqa: E402
from floor import apply_floor, measure_floor  # noqa: E402

HERE = Path(__file__).resolve().parent
PY = sys.executable
RINGEMU = [PY, "-m", "ringemu"]
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,vader"}


def have(module: str, python: str = PY) -> bool:
    """Whether ``python`` can import ``module``."""
    if python == PY:
        import importlib.util
        return importlib.util.find_spec(module) is not None
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def peer_python(module: str, venv: str) -> tuple[str, Path | None]:
    """This interpreter if it imports ``module``, else the engine's own venv (``$RINGEMU_ENGINES/VENV``, the ones
    ``.ci/run`` installs), with that venv's ``bin`` (for ``mpirun``); ("", None) if neither has it."""
    if have(module):
        return PY, None
    python = engine_python(venv)
    if python is not None and have(module, str(python)):
        return str(python), python.parent
    return "", None


def run_peer(name: str, n: int, numel: int, repeats: int, timeout: float = 900) -> dict | None:
    """One peer's JSON, or None (with the reason printed) if it is not installed or fails."""
    script = str(HERE / "peers" / {"gloo": "torch_gloo.py", "jax": "jax_host.py", "mpi": "mpi_bench.py"}[name])
    args = ["--ranks", str(n), "--numel", str(numel), "--repeats", str(repeats)]
    env = dict(os.environ)
    if name == "gloo" and not have("torch"):
        return _skip(name, "torch is not installed")
    python, bin_dir = {"gloo": (PY, None), "jax": peer_python("jax", "jax"),
                       "mpi": peer_python("mpi4py", "ompi")}[name]
    if not python:
        return _skip(name, f"{'jax' if name == 'jax' else 'mpi4py'} is not installed here nor in "
                           f"$RINGEMU_ENGINES/{'jax' if name == 'jax' else 'ompi'}")
    if name == "mpi":
        mpirun = str(bin_dir / "mpirun") if bin_dir and (bin_dir / "mpirun").exists() else shutil.which("mpirun")
        if mpirun is None:
            return _skip(name, "mpirun is not installed")
        env.update(MPI_ENV)
        cmd = [mpirun, "--oversubscribe", "--bind-to", "none", "-n", str(n), python, script] + args
    else:
        cmd = [python, script] + args + (["--port", str(29500 + n)] if name == "gloo" else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return _skip(name, f"timed out after {timeout} s")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return _skip(name, f"failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return json.loads(lines[-1])


def _skip(name: str, why: str) -> None:
    print(f"  peer {name}: skipped, {why}", file=sys.stderr)
    return None


def wall(cmd: list[str], repeats: int, env: dict | None = None) -> dict:
    """Median/min/max wall seconds of a command (its output discarded)."""
    def once():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    t = time_it(once, repeats)
    return t.as_dict()


def startup(repeats: int, cold: bool = True) -> dict:
    """`ringemu demo` with a warm cache, and a cold compile into an empty cache listing what it compiled."""
    warm = wall(RINGEMU + ["demo"], repeats)
    if not cold:
        return {"demo_warm": warm}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        start = time.perf_counter()
        subprocess.run(RINGEMU + ["demo"], check=True, stdout=subprocess.DEVNULL, env=env)
        cold = time.perf_counter() - start
        compiled = sorted(p.name.split("-")[0] for p in Path(cache).rglob("*.nbi"))
        signatures = len(list(Path(cache).rglob("*.nbc")))
    return {"demo_warm": warm, "demo_cold_s": cold, "cold_compiled_functions": compiled,
            "cold_compiled_signatures": signatures}


def memory_check(n: int, numel: int) -> dict:
    """Extra bytes ringemu.all_reduce allocates beyond its input (tracemalloc sees numpy's buffers)."""
    world = np.ones((n, numel), dtype=np.float32)
    ringemu.all_reduce(world[:, :8])  # compile outside the measurement
    tracemalloc.start()
    result = ringemu.all_reduce(world)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return {"world_bytes": world.nbytes, "all_reduce_peak_extra_bytes": peak,
            "extra_world_buffers": peak / world.nbytes}


def zero_log2_params(n: int, log2: int) -> int:
    """The largest Ψ = 2^k, k <= ``log2``, whose training run fits zero_stages' state budget (Ψ·N at most
    ``TRAINING_STATE_BUDGET``): the run is sized to the check, which stays."""
    from zero_stages.api import TRAINING_STATE_BUDGET
    return min(log2, (TRAINING_STATE_BUDGET // n).bit_length() - 1)


def zero_step(n: int, log2: int, steps: int) -> dict | None:
    """benchmarks/zero_step.py's JSON, with each stage's time next to a bandwidth floor (see docs)."""
    if not have("zero_stages"):
        return _skip("zero", "zero_stages is not installed")
    log2 = zero_log2_params(n, log2)
    cmd = [PY, str(HERE / "zero_step.py"), "--ranks", str(n), "--log2-params", str(log2), "--steps", str(steps),
           "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return _skip("zero", f"zero_step.py failed: {done.stderr.strip()[-300:]}")
    out = json.loads(done.stdout.splitlines()[-1])
    # zero_step.py measures its own floor (STREAM rates of its run; byte model in its docstring): keep it
    for row in out["rows"]:
        missing = [k for k in ("floor_s", "x_floor") if k not in row]
        if missing:
            return _skip("zero", f"zero_step.py's JSON lacks {missing}")
    return out


def target(name: str, value: float, limit: float, better: str, unit: str = "") -> dict:
    ok = value <= limit if better == "lower" else value >= limit
    return {"target": name, "value": value, "limit": limit, "better": better, "unit": unit, "met": bool(ok)}


def scale_targets(scale: dict) -> list[dict]:
    """The targets of the scale section (ratios from one run; the lesson's shapes)."""
    t = []
    points = {(r["ranks"], r["units"]): r for r in scale["size_only_grid"]}
    if (1024, 64) in points:
        t.append(target("memory, 64 units, N = 1024 (wall, with start-up)", points[(1024, 64)]["wall_s"], 1.0, "lower",
                        " s"))
        rss = points[(1024, 64)]["peak_rss_bytes"]
        if rss is not None:
            t.append(target("memory, 64 units, N = 1024 (peak RSS)", rss / 1e6, 300, "lower", " MB"))
    if (1024, 1024) in points:
        t.append(target("memory, 1024 units, N = 1024 (wall)", points[(1024, 1024)]["wall_s"], 5.0, "lower", " s"))
    t.append(target("lesson grid N = 1..1024 × 4 stages (wall)", scale["lesson_grid"]["wall_s"], 5.0, "lower", " s"))
    for row, limit in zip(scale["latency"], (2.0, 3.0)):
        t.append(target(f"EmulatedWorld all-reduce N = {row['ranks']} / direct", row["x_direct"]["greenlet"], limit,
                        "lower", "×"))
        if row.get("torch_threaded_s"):
            t.append(target(f"torch threaded PG / EmulatedWorld, N = {row['ranks']}",
                            row["torch_threaded_s"] / row["seconds"]["greenlet"], 1.0, "higher", "×"))
    t.append(target("parity run ZeRO-3 vs DP, examples/s (wall)", scale["parity"]["examples_per_s_wall"], 100,
                    "higher"))
    t.append(target("all_reduce(out=) / in-place kernel", scale["api"]["x_kernel"]["all_reduce(out=)"], 1.2, "lower",
                    "×"))
    t.append(target("all_reduce fresh / in-place kernel", scale["api"]["x_kernel"]["all_reduce fresh"], 1.6, "lower",
                    "×"))
    return t


def _print_targets(t: list[dict]) -> None:
    for x in t:
        print(f"  {'met ' if x['met'] else 'MISS'} {x['target']}: {x['value']:.3g}{x['unit']} "
              f"({'≤' if x['better'] == 'lower' else '≥'} {x['limit']}{x['unit']})")


def _scale_only(args) -> None:
    from scale import scale_section
    out = {"scale": scale_section(args.quick)}
    out["targets"] = scale_targets(out["scale"])
    print("== targets ==")
    _print_targets(out["targets"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smoke run: small sizes, no peers, no ZeRO step")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--log2-numel", type=int, default=24)
    p.add_argument("--sweep", default="2,4,8,16,32,64", help="ranks for the all-reduce sweep")
    p.add_argument("--sweep-log2-numel", type=int, default=20)
    p.add_argument("--gloo-max-ranks", type=int, default=16, help="largest N for gloo in the sweep (memory)")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--no-zero", action="store_true")
    p.add_argument("--no-scale", action="store_true", help="skip the scale section (benchmarks/scale.py)")
    p.add_argument("--only-scale", action="store_true", help="run the scale section only")
    p.add_argument("--json", metavar="FILE", help="also write all results as JSON")
    args = p.parse_args()
    if args.only_scale:
        return _scale_only(args)
    if args.quick:
        args.repeats, args.ranks, args.log2_numel, args.sweep, args.sweep_log2_numel = 3, 4, 16, "2,4", 12
        args.no_peers = args.no_zero = True
    n, numel, reps = args.ranks, 2 ** args.log2_numel, args.repeats
    out = {"machine": {"cpus": os.cpu_count(), "load_average_start": os.getloadavg(),
                       "ringemu": ringemu.__version__, "numpy": np.__version__}, "command": " ".join(sys.argv)}

    print(f"== collectives: N = {n}, S = 2^{args.log2_numel} fp32 ==", flush=True)
    main_case = bench_collectives(n, numel, "fp32", repeats=reps)
    print(render(main_case), flush=True)
    floor = measure_floor(main_case["world_bytes"], reps, main_case["threads"])
    apply_floor(main_case, floor)
    out["floor"] = floor
    g = floor["GBps"]
    print(f"floor (pre-faulted, {floor['threads']} threads): copy {g['copy']:.1f}, add {g['add']:.1f}, in-place add "
          f"{g['inplace_add']:.1f} GB/s; sanity check "
          + ("passed" if floor["passed"] else f"FAILED ({floor['why_not']}): no ratio to it is taken"), flush=True)
    for r in main_case["rows"]:
        if r["impl"] == "ringemu-direct":
            ratio = f"{r['x_floor2']:.2f}× floor" if r["x_floor2"] is not None else "no ratio (floor failed)"
            print(f"  {SHORT[r['op']]}: least traffic {r['least_B']:,} B, floor {r['floor2_s'] * 1e3:.1f} ms, direct "
                  f"{r['median_s'] * 1e3:.1f} ms = {ratio}", flush=True)
    out["main"] = main_case
    med = {(r["op"], r["impl"]): r["median_s"] for r in main_case["rows"]}
    out["machine"]["peak_rss_after_main_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    peers = {}
    if not args.no_peers:
        for name in ("gloo", "jax", "mpi"):
            res = run_peer(name, n, numel, reps)
            if res:
                peers[name] = res
                for r in res["rows"]:
                    med[(r["op"], r["impl"])] = r["median_s"]
                print(f"  {res['impl']:<15} " + "  ".join(f"{SHORT[r['op']]} {r['median_s'] * 1e3:.1f} ms "
                                                          f"[{r['min_s'] * 1e3:.1f}, {r['max_s'] * 1e3:.1f}]"
                                                          for r in res["rows"]), flush=True)
    out["peers"] = peers

    print("== 16-bit wire types (direct) ==", flush=True)
    wire16 = {dt: bench_collectives(n, numel, dt, modes=("direct",), numpy=False, repeats=reps)
              for dt in ("fp16", "bf16")}
    out["wire16"] = wire16
    for dt, res in wire16.items():
        for r in res["rows"]:
            med[(r["op"], f"ringemu-direct-{dt}")] = r["median_s"]
            print(f"  {dt} {SHORT[r['op']]}: {r['median_s'] * 1e3:.1f} ms = "
                  f"{r['median_s'] / med[(r['op'], 'ringemu-direct')]:.2f}× fp32", flush=True)

    print(f"== all-reduce sweep, S = 2^{args.sweep_log2_numel} fp32 ==", flush=True)
    sweep = []
    for k in [int(x) for x in args.sweep.split(",")]:
        case = bench_collectives(k, 2 ** args.sweep_log2_numel, "fp32", ops=("all-reduce",), modes=("direct",),
                                 repeats=reps)
        row = {"ranks": k, "ringemu-direct": case["rows"][0]["median_s"], "numpy-loop": case["rows"][1]["median_s"]}
        if not args.no_peers:
            for name in ("jax", "mpi") + (("gloo",) if k <= args.gloo_max_ranks else ()):
                res = run_peer(name, k, 2 ** args.sweep_log2_numel, reps)
                if res:
                    row[res["impl"]] = [r for r in res["rows"] if r["op"] == "all-reduce"][0]["median_s"]
        row["fastest_peer_ratio"] = min(v for key, v in row.items() if key not in ("ranks", "ringemu-direct")) \
            / row["ringemu-direct"]
        sweep.append(row)
        print("  N = %-3d " % k + "  ".join(f"{key} {v * 1e3:.2f} ms" for key, v in row.items()
                                             if key not in ("ranks", "fastest_peer_ratio")), flush=True)
    out["sweep"] = sweep

    print("== size-only counting and start-up ==", flush=True)
    count_cmd = RINGEMU + ["count", "--op", "all-reduce", "--ranks", "1024", "--numel", "27781427952",
                           "--dtype", "bf16", "--json"]
    out["count_1024"] = wall(count_cmd, 1 if args.quick else 3)
    out["startup"] = startup(1 if args.quick else 3, cold=not args.quick)
    print(f"  count N=1024: {out['count_1024']['median_s']:.2f} s; demo warm {out['startup']['demo_warm']['median_s']:.2f}"
          " s", flush=True)
    if "demo_cold_s" in out["startup"]:
        print(f"  demo cold (empty cache) {out['startup']['demo_cold_s']:.1f} s, compiling "
              f"{out['startup']['cold_compiled_signatures']} signatures of "
              f"{sorted(set(out['startup']['cold_compiled_functions']))}", flush=True)
    out["memory"] = memory_check(n, numel)

    if not args.no_zero:
        print("== ZeRO training step ==", flush=True)
        out["zero"] = zero_step(n, args.log2_numel, 2)
    if not args.no_scale:
        from scale import scale_section
        out["scale"] = scale_section(args.quick)

    # -- targets -------------------------------------------------------------------------------------------------
    t = []
    rows = {(r["op"], r["impl"]): r for r in main_case["rows"]}
    for op in ("all-reduce", "reduce-scatter", "all-gather"):
        ratio = rows[(op, "ringemu-direct")]["x_floor2"]
        if ratio is None:  # the floor failed its own check: no ratio is taken against it
            t.append({**target(f"{SHORT[op]} direct, × floor (floor failed its check)", float("nan"), 1.2, "lower"),
                      "met": False})
        else:
            t.append(target(f"{SHORT[op]} direct, × floor (least traffic at the best STREAM rate)", ratio, 1.2,
                            "lower"))
    rs = med[("reduce-scatter", "ringemu-direct")]
    if ("reduce-scatter", "jax-host") in med:
        t.append(target("RS speed-up over jax-host", med[("reduce-scatter", "jax-host")] / rs, 1.5, "higher", "×"))
    ar = med[("all-reduce", "ringemu-direct")]
    for impl, need in (("torch-gloo", 10), ("jax-host", 5), ("mpi4py-openmpi", 5), ("numpy-loop", 2.5)):
        if ("all-reduce", impl) in med:
            t.append(target(f"AR speed-up over {impl}", med[("all-reduce", impl)] / ar, need, "higher", "×"))
    t.append(target("AR sweep: fastest peer / ringemu, min over N", min(r["fastest_peer_ratio"] for r in sweep),
                    1.0, "higher", "×"))
    add_rate = main_case["stream"]["add_GBps"]
    t.append(target("RS step, ring-model rate / STREAM add", rows[("reduce-scatter", "ringemu-step")]
                    ["schedule_model_GBps"] / add_rate, 0.8, "higher"))
    for dt in ("fp16", "bf16"):
        worst = max(med[(op, f"ringemu-direct-{dt}")] / med[(op, "ringemu-direct")] for op in SHORT)
        t.append(target(f"{dt} direct / fp32 direct, worst op", worst, 2.0, "lower", "×"))
    t.append(target("count N=1024, S=27.8e9 (wall, with start-up)", out["count_1024"]["median_s"], 1.0, "lower", "s"))
    t.append(target("ringemu demo, warm cache (wall)", out["startup"]["demo_warm"]["median_s"], 1.5, "lower", "s"))
    if out.get("zero"):
        for row in out["zero"]["rows"]:
            if row.get("x_floor"):
                t.append(target(f"ZeRO step {row['stage']}, × floor", row["x_floor"], 2.0, "lower"))
    if out.get("scale"):
        t += scale_targets(out["scale"])
    out["targets"] = [] if args.quick else t  # smoke sizes say nothing about the targets: not evaluated
    out["machine"]["load_average_end"] = os.getloadavg()
    out["machine"]["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    out["machine"]["peak_rss_largest_child_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if args.quick:
        print("== targets: not evaluated in a smoke run (sizes far too small for them to mean anything)")
    else:
        print("== targets ==")
    _print_targets(out["targets"])
    print(f"peak RSS of this process {out['machine']['peak_rss_bytes'] / 2**30:.2f} GiB, of its largest child "
          f"process {out['machine']['peak_rss_largest_child_bytes'] / 2**30:.2f} GiB (peers run in children, "
          f"several at once); all_reduce allocates "
          f"{out['memory']['extra_world_buffers']:.2f} extra world buffers; load average "
          f"{out['machine']['load_average_start'][0]:.1f} -> {out['machine']['load_average_end'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
