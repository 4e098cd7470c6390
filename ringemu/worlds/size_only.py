"""A world for counting only: N ranks of size-only buffers, run one after another, no threads, no rendezvous.

On size-only buffers (:class:`~ringemu.virtual.VirtualBuffer`) a collective moves no numbers: what a rank gets
back is a shape that depends on its own rank and on the call alone, never on what other ranks hold. So the ranks
need not meet. :meth:`SizeOnlyWorld.run` calls the per-rank function on each rank in turn, each rank's
:class:`SizeOnlyCommunicator` writes down its calls, and at the end the world checks that every rank made the
same calls in the same order (a :class:`~ringemu.worlds.RankFailure` names the first rank that differs, as
:class:`~ringemu.worlds.EmulatedWorld` does) and records them once in the CommLedger. Schedules are built once
per world and shared by every record, so a model of many units holds each transfer table once.

The ledger then holds exactly what :class:`~ringemu.worlds.EmulatedWorld` would record for the same per-rank
code (the tests compare both, record by record).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .. import algorithms
from ..dtypes import resolve_dtype, dtype_name
from ..checks import check_n_ranks
from ..layout import ChunkLayout
from ..partition import layout_for
from ..ledger import CommLedger
from ..schedule import Schedule
from ..virtual import VirtualBuffer, is_virtual
from .base import RankFailure, check_algorithm, check_call
from .groups import group_layout, group_schedule, lift, virtual_result

__all__ = ["SizeOnlyWorld", "SizeOnlyCommunicator", "ScheduleCache", "count_collective", "collective_of"]


def collective_of(op: str) -> str:
    """The registry's collective name of a Communicator method (``reduce_scatter`` -> ``reduce-scatter``)."""
    collective = op.replace("_", "-")
    if collective not in algorithms.COLLECTIVES:
        allowed = ", ".join(c.replace("-", "_") for c in algorithms.COLLECTIVES)
        raise ValueError(f"op must be a Communicator collective ({allowed}); got {op!r}")
    return collective


class ScheduleCache:
    """Schedules of one world, built on first use: ``get(op, algorithm)`` returns the same object every time.
    ``ranks_per_node`` is passed to the hierarchical algorithms (:func:`ringemu.algorithms.build`)."""

    def __init__(self, n_ranks: int, ranks_per_node: int | None = None):
        self.n_ranks = check_n_ranks(n_ranks)
        self.ranks_per_node = ranks_per_node
        self._built: dict[tuple, Schedule] = {}

    def get(self, op: str, algorithm: str = algorithms.DEFAULT_ALGORITHM, numel: int | None = None,
            itemsize: int | None = None) -> Schedule:
        """The schedule of ``op`` by ``algorithm``; an engine order that cuts each buffer its own way is built (and
        kept) per buffer length and element size."""
        collective = collective_of(op)
        sized = algorithms.algorithm(collective, algorithm).sized
        key = (collective, algorithm) + ((numel, itemsize) if sized else ())
        schedule = self._built.get(key)
        if schedule is None:
            schedule = self._built[key] = algorithms.build(collective, self.n_ranks, algorithm,
                                                           ranks_per_node=self.ranks_per_node, numel=numel,
                                                           itemsize=itemsize)
        return schedule


def count_collective(ledger: CommLedger | None, schedules: ScheduleCache, op: str, numel: int, dtype,
                     label: str, algorithm: str = algorithms.DEFAULT_ALGORITHM) -> None:
    """Record one size-only collective of a ``numel``-element buffer in ``ledger`` (what
    :mod:`ringemu.collectives` records for a VirtualBuffer world, with the world's shared schedule)."""
    if ledger is None:
        return
    if dtype_name(dtype) in algorithms.algorithm(collective_of(op), algorithm).accumulate:
        dtype = "fp32"  # the engine sums this type in fp32 and moves fp32 (Algorithm.accumulate)
    schedule = schedules.get(op, algorithm, numel, resolve_dtype(dtype).itemsize)
    ledger.record(schedule, layout_for(schedule, numel), dtype, label, size_only=True)


_EXIT = ("exit", "", 0, "int32", "")  # how a rank that has returned is shown beside one that still calls


def _describe(call: tuple) -> str:
    op, label, numel, dtype, algorithm = call[:5]
    group = f", group={call[5].name}" if len(call) > 5 else ""
    return f"{op}({label!r}, numel={numel}, {dtype}, algorithm={algorithm!r}{group})"


def _mismatch(first: int, want: tuple, rank: int, got: tuple, index: int) -> RankFailure:
    return RankFailure(f"ranks made different collective calls (call {index}): rank {first}: {_describe(want)}; "
                       f"rank {rank}: {_describe(got)}")


class SizeOnlyCommunicator:
    """One rank's view of a :class:`SizeOnlyWorld` (implements :class:`~ringemu.worlds.Communicator` for
    size-only buffers): each call is checked, written down and answered with the shape this rank would get."""

    def __init__(self, world: "SizeOnlyWorld", rank: int, expected: tuple[int, list] | None = None):
        self.world, self.rank, self.n_ranks, self.ledger = world, rank, world.n_ranks, world.ledger
        self.algorithm = world.algorithm
        self.calls: list[tuple] = []  # the first rank's calls; later ranks are checked against them as they call
        self._expected = expected  # (first rank, its calls) or None for the first rank
        self._index = 0

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)

    def _call(self, op: str, buffer, numel: int | None, label: str, algorithm: str | None) -> int:
        numel, algorithm = check_call(self, op, buffer, numel, label, algorithm, arrays=False)
        call = (op, label, numel, dtype_name(buffer.dtype), algorithm)
        self._record(call)
        return numel

    def _record(self, call: tuple) -> None:
        """The first rank records its calls; every later rank must make the same ones, in order."""
        if self._expected is None:
            self.calls.append(call)
            return
        first, calls = self._expected
        want = calls[self._index] if self._index < len(calls) else _EXIT
        if call != want:
            raise _mismatch(first, want, self.rank, call, self._index)
        self._index += 1

    def _finish(self) -> None:
        """The rank's function returned: a later rank must have made every call the first rank made."""
        if self._expected is not None and self._index < len(self._expected[1]):
            first, calls = self._expected
            raise _mismatch(first, calls[self._index], self.rank, _EXIT, self._index)

    def _group_call(self, op: str, buffer, numel: int | None, label: str, partition):
        """A collective of this rank's group of ``partition`` (:mod:`ringemu.worlds.groups`), size-only."""
        if not is_virtual(buffer):
            raise TypeError(f"rank {self.rank}: {op} in a size-only world needs a 1-D VirtualBuffer; got "
                            f"{type(buffer).__name__}")
        numel = buffer.shape[0] if numel is None else numel
        call = (op, label, numel, dtype_name(buffer.dtype), "ring", partition)
        self._record(call)
        return virtual_result(op, buffer, numel, partition, self.rank)

    def reduce_scatter(self, buffer, label: str = "reduce_scatter", algorithm: str | None = None):
        """This rank's chunk of ``ChunkLayout(S, N)`` (its payload length), size-only."""
        numel = self._call("reduce_scatter", buffer, None, label, algorithm)
        return VirtualBuffer((ChunkLayout(numel, self.n_ranks).payload(self.rank),), buffer.dtype)

    def all_gather(self, shard, numel: int, label: str = "all_gather", algorithm: str | None = None):
        """The whole ``numel``-element buffer, size-only; the shard must be this rank's payload long."""
        numel = self._call("all_gather", shard, numel, label, algorithm)
        want = ChunkLayout(numel, self.n_ranks).payload(self.rank)
        if shard.shape[0] != want:
            raise RankFailure(f"{label}: rank {self.rank} passed a shard of {shard.shape[0]} elements; "
                              f"ChunkLayout({numel}, {self.n_ranks}) gives it {want}")
        return VirtualBuffer((numel,), shard.dtype)

    def all_reduce(self, buffer, label: str = "all_reduce", algorithm: str | None = None):
        """The sum's shape: the buffer's, size-only."""
        numel = self._call("all_reduce", buffer, None, label, algorithm)
        return VirtualBuffer((numel,), buffer.dtype)


class SizeOnlyWorld:
    """N virtual ranks whose buffers are all size-only, sharing one CommLedger (see the module docstring).

    ``algorithm`` and ``ranks_per_node`` as for :class:`~ringemu.worlds.EmulatedWorld`."""

    def __init__(self, n_ranks: int, ledger: CommLedger | None = None,
                 algorithm: str = algorithms.DEFAULT_ALGORITHM, ranks_per_node: int | None = None):
        self.n_ranks = check_n_ranks(n_ranks)
        if ledger is not None and not isinstance(ledger, CommLedger):
            raise TypeError(f"ledger must be a CommLedger or None; got {type(ledger).__name__}")
        self.ranks_per_node = (None if ranks_per_node is None
                               else algorithms.check_ranks_per_node(ranks_per_node, self.n_ranks))
        self.algorithm = check_algorithm(algorithm, self.n_ranks, self.ranks_per_node)
        self.ledger = ledger
        self.schedules = ScheduleCache(self.n_ranks, self.ranks_per_node)
        self._lifted: dict = {}  # sub-group schedules lifted to the world (ringemu.worlds.groups)

    def communicators(self) -> list[SizeOnlyCommunicator]:
        return [SizeOnlyCommunicator(self, r) for r in range(self.n_ranks)]

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> list[Any]:
        """Call ``fn(comm, *args, **kwargs)`` on every rank; return the per-rank results in rank order."""
        out = self.run_ranks(range(self.n_ranks), fn, *args, **kwargs)
        return [out[r] for r in range(self.n_ranks)]

    def run_ranks(self, ranks: Iterable[int], fn: Callable[..., Any], *args, **kwargs) -> dict[int, Any]:
        """Call ``fn`` on the given ranks only (each once, in the order given); return {rank: result}.

        The caller vouches that the other ranks would make the same calls (the collectives are recorded once,
        from the first rank); a size-only stage run uses it for ranks whose shards have the same sizes, and its
        tests compare the outcome with every rank run."""
        chosen = list(dict.fromkeys(ranks))
        if not chosen or any(isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < self.n_ranks
                             for r in chosen):
            raise ValueError(f"ranks must be a non-empty list of ranks in [0, {self.n_ranks}); got {chosen!r}")
        results, expected = {}, None
        for rank in chosen:
            comm = SizeOnlyCommunicator(self, rank, expected)
            try:
                results[rank] = fn(comm, *args, **kwargs)
                comm._finish()
            except RankFailure:
                raise
            except Exception as exc:
                raise RankFailure(f"rank {rank} failed: {type(exc).__name__}: {exc}") from exc
            if expected is None:
                expected = (rank, comm.calls)
        for call in expected[1]:
            if len(call) > 5:
                self._count_group(*call)
            else:
                op, label, numel, dtype, algorithm = call
                count_collective(self.ledger, self.schedules, op, numel, dtype, label, algorithm)
        return results

    def _count_group(self, op, label, numel, dtype, algorithm, partition) -> None:
        if self.ledger is None:
            return
        key = (op, partition)
        if key not in self._lifted:
            group = group_schedule(op, partition.group_size)
            self._lifted[key] = (lift(group, partition), group)
        lifted, group = self._lifted[key]
        self.ledger.record(lifted, group_layout(op, numel, group, partition.group_size), dtype, label,
                           size_only=True)
