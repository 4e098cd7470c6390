"""Regenerate docs/zero.md's table of the four stages on every all-reduce algorithm of the registry: parity with
DP and the bytes the busiest rank sends, with ZeRO-3's traffic ratio to DP per rank (the range over ranks where
they differ: a tree's ranks send unequal shares).

Each row is ``zero_stages.train`` on 8 emulated ranks (the default MLP, 3 steps, bf16), the same run as
``ringemu zero --stage all --ranks 8 --algorithm A``. ``python benchmarks/zero_algorithms_table.py`` rewrites the
text between ``<!-- zero-algorithms -->`` and ``<!-- /zero-algorithms -->``; ``--out -`` prints it.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ringemu.worlds.base import communicator_algorithms  # noqa: E402
from zero_stages import parity_with_dp, train  # noqa: E402
from zero_stages.report import traffic_ratio  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "zero.md"
N_RANKS, STEPS = 8, 3


def table() -> str:
    rows = ["| algorithm | parity with DP (4 stages) | DP B/rank | ZeRO-1 | ZeRO-2 | ZeRO-3 | ZeRO-3 / DP |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for name in communicator_algorithms():
        reports = {stage: train(stage, N_RANKS, STEPS, algorithm=name) for stage in ("dp", "zero1", "zero2",
                                                                                      "zero3")}
        dp = reports["dp"]
        parity = all(parity_with_dp(r, dp) for s, r in reports.items() if s != "dp")
        busiest = {s: max(r.traffic_sent_bytes_per_rank) for s, r in reports.items()}
        rows.append(f"| `{name}` | {'yes' if parity else 'NO'} | {busiest['dp']:,} | {busiest['zero1']:,} | "
                    f"{busiest['zero2']:,} | {busiest['zero3']:,} | {traffic_ratio(reports['zero3'], dp)} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(DOC))
    args = p.parse_args(argv)
    body = table()
    if args.out == "-":
        print(body)
        return 0
    text = DOC.read_text(encoding="utf-8")
    pattern = re.compile(r"(<!-- zero-algorithms -->\n)(?:.*?\n)?(<!-- /zero-algorithms -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: markers <!-- zero-algorithms --> ... <!-- /zero-algorithms --> not found")
    Path(args.out).write_text(pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
