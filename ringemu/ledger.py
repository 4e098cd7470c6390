"""CommLedger: exact traffic counts per link, per step, per collective label, read from the schedule.

Every collective that runs (on real or on size-only buffers) is recorded with its schedule, chunk layout and
element size. Counts are derived by walking the schedule's transfer table with integer numpy aggregation, so the
lesson's Ψ = 27,781,427,952 on N = 1024 ranks is counted in milliseconds, never by a closed-form formula. All
results are Python ints (bytes, elements, messages) or ``fractions.Fraction`` (ratios, seconds).

Padding: a transfer always carries a whole chunk (``layout.chunk_size`` elements); the part of it beyond the
buffer's real length is padding, reported separately.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Iterable

import numpy as np

from .dtypes import dtype_name, resolve_dtype
from .layout import ChunkLayout
from .schedule import Schedule

__all__ = ["Traffic", "RankTraffic", "CollectiveRecord", "CommLedger"]


@dataclass(frozen=True)
class Traffic:
    """Messages, elements and bytes of some set of transfers; ``padding_*`` is the part that is padding."""

    messages: int = 0
    elements: int = 0
    bytes: int = 0
    padding_elements: int = 0
    padding_bytes: int = 0

    def __add__(self, other: "Traffic") -> "Traffic":
        return Traffic(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple[int, ...]:
        return (self.messages, self.elements, self.bytes, self.padding_elements, self.padding_bytes)

    def as_dict(self) -> dict[str, int]:
        return dict(zip(("messages", "elements", "bytes", "padding_elements", "padding_bytes"), self.as_tuple()))


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
    """One collective call: its label, schedule, layout and element size. Aggregates are computed lazily."""

    label: str
    schedule: Schedule
    layout: ChunkLayout
    itemsize: int
    dtype: str
    size_only: bool = False

    @cached_property
    def _padding_per_transfer(self) -> np.ndarray:
        # padding, not payload, is summed in int64: a buffer's padding is < n_chunks elements, so these sums
        # stay small, while summed payloads could pass 2^63 for S near the int64 limit
        padding = self.layout.chunk_size - self.layout.payloads()
        return padding[self.schedule.table[:, 3]]

    def _traffic(self, count: np.ndarray, padding: np.ndarray) -> list[Traffic]:
        chunk, item = self.layout.chunk_size, self.itemsize
        out = []
        for messages, pad in zip(count.tolist(), padding.tolist()):  # Python ints from here on
            elements = messages * chunk
            out.append(Traffic(messages, elements, elements * item, pad, pad * item))
        return out

    def _by(self, key: np.ndarray, size: int) -> list[Traffic]:
        count = np.bincount(key, minlength=size)
        padding = np.zeros(size, dtype=np.int64)
        np.add.at(padding, key, self._padding_per_transfer)
        return self._traffic(count, padding)

    @cached_property
    def sent(self) -> list[Traffic]:
        """Per rank: what it sent."""
        return self._by(self.schedule.table[:, 1], self.schedule.n_ranks)

    @cached_property
    def received(self) -> list[Traffic]:
        """Per rank: what it received."""
        return self._by(self.schedule.table[:, 2], self.schedule.n_ranks)

    @cached_property
    def links(self) -> dict[tuple[int, int], Traffic]:
        """Per directed link (src, dst) that carried anything."""
        n = self.schedule.n_ranks
        key = self.schedule.table[:, 1] * n + self.schedule.table[:, 2]
        used, inverse = _dense_ids(key, n * n)
        traffic = self._by(inverse, used.size)
        return {(int(k) // n, int(k) % n): t for k, t in zip(used.tolist(), traffic)}

    @cached_property
    def steps(self) -> list[Traffic]:
        """Per step: everything sent in that step."""
        return self._by(self.schedule.table[:, 0], self.schedule.n_steps)

    @cached_property
    def max_link_bytes_per_step(self) -> list[int]:
        """Per step: the bytes on the busiest link (the step's duration in the α-β model)."""
        t, n = self.schedule.table, self.schedule.n_ranks
        if t.shape[0] == 0:
            return []
        key = (t[:, 0] * n + t[:, 1]) * n + t[:, 2]
        used, count = _runs(key)
        busiest = np.zeros(self.schedule.n_steps, dtype=np.int64)
        np.maximum.at(busiest, used // (n * n), count)
        return [c * self.layout.chunk_size * self.itemsize for c in busiest.tolist()]

    @cached_property
    def total(self) -> Traffic:
        return sum(self.sent, Traffic())


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
    :class:`ringemu.fault_link.Message`) of every step that ran with injected faults (:mod:`ringemu.faults`).
    """

    records: list[CollectiveRecord] = field(default_factory=list)
    messages: list = field(default_factory=list)

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
        rec = CollectiveRecord(label, schedule, layout, dt.itemsize, dtype_name(dt), size_only)
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
        sent = [sum((r.sent[k] for r in recs), Traffic()) for k in range(n)]
        received = [sum((r.received[k] for r in recs), Traffic()) for k in range(n)]
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
        buffer = sum(r.layout.padded_numel for r in recs)
        if buffer == 0:
            return Fraction(0)
        busiest = max(sum(r.sent[k].elements for r in recs) for k in range(self.n_ranks))
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


def _dense_ids(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, each row's index into them), like ``np.unique(key, return_inverse=True)`` but in
    O(len(key) + size) without sorting when the keys are below a modest ``size``."""
    if size > 1 << 24:
        used, inverse = np.unique(key, return_inverse=True)
        return used, inverse.ravel()
    present = np.bincount(key, minlength=size) > 0
    used = np.flatnonzero(present)
    index = np.cumsum(present) - 1
    return used, index[key]


def _runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys, multiplicity), like ``np.unique(key, return_counts=True)``; O(len) for sorted keys, as the
    schedules' (step, src, dst) keys are."""
    if key.size and np.all(key[1:] >= key[:-1]):
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        return key[starts], np.diff(np.append(starts, key.size))
    return np.unique(key, return_counts=True)
