"""Every algorithm of the catalog on the same collective, buffer and topology: bytes and modelled α-β time.

For each entry of :data:`ringemu.algorithms.REGISTRY` that implements the collective and supports N, the real
schedule is recorded in a fresh :class:`~ringemu.ledger.CommLedger` on size-only buffers
(:class:`~ringemu.virtual.VirtualBuffer`: shapes and dtypes, no data), so every byte is counted by walking the
schedule, never by a formula. :mod:`ringemu.topology` then gives the bytes per link class and the modelled time.

busbw follows nccl-tests (doc/PERFORMANCE.md): algbw = S / time, busbw = algbw × F, with F the collective's bus
factor, which nccl-tests defines as the ring's traffic per rank over S (2(N-1)/N for all-reduce); here F is read
from the ledger of the catalog's default algorithm, so busbw compares algorithms against one yardstick.

:func:`sweep` evaluates every algorithm over a range of buffer sizes and, between each two neighbouring sizes whose
fastest algorithms differ, locates by bisection on the integer size one S at which the fastest algorithm changes
(latency-bound algorithms win small buffers, bandwidth-bound ones large buffers). Where the winner changes more than
once between two neighbouring sizes, only one of those changes is found: give finer ``sizes`` to see them all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from . import algorithms, collectives
from .checks import check_numel
from .dtypes import dtype_name, resolve_dtype
from .layout import ChunkLayout
from .partition import layout_for
from .ledger import CommLedger
from .schedule import Schedule
from .topology import LinkProfile, Topology, link_model
from .virtual import VirtualBuffer

__all__ = ["AlgorithmRow", "Comparison", "SweepPoint", "Crossover", "Sweep", "count_algorithm", "compare",
           "sweep", "sweep_sizes", "MAX_RANKS"]

# every schedule of the catalog is built and walked transfer by transfer: at N = 1024 the ring all-reduce has
# 2N(N-1) = 2.1 M transfers and the bidirectional ring and double binary tree twice that
MAX_RANKS = 1024


@dataclass(frozen=True)
class AlgorithmRow:
    """One algorithm's counts (ints, from its ledger) and modelled time (exact seconds)."""

    name: str
    steps: int
    messages: int
    max_rank_bytes: int  # bytes sent by the busiest rank
    total_bytes: int  # bytes sent by all ranks together (padding included)
    class_bytes: dict[str, int]  # bytes per link class
    slowest_class_bytes: int  # bytes on the topology's slowest link class
    seconds: Fraction
    busbw: Fraction | None  # bytes per second; None when the modelled time is 0

    def as_dict(self) -> dict:
        return {"algorithm": self.name, "steps": self.steps, "messages": self.messages,
                "max_bytes_per_rank": self.max_rank_bytes, "total_bytes": self.total_bytes,
                "bytes_per_class": dict(self.class_bytes), "slowest_class_bytes": self.slowest_class_bytes,
                "seconds": float(self.seconds), "seconds_exact": str(self.seconds),
                "busbw_GBps": None if self.busbw is None else float(self.busbw / 10 ** 9)}


@dataclass(frozen=True)
class Comparison:
    collective: str
    topology: Topology
    numel: int
    dtype: str
    bus_factor: Fraction
    rows: tuple[AlgorithmRow, ...]
    unsupported: tuple[tuple[str, str], ...]  # (algorithm, reason)

    @property
    def fastest(self) -> tuple[str, ...]:
        """The algorithms of least modelled time (several on a tie), in catalog order."""
        if not self.rows:
            return ()
        best = min(r.seconds for r in self.rows)
        return tuple(r.name for r in self.rows if r.seconds == best)

    def as_dict(self) -> dict:
        return {"op": self.collective, **_topology_dict(self.topology), "numel": self.numel, "dtype": self.dtype,
                "bus_factor": str(self.bus_factor), "rows": [r.as_dict() for r in self.rows],
                "unsupported": [{"algorithm": a, "reason": why} for a, why in self.unsupported],
                "fastest": list(self.fastest)}


def _topology_dict(topology: Topology) -> dict:
    return {"ranks": topology.n_ranks, "nodes": topology.n_nodes, "ranks_per_node": topology.ranks_per_node,
            "contention": topology.contention,
            "link_classes": [{"name": c.name, "bandwidth_GBps": str(c.bandwidth / 10 ** 9),
                              "latency_us": str(c.latency * 10 ** 6),
                              "inside_node": c is topology.intra} for c in topology.classes()]}


def _runnable(collective: str, n_ranks: int) -> tuple[list[str], list[tuple[str, str]]]:
    """Names of the catalog entries for ``collective`` that support N; (name, reason) of the rest. An engine order
    cut for each buffer length (:attr:`~ringemu.algorithms.Algorithm.sized`) is built and counted for each size."""
    runnable, refused = [], []
    for name in algorithms.names(collective):
        entry = algorithms.algorithm(collective, name)
        reason = entry.unsupported(n_ranks)
        if reason is None:
            runnable.append(name)
        else:
            refused.append((name, reason))
    return runnable, refused


def count_algorithm(collective: str, name: str, n_ranks: int, numel: int, dtype,
                    ranks_per_node: int | None = None) -> CommLedger:
    """The ledger of one catalog algorithm run by the public collective (``ringemu.reduce_scatter`` and so on) on
    size-only buffers of ``numel`` elements per rank: no data moves, every transfer of the schedule is counted.
    ``ranks_per_node`` reaches the hierarchical algorithms (see :func:`ringemu.algorithms.build`)."""
    algorithms.algorithm(collective, name)  # a clear error for unknown names
    run = getattr(collectives, collective.replace("-", "_"))  # reduce-scatter -> collectives.reduce_scatter
    ledger = CommLedger()
    run(VirtualBuffer((n_ranks, numel), dtype), ledger=ledger, label=name, algorithm=name,
        ranks_per_node=ranks_per_node)
    return ledger


def _record(schedule: Schedule, numel: int, dtype, label: str) -> CommLedger:
    """A ledger holding one size-only call of ``schedule`` with the collectives' layout (shards of ChunkLayout(S, N),
    cut into the schedule's chunks, or an engine order's own partition): what :func:`count_algorithm` records."""
    ledger = CommLedger()
    ledger.record(schedule, layout_for(schedule, numel), dtype, label, size_only=True)
    return ledger


def _check(collective: str, topology: Topology, dtype) -> tuple[str, object]:
    algorithms.algorithm(collective)  # raises for an unknown collective
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a Topology; got {type(topology).__name__}")
    if topology.n_ranks > MAX_RANKS:
        raise ValueError(f"ranks must be <= {MAX_RANKS} (every transfer of every schedule is walked); "
                         f"got {topology.n_ranks}")
    dt = resolve_dtype(dtype)
    return dtype_name(dt), dt


def compare(collective: str, topology: Topology, numel: int, dtype) -> Comparison:
    """Run every catalog algorithm for ``collective`` that supports ``topology.n_ranks`` on size-only buffers of
    ``numel`` elements per rank and report its counts and modelled time (see :class:`AlgorithmRow`)."""
    name_of_dtype, dt = _check(collective, topology, dtype)
    numel = check_numel(numel)
    runnable, refused = _runnable(collective, topology.n_ranks)
    slowest = topology.slowest()
    n, payload = topology.n_ranks, numel * dt.itemsize
    counted, bus_factor = [], None
    for name in runnable:  # one ledger alive at a time: at N = 1024 a schedule holds millions of transfers
        ledger = count_algorithm(collective, name, n, numel, dt, topology.ranks_per_node)
        model = link_model(ledger, topology)
        counted.append((name, ledger.n_steps(), model, ledger.max_sent_bytes_per_rank(), ledger.total().bytes))
        if name == algorithms.DEFAULT_ALGORITHM:
            bus_factor = ledger.bus_bandwidth_factor()
        del ledger
    if bus_factor is None:
        bus_factor = count_algorithm(collective, algorithms.DEFAULT_ALGORITHM, n, numel, dt).bus_bandwidth_factor()
    rows = [AlgorithmRow(name, steps, model.messages, busiest, total, model.bytes_per_class,
                         model.bytes_per_class[slowest.name] if slowest else 0, model.seconds,
                         payload / model.seconds * bus_factor if model.seconds else None)
            for name, steps, model, busiest, total in counted]
    return Comparison(collective, topology, numel, name_of_dtype, bus_factor, tuple(rows), tuple(refused))


# -- sweep over buffer sizes ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    numel: int
    seconds: dict[str, Fraction]  # algorithm -> modelled time

    @property
    def fastest(self) -> str:
        """The algorithm of least time (the first in catalog order on a tie)."""
        return min(self.seconds, key=self.seconds.__getitem__)


@dataclass(frozen=True)
class Crossover:
    """At ``numel`` elements ``before`` is fastest, at ``numel + 1`` ``after`` is."""

    numel: int
    before: str
    after: str


@dataclass(frozen=True)
class Sweep:
    collective: str
    topology: Topology
    dtype: str
    points: tuple[SweepPoint, ...]
    crossovers: tuple[Crossover, ...]
    unsupported: tuple[tuple[str, str], ...] = field(default=())
    steps: dict[str, int] = field(default_factory=dict)  # algorithm -> steps of its schedule (the α count)

    def as_dict(self) -> dict:
        return {"op": self.collective, **_topology_dict(self.topology), "dtype": self.dtype,
                "points": [{"numel": p.numel, "fastest": p.fastest,
                            "seconds": {a: float(t) for a, t in p.seconds.items()},
                            "seconds_exact": {a: str(t) for a, t in p.seconds.items()}} for p in self.points],
                "crossovers": [{"numel": c.numel, "before": c.before, "after": c.after} for c in self.crossovers],
                "steps": dict(self.steps),
                "unsupported": [{"algorithm": a, "reason": why} for a, why in self.unsupported]}


def sweep_sizes(max_numel: int) -> list[int]:
    """1, 2, 4, ... up to ``max_numel``, and ``max_numel`` itself."""
    top = check_numel(max_numel, "numel")
    sizes = [1 << k for k in range(max(top, 1).bit_length()) if 1 << k <= top]
    return sizes + ([top] if top not in sizes and top > 0 else [])


def sweep(collective: str, topology: Topology, sizes, dtype) -> Sweep:
    """Modelled time of every runnable algorithm at each size in ``sizes`` (elements per rank) and, for each two
    neighbouring sizes with different winners, one place where the fastest one changes, narrowed by bisection to
    adjacent integers (one per pair: a pair whose winner changes several times shows one of the changes)."""
    name_of_dtype, dt = _check(collective, topology, dtype)
    sizes = sorted({check_numel(s) for s in sizes})
    runnable, refused = _runnable(collective, topology.n_ranks)
    sized = [name for name in runnable if algorithms.algorithm(collective, name).sized]  # engine orders
    runnable = [name for name in runnable if name not in sized]
    refused = refused + [(name, "cut for each buffer size (an engine's own partition): in the table, not swept")
                         for name in sized]
    profiles = {}
    for name in runnable:  # each schedule is built and walked once; each size only re-prices its chunks
        schedule = algorithms.build(collective, topology.n_ranks, name, ranks_per_node=topology.ranks_per_node)
        profiles[name] = (schedule, LinkProfile(schedule, topology))

    def point(numel: int) -> SweepPoint:
        seconds = {}
        for name, (schedule, profile) in profiles.items():
            record = _record(schedule, numel, dt, name).records[0]  # the size-only layout of this call
            seconds[name] = profile.seconds(record.layout.chunk_size * record.itemsize)
        return SweepPoint(numel, seconds)

    points = [point(s) for s in sizes]
    crossovers = []
    for left, right in zip(points, points[1:]):
        lo, hi = left, right
        while lo.fastest != hi.fastest and hi.numel - lo.numel > 1:  # invariant: winners differ at lo and hi
            middle = point((lo.numel + hi.numel) // 2)
            lo, hi = (middle, hi) if middle.fastest == lo.fastest else (lo, middle)
        if lo.fastest != hi.fastest:
            crossovers.append(Crossover(lo.numel, lo.fastest, hi.fastest))
    steps = {name: schedule.n_steps for name, (schedule, _) in profiles.items()}
    return Sweep(collective, topology, name_of_dtype, tuple(points), tuple(crossovers), tuple(refused), steps)
