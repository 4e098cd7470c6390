"""How an EmulatedWorld's N rank functions run and meet at each collective: as greenlets in one thread, or as threads.

A rendezvous runs ``body(rank)`` for every rank. Inside it, a rank's collective call is
``exchange(rank, request, execute)``: once every rank has deposited its request, ``execute(requests)`` runs once
(on the whole world) and each rank gets its entry of the result, or the exception ``execute`` raised.

* :class:`GreenletRendezvous` (the default): the ranks are greenlets of the calling thread. A hub switches to
  rank 0, 1, …, N−1 in turn; each runs until it reaches its next collective (or fails), then the hub executes the
  collective and hands out the results. No OS thread and no lock is involved, so a collective costs N greenlet
  switches (about a microsecond each) instead of 2N context switches through a barrier. The order in which ranks
  run between collectives is fixed (rank order), so runs are deterministic. A rank cannot be interrupted: a rank
  that takes longer than ``timeout`` to reach its next collective is reported when it gets there; one that never
  does (it blocks on something only another rank would provide outside the collectives) blocks the world.
* :class:`ThreadRendezvous`: one OS thread per rank, meeting at a :class:`threading.Barrier` twice per collective.
  Rank code may block on anything (queues, events shared between ranks); a rank that does not arrive within
  ``timeout`` seconds breaks the barrier and is reported while it is still away.

Both report through :class:`Outcome`: the ranks that raised, or who waited where while which ranks did not arrive.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..faults.spec import CollectiveFault

__all__ = ["SCHEDULERS", "Outcome", "GreenletRendezvous", "ThreadRendezvous", "new_rendezvous"]

SCHEDULERS = ("greenlet", "threads")


@dataclass
class Outcome:
    """How a run ended: ``errors`` (rank, exception) of the ranks that raised, and ``hung`` = (ranks that waited,
    the collective's label, ranks that did not arrive in time) if the world hung."""

    errors: list[tuple[int, BaseException]] = field(default_factory=list)
    hung: tuple[list[int], str, list[int]] | None = None


class _Raise:
    """What a rank receives instead of a result when the collective failed."""

    def __init__(self, error: BaseException):
        self.error = error


def _where(request) -> str:
    return request.label or request.op


class GreenletRendezvous:
    """All ranks as greenlets of the calling thread (see the module docstring)."""

    def __init__(self, n_ranks: int, timeout: float | None):
        self.n_ranks, self.timeout = n_ranks, timeout
        self.requests: list[Any] = [None] * n_ranks
        self._hub = None

    def exchange(self, rank: int, request, execute: Callable[[list], list]):
        self.requests[rank] = request
        reply = self._hub.switch()  # back to the hub, until every rank has arrived and the collective ran
        if type(reply) is _Raise:
            raise reply.error
        return reply

    def run(self, body: Callable[[int], None], execute: Callable[[list], list]) -> Outcome:
        from greenlet import GreenletExit, greenlet, getcurrent

        self._hub = getcurrent()
        ranks = [greenlet(lambda _reply=None, r=r: body(r)) for r in range(self.n_ranks)]
        replies: list[Any] = [None] * self.n_ranks
        outcome = Outcome()
        try:
            while True:
                arrived = []  # ranks now waiting at a collective
                for r, rank in enumerate(ranks):
                    started = time.monotonic()
                    try:
                        rank.switch(replies[r])  # runs rank r up to its next collective, or to its end
                    except BaseException as exc:
                        outcome.errors.append((r, exc))
                        continue
                    if rank.dead:
                        continue
                    arrived.append(r)
                    if self.timeout is not None and time.monotonic() - started > self.timeout and self.n_ranks > 1:
                        others = [k for k in range(self.n_ranks) if k != r and not ranks[k].dead]
                        outcome.hung = (others, _where(self.requests[arrived[0]]), [r])
                        return outcome
                if outcome.errors or not arrived:
                    return outcome
                try:
                    replies = execute(self.requests)
                except BaseException as exc:  # handed to every rank, which raises it
                    replies = [_Raise(exc)] * self.n_ranks
        finally:
            for rank in ranks:  # unwind ranks left waiting (their finally blocks run)
                if rank and not rank.dead:
                    rank.throw(GreenletExit)
            self._hub = None


class ThreadRendezvous:
    """One OS thread per rank; two barrier waits per collective: all requests in, one thread executes, all read out."""

    def __init__(self, n_ranks: int, timeout: float | None):
        self.n_ranks, self.timeout = n_ranks, timeout
        self.barrier = threading.Barrier(n_ranks, timeout=timeout)
        self.requests: list[Any] = [None] * n_ranks
        self.results: list[Any] = []
        self.error: BaseException | None = None
        self.waiting: set[int] = set()  # ranks that have arrived at the current collective
        self.stalled: tuple[list[int], str] | None = None  # who was waiting, and where, when the barrier broke

    def exchange(self, rank: int, request, execute: Callable[[list], list]):
        self.requests[rank] = request
        self.waiting.add(rank)
        try:
            first = self.barrier.wait()
        except threading.BrokenBarrierError:
            if self.stalled is None:
                self.stalled = (sorted(self.waiting), _where(request))
            raise
        self.waiting.discard(rank)
        if first == 0:
            try:
                self.error, self.results = None, execute(self.requests)
            except BaseException as exc:  # handed to every rank below
                self.error, self.results = exc, []
        self.barrier.wait()
        if self.error is not None:
            raise self.error
        return self.results[rank]

    def run(self, body: Callable[[int], None], execute: Callable[[list], list]) -> Outcome:
        outcome = Outcome()
        released: list[int] = []  # ranks woken by a broken barrier (another rank failed, or a timeout)

        def guarded(rank: int) -> None:
            try:
                body(rank)
            except threading.BrokenBarrierError:
                released.append(rank)
            except BaseException as exc:
                outcome.errors.append((rank, exc))
                if not isinstance(exc, CollectiveFault):  # a fault reaches every rank: nobody is left waiting,
                    self.barrier.abort()  # and an abort now could break a barrier others have just passed

        if self.n_ranks == 1:
            guarded(0)
        else:
            threads = [threading.Thread(target=guarded, args=(r,), name=f"rank{r}", daemon=True)
                       for r in range(self.n_ranks)]
            started = []
            try:
                for t in threads:
                    t.start()
                    started.append(t)
            except BaseException:
                self.barrier.abort()  # release the ranks already waiting at a collective
                for t in started:
                    t.join()
                raise
            for t in threads:
                t.join()
        if released and not outcome.errors:
            waiting, where = self.stalled or (sorted(released), "a collective")
            outcome.hung = (waiting, where, sorted(set(range(self.n_ranks)) - set(waiting)))
        return outcome


def new_rendezvous(scheduler: str, n_ranks: int, timeout: float | None):
    """A fresh rendezvous of the named kind (one per run)."""
    if scheduler == "greenlet":
        return GreenletRendezvous(n_ranks, timeout)
    if scheduler == "threads":
        return ThreadRendezvous(n_ranks, timeout)
    raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}; got {scheduler!r}")
