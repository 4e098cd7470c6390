"""CommLedger: exact traffic counts per link, per step, per collective label, read from the schedule.

Every collective that runs (on real or on size-only buffers) is recorded with its schedule, chunk layout and
element size. Counts are derived by walking the schedule's transfer table with integer numpy aggregation, so the
lesson's Ψ = 27,781,427,952 on N = 1024 ranks is counted in milliseconds, never by a closed-form formula. All
results are Python ints (bytes, elements, messages) or ``fractions.Fraction`` (ratios, seconds).

Padding: on a textbook :class:`~ringemu.layout.ChunkLayout` a transfer carries a whole chunk (``layout.chunk_size``
elements); the part of it beyond the buffer's real length is padding, reported separately. An engine order's
:class:`~ringemu.partition.Partition` sends each chunk's own length, as the engine does: no padding.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable

import numpy as np

from .dtypes import dtype_name, resolve_dtype
from .layout import ChunkLayout
from .ledger_counts import LayoutCounts, ScheduleCounts, Traffic
from .schedule import Schedule

__all__ = ["Traffic", "RankTraffic", "CollectiveRecord", "CommLedger"]


@dataclass(frozen=True)
class RankTraffic:
    """What one rank sent and received."""

    rank: int
    sent: Traffic
    received: Traffic

    def as_dict(self) -> dict[str, int]:
        out = {"rank": self.rank}
        for side, t in (("sent", self.sent), ("received", self.received)):
            out.update({f"{side}_{k}": v for k, v in t.as_dict().items()})
        return out


@dataclass(frozen=True, eq=False)
class CollectiveRecord:
    """One collective call: its label, schedule, layout and element size.

    The aggregates (``sent``, ``received``, ``links``, ``steps``, ...) are computed lazily and shared by every
    record of the same ledger with the same schedule, layout and element size (:mod:`ringemu.ledger_counts`).
    """

    label: str
    schedule: Schedule
    layout: ChunkLayout
    itemsize: int
    dtype: str
    size_only: bool = False
    counts: LayoutCounts | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.counts is None:
            object.__setattr__(self, "counts", LayoutCounts(ScheduleCounts(self.schedule), self.layout,
                                                            self.itemsize))

    @property
    def sent(self) -> list[Traffic]:
        """Per rank: what it sent."""
        return self.counts.sent

    @property
    def received(self) -> list[Traffic]:
        """Per rank: what it received."""
        return self.counts.received

    @property
    def links(self) -> dict[tuple[int, int], Traffic]:
        """Per directed link (src, dst) that carried anything."""
        return self.counts.links

    @property
    def steps(self) -> list[Traffic]:
        """Per step: everything sent in that step."""
        return self.counts.steps

    @property
    def max_link_bytes_per_step(self) -> list[int]:
        """Per step: the bytes on the busiest link (the step's duration in the α-β model)."""
        return self.counts.max_link_bytes_per_step

    @property
    def total(self) -> Traffic:
        return self.counts.total


def _exact(value, name: str) -> Fraction:
    """An exact rational from an int, Fraction or decimal string; floats and bools are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, Fraction, str)):
        raise TypeError(f"{name} must be an int, a fractions.Fraction or a decimal string such as '50e9' "
                        f"(floats are not exact); got {value!r} ({type(value).__name__})")
    try:
        return Fraction(int(value) if isinstance(value, np.integer) else value)
    except ValueError:
        raise ValueError(f"{name} must be a number; got {value!r}") from None


@dataclass
class CommLedger:
    """Traffic of every collective run in one world of ``n_ranks`` ranks (set by the first record).

    Pass one ledger to the collectives (or to a Communicator); query it afterwards, optionally by label.
    ``messages`` carries the per-message records (header and CRC-32 as sent and as received,
    :class:`ringemu.faults.link.Message`) of every step that ran with injected faults (:mod:`ringemu.faults.plan`).
    """

    records: list[CollectiveRecord] = field(default_factory=list)
    messages: list = field(default_factory=list)
    # shared counts: one ScheduleCounts per distinct schedule, one LayoutCounts per (schedule, layout, itemsize)
    _schedules: dict = field(default_factory=dict, repr=False, compare=False)
    _layouts: dict = field(default_factory=dict, repr=False, compare=False)

    def _shared(self, schedule: Schedule, layout: ChunkLayout, itemsize: int) -> LayoutCounts:
        """The counts of an identical earlier call, or new ones. A schedule equal to one already recorded (same
        name, shape and transfer table) is replaced by it, so a ledger holds each distinct table once."""
        key = (schedule.name, schedule.n_ranks, schedule.n_chunks, schedule.n_steps, schedule.n_transfers,
               schedule.initial, schedule.final)
        counts = self._schedules.get(key)
        if counts is None or (counts.schedule is not schedule
                              and not np.array_equal(counts.schedule.table, schedule.table)):
            counts = ScheduleCounts(schedule)
            self._schedules[key] = counts
        lkey = (id(counts), layout, itemsize)  # ChunkLayout is a frozen dataclass: equal layouts, one entry
        shared = self._layouts.get(lkey)
        if shared is None or shared.counts is not counts:
            shared = self._layouts[lkey] = LayoutCounts(counts, layout, itemsize)
        return shared

    def record(self, schedule: Schedule, layout: ChunkLayout, dtype: object, label: str,
               size_only: bool = False) -> CollectiveRecord:
        """Add one collective call. All records of a ledger must share one number of ranks."""
        if self.records and self.records[0].schedule.n_ranks != schedule.n_ranks:
            raise ValueError(f"this ledger counts a world of {self.records[0].schedule.n_ranks} ranks; "
                             f"got a collective on {schedule.n_ranks} ranks (use one ledger per world)")
        if layout.n_chunks != schedule.n_chunks:
            raise ValueError(f"layout has {layout.n_chunks} chunks but schedule {schedule.name} uses "
                             f"{schedule.n_chunks}")
        dt = resolve_dtype(dtype)
        counts = self._shared(schedule, layout, dt.itemsize)
        rec = CollectiveRecord(label, counts.counts.schedule, counts.layout, dt.itemsize, dtype_name(dt), size_only,
                               counts)
        self.records.append(rec)
        return rec

    # -- selection -------------------------------------------------------------------------------------------
    @property
    def n_ranks(self) -> int:
        return self.records[0].schedule.n_ranks if self.records else 0

    def labels(self) -> list[str]:
        """Collective labels in order of first use."""
        return list(dict.fromkeys(r.label for r in self.records))

    def select(self, label: str | Iterable[str] | None = None) -> list[CollectiveRecord]:
        """Records with this label (or any of these labels); all records for None."""
        if label is None:
            return list(self.records)
        wanted = {label} if isinstance(label, str) else set(label)
        return [r for r in self.records if r.label in wanted]

    # -- queries ---------------------------------------------------------------------------------------------
    def per_rank(self, label=None) -> list[RankTraffic]:
        """Sent and received traffic of every rank, summed over the selected records."""
        recs = self.select(label)
        n = self.n_ranks
        sent = _sum_per_rank(recs, n, "sent")
        received = _sum_per_rank(recs, n, "received")
        return [RankTraffic(k, sent[k], received[k]) for k in range(n)]

    def per_link(self, label=None) -> dict[tuple[int, int], Traffic]:
        """Traffic per directed link (src, dst), summed over the selected records."""
        out: dict[tuple[int, int], Traffic] = {}
        for rec in self.select(label):
            for link, t in rec.links.items():
                out[link] = out.get(link, Traffic()) + t
        return dict(sorted(out.items()))

    def per_step(self, label=None) -> list[tuple[str, int, Traffic]]:
        """(label, step, traffic) for every step of every selected record, in execution order."""
        return [(r.label, s, t) for r in self.select(label) for s, t in enumerate(r.steps)]

    def total(self, label=None) -> Traffic:
        """Everything sent by every rank in the selected records."""
        return sum((r.total for r in self.select(label)), Traffic())

    def n_steps(self, label=None) -> int:
        """Communication steps, summed over the selected records."""
        return sum(r.schedule.n_steps for r in self.select(label))

    def max_sent_bytes_per_rank(self, label=None) -> int:
        """Bytes sent by the busiest rank (what the lesson quotes as "per card")."""
        return max((t.sent.bytes for t in self.per_rank(label)), default=0)

    def bus_bandwidth_factor(self, label=None) -> Fraction:
        """nccl-tests' busbw/algbw factor: the busiest rank's sent elements over the buffer's padded length.

        For ring all-reduce this is 2(N-1)/N, for reduce-scatter and all-gather (N-1)/N (nccl-tests,
        doc/PERFORMANCE.md). Summed over the selected records.
        """
        recs = self.select(label)
        buffer = sum(r.layout.padded_numel if r.layout.pads_on_wire else r.layout.numel for r in recs)
        if buffer == 0:
            return Fraction(0)
        busiest = max(t.elements for t in _sum_per_rank(recs, self.n_ranks, "sent"))
        return Fraction(busiest, buffer)

    def alpha_beta_time(self, bandwidth: int | Fraction | str, latency: int | Fraction | str = 0,
                        label=None) -> Fraction:
        """Seconds under the α-β model: each step costs ``latency`` plus its busiest link's bytes over
        ``bandwidth`` (bytes/s, per link and direction); steps run one after another. Both are exact numbers:
        ints, Fractions or decimal strings (``"1e-6"``); floats are refused, since 1e-6 is not 10^-6 in binary.

        With zero latency, ring all-reduce takes exactly (bytes each rank sends) / bandwidth: the lesson's
        97.2 GB at 50 GB/s = 1.94 s (claim C6).
        """
        beta, alpha = _exact(bandwidth, "bandwidth"), _exact(latency, "latency")
        if beta <= 0 or alpha < 0:
            raise ValueError(f"bandwidth must be > 0 and latency >= 0; got {bandwidth!r}, {latency!r}")
        return sum((alpha + Fraction(b) / beta for r in self.select(label) for b in r.max_link_bytes_per_step),
                   Fraction(0))

    def summary(self, label=None) -> dict:
        """A JSON-ready dict: steps, totals, padding and per-rank traffic."""
        total = self.total(label)
        return {
            "labels": self.labels() if label is None else [label] if isinstance(label, str) else list(label),
            "steps": self.n_steps(label),
            "total_messages": total.messages,
            "total_elements": total.elements,
            "total_bytes": total.bytes,
            "padding_elements": total.padding_elements,
            "padding_bytes": total.padding_bytes,
            "bus_bandwidth_factor": str(self.bus_bandwidth_factor(label)),
            "per_rank": [t.as_dict() for t in self.per_rank(label)],
        }


_INT64_SUM_LIMIT = 1 << 62  # padding sums below this are added as int64 vectors, else as Python ints


def _sum_per_rank(recs: list[CollectiveRecord], n: int, side: str) -> list[Traffic]:
    """Per rank, the Traffic of ``side`` ("sent" or "received") summed over ``recs``: equal to adding the records'
    per-rank Traffic one by one. Records are grouped by their shared counts. Messages depend on the schedule only,
    so elements and bytes are (messages per rank) × (Σ chunk elements, Σ chunk bytes over the schedule's records),
    multiplied in Python ints; padding vectors are added in int64 while the sum provably fits, else in Python ints.
    """
    groups: dict[int, list] = {}
    for r in recs:
        g = groups.setdefault(id(r.counts), [r.counts, 0])
        g[1] += 1
    schedules: dict[int, list] = {}  # id(ScheduleCounts) -> [counts, calls, Σ chunk elements, Σ chunk bytes]
    pad = np.zeros(n, dtype=np.int64)  # padding elements
    pad_bytes = np.zeros(n, dtype=np.int64)
    exact_pad, exact_pad_bytes = [0] * n, [0] * n  # used once the int64 sums could overflow
    bound = 0  # an upper bound of every int64 sum above
    uneven = [0] * n, [0] * n  # elements and bytes of layouts that send each chunk's own length (partitions)
    for shared, calls in groups.values():
        if not shared.uniform:
            per = shared.sent_elements if side == "sent" else shared.received_elements
            for k, e in enumerate(per):
                uneven[0][k] += e * calls
                uneven[1][k] += e * calls * shared.itemsize
            s = schedules.setdefault(id(shared.counts), [shared.counts, 0, 0, 0])
            s[1] += calls
            continue
        s = schedules.setdefault(id(shared.counts), [shared.counts, 0, 0, 0])
        s[1] += calls
        s[2] += calls * shared.layout.chunk_size
        s[3] += calls * shared.layout.chunk_size * shared.itemsize
        vec = shared.sent_padding if side == "sent" else shared.received_padding
        bound += calls * (int(vec.max()) if vec.size else 0) * shared.itemsize
        if bound < _INT64_SUM_LIMIT:
            pad += vec * calls
            pad_bytes += vec * (calls * shared.itemsize)
        else:
            for k, v in enumerate(vec.tolist()):
                exact_pad[k] += v * calls
                exact_pad_bytes[k] += v * calls * shared.itemsize
    messages, elements, nbytes = [0] * n, [0] * n, [0] * n
    for counts, calls, chunk_elements, chunk_bytes in schedules.values():
        per = (counts.sent_messages if side == "sent" else counts.received_messages).tolist()
        for k, m in enumerate(per):
            messages[k] += m * calls
            elements[k] += m * chunk_elements
            nbytes[k] += m * chunk_bytes
    pad_list, pad_bytes_list = pad.tolist(), pad_bytes.tolist()
    return [Traffic(messages[k], elements[k] + uneven[0][k], nbytes[k] + uneven[1][k], pad_list[k] + exact_pad[k],
                    pad_bytes_list[k] + exact_pad_bytes[k]) for k in range(n)]
