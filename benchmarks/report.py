"""Markdown tables from a benchmarks/run.py JSON file (the tables of docs/performance.md).

Usage: ``python benchmarks/report.py benchmarks/results/n8-s24.json`` (every table), or with ``--readme``: the
README's performance table, the floor it is measured against printed beside it.
"""
from __future__ import annotations

import json
import sys

SHORT = {"reduce-scatter": "RS", "all-gather": "AG", "all-reduce": "AR"}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def targets(d: dict) -> list[str]:
    out = ["| target | measured | required | met |", "|---|---:|---:|:---:|"]
    for t in d["targets"]:
        sign = "≤" if t["better"] == "lower" else "≥"
        value = "not taken" if t["value"] != t["value"] else f"{t['value']:.3g}{t['unit']}"  # NaN: no ratio
        out.append(f"| {t['target']} | {value} | {sign} {t['limit']}{t['unit']} | "
                   f"{'yes' if t['met'] else '**no**'} |")
    return out


def floor_line(d: dict) -> str:
    """The run's floor (benchmarks/floor.py): its three rates and whether it passed its own check."""
    f = d.get("floor")
    if not f:
        return "(no checked floor in this run)"
    g = f["GBps"]
    verdict = "passed its sanity check" if f["passed"] else f"FAILED its sanity check ({f['why_not']}): no ratios"
    return (f"Floor, measured in the same run on pre-faulted arrays ({f['threads']} threads): copy {g['copy']:.1f} "
            f"GB/s, add {g['add']:.1f} GB/s, in-place add {g['inplace_add']:.1f} GB/s; {verdict}. A collective's "
            "floor is its least traffic at the best of the three rates.")


def readme_table(d: dict) -> list[str]:
    """One row per collective: ringemu's direct path and world modes, the numpy loop and the peers; least traffic;
    × floor."""
    m = d["main"]
    med = {(r["op"], r["impl"]): r for r in m["rows"]}
    for p in d["peers"].values():
        for r in p["rows"]:
            med[(r["op"], p["impl"])] = r
    peers = [("torch-gloo", "torch gloo (8 procs)"), ("jax-host", "JAX (8 host devices)"),
             ("mpi4py-openmpi", "mpi4py (Open MPI)")]
    out = [floor_line(d), "",
           "| op | ringemu direct | world fused | world step | numpy per-rank loop | " + " | ".join(t for _, t in peers)
           + " | least traffic | floor | direct × floor |", "|---|" + "---:|" * (8 + len(peers) - 1)]
    for op in SHORT:
        fused = med[(op, "ringemu-direct")]
        cells = [ms(med[(op, i)]["median_s"]) + " ms" if (op, i) in med else "–"
                 for i in ("ringemu-direct", "ringemu-fused", "ringemu-step", "numpy-loop", *(k for k, _ in peers))]
        x = fused.get("x_floor2")
        out.append(f"| {SHORT[op]} | " + " | ".join(cells) + f" | {fused.get('least_B', 0):,} B | "
                   f"{ms(fused.get('floor2_s', float('nan')))} ms | {'–' if x is None else f'{x:.2f}'} |")
    return out


def main_table(d: dict) -> list[str]:
    m = d["main"]
    out = [f"N = {m['ranks']}, S = {m['numel']:,} fp32 per rank (world {m['world_bytes'] / 2**20:,.0f} MiB), "
           f"{m['repeats']} timed runs each after one warm-up, {m['threads']} threads. STREAM floor: copy "
           f"{m['stream']['copy_GBps']:.1f} GB/s, in-place add {m['stream']['add_GBps']:.1f} GB/s.", "",
           "| op | implementation | median ms | min | max | busbw GB/s | × floor | schedule-model GB/s | vs numpy |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    numpy = {r["op"]: r["median_s"] for r in m["rows"] if r["impl"] == "numpy-loop"}
    for r in m["rows"]:
        out.append(f"| {SHORT[r['op']]} | {r['impl']} | {ms(r['median_s'])} | {ms(r['min_s'])} | {ms(r['max_s'])} | "
                   f"{r['busbw_GBps']:.2f} | {r['x_floor']:.2f} | {r['schedule_model_GBps']:.1f} | "
                   f"{numpy[r['op']] / r['median_s']:.2f}× |")
    return out


def peers_table(d: dict) -> list[str]:
    fused = {r["op"]: r["median_s"] for r in d["main"]["rows"] if r["impl"] == "ringemu-direct"}
    out = ["| peer (same N, S, fp32) | RS median ms [min, max] | AG | AR | ringemu direct is faster by (RS / AG / AR) |",
           "|---|---|---|---|---|"]
    for p in d["peers"].values():
        rows = {r["op"]: r for r in p["rows"]}
        cells = [f"{ms(rows[o]['median_s'])} [{ms(rows[o]['min_s'])}, {ms(rows[o]['max_s'])}]" for o in SHORT]
        ratio = " / ".join(f"{rows[o]['median_s'] / fused[o]:.1f}×" for o in SHORT)
        out.append(f"| {p['impl']} {p.get('version', '')} | " + " | ".join(cells) + f" | {ratio} |")
    return out


def wire16_table(d: dict) -> list[str]:
    fused = {r["op"]: r["median_s"] for r in d["main"]["rows"] if r["impl"] == "ringemu-direct"}
    out = ["| dtype | RS ms (× fp32) | AG ms (× fp32) | AR ms (× fp32) |", "|---|---|---|---|"]
    for dt, res in d["wire16"].items():
        rows = {r["op"]: r["median_s"] for r in res["rows"]}
        out.append(f"| {dt} | " + " | ".join(f"{ms(rows[o])} ({rows[o] / fused[o]:.2f}×)" for o in SHORT) + " |")
    return out


def sweep_table(d: dict) -> list[str]:
    impls = [k for k in dict.fromkeys(k for r in d["sweep"] for k in r) if k not in ("ranks", "fastest_peer_ratio")]
    out = ["| N | " + " | ".join(f"{i} ms" for i in impls) + " | fastest peer / ringemu |",
           "|---:|" + "---:|" * (len(impls) + 1)]
    for r in d["sweep"]:
        out.append(f"| {r['ranks']} | " + " | ".join(f"{r[i] * 1e3:.2f}" if i in r else "–" for i in impls)
                   + f" | {r['fastest_peer_ratio']:.2f}× |")
    return out


def zero_table(d: dict) -> list[str]:
    z = d.get("zero")
    if not z:
        return ["(not measured in this run)"]
    out = [f"N = {z['ranks']}, Ψ = {z['psi']:,} parameters in units of {z['unit_sizes'][0]:,}, bf16.", "",
           "| stage | step s (fastest) | collectives alone s | model alone s | optimizer alone s | floor s "
           "| step × floor | (step − model) × floor |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in z["rows"]:
        out.append(f"| {r['stage']} | {r['step_s_min']:.3f} | {r['collectives_s']:.3f} | {r['model_s']:.3f} | "
                   f"{r['optimizer_s']:.3f} | {r['floor_s']:.4f} | {r['x_floor']:.1f} | "
                   f"{r['x_floor_without_model']:.1f} |")
    if all("collectives_x_floor" in r for r in z["rows"]):
        out += ["", "The step's collectives against their share of the floor (in the emulated world / called "
                "directly): " + ", ".join(f"{r['stage']} {r['collectives_x_floor']:.2f}× / "
                                          f"{r['collectives_direct_x_floor']:.2f}×" for r in z["rows"]) + "."]
    return out


def scale_tables(sc: dict) -> list[str]:
    """The scale section: the size-only growth grid, the emulated world's latency, the parity rate, the public API
    beside the kernel and the tuned constants."""
    grid = sc["size_only_grid"]
    ranks = sorted({r["ranks"] for r in grid})
    units = sorted({r["units"] for r in grid})
    cell = {(r["ranks"], r["units"]): r for r in grid}
    out = [f"`ringemu memory --units <k × {grid[0]['unit_params']:,}> --ranks N` in a child process each: wall s / "
           "CPU s / peak RSS MB (start-up included)", "",
           "| N \\ units | " + " | ".join(str(u) for u in units) + " |", "|---|" + "---:|" * len(units)]
    def text(c: dict) -> str:
        return f"{c['wall_s']:.2f} / {c['cpu_s']:.2f} / {(c['peak_rss_bytes'] or 0) / 1e6:.0f}"

    for n in ranks:
        out.append(f"| {n} | " + " | ".join(text(cell[(n, u)]) for u in units) + " |")
    lg = sc["lesson_grid"]
    out += ["", f"Whole lesson grid (N = 1, 2, …, 1024 × {len(lg['stages'])} stages, {lg['units']} units): "
            f"{lg['wall_s']:.2f} s in one process.", "",
            "| N | direct `all_reduce` | EmulatedWorld, greenlets | EmulatedWorld, threads | torch threaded PG |",
            "|---:|---:|---:|---:|---:|"]
    for row in sc["latency"]:
        s, x = row["seconds"], row["x_direct"]
        torch = f"{row['torch_threaded_s'] * 1e6:.0f} µs" if row.get("torch_threaded_s") else "-"
        out.append(f"| {row['ranks']} | {s['direct'] * 1e6:.0f} µs | "
                   f"{s['greenlet'] * 1e6:.0f} µs ({x['greenlet']:.2f}×) | "
                   f"{s['threads'] * 1e6:.0f} µs ({x['threads']:.2f}×) | {torch} |")
    p = sc["parity"]
    out += ["", f"Hypothesis parity run (ZeRO-3 vs DP, N ≤ 8, default model, 2 steps): {p['examples']} examples, "
            f"{p['examples_per_s_wall']:.0f}/s of wall time, {p['examples_per_s_cpu']:.0f}/s of CPU time.", ""]
    api = sc["api"]
    out += [f"Ring all-reduce, N = {api['ranks']}, S = {api['numel']:,} fp32 "
            f"({api['world_bytes'] / 2**20:.0f} MiB):", "",
            "| call | ms | × kernel in place |", "|---|---:|---:|"]
    out += [f"| {k} | {v * 1e3:.1f} | {api['x_kernel'][k]:.2f} |" for k, v in api["seconds"].items()]
    c = sc["constants"]
    out += ["", f"Tuned constants (in-place fused all-reduce, N = {c['ranks']}, S = {c['numel']:,} fp32; default "
            f"tile {c['default_tile']} elements): " + ", ".join(f"{k} {v:.2f}×" for k, v in c["x_defaults"].items()),
            "", f"Load average {sc['load_average_start'][0]:.1f} at the start, {sc['load_average_end'][0]:.1f} at "
            "the end."]
    return out


def main() -> None:
    d = json.load(open(sys.argv[1]))
    if "--readme" in sys.argv[2:]:
        print("\n".join(readme_table(d) + [""] + targets(d)))
        return
    if "main" not in d:  # `run.py --only-scale`
        for title, lines in (("Targets", targets(d)), ("Scale", scale_tables(d["scale"]))):
            print(f"### {title}\n")
            print("\n".join(lines) + "\n")
        return
    for title, lines in (("Targets", targets(d)), ("Floor", [floor_line(d)] + readme_table(d)[1:]),
                         ("Collectives", main_table(d)), ("Peers", peers_table(d)),
                         ("16-bit wire types", wire16_table(d)), ("All-reduce sweep", sweep_table(d)),
                         ("ZeRO training step", zero_table(d))) + ((("Scale", scale_tables(d["scale"])),)
                                                                   if d.get("scale") else ()):
        print(f"### {title}\n")
        print("\n".join(lines) + "\n")
    m, st = d["machine"], d["startup"]
    print(f"`ringemu count --op all-reduce --ranks 1024 --numel 27781427952 --dtype bf16 --json`: median "
          f"{d['count_1024']['median_s']:.2f} s wall; `ringemu demo` (warm cache): {st['demo_warm']['median_s']:.2f} s; "
          f"cold (empty cache): {st.get('demo_cold_s', float('nan')):.1f} s compiling "
          f"{st.get('cold_compiled_signatures', '?')} signatures of {sorted(set(st.get('cold_compiled_functions', [])))}.")
    mem = d.get("memory")
    if mem:
        print(f"\n`ringemu.all_reduce(world)` (a fresh result, the input left intact) allocated "
              f"{mem['all_reduce_peak_extra_bytes']:,} bytes beyond a {mem['world_bytes']:,}-byte world "
              f"({mem['extra_world_buffers']:.2f} world buffers; tracemalloc).")
    print(f"\nload average {m['load_average_start'][0]:.1f} at the start, {m['load_average_end'][0]:.1f} at the "
          f"end; peak RSS {m['peak_rss_bytes'] / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
