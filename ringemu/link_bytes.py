"""Bytes per link class per rank: what each rank sends over NVLink (inside its node) and InfiniBand (across
nodes), read from a CommLedger's schedules on a :class:`~ringemu.topology.Topology`, plus the PCIe bytes a rank
copies between its GPU and its host (:class:`HostLink`, filled by stage code that offloads).

:func:`sent_per_class` walks each recorded schedule's transfer table once: a transfer from rank s to rank d
carries one chunk of ``layout.chunk_size × itemsize`` bytes (padding included, as the ledger counts it) over the
class of the link s → d; per rank, the classes add up to the bytes the ledger says the rank sent. Counts are
Python ints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .checks import check_int, check_n_ranks
from .ledger import CommLedger
from .topology import PCIE, Topology

__all__ = ["INTRA", "INTER", "PCIE_CLASS", "LINK_CLASS_KEYS", "sent_per_class", "HostLink"]

INTRA, INTER, PCIE_CLASS = "intra_node", "inter_node", "pcie"
LINK_CLASS_KEYS = (INTRA, INTER, PCIE_CLASS)  # the keys of every per-rank report (JSON: --json carries them)


def sent_per_class(ledger: CommLedger, topology: Topology, label=None) -> list[dict[str, int]]:
    """Per rank: ``{"intra_node": B, "inter_node": B}`` sent over the selected records (labels as
    :meth:`CommLedger.select`). A world with one node has no inter-node bytes; one rank per node, no intra."""
    if not isinstance(ledger, CommLedger):
        raise TypeError(f"ledger must be a CommLedger; got {type(ledger).__name__}")
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a Topology; got {type(topology).__name__}")
    n, k = topology.n_ranks, topology.ranks_per_node
    if ledger.records and ledger.n_ranks != n:
        raise ValueError(f"topology has {n} ranks but the ledger counts {ledger.n_ranks}")
    intra, inter = np.zeros(n, dtype=object), np.zeros(n, dtype=object)
    per_schedule: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(schedule) -> transfers per src, per class
    for rec in ledger.select(label):
        sched = rec.schedule
        counts = per_schedule.get(id(sched))
        if counts is None:
            src, dst = sched.table[:, 1], sched.table[:, 2]
            cross = (src // k) != (dst // k)
            counts = (np.bincount(src[~cross], minlength=n), np.bincount(src[cross], minlength=n))
            per_schedule[id(sched)] = counts
        chunk_bytes = int(rec.layout.chunk_size) * int(rec.itemsize)
        intra += counts[0].astype(object) * chunk_bytes
        inter += counts[1].astype(object) * chunk_bytes
    return [{INTRA: int(a), INTER: int(b)} for a, b in zip(intra, inter)]


@dataclass
class HostLink:
    """Bytes each of ``n_ranks`` ranks copies over its PCIe link (class :data:`ringemu.topology.PCIE`), by
    direction (``"down"``: GPU to host, ``"up"``: host to GPU) and label. Passed in like a ledger; no global state."""

    n_ranks: int
    records: list = field(default_factory=list)  # (rank, label, direction, bytes)

    def __post_init__(self) -> None:
        self.n_ranks = check_n_ranks(self.n_ranks)

    def copy(self, rank: int, label: str, direction: str, nbytes: int) -> None:
        """Record one copy of ``nbytes`` bytes by ``rank``."""
        if direction not in ("down", "up"):
            raise ValueError(f"direction must be 'down' (GPU to host) or 'up' (host to GPU); got {direction!r}")
        check_int(rank, "rank", minimum=0, maximum=self.n_ranks - 1)
        self.records.append((rank, label, direction, check_int(nbytes, "nbytes", minimum=0)))

    def per_rank(self, direction: str | None = None) -> list[int]:
        """Bytes per rank, in one direction or both."""
        out = [0] * self.n_ranks
        for rank, _, d, nbytes in self.records:
            if direction is None or d == direction:
                out[rank] += nbytes
        return out

    def seconds(self, rank: int, link=PCIE) -> Fraction:
        """Rank ``rank``'s copies on ``link`` (default PCIe 4.0 ×16), one after another (exact)."""
        return sum((link.seconds(b) for r, _, _, b in self.records if r == rank), start=Fraction(0))
