"""The in-process emulator: N ranks as N threads of one process, meeting at every collective.

:meth:`EmulatedWorld.run` calls a per-rank function once per rank, each in its own thread with its own
:class:`EmulatorCommunicator`. A collective is a rendezvous: when every rank has arrived with its buffer, one
thread runs the whole collective on the stacked world (one kernel launch, :mod:`ringemu.collectives`) and
hands each rank its part. Ranks that disagree (another collective, label, size, dtype or algorithm, or a rank that
returned while others wait) get a :class:`RankFailure` naming what each rank asked for, instead of a hang.

Every collective runs the schedule of its algorithm from the registry (:mod:`ringemu.algorithms`): the world's
``algorithm`` (default ``"ring"``) unless a communicator's ``algorithm`` attribute or the call's ``algorithm=``
keyword says otherwise.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import collectives
from ..algorithms import DEFAULT_ALGORITHM, check_ranks_per_node
from ..checks import check_n_ranks, check_numel, check_timeout
from ..execute import MODES
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..virtual import VirtualBuffer, is_virtual
from .base import check_algorithm

__all__ = ["EmulatedWorld", "EmulatorCommunicator", "RankFailure"]



class RankFailure(RuntimeError):
    """A rank raised, or the ranks' collective calls did not match."""


@dataclass(frozen=True)
class _Request:
    op: str
    label: str
    numel: int | None
    dtype: Any
    buffer: Any
    algorithm: str = ""

    def key(self):
        return (self.op, self.label, self.numel, str(self.dtype), self.algorithm)


class _Rendezvous:
    """Two barrier waits per collective: all requests in, then one thread executes, then all read out."""

    def __init__(self, n_ranks: int, timeout: float | None):
        self.barrier = threading.Barrier(n_ranks, timeout=timeout)
        self.requests: list[_Request | None] = [None] * n_ranks
        self.results: list[Any] = []
        self.error: BaseException | None = None
        self.waiting: set[int] = set()  # ranks that have arrived at the current collective
        self.stalled: tuple[list[int], str] | None = None  # who was waiting, and where, when the barrier broke

    def exchange(self, rank: int, request: _Request, execute: Callable[[list[_Request]], list[Any]]):
        self.requests[rank] = request
        self.waiting.add(rank)
        try:
            first = self.barrier.wait()
        except threading.BrokenBarrierError:
            if self.stalled is None:
                self.stalled = (sorted(self.waiting), request.label or request.op)
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


class EmulatorCommunicator:
    """One rank's view of an :class:`EmulatedWorld` (implements :class:`~ringemu.backends.Communicator`).

    ``algorithm`` is the registry name its collectives run (the world's unless given; every rank of a world must
    use the same one for a given call, or the call fails with :class:`RankFailure`).
    """

    def __init__(self, world: "EmulatedWorld", rank: int, algorithm: str | None = None):
        self.world, self.rank, self.n_ranks, self.ledger = world, rank, world.n_ranks, world.ledger
        self.algorithm = world.algorithm if algorithm is None else check_algorithm(
            algorithm, world.n_ranks, world.ranks_per_node)

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)

    def _call(self, op: str, buffer, numel: int | None, label: str, algorithm: str | None = None):
        if not (isinstance(buffer, np.ndarray) and buffer.ndim == 1) and not (is_virtual(buffer) and buffer.ndim == 1):
            raise TypeError(f"rank {self.rank}: {op} needs a 1-D numpy array or VirtualBuffer; got "
                            f"{type(buffer).__name__} of shape {getattr(buffer, 'shape', None)}")
        if not isinstance(label, str):
            raise TypeError(f"rank {self.rank}: {op} label must be a str; got {label!r}")
        numel = buffer.shape[0] if numel is None else check_numel(numel, "numel")
        if algorithm is None:
            algorithm = self.algorithm
        elif algorithm != self.algorithm:
            algorithm = check_algorithm(algorithm, self.n_ranks, self.world.ranks_per_node)
        request = _Request(op, label, numel, buffer.dtype, buffer, algorithm)
        return self.world._rendezvous.exchange(self.rank, request, self.world._execute)

    def reduce_scatter(self, buffer, label: str = "reduce_scatter", algorithm: str | None = None):
        """Sum ``buffer`` over ranks; return this rank's chunk (see :class:`~ringemu.backends.Communicator`)."""
        return self._call("reduce_scatter", buffer, None, label, algorithm)

    def all_gather(self, shard, numel: int, label: str = "all_gather", algorithm: str | None = None):
        """Concatenate every rank's shard of a ``numel``-element buffer; every rank gets the whole buffer."""
        return self._call("all_gather", shard, numel, label, algorithm)

    def all_reduce(self, buffer, label: str = "all_reduce", algorithm: str | None = None):
        """Sum ``buffer`` over ranks in the algorithm's order; every rank gets the sum."""
        return self._call("all_reduce", buffer, None, label, algorithm)


class EmulatedWorld:
    """N virtual ranks in one process, sharing one CommLedger.

    ``mode`` selects the kernel path (``fused``, ``step`` or ``reference``; all give the same bits).
    ``timeout`` (seconds) bounds how long a rank waits at a collective before the world is declared hung.
    ``algorithm`` (a name of :func:`ringemu.algorithms.names`, default ``"ring"``) is the communicators' default;
    it must exist for all three collectives and support ``n_ranks``. ``ranks_per_node`` is passed to the
    hierarchical algorithms (default :func:`ringemu.algorithms.default_ranks_per_node`).
    """

    def __init__(self, n_ranks: int, ledger: CommLedger | None = None, mode: str = "fused",
                 timeout: float | None = 600.0, algorithm: str = DEFAULT_ALGORITHM,
                 ranks_per_node: int | None = None):
        self.n_ranks = check_n_ranks(n_ranks)
        self.ranks_per_node = None if ranks_per_node is None else check_ranks_per_node(ranks_per_node, self.n_ranks)
        self.algorithm = check_algorithm(algorithm, self.n_ranks, self.ranks_per_node)
        if ledger is not None and not isinstance(ledger, CommLedger):
            raise TypeError(f"ledger must be a CommLedger or None; got {type(ledger).__name__}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        self.ledger = ledger
        self.mode = mode
        self.timeout = check_timeout(timeout, allow_none=True)
        self._rendezvous = _Rendezvous(self.n_ranks, timeout)

    def communicators(self) -> list[EmulatorCommunicator]:
        return [EmulatorCommunicator(self, r) for r in range(self.n_ranks)]

    def __repr__(self) -> str:
        return f"EmulatedWorld(n_ranks={self.n_ranks}, mode={self.mode!r}, algorithm={self.algorithm!r})"

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> list[Any]:
        """Call ``fn(comm, *args, **kwargs)`` on every rank at once; return the per-rank results in rank order.

        If any rank raises, the others are released and :class:`RankFailure` is raised naming the rank.
        """
        self._rendezvous = _Rendezvous(self.n_ranks, self.timeout)
        results: list[Any] = [None] * self.n_ranks
        errors: list[tuple[int, BaseException]] = []
        released: list[int] = []  # ranks woken by a broken barrier (another rank failed, or a timeout)

        def body(comm: EmulatorCommunicator) -> None:
            try:
                results[comm.rank] = fn(comm, *args, **kwargs)
                comm._call("exit", VirtualBuffer((0,), "int32"), 0, "", self.algorithm)
            except threading.BrokenBarrierError:
                released.append(comm.rank)  # another rank failed first (reported below), or the wait timed out
            except BaseException as exc:
                errors.append((comm.rank, exc))
                self._rendezvous.barrier.abort()

        if self.n_ranks == 1:
            body(self.communicators()[0])
        else:
            threads = [threading.Thread(target=body, args=(c,), name=f"rank{c.rank}", daemon=True)
                       for c in self.communicators()]
            started = []
            try:
                for t in threads:
                    t.start()
                    started.append(t)
            except BaseException:
                self._rendezvous.barrier.abort()  # release the ranks already waiting at a collective
                for t in started:
                    t.join()
                raise
            for t in threads:
                t.join()
        if errors:
            rank, exc = min(errors, key=lambda e: e[0])
            if isinstance(exc, RankFailure):
                raise exc
            raise RankFailure(f"rank {rank} failed: {type(exc).__name__}: {exc}") from exc
        if released:
            waiting, where = self._rendezvous.stalled or (sorted(released), "a collective")
            absent = sorted(set(range(self.n_ranks)) - set(waiting))
            raise RankFailure(f"the world hung: ranks {waiting} waited more than {self.timeout} s at {where!r}; "
                              f"ranks {absent} did not arrive")
        return results

    # -- executed by one thread with every rank's request ------------------------------------------------------
    def _execute(self, requests: list[_Request]) -> list[Any]:
        keys = {r.key() for r in requests}
        if len(keys) != 1:
            asked = "; ".join(f"rank {i}: {r.op}({r.label!r}, numel={r.numel}, {r.dtype}, algorithm={r.algorithm!r})"
                              for i, r in enumerate(requests))
            raise RankFailure(f"ranks made different collective calls: {asked}")
        first = requests[0]
        if first.op == "exit":
            return [None] * self.n_ranks
        buffers = [r.buffer for r in requests]
        virtual = any(is_virtual(b) for b in buffers)
        if virtual and not all(is_virtual(b) for b in buffers):
            raise RankFailure(f"{first.label}: some ranks passed size-only buffers and some real arrays")
        opts = dict(ledger=self.ledger, label=first.label, mode=self.mode, algorithm=first.algorithm,
                    ranks_per_node=self.ranks_per_node)
        n, numel, dtype = self.n_ranks, first.numel, first.dtype
        if first.op == "all_gather":
            layout = ChunkLayout(numel, n)
            for rank, b in enumerate(buffers):
                if b.shape[0] != layout.payload(rank):
                    raise RankFailure(f"{first.label}: rank {rank} passed a shard of {b.shape[0]} elements; "
                                      f"ChunkLayout({numel}, {n}) gives it {layout.payload(rank)}")
            if virtual:
                collectives.all_gather(VirtualBuffer((n, numel), dtype), **opts)
                return [VirtualBuffer((numel,), dtype)] * n
            world = collectives.all_gather(list(buffers), **opts)
            return list(world)
        if any(b.shape[0] != numel for b in buffers):
            raise RankFailure(f"{first.label}: ranks passed buffers of different lengths "
                              f"{[b.shape[0] for b in buffers]}")
        world_in = VirtualBuffer((n, numel), dtype) if virtual else buffers
        if first.op == "reduce_scatter":
            return collectives.reduce_scatter(world_in, **opts)
        if first.op == "all_reduce":
            out = collectives.all_reduce(world_in, **opts)
            return [VirtualBuffer((numel,), dtype)] * n if virtual else list(out)
        raise RankFailure(f"unknown collective {first.op!r}")
