"""The Markdown tables of docs/robustness.md from the JSON that ``mutmut_parts.py --json`` writes:

    python tests/mutation/mutmut_table.py benchmarks/results/mutmut/*.json

One row per part: of several results for one part the last wins, the files read in the order PART.json,
PART-r1.json, PART-r2.json, ... (a rerun's file after the run it reran, whatever order the shell gives them),
then one row per package: the parts whose files lie in that package, added up. Score = killed / all mutants (every
other outcome is a miss); the score without the reviewed equivalent mutants (tests/mutation/equivalent.py) is printed
beside it. Last, a sentence on how much of each package the parts mutate.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from equivalent import EQUIVALENT  # this directory: the reviewed equivalent mutants

__all__ = ["load", "tables", "coverage", "main"]

OUTCOMES = ("survived", "equivalent", "timeout", "no tests")


def load(paths: list[Path]) -> dict[str, dict]:
    """part -> its result; a later file's result of a part replaces an earlier one's. Survivors are classed as
    equivalent by the list as it is now (a result written before a mutant was reviewed counts it so too)."""
    parts: dict[str, dict] = {}
    for path in sorted(paths, key=_run_order):
        for result in json.loads(Path(path).read_text()):
            counts = dict(result["counts"])
            for entry in result["survivors"]:
                name, status = entry.split(" (", 1)
                if status == "survived)" and name in EQUIVALENT:
                    counts["survived"] -= 1
                    counts["equivalent"] = counts.get("equivalent", 0) + 1
            parts[result["part"]] = {**result, "counts": {k: v for k, v in counts.items() if v}}
    return parts


def _run_order(path) -> tuple[str, int]:
    """PART.json first, then PART-r1.json, PART-r2.json, ..."""
    m = re.fullmatch(r"(.*?)(?:-r(\d+))?", Path(path).stem)
    return m.group(1), int(m.group(2) or 0)


def _package(result: dict) -> str:
    packages = {f.split("/")[0] for f in result["files"]}
    if len(packages) != 1:
        raise ValueError(f"part {result['part']} mutates files of several packages: {sorted(packages)}")
    return packages.pop()


def _pct(num: int, den: int) -> str:
    return "n/a" if den == 0 else f"{100 * num / den:.1f} %"


def _row(name: str, files: str, counts: dict, killed: int, total: int) -> str:
    misses = [counts.get(k, 0) for k in OUTCOMES]
    other = total - killed - sum(misses)
    equivalent = counts.get("equivalent", 0)
    return (f"| {name} | {files} | {total:,} | {killed:,} | " + " | ".join(f"{m:,}" for m in misses)
            + f" | {other:,} | **{_pct(killed, total)}** | {_pct(killed, total - equivalent)} |")


def tables(parts: dict[str, dict]) -> str:
    head = ("| {0} | files | mutants | killed | survived | equivalent | timeout | no tests | other | score | "
            "without the equivalent |")
    rule = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    out = [head.format("part"), rule]
    by_package: dict[str, list[dict]] = {}
    for name, r in parts.items():
        total = r["killed"] + r["missed"]
        out.append(_row(f"`{name}`", ", ".join(f"`{f}`" for f in r["files"]), r["counts"], r["killed"], total))
        by_package.setdefault(_package(r), []).append(r)
    out += ["", head.format("package").replace("| files |", "| parts |"), rule]
    for package, results in sorted(by_package.items()):
        counts: dict[str, int] = {}
        for r in results:
            for k, v in r["counts"].items():
                counts[k] = counts.get(k, 0) + v
        killed = sum(r["killed"] for r in results)
        total = sum(r["killed"] + r["missed"] for r in results)
        out.append(_row(package, ", ".join(r["part"] for r in results), counts, killed, total))
    return "\n".join(out)


ROOT = Path(__file__).resolve().parents[2]


def coverage(parts: dict[str, dict], root: Path = ROOT) -> str:
    """One sentence: of each package's Python files (and their lines, docstrings included), how many the parts
    mutate, counted in the tree as it is now."""
    mutated = {f for r in parts.values() for f in r["files"]}
    said = []
    for package in sorted({_package(r) for r in parts.values()}):
        files = sorted((root / package).rglob("*.py"))
        lines = {f.relative_to(root).as_posix(): len(f.read_text().splitlines()) for f in files}
        ours = [f for f in lines if f in mutated]
        owner = package + ("'" if package.endswith("s") else "'s")
        said.append(f"{len(ours)} of {owner} {len(lines)} files ({sum(lines[f] for f in ours):,} of its "
                    f"{sum(lines.values()):,} lines)")
    return "The parts mutate " + ", ".join(said[:-1]) + " and " + said[-1] + "."


def main(argv: list[str] | None = None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: mutmut_table.py RESULT.json ...", file=sys.stderr)
        return 2
    parts = load(paths)
    print(tables(parts))
    print()
    print(coverage(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
