"""``ringemu prove [--id ID ...] [--json]``: check every claim of the lesson and print the table.

Exit status 0 when no claim failed (``not-checkable`` claims do not fail the report: they are listed with
their reason, never counted as passed), 1 when at least one claim failed; unknown IDs exit 2.
"""
from __future__ import annotations

import argparse
import json

from ringemu.progress import progress_bar

from .catalog import select
from .report import prove, render_table, summary, to_json

__all__ = ["register", "cmd_prove"]


def register(subparsers) -> None:
    """Add ``prove`` to the ``ringemu`` dispatcher."""
    p = subparsers.add_parser("prove", help="check every claim of the ZeRO lesson (exact and run)")
    p.add_argument("--id", dest="ids", action="extend", nargs="+", metavar="ID",
                   help="check only these claims (e.g. --id M2 C4, or --id M2 --id C4)")
    p.add_argument("--json", action="store_true", help="print one JSON object on one line")
    p.add_argument("--indent", type=_indent, default=None, metavar="N",
                   help="with --json: indent nested levels by N spaces (one line without it)")
    p.set_defaults(handler=cmd_prove)


def _indent(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 16:
        raise argparse.ArgumentTypeError(f"must be a whole number of spaces from 0 to 16; got {text!r}")
    return value


def cmd_prove(args) -> int:
    if args.indent is not None and not args.json:
        raise ValueError("--indent applies to --json output only")
    with progress_bar(len(select(args.ids)), "prove", enabled=not args.json) as bar:
        results = prove(args.ids, bar=bar)
    if args.json:
        print(json.dumps(to_json(results), indent=args.indent, ensure_ascii=False))
    else:
        print(render_table(results))
    return 1 if summary(results)["fail"] else 0
