"""A ledger for your own communicator: :class:`SendLog` counts what it sends per link, per step and per label, in
the same :class:`~ringemu.ledger_counts.Traffic` rows as ringemu's :class:`~ringemu.ledger.CommLedger`.

Call ``log.send(src, dst, data, label=..., step=...)`` where your code puts ``data`` (a numpy array) on the wire
from rank ``src`` to rank ``dst`` (the adapters of :mod:`ringemu.testing.adapters` do it for you on their links).
``step`` defaults to the number of sends ``src`` already made under that label (one send per step, as in a ring).
:meth:`SendLog.differences` compares it with a CommLedger row by row (per rank, per link, per (label, step)),
counting the ledger's payload only (``count="payload"``, what an engine that never pads sends) or its padded
chunks (``"padded"``); :meth:`SendLog.assert_matches` raises with every row that differs. Thread-safe.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from ..ledger import CommLedger, RankTraffic
from ..ledger_counts import Traffic
from .local_registry import COUNTS

__all__ = ["Send", "SendLog"]


@dataclass(frozen=True)
class Send:
    """One message: ``elements`` of ``bytes`` from ``src`` to ``dst`` at ``step`` of the call ``label``."""

    label: str
    step: int
    src: int
    dst: int
    elements: int
    bytes: int


class SendLog:
    """Every message your communicator sends (module doc)."""

    def __init__(self, n_ranks: int | None = None):
        self.n_ranks = n_ranks
        self.sends: list[Send] = []
        self._lock = threading.Lock()
        self._steps: dict[tuple[str, int], int] = {}

    def send(self, src: int, dst: int, data, *, label: str = "", step: int | None = None) -> None:
        array = np.asarray(data)
        with self._lock:
            if step is None:
                step = self._steps.get((label, src), 0)
            self._steps[(label, src)] = step + 1
            self.sends.append(Send(label, int(step), int(src), int(dst), int(array.size), int(array.nbytes)))

    def sent_bytes(self, rank: int) -> int:
        """Bytes ``rank`` has sent so far (what a communicator's ``bytes_sent()`` returns)."""
        with self._lock:
            return sum(s.bytes for s in self.sends if s.src == rank)

    def _select(self, label) -> list[Send]:
        with self._lock:
            sends = list(self.sends)
        if label is None:
            return sends
        wanted = {label} if isinstance(label, str) else set(label)
        return [s for s in sends if s.label in wanted]

    def per_rank(self, label=None, n_ranks: int | None = None) -> list[RankTraffic]:
        sends = self._select(label)
        n = n_ranks or self.n_ranks or 1 + max((max(s.src, s.dst) for s in sends), default=-1)
        sent, received = [Traffic()] * n, [Traffic()] * n
        for s in sends:
            t = Traffic(1, s.elements, s.bytes)
            sent[s.src] = sent[s.src] + t
            received[s.dst] = received[s.dst] + t
        return [RankTraffic(r, sent[r], received[r]) for r in range(n)]

    def per_link(self, label=None) -> dict[tuple[int, int], Traffic]:
        out: dict[tuple[int, int], Traffic] = {}
        for s in self._select(label):
            out[(s.src, s.dst)] = out.get((s.src, s.dst), Traffic()) + Traffic(1, s.elements, s.bytes)
        return dict(sorted(out.items()))

    def per_step(self, label=None) -> dict[tuple[str, int], Traffic]:
        out: dict[tuple[str, int], Traffic] = {}
        for s in self._select(label):
            out[(s.label, s.step)] = out.get((s.label, s.step), Traffic()) + Traffic(1, s.elements, s.bytes)
        return out

    def differences(self, ledger: CommLedger, *, count: str = "payload", label=None) -> list[str]:
        """Every row where this log and ``ledger`` differ: per rank (sent), per link, per (label, step); each
        reads "yours: ... ; ringemu's ledger: ...". Messages are compared too, except for ledger chunks that are
        all padding under ``count="payload"`` (an engine that never pads sends nothing there)."""
        if not isinstance(ledger, CommLedger):
            raise TypeError(f"ledger must be a CommLedger; got {type(ledger).__name__}")
        if count not in COUNTS:
            raise ValueError(f"count must be one of {', '.join(map(repr, COUNTS))}; got {count!r}")
        rows = []
        theirs_rank = [_counted(t.sent, count) for t in ledger.per_rank(label)]
        mine_rank = [t.sent for t in self.per_rank(label, n_ranks=max(ledger.n_ranks, self.n_ranks or 0))]
        for r, (m, t) in enumerate(zip(mine_rank, theirs_rank)):
            rows += _differ(f"rank {r} sent", m, t)
        theirs_link = {k: _counted(v, count) for k, v in ledger.per_link(label).items()}
        mine_link = self.per_link(label)
        for link in sorted(set(theirs_link) | set(mine_link)):
            rows += _differ(f"link {link[0]}->{link[1]}", mine_link.get(link, Traffic()),
                            theirs_link.get(link, Traffic()))
        theirs_step: dict[tuple[str, int], Traffic] = {}
        for lab, step, t in ledger.per_step(label):
            theirs_step[(lab, step)] = theirs_step.get((lab, step), Traffic()) + _counted(t, count)
        mine_step = self.per_step(label)
        for key in sorted(set(theirs_step) | set(mine_step)):
            rows += _differ(f"label {key[0]!r} step {key[1]}", mine_step.get(key, Traffic()),
                            theirs_step.get(key, Traffic()))
        return rows

    def assert_matches(self, ledger: CommLedger, *, count: str = "payload", label=None) -> None:
        rows = self.differences(ledger, count=count, label=label)
        if rows:
            raise AssertionError(f"{len(rows)} rows differ between your sends and ringemu's ledger "
                                 f"({count} bytes):\n" + "\n".join("  " + r for r in rows))


def _counted(t: Traffic, count: str) -> Traffic:
    """A ledger row as an engine that never pads would send it (``payload``), or as counted (``padded``); under
    payload, the messages are not compared (a chunk all of padding is still a message in the ledger)."""
    if count == "padded":
        return t
    return Traffic(-1, t.elements - t.padding_elements, t.bytes - t.padding_bytes)


def _differ(where: str, mine: Traffic, theirs: Traffic) -> list[str]:
    same = mine.elements == theirs.elements and mine.bytes == theirs.bytes and \
        (theirs.messages < 0 or mine.messages == theirs.messages)
    if same:
        return []
    msgs = "" if theirs.messages < 0 else f"{theirs.messages:,} messages, "
    return [f"{where}: yours {mine.messages:,} messages, {mine.elements:,} elements = {mine.bytes:,} B; "
            f"ringemu's ledger {msgs}{theirs.elements:,} elements = {theirs.bytes:,} B"]
