"""``ringemu identify DUMP.npz``: which registry orders reproduce an engine's captured outputs bit for bit
(:mod:`ringemu.identify`; the dump format and a capture script are in docs/engines.md)."""
from __future__ import annotations

import json

from ..identify import identify_dump

__all__ = ["register", "cmd_identify"]


def register(subparsers) -> None:
    p = subparsers.add_parser("identify", help="name the registry orders that reproduce an engine's captured "
                                               "inputs and outputs, bit for bit")
    p.add_argument("dump", help=".npz with collective, inputs, outputs (docs/engines.md)")
    p.add_argument("--algorithm", action="append", default=None, metavar="NAME",
                   help="try only this order (repeatable; default every order of the registry)")
    p.add_argument("--json", action="store_true", help="print one JSON object on one line")
    p.set_defaults(handler=cmd_identify)


def cmd_identify(args) -> int:
    found = identify_dump(args.dump, args.algorithm)
    if args.json:
        nearest = None if found.nearest is None else found.nearest.__dict__
        print(json.dumps({"collective": found.collective, "n_ranks": found.n_ranks, "numel": found.numel,
                          "dtype": found.dtype, "matches": list(found.matches), "nearest": nearest,
                          "refused": [list(r) for r in found.refused]}))
    else:
        print(found.text())
    return 0 if found.matches else 1
