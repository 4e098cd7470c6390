"""Regenerate docs/algorithms.md's tables from the registry: the catalog (every entry's summary, source and whether
it was proven against the running engine or modelled) and what each one sends and costs at N = 8 and N = 6.

``python benchmarks/algorithms_table.py`` rewrites the text between ``<!-- catalog -->`` / ``<!-- /catalog -->``
and ``<!-- costs -->`` / ``<!-- /costs -->``; ``--out -`` prints both instead. Nothing in them is typed in.
"""
from __future__ import annotations

import argparse
import re
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ringemu import algorithms as A  # noqa: E402
from ringemu.ledger import CommLedger  # noqa: E402
from ringemu.partition import layout_for  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "algorithms.md"
ALPHA, BANDWIDTH = Fraction(5, 10 ** 6), 50 * 10 ** 9  # 5 µs, 50 GB/s per link and direction
NUMEL = 1 << 20  # fp32 elements per rank: 4 MiB


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def catalog() -> str:
    rows = ["| algorithm | collective | what it does | source | engines, or whose description | checked |",
            "|---|---|---|---|---|---|"]
    for (collective, name), entry in A.REGISTRY.items():
        checked = ("modelled: " + entry.modelled) if entry.modelled else (
            "run against the engine (docs/engines.md)" if ":" in name else "textbook")
        rows.append(f"| `{name}` | {collective} | {_cell(entry.summary)} | {_cell(entry.source)} | "
                    f"{_cell(entry.engines)} | {_cell(checked)} |")
    return "\n".join(rows)


def _us(seconds: Fraction) -> str:
    return f"{float(seconds) * 1e6:.1f} µs"


def costs(n: int) -> str:
    rows = [f"N = {n}, S = 4 MiB of fp32 per rank; α-β time at α = 5 µs, 50 GB/s per link and direction", "",
            "| algorithm | collective | steps | transfers | max bytes sent by a rank | padding bytes | "
            "α-β time (ledger) | cost formula |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (collective, name), entry in A.REGISTRY.items():
        if entry.unsupported(n) is not None:
            continue
        schedule = A.build(collective, n, name, numel=NUMEL, itemsize=4)
        ledger = CommLedger()
        ledger.record(schedule, layout_for(schedule, NUMEL), "fp32", "x", size_only=True)
        padding = sum(t.sent.padding_bytes for t in ledger.per_rank())
        formula = A.cost(collective, name, n, 4 * NUMEL, ALPHA, Fraction(1, BANDWIDTH))
        rows.append(f"| `{name}` | {collective} | {schedule.n_steps} | {schedule.n_transfers:,} | "
                    f"{ledger.max_sent_bytes_per_rank():,} | {padding:,} | "
                    f"{_us(ledger.alpha_beta_time(BANDWIDTH, ALPHA))} | {_us(formula)} |")
    return "\n".join(rows)


def _replace(text: str, marker: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {marker} -->\n)(?:.*?\n)?(<!-- /{marker} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: markers <!-- {marker} --> ... <!-- /{marker} --> not found")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(DOC))
    args = p.parse_args(argv)
    tables = {"catalog": catalog(), "costs": costs(8) + "\n\n" + costs(6)}
    if args.out == "-":
        print("\n\n".join(tables.values()))
        return 0
    text = DOC.read_text(encoding="utf-8")
    for marker, body in tables.items():
        text = _replace(text, marker, body)
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
