"""Write the torch backend's support tables (calls, dtypes, reduce ops) into docs/torch.md, between the
``<!-- surface:begin -->`` and ``<!-- surface:end -->`` markers, from the backend's own tables
(:func:`ringemu.torch.surface.markdown`). ``--check`` exits 1 if the file differs instead of writing it.

Usage: ``python benchmarks/torch_surface_table.py [--check] [--doc docs/torch.md]``
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringemu.torch.surface import markdown  # noqa: E402

BEGIN, END = "<!-- surface:begin -->", "<!-- surface:end -->"


def rendered(text: str) -> str:
    """``text`` with the block between the markers replaced by the tables."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{markdown()}{END}{tail}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", default=str(ROOT / "docs" / "torch.md"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    path = Path(args.doc)
    text = path.read_text()
    new = rendered(text)
    if args.check:
        return 0 if new == text else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
