"""Write the performance figures of README.md, docs/performance.md and docs/torch.md from recorded runs.

Each document holds its generated block between markers; everything between them is replaced, nothing else:

* README.md, ``<!-- perf:begin -->`` … ``<!-- perf:end -->``: the floor, the collectives beside their peers and
  the targets (:func:`report.readme_table`, :func:`report.targets`) of a ``benchmarks/run.py --json`` run;
* docs/performance.md, ``<!-- perf-report:begin -->`` … ``<!-- perf-report:end -->``: every table of that run
  (``python benchmarks/report.py FILE``);
* docs/torch.md, ``<!-- speed:begin -->`` … ``<!-- speed:end -->``: the torch backend beside torch's threaded
  group (:func:`torch_backend.markdown` of a ``benchmarks/torch_backend.py --json`` run).

Usage::

    python benchmarks/write_docs.py --run benchmarks/results/n8-s24.json --torch benchmarks/results/torch-backend.json
    python benchmarks/write_docs.py ... --check     # exit 1 if a document differs from what the runs give
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402


def _replace(text: str, name: str, block: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"write_docs: markers {begin} … {end} are missing")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block.rstrip()}\n{end}{tail}"


def _full_report(path: Path) -> str:
    saved = sys.argv
    out = io.StringIO()
    try:
        sys.argv = ["report.py", str(path)]
        with contextlib.redirect_stdout(out):
            report.main()
    finally:
        sys.argv = saved
    return out.getvalue()


def blocks(run: Path | None, torch_run: Path | None) -> dict[tuple[str, str], str]:
    """(document, marker name) -> the generated block, for the runs given."""
    out = {}
    if run is not None:
        d = json.loads(run.read_text())
        rel = run.resolve().relative_to(ROOT)
        load = d["machine"]["load_average_start"][0], d["machine"]["load_average_end"][0]
        head = (f"From `{rel}` (`{d.get('command', 'benchmarks/run.py')}`; load average {load[0]:.1f} at the start, "
                f"{load[1]:.1f} at the end):\n\n")
        out[("README.md", "perf")] = head + "\n".join(report.readme_table(d) + [""] + report.targets(d))
        out[("docs/performance.md", "perf-report")] = head + _full_report(run)
    if torch_run is not None:
        import torch_backend  # imports torch

        t = json.loads(torch_run.read_text())
        rel = torch_run.resolve().relative_to(ROOT)
        out[("docs/torch.md", "speed")] = f"From `{rel}` (`python benchmarks/torch_backend.py --json {rel}`):\n\n" \
            + torch_backend.markdown(t)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, help="a benchmarks/run.py --json file")
    p.add_argument("--torch", type=Path, help="a benchmarks/torch_backend.py --json file")
    p.add_argument("--check", action="store_true", help="exit 1 if a document differs instead of writing it")
    args = p.parse_args(argv)
    differ = []
    for (doc, name), block in blocks(args.run, args.torch).items():
        path = ROOT / doc
        text = path.read_text(encoding="utf-8")
        new = _replace(text, name, block)
        if new != text:
            differ.append(doc)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and differ:
        print(f"write_docs: {', '.join(differ)} differ from the recorded runs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
