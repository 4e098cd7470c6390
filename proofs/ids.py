"""The claim IDs of ``claims.md``, pinned in the package, and a reader of ``claims.md`` itself.

The catalog must hold exactly these IDs (plus statements outside claims.md, prefixed ``X``). ``claims.md`` ships
inside the package (``proofs/claims.md``, package data); the tests compare the catalog's IDs with the IDs of
that copy, so nothing outside the repository is read.
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
    """The claims list shipped with the package: ``proofs/claims.md``."""
    return Path(__file__).resolve().with_name("claims.md")


def read_claim_ids(text: str) -> list[str]:
    """The IDs of the table rows of a claims.md text, in order (``| M1 | ... |``)."""
    return _ROW.findall(text)
