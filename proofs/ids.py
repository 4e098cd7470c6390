"""The claim IDs of ``claims.md``, pinned in the package, and a reader of ``claims.md`` itself.

The catalog must hold exactly these IDs (plus statements outside claims.md, prefixed ``X``); the tests compare
both the pinned list and the live ``claims.md`` (``../shared/claims.md`` from the repository root) with it, so
the report does not depend on that path at run time.
"""
from __future__ import annotations

import re
from pathlib import Path

__all__ = ["CLAIM_IDS", "EXTRA_PREFIX", "read_claim_ids", "claims_md_path"]

CLAIM_IDS = tuple([f"M{i}" for i in range(1, 12)] + [f"C{i}" for i in range(1, 8)] +
                  [f"E{i}" for i in range(1, 8)])
EXTRA_PREFIX = "X"  # lesson statements that claims.md does not list

_ROW = re.compile(r"^\|\s*([A-Z]\d+)\s*\|", re.MULTILINE)


def claims_md_path() -> Path:
    """Where the shared claims.md lives: ``../shared/claims.md`` relative to the repository root."""
    return Path(__file__).resolve().parents[1].parent / "shared" / "claims.md"


def read_claim_ids(text: str) -> list[str]:
    """The IDs of the table rows of a claims.md text, in order (``| M1 | ... |``)."""
    return _ROW.findall(text)
