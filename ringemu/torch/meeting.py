"""Where the thread-ranks of one process group meet: the n-th call of every rank is one collective.

Each rank's n-th collective call on a group joins the n-th :class:`_Slot`; the last rank to arrive checks that
all ranks asked for the same collective (kind, sizes, dtype, root) and runs it once for everyone, then wakes
the others. Waits are bounded, as a real engine's watchdog bounds them: a rank that waits longer than the
group's timeout gets a :class:`CollectiveTimeout` naming the ranks that never arrived and the collective, and a
rank that fails (its function raised) wakes every waiting rank with a :class:`PeerFailure` naming it. Nothing
ever waits forever.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Request", "Meeting", "CollectiveMismatch", "CollectiveTimeout", "PeerFailure"]


class CollectiveMismatch(RuntimeError):
    """The ranks of a group called different collectives (or shapes, dtypes, roots) at the same position."""


class CollectiveTimeout(RuntimeError):
    """Some ranks did not reach a collective within the group's timeout."""


class PeerFailure(RuntimeError):
    """Another rank of the group failed while this one waited at a collective."""


@dataclass(frozen=True)
class Request:
    """What one rank asks for: ``kind`` and ``signature`` must agree across ranks; ``payload`` is its tensors."""

    kind: str
    signature: tuple
    label: str
    payload: Any


@dataclass
class _Slot:
    requests: list
    arrived: int = 0
    done: bool = False
    error: BaseException | None = None
    waiting: set = field(default_factory=set)


class Meeting:
    """The meeting point of the ``n_ranks`` thread-ranks of one group; ``timeout_s`` bounds every wait."""

    def __init__(self, n_ranks: int, timeout_s: float):
        self.n_ranks = n_ranks
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._calls = [0] * n_ranks  # how many collectives each rank has entered
        self._slots: dict[int, _Slot] = {}
        self._failed: dict[int, str] = {}  # rank -> why it failed

    def fail(self, rank: int, why: str) -> None:
        """Record that ``rank`` failed and wake every rank waiting on this group."""
        with self._cond:
            self._failed.setdefault(rank, why)
            self._cond.notify_all()

    def call(self, rank: int, request: Request, execute: Callable[[list[Request]], None]) -> None:
        """Join this rank's next collective; returns once ``execute(all requests)`` has run (on some rank)."""
        with self._cond:
            seq = self._calls[rank]
            self._calls[rank] += 1
            slot = self._slots.setdefault(seq, _Slot([None] * self.n_ranks))
            slot.requests[rank] = request
            slot.arrived += 1
            last = slot.arrived == self.n_ranks
            if not last:
                self._wait(rank, seq, slot, request)
        if last:
            try:
                _check_agree(seq, slot.requests)
                execute(slot.requests)
            except BaseException as exc:  # noqa: BLE001 - handed to every rank of the collective
                slot.error = exc
            with self._cond:
                slot.done = True
                self._slots.pop(seq, None)
                self._cond.notify_all()
        if slot.error is not None:
            raise slot.error

    def _wait(self, rank: int, seq: int, slot: _Slot, request: Request) -> None:
        ok = self._cond.wait_for(lambda: slot.done or bool(self._failed), timeout=self.timeout_s)
        if slot.done:
            return
        where = f"{request.label} (collective #{seq} of this group)"
        if ok and self._failed:
            names = ", ".join(f"rank {r}: {why}" for r, why in sorted(self._failed.items()))
            raise PeerFailure(f"rank {rank} waited at {where} while another rank failed ({names})")
        missing = [r for r, req in enumerate(slot.requests) if req is None]
        raise CollectiveTimeout(f"rank {rank} waited {self.timeout_s:g} s at {where}: rank(s) {missing} never "
                                f"arrived")


def _check_agree(seq: int, requests: list[Request]) -> None:
    first = requests[0]
    for rank, req in enumerate(requests):
        if (req.kind, req.signature) != (first.kind, first.signature):
            asked = "; ".join(f"rank {r}: {q.kind} {q.signature}" for r, q in enumerate(requests))
            raise CollectiveMismatch(f"collective #{seq}: ranks disagree ({asked})")
