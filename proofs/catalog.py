"""The catalog: every claim of the lesson (claims.md's IDs), then lesson statements outside claims.md."""
from __future__ import annotations

from .claim import Claim
from .claims_beyond import BEYOND_CLAIMS
from .claims_comm import COMM_CLAIMS
from .claims_map import EXTRA_CLAIMS, MAP_CLAIMS
from .claims_memory import MEMORY_CLAIMS

__all__ = ["CATALOG", "CLAIMS", "EXTRAS", "select"]

CLAIMS: tuple[Claim, ...] = MEMORY_CLAIMS + COMM_CLAIMS + MAP_CLAIMS  # exactly claims.md's IDs
EXTRAS: tuple[Claim, ...] = EXTRA_CLAIMS + BEYOND_CLAIMS              # X1…, XB1…: outside claims.md
CATALOG: tuple[Claim, ...] = CLAIMS + EXTRAS


def select(ids=None, catalog: tuple[Claim, ...] = CATALOG) -> tuple[Claim, ...]:
    """The claims with these IDs (case-insensitive), in catalog order; all for None."""
    if not ids:
        return catalog
    known = {c.id: c for c in catalog}
    wanted = [i.upper() for i in ids]
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise ValueError(f"--id must be claim IDs of the catalog ({', '.join(known)}); got {', '.join(unknown)}")
    return tuple(c for c in catalog if c.id in set(wanted))
