"""``ringemu faults``: random faults injected into every algorithm and mode, and how often each detector finds and
locates them (the trials and their tables live in :mod:`ringemu.faults.plan.report`)."""
from __future__ import annotations

import json

from ..algorithms import REGISTRY
from ..faults.report import markdown, run_trials, summary
from ..progress import progress_bar

__all__ = ["register", "cmd_faults", "summary_table"]

_ROWS = (("integer_any_found", "integer-block message faults found by some detector"),
         ("integer_any_located", "integer-block message faults located to their step and link"),
         ("stop_located", "stopped ranks named by the watchdog"))


def register(subparsers) -> None:
    p = subparsers.add_parser("faults", help="inject random faults into every algorithm and mode; count detection")
    p.add_argument("--trials", type=int, default=6, help="faults drawn per (algorithm, N, dtype, kind); default 6")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    p.add_argument("--markdown", action="store_true", help="print the Markdown tables of docs/faults.md (default: a "
                                                           "short summary table)")
    p.add_argument("--json", action="store_true", help="print every trial as JSON")
    p.set_defaults(handler=cmd_faults)


def cmd_faults(args) -> int:
    if args.trials < 1 or args.trials > 1000:
        raise ValueError(f"--trials must be an integer in [1, 1000]; got {args.trials}")
    if args.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0; got {args.seed}")
    with progress_bar(len(REGISTRY), "faults (collective × algorithm)", enabled=not args.json) as bar:
        rows = run_trials(args.trials, args.seed, bar=bar)
    totals = summary(rows)
    if args.json:
        print(json.dumps({"summary": totals, "trials": rows}))
    else:
        print(markdown(rows) if args.markdown else summary_table(totals, args.trials, args.seed))
    ok = totals["integer_any_located"][0] == totals["integer_any_located"][1] and \
        totals["stop_located"][0] == totals["stop_located"][1]
    return 0 if ok else 1


def summary_table(summary: dict, trials: int, seed: int) -> str:
    """The default output: what was injected and, per verdict, how many of how many, as an aligned table (counts
    are the trials' own; the share is rounded only here)."""
    lines = [f"{summary['trials']:,} fault trials ({trials} per collective, algorithm, N, dtype and kind; seed {seed})",
             f"{'verdict':<64} {'count':>15} {'share':>8}"]
    for key, text in _ROWS:
        hit, total = summary[key]
        share = f"{100 * hit / total:.1f} %" if total else "—"
        lines.append(f"{text:<64} {f'{hit:,} / {total:,}':>15} {share:>8}")
    lines.append("every trial and detector: --markdown (the tables of docs/faults.md) or --json")
    return "\n".join(lines)
