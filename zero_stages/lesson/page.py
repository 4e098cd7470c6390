"""``ringemu lesson``: the lesson's three in-page experiments as one offline HTML page driven by real runs.

1. memory bars and 2. the formula: :func:`~zero_stages.lesson.memory_grid.memory_panel` (size-only stage runs for
   every N in 1 … 1,024, every preset and activation setting);
3. the ring stepper: every all-reduce algorithm of the catalog (``ringemu.algorithms.names``) traced on
   fixed-seed integer blocks with its CommLedger (:mod:`ringemu.views.stepper`), then the ZeRO communication
   strip: each stage's collectives per step, read from the CommLedger of a size-only run (the anchor's Ψ on the
   stepper's N), with the ratio to DP;
then the algorithm trade-off (:mod:`~zero_stages.lesson.tradeoff`, ``compare --sweep`` on the lesson's cluster)
and the exercises (:mod:`~zero_stages.lesson.exercises`), whose answers are read from the same runs. The page's
N is one N: the lesson's 8 unless ``--ranks`` says otherwise, for the memory panel's first view, the stepper and
the strip alike; every algorithm of the stepper runs on the same input.

The page itself is :func:`ringemu.views.page_html`; this module only gathers the runs.
"""
from __future__ import annotations

import time
from pathlib import Path

from ringemu.algorithms import algorithm, build, names
from ringemu.checks import check_int
from ringemu.progress import progress_bar
from ringemu.units import format_gb
from ringemu.views import page_html
from ringemu.views.html import provenance_palette
from ringemu.views.labels import LANGS
from ringemu.trace import trace_algorithm
from ringemu.views.stepper import stepper_data

from ..memory.anchor import ANCHOR_PSI, ANCHOR_RANKS
from ..api import run_size_only
from ..memory.closed_forms import STAGES
from .exercises import exercises
from .memory_grid import PRESETS, RANKS_GRID, STAGE_LABELS, memory_panel
from .tradeoff import tradeoff_panel
from ..report import OVERFLOW_LABEL, traffic_ratio

__all__ = ["register", "lesson_command", "lesson_data", "stepper_panel", "comm_panel", "STEPPER_COLLECTIVE",
           "MAX_STEPPER_RANKS"]

STEPPER_COLLECTIVE = "all-reduce"  # reduce-scatter then all-gather: both phases of the lesson's third experiment
MAX_STEPPER_RANKS = 16  # a ranks × chunks grid wider than this is not readable (ringemu.trace.MAX_RANKS)


def stepper_panel(n_ranks: int, seed: int = 0, default: str | None = None) -> dict:
    """Every catalog algorithm of all-reduce that runs on ``n_ranks`` ranks, traced on the same N fixed-seed
    integer blocks (S = the most chunks any of them cuts a buffer into, so every chunk holds a value), with its
    ledger; ``default`` is shown first."""
    runnable = [a for a in names(STEPPER_COLLECTIVE) if algorithm(STEPPER_COLLECTIVE, a).unsupported(n_ranks) is None]
    default = default or runnable[0]
    if default not in names(STEPPER_COLLECTIVE):
        raise ValueError(f"algorithm must be one of {', '.join(names(STEPPER_COLLECTIVE))}; got {default!r}")
    if default not in runnable:
        raise ValueError(f"algorithm {default!r} does not run on {n_ranks} ranks: "
                         f"{algorithm(STEPPER_COLLECTIVE, default).unsupported(n_ranks)}")
    numel = max(max(n_ranks, build(STEPPER_COLLECTIVE, n_ranks, a).n_chunks) for a in runnable
                if not algorithm(STEPPER_COLLECTIVE, a).sized)  # engine orders are cut for this numel
    out = {}
    for name in [default] + [a for a in runnable if a != default]:
        trace, ledger, inputs = trace_algorithm(STEPPER_COLLECTIVE, name, n_ranks, numel=numel, seed=seed)
        out[name] = stepper_data(trace, ledger, collective=STEPPER_COLLECTIVE, algorithm_name=name, inputs=inputs)
    return {"default": default, "algorithms": out, "palette": provenance_palette(n_ranks), "seed": seed,
            "numel": numel}


def _kind(label: str) -> str:
    return "rs" if "reduce_scatter" in label else "ag" if "all_gather" in label else "ar"


def comm_panel(n_ranks: int, psi: int = ANCHOR_PSI) -> dict:
    """Each stage's collectives in one step (bytes the busiest rank sends, per label, from the CommLedger of a
    size-only run) and the exact ratio to DP (ZeRO §7: 1 for ZeRO-1/2, 3/2 for ZeRO-3 on a ring)."""
    reports = {s: run_size_only(s, n_ranks, psi=psi) for s in STAGES}
    dp = reports["dp"]
    stages = []
    for s, rep in reports.items():
        phases = []
        for label, t in rep.traffic_by_label.items():
            if label == OVERFLOW_LABEL:
                continue
            sent = max(t["sent_bytes_per_rank"])
            phases.append({"label": label, "kind": _kind(label), "bytes": sent, "gb": format_gb(sent),
                           "then_update": s in ("zero1", "zero2") and _kind(label) == "rs"})
        total = max(rep.traffic_sent_bytes_per_rank)
        stages.append({"id": s, "label": STAGE_LABELS[s], "phases": phases, "total_bytes": total,
                       "total_gb": format_gb(total), "ratio_to_dp": traffic_ratio(rep, dp) or "n/a"})
    return {"n_ranks": n_ranks, "psi": psi, "stages": stages,
            "note": {"en": f"Ψ = {psi:,} on N = {n_ranks} ranks, one step, bytes each rank sends (size-only runs of "
                           "the stage code; DP's all-reduce is a reduce-scatter followed by an all-gather).",
                     "zh": f"Ψ = {psi:,}，N = {n_ranks} 张卡，一步，每卡发送的字节（分级代码的只计尺寸运行；数据并行的 "
                           "all-reduce 就是 reduce-scatter 加 all-gather）。"}}


def lesson_data(n_ranks: int = ANCHOR_RANKS, seed: int = 0, algorithm_name: str | None = None, ranks_grid=None,
                presets=PRESETS, memory: dict | None = None, progress: bool = False) -> dict:
    """All the page's data: memory grid (``ranks_grid``, default :data:`RANKS_GRID`; or ``memory``, a
    :func:`memory_panel` already made), stepper, communication strip, trade-off and exercises, every value from
    a run. The memory panel opens at ``n_ranks`` where its grid has it. ``progress``: a bar on a terminal's
    stderr (:mod:`ringemu.progress`)."""
    ranks_grid = RANKS_GRID if ranks_grid is None else ranks_grid
    check_int(n_ranks, "n_ranks", minimum=2, maximum=MAX_STEPPER_RANKS)  # the stepper's grid stays readable
    check_int(seed, "seed", minimum=0)
    with progress_bar(5, "lesson (memory grid, stepper, strip, trade-off, exercises)", enabled=progress) as bar:
        stepper = stepper_panel(n_ranks, seed, algorithm_name)  # checks the algorithm before the longer runs
        bar.update()
        memory = memory_panel(ranks_grid, presets) if memory is None else memory
        bar.update()
        comm = comm_panel(n_ranks)
        bar.update()
        tradeoff = tradeoff_panel(ANCHOR_PSI)
        bar.update()
        questions = exercises(memory, stepper, comm)
        bar.update()
    start_n = n_ranks if n_ranks in memory["ranks"] else None
    return {"memory": dict(memory, start_n=start_n), "stepper": stepper, "comm": comm, "tradeoff": tradeoff,
            "exercises": questions}


def register(subparsers) -> None:
    from ..cli.arguments import integer
    p = subparsers.add_parser("lesson", help="write the lesson's three experiments as one offline HTML page")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--lang", choices=LANGS, default="en", help="labels in English or Chinese (a button switches)")
    p.add_argument("--ranks", type=integer(2, MAX_STEPPER_RANKS), default=ANCHOR_RANKS,
                   help=f"the page's N: memory bars, ring stepper and strip (2 to {MAX_STEPPER_RANKS}; default "
                        f"{ANCHOR_RANKS}, the lesson's)")
    p.add_argument("--seed", type=integer(0), default=0, help="seed of the stepper's integer blocks")
    p.add_argument("--algorithm", choices=names(STEPPER_COLLECTIVE), default=None,
                   help="the all-reduce algorithm the stepper shows first (all runnable ones are in the page)")
    p.set_defaults(handler=lesson_command)


def lesson_command(args) -> int:
    start = time.perf_counter()
    page = page_html(lesson_data(args.ranks, args.seed, args.algorithm, progress=True), args.lang)
    path = Path(args.output)
    path.write_text(page, encoding="utf-8")
    print(f"wrote {path} ({len(page.encode('utf-8')):,} bytes) in {time.perf_counter() - start:.1f} s; open it in "
          f"a browser (file://{path.resolve()}), no server or network needed")
    return 0
