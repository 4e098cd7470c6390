"""Fuzz every public entry point and every CLI subcommand with malformed input and print the summary table of
docs/robustness.md (inputs tried per entry point, how each was answered). Exit status 1 if any input was not
answered cleanly (harness and outcome rules: tests/fuzzing.py).

Usage: ``python benchmarks/fuzz_summary.py [--examples K] [--seed S] [--out FILE.md]``
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings  # noqa: E402

from fuzzing import (SUBCOMMANDS, call_cli, call_library, cli_examples, is_bad, library_entry_points,  # noqa: E402
                     library_examples)


def _run(strategy, call, examples: int, seed: int) -> tuple[collections.Counter, list[str], float]:
    outcomes: collections.Counter = collections.Counter()
    bad: list[str] = []
    slowest = [0.0]

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def drive(example):
        start = time.perf_counter()
        outcome = call(example)
        slowest[0] = max(slowest[0], time.perf_counter() - start)
        outcomes["BAD" if is_bad(outcome) else outcome] += 1
        if is_bad(outcome):
            bad.append(f"{example!r}: {outcome}")

    drive()
    return outcomes, bad, slowest[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="hypothesis examples per entry point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    rows, all_bad = [], []
    for point in library_entry_points():
        counts, bad, slowest = _run(library_examples(point), lambda ex, p=point: call_library(p, *ex),
                                    args.examples, args.seed)
        rows.append((f"`{point.name}`", counts, slowest))
        all_bad += [f"{point.name}: {b}" for b in bad]
    for command in SUBCOMMANDS:
        counts, bad, slowest = _run(cli_examples(command), call_cli, args.examples, args.seed)
        rows.append((f"`ringemu {command}`", counts, slowest))
        all_bad += [f"ringemu {command}: {b}" for b in bad]
    lines = [f"{args.examples} hypothesis examples per entry point (seed {args.seed}); distinct inputs may be "
             "fewer when the strategy's space is small.", "",
             "| entry point | inputs tried | refused cleanly | accepted and ran | not clean | slowest (s) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, c, slowest in rows:
        lines.append(f"| {name} | {sum(c.values())} | {c['refused']} | {c['ran']} | {c['BAD']} | {slowest:.2f} |")
    total = collections.Counter()
    for _, c, _ in rows:
        total.update(c)
    lines.append(f"| **all** | {sum(total.values())} | {total['refused']} | {total['ran']} | {total['BAD']} | |")
    text = "\n".join(lines)
    print(text)
    for b in all_bad:
        print("NOT CLEAN:", b, file=sys.stderr)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 1 if all_bad else 0


if __name__ == "__main__":
    sys.exit(main())
