"""``ringemu faults``: inject random faults into every algorithm of the registry, in every kernel mode, and count
how many each detector of :mod:`ringemu.faults.locate` found and located exactly.

For every (collective, algorithm) of :data:`ringemu.algorithms.REGISTRY`, N in :data:`RANKS`, every kernel mode
and every fault kind, :func:`run_trials` draws faults from a fixed seed: a step, then one message of that step
(its link and chunk), and for ``corrupt`` an element and a bit of its storage, for ``misroute`` another
receiver, for ``stop`` a rank. Message faults are observed step by step (:func:`ringemu.faults.locate.observe`)
and handed to each detector, which is not told the fault. A stop is run through the collective's own path
(:meth:`ringemu.faults.plan.FaultPlan.run`): it counts as detected when the collective raised
:class:`~ringemu.faults.plan.RankStopped`, and as located when the error names the stopped rank and its step.

Inputs: integer blocks (:func:`ringemu.blocks.integer_blocks`, int32) and standard-normal floats (fp32, bf16).
The table of ``docs/faults.md`` is this command's ``--markdown`` output.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..algorithms import REGISTRY, build
from ..blocks import integer_blocks
from ..dtypes import dtype_name, resolve_dtype
from ..execute import MODES
from .locate import DETECTORS, detect, located, observe
from .plan import FaultPlan
from .spec import KINDS, MESSAGE_KINDS, Fault, RankStopped
from ..partition import layout_for

__all__ = ["RANKS", "DTYPES", "run_trials", "bit_classes", "markdown", "summary"]

RANKS = (4, 5)  # with numel = 4N - 1 every layout pads its last shard, and (nearly) every chunk holds data
DTYPES = ("int32", "fp32", "bf16")


def _world(schedule, dtype, rng) -> np.ndarray:
    """A padded world of the schedule's shape: integer blocks (int32) or standard normals (floats); for an
    all-gather (initial ``own``) only chunk r of row r is input, the rest zero (as :mod:`ringemu.trace`)."""
    n = schedule.n_ranks
    layout = layout_for(schedule, _numel(n))
    if _is_int(dtype):
        data = integer_blocks(n, layout.numel, int(rng.integers(2 ** 31)), dtype)
    else:
        data = rng.standard_normal((n, layout.numel)).astype(dtype)
    world = layout.pad(data, np.empty((n, layout.padded_numel), dtype=dtype))
    if schedule.initial == "own":
        own = np.zeros_like(world)
        for r in range(n):
            for c in schedule.chunks_of_shard(r):
                sl = slice(layout.start(c), layout.start(c + 1))
                own[r, sl] = world[r, sl]
        world = own
    return world


def _numel(n_ranks: int) -> int:
    """Elements per rank: 4N - 1, so that the last shard is padded (by one element) and no chunk of the plain,
    split (2 chunks per shard) or whole-buffer layouts is padding only."""
    return 4 * n_ranks - 1


def _is_int(dtype) -> bool:
    return dtype_name(dtype).startswith("int")


def _draw(kind: str, schedule, dtype, rng) -> Fault:
    step = int(rng.integers(schedule.n_steps))
    if kind == "stop":
        return Fault("stop", step, rank=int(rng.integers(schedule.n_ranks)))
    bounds = schedule.step_bounds()
    _, src, dst, chunk, _ = schedule.table[int(rng.integers(bounds[step], bounds[step + 1]))].tolist()
    extra: dict = {}
    if kind == "corrupt":
        layout = layout_for(schedule, _numel(schedule.n_ranks))  # an engine's chunk: its own length
        width = layout.payload(chunk) if schedule.partition else layout.chunk_size
        extra = {"elem": int(rng.integers(width)), "bits": (int(rng.integers(dtype.itemsize * 8)),)}
    if kind == "misroute":
        extra = {"to": int(rng.choice([r for r in range(schedule.n_ranks) if r != dst]))}
    return Fault(kind, step, src=src, dst=dst, chunk=chunk, **extra)


def _stop_trial(schedule, world, fault: Fault, mode: str) -> tuple[bool, bool]:
    try:
        FaultPlan((fault,)).run(schedule, world.copy(), mode, "collective")
    except RankStopped as exc:
        return True, exc.ranks == (fault.rank,) and exc.step == fault.step and str(fault.rank) in str(exc)
    return False, False


def run_trials(trials: int = 6, seed: int = 0, dtypes=DTYPES, ranks=RANKS, bar=None) -> list[dict]:
    """One dict per trial: collective, algorithm, n_ranks, dtype, mode, kind, the fault's spec, and per detector
    ``found`` / ``located`` (message faults) or ``watchdog`` (stop), plus the corrupted bit's class."""
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    with np.errstate(all="ignore"):  # corrupted exponents make infs and NaNs, as they would on a real link
        _trials(rows, rng, trials, dtypes, ranks, bar)
    return rows


def _trials(rows: list, rng, trials: int, dtypes, ranks, bar=None) -> None:
    for (collective, name), entry in REGISTRY.items():
        bar and bar.update()  # a progress bar of len(REGISTRY) steps (ringemu.progress), if given
        for n in ranks:
            if entry.unsupported(n) is not None:
                continue
            for dtname in dtypes:
                dtype = resolve_dtype(dtname)
                schedule = build(collective, n, name, numel=_numel(n), itemsize=dtype.itemsize)
                for kind in KINDS:
                    for _ in range(trials):
                        world, fault = _world(schedule, dtype, rng), _draw(kind, schedule, dtype, rng)
                        for mode in MODES:
                            row = {"collective": collective, "algorithm": name, "n_ranks": n, "dtype": dtname,
                                   "mode": mode, "kind": kind, "fault": fault.spec()}
                            if kind == "stop":
                                row["found"], row["located"] = _stop_trial(schedule, world, fault, mode)
                            else:
                                obs = observe(schedule, world, [fault], mode)
                                for d in DETECTORS:
                                    finding = detect(obs, d)
                                    row[d] = {"found": finding is not None, "located": located(finding, fault)}
                                if kind == "corrupt":
                                    row["bit_class"] = bit_classes(dtype)[fault.bits[0]]
                            rows.append(row)


def bit_classes(dtype) -> list[str]:
    """Name of each storage bit (0 = least significant): ``sign``, ``exponent``, ``mantissa high`` (upper half of
    the stored fraction) or ``mantissa low``; integers: ``high`` (upper half) or ``low``."""
    dtype = resolve_dtype(dtype)
    width = dtype.itemsize * 8
    if _is_int(dtype):
        return ["low" if b < width // 2 else "high" for b in range(width)]
    fraction = {"fp16": 10, "bf16": 7, "fp32": 23, "fp64": 52}[dtype_name(dtype)]
    return [("mantissa low" if b < fraction // 2 else "mantissa high") if b < fraction else
            "sign" if b == width - 1 else "exponent" for b in range(width)]


def _count(rows, key) -> dict:
    table: dict = defaultdict(lambda: defaultdict(int))
    for r in rows:
        cell = table[key(r)]
        cell["tried"] += 1
        if r["kind"] == "stop":
            for d in ("checksum", "provenance", "values"):
                cell[f"{d} found"] += 0
            cell["watchdog found"] += r["found"]
            cell["watchdog located"] += r["located"]
            continue
        for d in DETECTORS:
            cell[f"{d} found"] += r[d]["found"]
            cell[f"{d} located"] += r[d]["located"]
        cell["any found"] += any(r[d]["found"] for d in DETECTORS)
        cell["any located"] += any(r[d]["located"] for d in DETECTORS)
    return table


def markdown(rows) -> str:
    """The report as Markdown tables: found/located out of tried, per detector (``output changed``: found only).

    Integer blocks by fault kind × collective × mode (every algorithm of the registry pooled; a second table per
    algorithm), floats by kind × collective × dtype (modes pooled), then the float corruptions the values
    detector could not see, by the class of the flipped bit."""
    out = []
    ints = [r for r in rows if _is_int(r["dtype"])]
    floats = [r for r in rows if not _is_int(r["dtype"])]
    for title, subset, key, third in (
            ("Integer blocks (int32), every algorithm pooled", ints,
             lambda r: (r["kind"], r["collective"], r["mode"]), "mode"),
            ("Integer blocks (int32), per algorithm (all collectives and modes pooled)", ints,
             lambda r: (r["kind"], r["algorithm"], ""), ""),
            ("Floats (fp32 and bf16, standard normal inputs), every algorithm and mode pooled", floats,
             lambda r: (r["kind"], r["collective"], r["dtype"]), "dtype")):
        if subset:
            out += _table(title, _count(subset, key), "collective" if third else "algorithm", third)
    corrupt = [r for r in floats if r["kind"] == "corrupt"]
    if corrupt:
        out += ["### Float corruptions the values detector cannot see, by corrupted bit", "",
                "| dtype | bit class | tried | values missed | output unchanged |", "|---|---|---:|---:|---:|"]
        by: dict = defaultdict(lambda: [0, 0, 0])
        for r in corrupt:
            cell = by[(r["dtype"], r["bit_class"])]
            cell[0] += 1
            cell[1] += not r["values"]["found"]
            cell[2] += not r["output"]["found"]
        for (dt, cls), (t, missed, same) in sorted(by.items()):
            out.append(f"| {dt} | {cls} | {t} | {missed} | {same} |")
        out.append("")
    return "\n".join(out)


def _table(title: str, table: dict, second: str, third: str) -> list[str]:
    head = f"| kind | {second} |" + (f" {third} |" if third else "")
    out = [f"### {title}", "", head + " tried | checksum | provenance | values | output changed | any detector |",
           "|---|---|" + ("---|" if third else "") + "---:|---:|---:|---:|---:|---:|"]
    for k in sorted(table, key=lambda k: (KINDS.index(k[0]), k[1], k[2])):
        c, t = table[k], table[k]["tried"]
        lead = f"| {k[0]} | {k[1]} |" + (f" {k[2]} |" if third else "") + f" {t} |"
        if k[0] == "stop":
            out.append(lead + f" — | — | — | — | watchdog {c['watchdog found']}/{c['watchdog located']} |")
            continue
        cells = [f"{c[f'{d} found']}/{c[f'{d} located']}" for d in ("checksum", "provenance", "values")]
        out.append(lead + " " + " | ".join(cells) + f" | {c['output found']} | {c['any found']}/{c['any located']} |")
    return out + [""]


def summary(rows) -> dict:
    ints = [r for r in rows if _is_int(r["dtype"])]

    def share(subset, test):
        return [sum(1 for r in subset if test(r)), len(subset)]
    msg = [r for r in ints if r["kind"] in MESSAGE_KINDS]
    stops = [r for r in rows if r["kind"] == "stop"]
    return {"trials": len(rows),
            "integer_any_found": share(msg, lambda r: any(r[d]["found"] for d in DETECTORS)),
            "integer_any_located": share(msg, lambda r: any(r[d]["located"] for d in DETECTORS)),
            "stop_located": share(stops, lambda r: r["located"])}
