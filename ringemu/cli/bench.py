"""``ringemu bench``: time the collectives against this machine's memory-bandwidth floor and a numpy loop.

Everything is measured in one process on the same data: a STREAM-style copy and in-place add (the floor), ringemu's
``direct`` path (what the public collectives run in fused mode: :mod:`ringemu.direct`, in place on the world's rows),
the world kernels' ``fused`` and ``step`` modes, and a straightforward per-rank numpy loop over the same schedule (which gives the same
bits; the benchmark checks it). The schedules come from the registry (:mod:`ringemu.algorithms`; ``--algorithm``,
default the ring). Times are medians of ``repeats`` runs after one warm-up run, with min and max; the
cases take turns run by run, so that load from elsewhere hits them alike.

Traffic models (bytes; S = padded elements per rank, e = bytes per element, N ranks):

* floor (the least memory traffic that produces the ring's end state in every rank's buffer):
  reduce-scatter reads every element once and writes the N-1 partial sums of each chunk: (2N-1)·S·e at the
  in-place-add rate; all-gather reads each chunk once and writes it N-1 times: N·S·e at the copy rate;
  all-reduce reads and writes every element once: 2N·S·e at the in-place-add rate. STREAM rates count bytes
  as STREAM does (copy: 2 per element, add a += b: 3) and use every core this process may use.
* schedule model (what a step-by-step in-place run of the schedule moves, the step mode's yardstick): every ADD
  transfer reads two chunks and writes one, every COPY reads one and writes one. For the ring that is 3(N-1)·S·e
  for reduce-scatter and 2(N-1)·S·e for all-gather.
* bus bandwidth as nccl-tests reports it: S·e / time × (N-1)/N (RS, AG) or 2(N-1)/N (AR).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .. import algorithms
from ..checks import check_budget, check_n_ranks, check_numel
from ..dtypes import dtype_name, resolve_dtype
from ..worlds import communicator_algorithms  # one schedule per op, built once: names for any buffer
from ..direct import run_direct
from ..execute import default_threads, run_schedule
from ..layout import ChunkLayout
from ..partition import layout_for
from ..progress import progress_bar
from ..schedule import ADD, Schedule
from ..worlds.base import communicator_algorithms  # the textbook orders: all three collectives, any buffer

__all__ = ["Timing", "time_it", "time_interleaved", "stream_calls", "stream_rates", "floor_bytes",
           "schedule_model_bytes", "bus_factor", "numpy_loop", "bench_collectives", "render", "register",
           "OPS", "SHORT", "bench_settings", "MAX_BENCH_RANKS", "MAX_BENCH_LOG2_NUMEL",
           "MAX_BENCH_WORLD_BYTES", "MAX_BENCH_REPEATS"]

OPS = algorithms.COLLECTIVES  # the collectives a bench times, as the registry names them


def _short(op: str) -> str:
    """``reduce-scatter`` -> ``RS``: the initials of a collective's name."""
    return "".join(word[0].upper() for word in op.split("-"))


SHORT = {op: _short(op) for op in OPS}  # table headings


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples in seconds."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    def as_dict(self) -> dict:
        return {"median_s": self.median, "min_s": min(self.samples), "max_s": max(self.samples),
                "samples_s": list(self.samples)}


def time_it(fn, repeats: int, warmup: int = 1) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``repeats`` times timed."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return Timing(tuple(samples))


def _threaded(fn, parts: list[tuple[int, int]]) -> None:
    workers = [threading.Thread(target=fn, args=p) for p in parts[1:]]
    for w in workers:
        w.start()
    fn(*parts[0])
    for w in workers:
        w.join()


def time_interleaved(calls: dict, repeats: int, warmup: int = 1, bar=None) -> dict:
    """:func:`time_it` for several calls taking turns (run r of every call before run r+1 of any), so that a burst
    of load from elsewhere on the machine hits all of them alike and their ratios stay fair. ``bar`` (a progress
    bar) advances once per round, warm-up included, outside the timed calls."""
    for _ in range(warmup):
        for fn in calls.values():
            fn()
        if bar is not None:
            bar.update()
    samples = {key: [] for key in calls}
    for _ in range(repeats):
        for key, fn in calls.items():
            start = time.perf_counter()
            fn()
            samples[key].append(time.perf_counter() - start)
        if bar is not None:
            bar.update()
    return {key: Timing(tuple(v)) for key, v in samples.items()}


def stream_calls(nbytes: int, threads: int) -> dict:
    """STREAM-style copy (b = a) and in-place add (a += b) over two float32 arrays of ``nbytes`` in all, split
    over ``threads`` threads (numpy releases the GIL); bytes per call as STREAM counts them."""
    n = max(1, nbytes // 8)
    a = np.full(n, 1e-3, dtype=np.float32)
    b = np.full(n, 2e-3, dtype=np.float32)
    cuts = np.linspace(0, n, threads + 1).astype(int)
    parts = list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))
    return {"copy": (lambda: _threaded(lambda lo, hi: np.copyto(b[lo:hi], a[lo:hi]), parts), 2 * a.nbytes),
            "add": (lambda: _threaded(lambda lo, hi: np.add(a[lo:hi], b[lo:hi], out=a[lo:hi]), parts), 3 * a.nbytes)}


def stream_rates(nbytes: int, repeats: int, threads: int) -> dict:
    """Rates in bytes/s of :func:`stream_calls`, and their timings."""
    calls = stream_calls(nbytes, threads)
    t = time_interleaved({k: fn for k, (fn, _) in calls.items()}, repeats)
    return {"array_bytes": calls["copy"][1], "threads": threads, "copy": t["copy"], "add": t["add"],
            "copy_Bps": calls["copy"][1] / t["copy"].median, "add_Bps": calls["add"][1] / t["add"].median}


# end state (a schedule's postcondition) -> (buffers of S·e moved as a function of N, STREAM rate): module doc
_FLOORS = {"reduced-own": (lambda n: 2 * n - 1, "add"), "gathered": (lambda n: n, "copy"),
           "reduced-all": (lambda n: 2 * n, "add")}


def floor_bytes(op: str, n: int, padded: int, itemsize: int) -> tuple[int, str]:
    """(bytes, "add" or "copy"): the least traffic for ``op``'s end state and the STREAM rate it runs at."""
    buffers, rate = _FLOORS[algorithms.build(op, 1).final]  # the collective's postcondition
    return buffers(n) * padded * itemsize, rate


def schedule_model_bytes(schedule: Schedule, chunk: int, itemsize: int) -> int:
    """Bytes a step-by-step in-place run of ``schedule`` moves: 3 chunks per ADD transfer (two read, one written),
    2 per COPY. The ring: 3(N-1)·S·e for RS, 2(N-1)·S·e for AG, their sum for AR."""
    adds = int(np.count_nonzero(schedule.table[:, 4] == ADD))
    return (3 * adds + 2 * (schedule.n_transfers - adds)) * chunk * itemsize


def bus_factor(op: str, n: int) -> Fraction:
    """nccl-tests' busbw / algbw: (N-1)/N for RS and AG, 2(N-1)/N for AR."""
    return Fraction((2 if op == "all-reduce" else 1) * (n - 1), n)


def numpy_loop(schedule, world: np.ndarray) -> None:
    """The schedule as a per-rank numpy loop: every transfer one ufunc call on whole chunks, in table order (an
    exchange schedule's sources are copied at the start of each step, as the kernels stage them)."""
    chunk = world.shape[1] // schedule.n_chunks
    bounds = schedule.step_bounds()
    for step in range(schedule.n_steps):
        rows = schedule.table[bounds[step]:bounds[step + 1]].tolist()
        sent = ([world[src, c * chunk:(c + 1) * chunk].copy() for _, src, _, c, _ in rows]
                if getattr(schedule, "exchange", False) else
                [world[src, c * chunk:(c + 1) * chunk] for _, src, _, c, _ in rows])
        for (_, _, dst, c, op), source in zip(rows, sent):
            target = world[dst, c * chunk:(c + 1) * chunk]
            if op == ADD:
                np.add(target, source, out=target)
            else:
                target[...] = source


def _world(shape: tuple[int, int], dt) -> np.ndarray:
    world = np.empty(shape, dtype=dt)
    world[...] = (np.random.default_rng(0).standard_normal(shape, dtype=np.float32) * 1e-3).astype(dt)
    return world


def _direct_call(op: str, schedule: Schedule, layout, world: np.ndarray, threads: int):
    """What the public collectives run in fused mode, in place on the world's rows (:mod:`ringemu.direct`): an
    all-reduce or reduce-scatter reads each row and writes its result into it, an all-gather reads each rank's shard
    of its row and writes the others."""
    numel = layout.numel
    rows = [world[r, :numel] for r in range(world.shape[0])]
    shards = ChunkLayout(numel, world.shape[0])
    starts = [shards.payload_slice(r).start for r in range(world.shape[0])]
    own = [row[shards.payload_slice(r)] for r, row in enumerate(rows)]
    if schedule.initial == "own":
        return lambda: run_direct(schedule, layout, own, rows, input_offsets=starts, threads=threads)
    if op == "reduce-scatter":
        return lambda: run_direct(schedule, layout, rows, own, shard_results=True, output_offsets=starts,
                                  threads=threads)
    return lambda: run_direct(schedule, layout, rows, rows, threads=threads)


def bench_collectives(n: int, numel: int, dtype="fp32", ops=OPS, modes=("direct", "fused", "step"),
                      numpy: bool = True, repeats: int = 5, threads: int | None = None,
                      algorithm: str = algorithms.DEFAULT_ALGORITHM, bar=None) -> dict:
    """Time ``ops`` by ``algorithm`` on an (N, S) world of small random values (seed 0, scaled so repeated runs
    stay finite), padded as each schedule's :class:`~ringemu.layout.ChunkLayout` pads; ``bar`` (a progress bar of
    ``repeats + 1`` steps) advances once per round."""
    dt = resolve_dtype(dtype)
    n, numel = check_n_ranks(n, "n"), check_numel(numel)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_BENCH_REPEATS:
        raise ValueError(f"repeats must be an integer >= 1 and <= {MAX_BENCH_REPEATS}; got {repeats!r}")
    check_budget(n * ChunkLayout(numel, n).padded_numel * dt.itemsize, MAX_BENCH_WORLD_BYTES,
                 "the world buffer in bytes", "the benchmark holds it and STREAM arrays as large")
    schedules = {op: algorithms.build(op, n, algorithm, numel=numel, itemsize=dt.itemsize) for op in ops}
    layouts = {op: layout_for(s, numel) for op, s in schedules.items()}
    worlds = {}  # one world per padded width (the ring's three collectives share one)
    for layout in layouts.values():
        worlds.setdefault(layout.padded_numel, _world((n, layout.padded_numel), dt))
    layout = ChunkLayout(numel, n)
    world_bytes = max(w.nbytes for w in worlds.values()) if worlds else n * layout.padded_numel * dt.itemsize
    threads = threads or default_threads(world_bytes)
    streams = stream_calls(world_bytes, threads)
    calls = {("stream", k): fn for k, (fn, _) in streams.items()}
    for op in ops:
        schedule, world = schedules[op], worlds[layouts[op].padded_numel]
        for m in modes:
            calls[(op, f"ringemu-{m}")] = (_direct_call(op, schedule, layouts[op], world, threads) if m == "direct" else
                                           lambda s=schedule, w=world, m=m: run_schedule(s, w, m, threads=threads))
        if numpy:
            calls[(op, "numpy-loop")] = lambda s=schedule, w=world: numpy_loop(s, w)
    timings = time_interleaved(calls, repeats, bar=bar)
    stream = {"array_bytes": streams["copy"][1], "copy": timings[("stream", "copy")],
              "add": timings[("stream", "add")]}
    for k in ("copy", "add"):
        stream[f"{k}_Bps"] = streams[k][1] / stream[k].median
    rows = []
    for (op, name), t in timings.items():
        if op == "stream":
            continue
        padded = layouts[op].padded_numel
        fbytes, rate = floor_bytes(op, n, padded, dt.itemsize)
        floor_s = fbytes / stream[f"{rate}_Bps"]
        busbw = float(padded * dt.itemsize / t.median * bus_factor(op, n))
        model = schedule_model_bytes(schedules[op], layouts[op].chunk_size, dt.itemsize)
        rows.append({"op": op, "impl": name, **t.as_dict(), "busbw_GBps": busbw / 1e9,
                     "floor_s": floor_s, "x_floor": t.median / floor_s,
                     "schedule_model_GBps": model / t.median / 1e9})
    if numpy:  # same schedule, same order, same in-place updates: the loop must give ringemu's bits
        for op in ops:
            small = ChunkLayout(min(numel, 1 << 16), schedules[op].n_chunks, n)
            a = (np.arange(n * small.padded_numel) % 7 - 3).astype(dt).reshape(n, small.padded_numel)
            b = a.copy()
            run_schedule(schedules[op], a, "fused", threads=threads)
            numpy_loop(schedules[op], b)
            if a.tobytes() != b.tobytes():
                raise AssertionError(f"numpy loop and ringemu differ on {op} ({algorithm})")
    return {"ranks": n, "numel": numel, "algorithm": algorithm, "padded_numel": layout.padded_numel,
            "dtype": dtype_name(dt), "world_bytes": world_bytes, "repeats": repeats, "threads": threads,
            "stream": {"array_bytes": stream["array_bytes"], "threads": threads,
                       "copy": stream["copy"].as_dict(), "add": stream["add"].as_dict(),
                       "copy_GBps": stream["copy_Bps"] / 1e9, "add_GBps": stream["add_Bps"] / 1e9},
            "rows": rows}


def render(result: dict) -> str:
    """The benchmark as a text table: one row per (op, implementation)."""
    s = result["stream"]
    lines = [f"N = {result['ranks']}, S = {result['numel']:,} {result['dtype']} per rank "
             f"(world {result['world_bytes'] / 2**20:,.0f} MiB), {result['algorithm']} schedules, "
             f"{result['repeats']} runs each, "
             f"{result['threads']} thread(s)",
             f"STREAM floor: copy {s['copy_GBps']:.1f} GB/s, in-place add {s['add_GBps']:.1f} GB/s",
             f"{'op':<4} {'implementation':<15} {'median ms':>10} {'min':>8} {'max':>8} {'busbw GB/s':>11} "
             f"{'× floor':>8} {'model GB/s':>10} {'vs numpy':>9}"]
    by_op = {}
    for r in result["rows"]:
        by_op.setdefault(r["op"], {})[r["impl"]] = r["median_s"]
    for r in result["rows"]:
        base = by_op[r["op"]].get("numpy-loop")
        ratio = f"{base / r['median_s']:.2f}×" if base else "-"
        lines.append(f"{SHORT[r['op']]:<4} {r['impl']:<15} {r['median_s'] * 1e3:>10.1f} {r['min_s'] * 1e3:>8.1f} "
                     f"{r['max_s'] * 1e3:>8.1f} {r['busbw_GBps']:>11.2f} {r['x_floor']:>8.2f} "
                     f"{r['schedule_model_GBps']:>10.1f} {ratio:>9}")
    lines.append("× floor: median over the time the STREAM rate needs for the op's least traffic; model GB/s: the "
                 "step-by-step schedule's traffic over the median; vs numpy: how many times faster than the numpy "
                 "loop")
    return "\n".join(lines)


MAX_BENCH_RANKS = 1024  # the lesson's largest N
MAX_BENCH_LOG2_NUMEL = 30  # S <= 2^30 elements per rank
MAX_BENCH_WORLD_BYTES = 2 ** 30  # N·S·e: the world buffer (1 GiB), plus the same again for the STREAM arrays
MAX_BENCH_REPEATS = 100  # timed runs per case
QUICK = {"ranks": 4, "log2_numel": 16, "repeats": 3}  # --quick: a smoke run of about a second
DEFAULTS = {"ranks": 8, "log2_numel": 24, "repeats": 5}


def bench_settings(args) -> tuple[int, int, int]:
    """(ranks, log2 numel, repeats) from the flags, checked; ``--quick`` refuses flags it would override."""
    given = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k) is not None}
    if args.quick and given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ValueError(f"--quick sets N = 4, S = 2^16 and 3 runs; it cannot be combined with {flags}")
    chosen = {**(QUICK if args.quick else DEFAULTS), **given}
    limits = {"ranks": MAX_BENCH_RANKS, "log2_numel": MAX_BENCH_LOG2_NUMEL, "repeats": MAX_BENCH_REPEATS}
    for name, value in chosen.items():
        flag = "--" + name.replace("_", "-")
        if not 1 <= value <= limits[name]:
            raise ValueError(f"{flag} must be >= 1 and <= {limits[name]}; got {value}")
    itemsize = resolve_dtype(args.dtype).itemsize
    check_budget(chosen["ranks"] * 2 ** chosen["log2_numel"] * itemsize, MAX_BENCH_WORLD_BYTES,
                 "the world buffer N·2^log2-numel·itemsize in bytes",
                 "the benchmark holds it and STREAM arrays as large")
    return chosen["ranks"], chosen["log2_numel"], chosen["repeats"]


def cmd_bench(args) -> int:
    n, log2, repeats = bench_settings(args)
    with progress_bar(repeats + 1, "bench (warm-up, then timed rounds)", enabled=not args.json) as bar:
        result = bench_collectives(n, 2 ** log2, args.dtype, repeats=repeats, algorithm=args.algorithm, bar=bar)
    if not args.no_scale:
        result["scale"] = bench_scale(args.quick)
    print(json.dumps(result) if args.json else render(result) + ("" if args.no_scale else
                                                                  "\n" + render_scale(result["scale"])))
    return 0


def bench_scale(quick: bool) -> dict:
    """The emulated world's per-collective cost beside a direct call (N = 8 and 32, 64 fp32 elements per rank),
    and size-only ``ringemu memory`` runs of 64 units of the lesson's model at N = 8 and 1,024 (child processes)."""
    from .scale_bench import size_only_point, world_latency
    latency = [world_latency(n, rounds=3 if quick else 10) for n in (8, 32)]
    points = [size_only_point(n, 4 if quick else 64) for n in (8, 1024)]
    return {"latency": latency, "size_only": points}


def render_scale(scale: dict) -> str:
    lines = ["emulated world, one all-reduce of 64 fp32 per rank:"]
    for row in scale["latency"]:
        s, x = row["seconds"], row["x_direct"]
        lines.append(f"  N = {row['ranks']:>2}: direct {s['direct'] * 1e6:6.0f} µs, "
                     f"greenlet {s['greenlet'] * 1e6:6.0f} µs ({x['greenlet']:.2f}×), "
                     f"threads {s['threads'] * 1e6:6.0f} µs ({x['threads']:.2f}×)")
    lines.append("size-only `ringemu memory` (own process, start-up included):")
    for p in scale["size_only"]:
        lines.append(f"  N = {p['ranks']:>4}, {p['units']} units of {p['unit_params']:,}: {p['wall_s']:.2f} s wall, "
                     f"{(p['peak_rss_bytes'] or 0) / 1e6:.0f} MB peak RSS")
    return "\n".join(lines)


def register(subparsers) -> None:
    """Add ``bench`` to the ``ringemu`` dispatcher."""
    p = subparsers.add_parser("bench", help="time the collectives against the memory-bandwidth floor and numpy")
    p.add_argument("--ranks", type=int, default=None, help=f"number of ranks N (default 8, at most {MAX_BENCH_RANKS})")
    p.add_argument("--log2-numel", type=int, default=None, help="S = 2^this elements per rank (default 24)")
    p.add_argument("--dtype", default="fp32", help="element type (default fp32)")
    p.add_argument("--repeats", type=int, default=None, help="timed runs per case (default 5)")
    p.add_argument("--quick", action="store_true", help="smoke run: N = 4, S = 2^16, 3 runs (about a second)")
    p.add_argument("--algorithm", choices=communicator_algorithms(), default=algorithms.DEFAULT_ALGORITHM,
                   help=f"the schedules' algorithm, from the catalog's whole families (default {algorithms.DEFAULT_ALGORITHM})")
    p.add_argument("--no-scale", action="store_true",
                   help="skip the emulated-world latency and the size-only scale points")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_bench)  # progress on stderr when it is a terminal (ringemu.progress)
