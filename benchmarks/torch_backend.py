"""The "ringemu" torch.distributed backend beside torch's threaded test group and gloo processes.

Measured side by side in one run (ratios only mean something within one run on a shared machine):
* all_reduce of S fp32 per rank on N thread-ranks (or processes for gloo), median of ``--repeats`` timed calls
  after a barrier (ten times as many at 4 KiB), for S = 4 KiB, 1 MiB, 16 MiB and 64 MiB per rank;
* the hand-off alone: ``barrier()`` on both groups, median of 100 (no data moves: what meeting and waking the
  ranks costs);
* a world start: ``spawn`` of a function that returns at once, N = 8;
* one DDP and one FSDP2 training step (Adam) of an MLP on N = 8 thread-ranks.
torch's threaded group (``torch.testing._internal.distributed.multi_threaded_pg``) is a private testing module:
it is used here as a peer to measure against, never by ringemu itself.

    python benchmarks/torch_backend.py [--ranks 8] [--repeats 5] [--quick] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from ringemu.torch import spawn  # noqa: E402

warnings.filterwarnings("ignore")


def _timed_all_reduce(numel: int, repeats: int):
    def fn(rank):
        t = torch.full((numel,), 1e-3)
        dist.all_reduce(t)  # warm-up (kernels compiled, buffers touched)
        samples = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            samples.append(time.perf_counter() - start)
        return samples
    return fn


def _timed_barrier(repeats: int):
    def fn(rank):
        for _ in range(5):
            dist.barrier()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            dist.barrier()
            samples.append(time.perf_counter() - start)
        return samples
    return fn


ROUNDS = 3  # each comparison runs in rounds, the two groups taking turns; the median round is kept


def _side_by_side(fn_of, n: int):
    """(ringemu, threaded) median seconds of rank 0, the groups taking turns for ROUNDS rounds (so that a burst
    of load from elsewhere hits both alike), each the median over its rounds."""
    ours, theirs = [], []
    for _ in range(ROUNDS):
        ours.append(statistics.median(spawn(fn_of(), n).results[0]))
        theirs.append(statistics.median(_threaded_world(fn_of(), n)[0]))
    return statistics.median(ours), statistics.median(theirs)

TARGETS = {"4 KiB": 1.0, "1 MiB": 2.0, "16 MiB": 2.0, "64 MiB": 2.0, "ddp": 1.3, "fsdp2": 1.3}  # × threaded


def _threaded_world(fn, n: int):
    """Run fn(rank) on n threads under torch's threaded test group; return per-rank results."""
    from torch.testing._internal.distributed import multi_threaded_pg as mt
    world = mt._install_threaded_pg()
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    store, results = dist.HashStore(), [None] * n

    def worker(rank):
        dist.init_process_group("threaded", rank=rank, world_size=n, store=store)
        try:
            results[rank] = fn(rank)
        finally:
            if world == dist.distributed_c10d._world:
                dist.destroy_process_group()
    try:
        threads = [threading.Thread(target=worker, args=(r,)) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        mt._uninstall_threaded_pg()
        mt.ProcessLocalGroup.reset()
    return results


def _gloo(n: int, numel: int, repeats: int) -> float | None:
    cmd = [sys.executable, str(HERE / "peers" / "torch_gloo.py"), "--ranks", str(n), "--numel", str(numel),
           "--repeats", str(repeats)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode:
        return None
    rows = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    row = rows["all-reduce"] if isinstance(rows, dict) else next(r for r in rows if r.get("op") == "all-reduce")
    return row.get("median_s", row.get("median"))


def _mlp(width: int, depth: int) -> nn.Module:
    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    return model


def _training_step(kind: str, width: int, depth: int, repeats: int):
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    def fn(rank):
        model = _mlp(width, depth)
        if kind == "ddp":
            model = DistributedDataParallel(model)
        else:
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(rank)
        x = torch.randn(8, width, generator=gen)
        samples = []
        for step in range(repeats + 2):  # two warm-up steps (DDP rebuilds its buckets at step 2)
            dist.barrier()
            start = time.perf_counter()
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            if step >= 2:
                samples.append(time.perf_counter() - start)
        return samples
    return fn


def markdown(out: dict) -> str:
    """docs/torch.md's speed table from one run's results."""
    h = out["handoff"]
    lines = [f"| fp32 per rank, N = {out['ranks']} | ringemu backend | threaded group | speed-up | gloo processes "
             "| speed-up |", "|---|---:|---:|---:|---:|---:|",
             f"| hand-off alone (`barrier()`) | {h['ringemu'] * 1e6:.0f} µs | {h['threaded'] * 1e6:.0f} µs | "
             f"{h['threaded'] / h['ringemu']:.2f}× | – | – |"]
    for r in out["all_reduce"]:
        gloo = f"{r['gloo'] * 1e3:.1f} ms | {r['gloo'] / r['ringemu']:.2f}×" if r["gloo"] else "– | –"
        lines.append(f"| all_reduce {r['size']} | {r['ringemu'] * 1e3:.2f} ms | {r['threaded'] * 1e3:.2f} ms | "
                     f"{r['threaded'] / r['ringemu']:.2f}× | {gloo} |")
    for r in out["training"]:
        lines.append(f"| {r['kind']} step, {r['depth']} × Linear({r['width']}, {r['width']}) | {r['ringemu']:.3f} s "
                     f"| {r['threaded']:.3f} s | {r['threaded'] / r['ringemu']:.2f}× | – | – |")
    lines.append(f"\nWorld start (a function that returns at once): {out['world_start_s'] * 1e3:.1f} ms. Targets: "
                 + "; ".join(f"{t['what']} {t['speedup']:.2f}× (≥ {t['need']}×: {'met' if t['met'] else 'not met'})"
                             for t in out["targets"]) + ".")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="1 MiB only, no gloo, a small model")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = p.parse_args()
    n, reps = args.ranks, args.repeats
    sizes = [1 << 10, 1 << 18] if args.quick else [1 << 10, 1 << 18, 1 << 22, 1 << 24]  # fp32: 4 KiB ... 64 MiB
    out = {"ranks": n, "torch": torch.__version__, "all_reduce": [], "training": []}
    ours, threaded = _side_by_side(lambda: _timed_barrier(100), n)
    out["handoff"] = {"ringemu": ours, "threaded": threaded}
    print(f"hand-off alone (barrier, median of 100): ringemu {ours * 1e6:.0f} µs, threaded {threaded * 1e6:.0f} µs "
          f"({threaded / ours:.1f}x)")
    print(f"all_reduce, fp32, {n} ranks: median seconds of {reps} calls (speed-up of ringemu in brackets)")
    for numel in sizes:
        calls = reps * 10 if numel <= 1 << 12 else reps
        ours, threaded = _side_by_side(lambda: _timed_all_reduce(numel, calls), n)
        gloo = None if args.quick or numel <= 1 << 12 else _gloo(n, numel, reps)
        row = {"mib_per_rank": numel * 4 / 2 ** 20, "ringemu": ours, "threaded": threaded, "gloo": gloo}
        out["all_reduce"].append(row)
        gloo_text = f"gloo {gloo:.4f} ({gloo / ours:.1f}x)" if gloo else "gloo -"
        row["size"] = f"{numel * 4 >> 20} MiB" if numel * 4 >= 1 << 20 else f"{numel * 4 >> 10} KiB"
        print(f"  {row['size']:>6}: ringemu {ours:.5f}  threaded {threaded:.5f} "
              f"({threaded / ours:.2f}x)  {gloo_text}")
    starts = []
    for _ in range(reps):
        begin = time.perf_counter()
        spawn(lambda rank: None, n)
        starts.append(time.perf_counter() - begin)
    out["world_start_s"] = statistics.median(starts)
    print(f"world start, {n} ranks: {out['world_start_s'] * 1e3:.1f} ms (median of {reps})")
    width, depth = (256, 4) if args.quick else (1024, 4)
    for kind in ("ddp", "fsdp2"):
        ours, threaded = _side_by_side(lambda: _training_step(kind, width, depth, reps), n)
        out["training"].append({"kind": kind, "width": width, "depth": depth, "ringemu": ours, "threaded": threaded})
        print(f"{kind} step, {depth} x Linear({width}, {width}), {n} ranks: ringemu {ours:.4f} s  threaded "
              f"{threaded:.4f} s ({threaded / ours:.1f}x)")
    speedups = {r["size"]: r["threaded"] / r["ringemu"] for r in out["all_reduce"]}
    speedups.update({r["kind"]: r["threaded"] / r["ringemu"] for r in out["training"]})
    out["targets"] = [{"what": what, "speedup": speedups[what], "need": need, "met": speedups[what] >= need}
                      for what, need in TARGETS.items() if what in speedups]
    print("targets (× torch's threaded group, same run): " + "; ".join(
        f"{t['what']} {t['speedup']:.2f}× (≥ {t['need']}: {'met' if t['met'] else 'not met'})" for t in out["targets"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(markdown(out))


if __name__ == "__main__":
    main()
