"""``ringemu faults``: random faults injected into every algorithm and mode, and how often each detector finds and
locates them (the trials and their tables live in :mod:`ringemu.faults.plan.report`)."""
from __future__ import annotations

import json

from ..faults.report import markdown, run_trials, summary

__all__ = ["register", "cmd_faults"]


def register(subparsers) -> None:
    p = subparsers.add_parser("faults", help="inject random faults into every algorithm and mode; count detection")
    p.add_argument("--trials", type=int, default=6, help="faults drawn per (algorithm, N, dtype, kind); default 6")
    p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    p.add_argument("--markdown", action="store_true", help="print the Markdown tables of docs/faults.md")
    p.add_argument("--json", action="store_true", help="print every trial as JSON")
    p.set_defaults(handler=cmd_faults)


def cmd_faults(args) -> int:
    if args.trials < 1 or args.trials > 1000:
        raise ValueError(f"--trials must be an integer in [1, 1000]; got {args.trials}")
    if args.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0; got {args.seed}")
    rows = run_trials(args.trials, args.seed)
    summary = summary(rows)
    if args.json:
        print(json.dumps({"summary": summary, "trials": rows}))
    else:
        print(markdown(rows) if args.markdown else "\n".join(f"{k}: {v}" for k, v in summary.items()))
    ok = summary["integer_any_located"][0] == summary["integer_any_located"][1] and \
        summary["stop_located"][0] == summary["stop_located"][1]
    return 0 if ok else 1
