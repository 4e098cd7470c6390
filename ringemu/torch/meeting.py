"""Where the thread-ranks of one process group meet: the n-th call of every rank is one collective.

Each rank's n-th collective call on a group joins the n-th :class:`_Slot`; the last rank to arrive checks that
all ranks asked for the same collective (kind, sizes, dtype, root) and runs it once for everyone, then wakes
the others. Waits are bounded, as a real engine's watchdog bounds them: a rank that waits longer than the
group's timeout gets a :class:`CollectiveTimeout` naming the group (its ranks), the collective and the ranks that
never arrived, and leaves the collective: it is abandoned, and never runs. The ranks still waiting at it are
woken with a :class:`CollectiveTimeout` naming the ranks that left, and a rank arriving later raises one too,
naming the collective and the ranks that left, instead of running it on buffers its peers no longer wait for.
A rank that fails (its function raised) wakes every waiting rank with a :class:`PeerFailure` naming it.
Nothing ever waits forever.

The hand-off: each rank waits on its own :class:`threading.Event`, and the rank that runs the collective sets
exactly the events of the ranks waiting at it, so that a small collective costs one wake-up per waiting rank and
no rank is woken to find that it must wait again (a shared condition variable would wake all of them, one after
another through its lock, at every change).
"""
from __future__ import annotations

import threading
import time
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
    left: list = field(default_factory=list)  # ranks that timed out here and left: the collective is abandoned


class Meeting:
    """The meeting point of the ``n_ranks`` thread-ranks of one group; ``timeout_s`` bounds every wait;
    ``name`` says which group it is in errors (``group 'x' (global ranks [0, 2])``); ``ranks`` are the members'
    global ranks, which errors name (default: 0 .. n_ranks - 1)."""

    def __init__(self, n_ranks: int, timeout_s: float, name: str = "the group", ranks: list[int] | None = None):
        self.n_ranks = n_ranks
        self.timeout_s = timeout_s
        self.name = name
        self.ranks = list(range(n_ranks)) if ranks is None else list(ranks)
        self._cond = threading.Lock()  # guards the slots, the counts and the failures
        self._wake = [threading.Event() for _ in range(n_ranks)]  # rank r waits on _wake[r]
        self._calls = [0] * n_ranks  # how many collectives each rank has entered
        self._slots: dict[int, _Slot] = {}
        self._failed: dict[int, str] = {}  # rank -> why it failed

    def fail(self, rank: int, why: str) -> None:
        """Record that ``rank`` failed and wake every rank waiting on this group."""
        with self._cond:
            self._failed.setdefault(rank, why)
            for slot in self._slots.values():
                self._set(slot.waiting)

    def call(self, rank: int, request: Request, execute: Callable[[list[Request]], None]) -> None:
        """Join this rank's next collective; returns once ``execute(all requests)`` has run (on some rank)."""
        with self._cond:
            seq = self._calls[rank]
            self._calls[rank] += 1
            slot = self._slots.setdefault(seq, _Slot([None] * self.n_ranks))
            slot.requests[rank] = request
            slot.arrived += 1
            if slot.left:
                self._abandoned(rank, seq, slot, request)
            last = slot.arrived == self.n_ranks
            if not last:
                slot.waiting.add(rank)
        if not last:
            self._wait(rank, seq, slot, request)
        else:
            try:
                _check_agree(seq, slot.requests)
                execute(slot.requests)
            except BaseException as exc:  # noqa: BLE001 - handed to every rank of the collective
                slot.error = exc
            with self._cond:
                slot.done = True
                self._slots.pop(seq, None)
                self._set(slot.waiting)
        if slot.error is not None:
            raise slot.error

    def _where(self, seq: int, request: Request) -> str:
        return f"{request.label} (collective #{seq} of {self.name})"

    def _abandoned(self, rank: int, seq: int, slot: _Slot, request: Request) -> None:
        """Raise for a rank that reached a collective some ranks already left (timed out): it never runs."""
        if slot.arrived + len(slot.left) >= self.n_ranks:  # everyone has been here: forget the slot
            self._slots.pop(seq, None)
        raise CollectiveTimeout(f"rank {self.ranks[rank]} reached {self._where(seq, request)} after rank(s) "
                                f"{self._global(slot.left)} timed out there and left ({self.timeout_s:g} s); the "
                                f"collective was abandoned and does not run")

    def _set(self, ranks) -> None:
        for r in ranks:
            self._wake[r].set()

    def _wait(self, rank: int, seq: int, slot: _Slot, request: Request) -> None:
        """Wait on this rank's event until the collective has run, a rank failed, a peer left, or the timeout."""
        event, deadline = self._wake[rank], time.monotonic() + self.timeout_s
        while True:
            with self._cond:
                if slot.done:
                    return
                if self._failed or slot.left or time.monotonic() >= deadline:
                    slot.waiting.discard(rank)
                    self._leave(rank, seq, slot, request)
                event.clear()  # under the lock: a set() after this check is never lost
            event.wait(max(0.0, deadline - time.monotonic()))

    def _leave(self, rank: int, seq: int, slot: _Slot, request: Request) -> None:
        """Raise for a waiting rank that stops waiting (called with the lock held)."""
        where = self._where(seq, request)
        if self._failed:
            names = ", ".join(f"rank {r}: {why}" for r, why in sorted(self._failed.items()))
            raise PeerFailure(f"rank {self.ranks[rank]} waited at {where} while another rank failed ({names})")
        missing = self._global(r for r, req in enumerate(slot.requests) if req is None)
        slot.arrived -= 1
        me = self.ranks[rank]
        if slot.left:  # woken by a peer that timed out and left
            left = self._global(slot.left)
            slot.left.append(rank)
            raise CollectiveTimeout(f"rank {me} waited at {where}: rank(s) {missing} never arrived and rank(s) "
                                    f"{left} timed out ({self.timeout_s:g} s) and left; the collective was abandoned")
        slot.left.append(rank)
        self._set(slot.waiting)
        raise CollectiveTimeout(f"rank {me} waited {self.timeout_s:g} s at {where}: rank(s) {missing} never "
                                f"arrived")

    def _global(self, group_ranks) -> list[int]:
        return sorted(self.ranks[r] for r in group_ranks)


def _check_agree(seq: int, requests: list[Request]) -> None:
    first = requests[0]
    for rank, req in enumerate(requests):
        if (req.kind, req.signature) != (first.kind, first.signature):
            asked = "; ".join(f"rank {r}: {q.kind} {q.signature}" for r, q in enumerate(requests))
            raise CollectiveMismatch(f"collective #{seq}: ranks disagree ({asked})")
