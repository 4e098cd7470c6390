"""The in-process emulator: N ranks of one process, meeting at every collective.

:meth:`EmulatedWorld.run` calls a per-rank function once per rank, each with its own
:class:`EmulatorCommunicator`; the ranks run as greenlets of the calling thread (default) or as N threads
(:mod:`ringemu.worlds.scheduling`). A collective is a rendezvous: when every rank has arrived with its buffer,
the whole collective runs once on the stacked world (one kernel launch, :mod:`ringemu.collectives`) and each
rank gets its part. Ranks that disagree (another collective, label, size, dtype or algorithm, or a rank that
returned while others wait) get a :class:`RankFailure` naming what each rank asked for, instead of a hang.
``faults=`` (:mod:`ringemu.faults.plan`) injects faults into the world's collectives; a detected fault or a stopped
rank fails the collective on every rank at once, and :meth:`EmulatedWorld.run` raises :class:`RankFailure` with
the fault's one-line description (the :class:`~ringemu.faults.plan.CollectiveFault` is its ``__cause__``).

Every collective runs the schedule of its algorithm from the registry (:mod:`ringemu.algorithms`): the world's
``algorithm`` (default ``"ring"``) unless a communicator's ``algorithm`` attribute or the call's ``algorithm=``
keyword says otherwise. Size-only buffers are counted with one schedule per (collective, algorithm) for the whole
world (:mod:`ringemu.worlds.size_only`).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .. import algorithms, collectives
from ..algorithms import DEFAULT_ALGORITHM, check_ranks_per_node
from ..checks import check_n_ranks, check_timeout
from ..execute import MODES
from ..faults.plan import as_plan
from ..faults.spec import CollectiveFault, FaultSpecError
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..virtual import VirtualBuffer, is_virtual
from .base import RankFailure, check_algorithm, check_call
from .groups import execute_group, group_layout, group_schedule, lift, virtual_result
from .scheduling import SCHEDULERS, new_rendezvous
from .size_only import ScheduleCache, collective_of, count_collective

__all__ = ["EmulatedWorld", "EmulatorCommunicator", "RankFailure"]



class _Request(NamedTuple):
    """What one rank asks for at a collective; ranks agree when every field but the buffer is equal."""

    op: str
    label: str
    numel: int | None
    dtype: Any  # a numpy dtype (compared by value)
    buffer: Any
    algorithm: str = ""
    group: Any = None  # a ringemu.worlds.groups.Partition for a sub-group call, else None

    def key(self):
        return (self.op, self.label, self.numel, self.dtype, self.algorithm, self.group)


class EmulatorCommunicator:
    """One rank's view of an :class:`EmulatedWorld` (implements :class:`~ringemu.worlds.Communicator`).

    ``algorithm`` is the registry name its collectives run (the world's unless given; every rank of a world must
    use the same one for a given call, or the call fails with :class:`RankFailure`).
    """

    def __init__(self, world: "EmulatedWorld", rank: int, algorithm: str | None = None):
        self.world, self.rank, self.n_ranks, self.ledger = world, rank, world.n_ranks, world.ledger
        self.faults = world.faults  # the world's FaultPlan or None: stage code rolls a failed step back if set
        self.algorithm = world.algorithm if algorithm is None else check_algorithm(
            algorithm, world.n_ranks, world.ranks_per_node)

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)

    def _call(self, op: str, buffer, numel: int | None, label: str, algorithm: str | None = None):
        numel, algorithm = check_call(self, op, buffer, numel, label, algorithm)
        request = _Request(op, label, numel, buffer.dtype, buffer, algorithm)
        return self.world._rendezvous.exchange(self.rank, request, self.world._execute)

    def _group_call(self, op: str, buffer, numel: int | None, label: str, partition):
        """A collective of this rank's group of ``partition`` (:mod:`ringemu.worlds.groups`)."""
        numel = buffer.shape[0] if numel is None else numel
        request = _Request(op, label, numel, buffer.dtype, buffer, "ring", partition)
        return self.world._rendezvous.exchange(self.rank, request, self.world._execute)

    def reduce_scatter(self, buffer, label: str = "reduce_scatter", algorithm: str | None = None):
        """Sum ``buffer`` over ranks; return this rank's chunk (see :class:`~ringemu.worlds.Communicator`)."""
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
    ``scheduler``: ``"greenlet"`` (default; all ranks in the calling thread, switching at collectives) or
    ``"threads"`` (one OS thread per rank, for rank code that blocks on other ranks outside the collectives);
    both give the same results and ledgers (:mod:`ringemu.worlds.scheduling`).
    ``faults``: None, a :class:`~ringemu.faults.plan.FaultPlan`, or Fault objects / spec strings (one plan for the
    world's lifetime: each fault fires once, at its label's ``call``-th collective; real buffers only).
    """

    def __init__(self, n_ranks: int, ledger: CommLedger | None = None, mode: str = "fused",
                 timeout: float | None = 600.0, algorithm: str = DEFAULT_ALGORITHM,
                 ranks_per_node: int | None = None, scheduler: str = "greenlet", faults=None):
        self.n_ranks = check_n_ranks(n_ranks)
        self.ranks_per_node = None if ranks_per_node is None else check_ranks_per_node(ranks_per_node, self.n_ranks)
        self.algorithm = check_algorithm(algorithm, self.n_ranks, self.ranks_per_node)
        if ledger is not None and not isinstance(ledger, CommLedger):
            raise TypeError(f"ledger must be a CommLedger or None; got {type(ledger).__name__}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}; got {scheduler!r}")
        self.ledger = ledger
        self.mode = mode
        self.timeout = check_timeout(timeout, allow_none=True)
        self.scheduler = scheduler
        self.faults = as_plan(faults)
        if self.faults is not None:
            self.faults.check_world(self.n_ranks)  # ranks and N = 1 refused before any rank starts
        # size-only calls share one schedule per (collective, algorithm)
        self.schedules = ScheduleCache(self.n_ranks, self.ranks_per_node)
        self._lifted: dict = {}  # sub-group schedules lifted to the world, built once (ringemu.worlds.groups)
        self._rendezvous = new_rendezvous(scheduler, self.n_ranks, self.timeout)

    def communicators(self) -> list[EmulatorCommunicator]:
        return [EmulatorCommunicator(self, r) for r in range(self.n_ranks)]

    def __repr__(self) -> str:
        return f"EmulatedWorld(n_ranks={self.n_ranks}, mode={self.mode!r}, algorithm={self.algorithm!r})"

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> list[Any]:
        """Call ``fn(comm, *args, **kwargs)`` on every rank at once; return the per-rank results in rank order.

        If any rank raises, the others are released and :class:`RankFailure` is raised naming the rank.
        """
        self._rendezvous = new_rendezvous(self.scheduler, self.n_ranks, self.timeout)
        results: list[Any] = [None] * self.n_ranks
        comms = self.communicators()

        def body(rank: int) -> None:
            comm = comms[rank]
            results[rank] = fn(comm, *args, **kwargs)
            comm._call("exit", VirtualBuffer((0,), "int32"), 0, "", self.algorithm)

        outcome = self._rendezvous.run(body, self._execute)
        if outcome.errors:
            rank, exc = min(outcome.errors, key=lambda e: e[0])
            if isinstance(exc, (RankFailure, FaultSpecError)):  # a fault the run lacks is bad input: as it is
                raise exc
            if isinstance(exc, CollectiveFault):  # every rank saw it: name the fault, not rank 0
                raise RankFailure(str(exc)) from exc
            raise RankFailure(f"rank {rank} failed: {type(exc).__name__}: {exc}") from exc
        if outcome.hung is not None:
            waiting, where, absent = outcome.hung
            raise RankFailure(f"the world hung: ranks {waiting} waited more than {self.timeout} s at {where!r}; "
                              f"ranks {absent} did not arrive")
        return results

    # -- executed by one thread with every rank's request ------------------------------------------------------
    def _execute(self, requests: list[_Request]) -> list[Any]:
        first = requests[0]
        key = first.key()
        if any(r.key() != key for r in requests):
            asked = "; ".join(f"rank {i}: {r.op}({r.label!r}, numel={r.numel}, {r.dtype}, algorithm={r.algorithm!r})"
                              for i, r in enumerate(requests))
            raise RankFailure(f"ranks made different collective calls: {asked}")
        if first.op == "exit":
            return [None] * self.n_ranks
        if first.group is not None:
            return self._execute_group(first, [r.buffer for r in requests])
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
        elif any(b.shape[0] != numel for b in buffers):
            raise RankFailure(f"{first.label}: ranks passed buffers of different lengths "
                              f"{[b.shape[0] for b in buffers]}")
        try:
            collective_of(first.op)  # a collective of the registry
        except ValueError as exc:
            raise RankFailure(str(exc)) from None
        if virtual and self.faults is not None:
            raise RankFailure(f"{first.label}: faults need real buffers (size-only buffers only count)")
        if virtual:  # counting only: what collectives.* records for a VirtualBuffer world, one schedule per world
            count_collective(self.ledger, self.schedules, first.op, numel, dtype, first.label, first.algorithm)
            if first.op == "reduce_scatter":
                layout = ChunkLayout(numel, n)
                return [VirtualBuffer((layout.payload(r),), dtype) for r in range(n)]
            return [VirtualBuffer((numel,), dtype)] * n
        opts["schedule"] = self.schedules.get(first.op, first.algorithm, numel, dtype.itemsize)  # prepared once
        if self.faults is not None:
            opts["faults"] = self.faults
        if first.op == "all_gather":
            return list(collectives.all_gather(list(buffers), **opts))
        if first.op == "reduce_scatter":
            return collectives.reduce_scatter(buffers, **opts)
        return list(collectives.all_reduce(buffers, **opts))

    def _execute_group(self, first: _Request, buffers: list) -> list[Any]:
        """One sub-group call of every rank (:mod:`ringemu.worlds.groups`): each group runs its ring on its own
        ranks; the ledger records the lifted N-rank schedule once."""
        partition, op, numel = first.group, first.op, first.numel
        if self.faults is not None:
            raise RankFailure(f"{first.label}: faults are not injected into sub-group collectives")
        virtual = [is_virtual(b) for b in buffers]
        if any(virtual) and not all(virtual):
            raise RankFailure(f"{first.label}: some ranks passed size-only buffers and some real arrays")
        k = partition.group_size
        if op == "all_gather":
            for rank, b in enumerate(buffers):
                want = ChunkLayout(numel, k).payload(partition.place(rank)[1])
                if b.shape[0] != want:
                    raise RankFailure(f"{first.label}: rank {rank} passed a shard of {b.shape[0]} elements; "
                                      f"ChunkLayout({numel}, {k}) gives it {want}")
        key = ("group", op, partition)
        lifted = self._lifted.get(key)
        if lifted is None:
            group = group_schedule(op, k)
            lifted = self._lifted[key] = (lift(group, partition), group)
        if self.ledger is not None:
            self.ledger.record(lifted[0], group_layout(op, numel, lifted[1], k), first.dtype, first.label,
                               size_only=all(virtual))
        if all(virtual):
            return [virtual_result(op, b, numel, partition, r) for r, b in enumerate(buffers)]
        return execute_group(op, partition, buffers, numel, self.mode)
