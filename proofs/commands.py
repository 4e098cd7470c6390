"""``ringemu prove [--id ID ...] [--json]``: check every claim of the lesson and print the table.

Exit status 0 when no claim failed (``not-checkable`` claims do not fail the report: they are listed with
their reason, never counted as passed), 1 when at least one claim failed; unknown IDs exit 2.
"""
from __future__ import annotations

import json

from .report import prove, render_table, summary, to_json

__all__ = ["register", "cmd_prove"]


def register(subparsers) -> None:
    """Add ``prove`` to the ``ringemu`` dispatcher."""
    p = subparsers.add_parser("prove", help="check every claim of the ZeRO lesson (exact and run)")
    p.add_argument("--id", dest="ids", action="extend", nargs="+", metavar="ID",
                   help="check only these claims (e.g. --id M2 C4, or --id M2 --id C4)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_prove)


def cmd_prove(args) -> int:
    results = prove(args.ids)
    if args.json:
        print(json.dumps(to_json(results), indent=2, ensure_ascii=False))
    else:
        print(render_table(results))
    return 1 if summary(results)["fail"] else 0
