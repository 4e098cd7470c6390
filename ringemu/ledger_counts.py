"""The counts behind a CommLedger, computed once per schedule and once per (schedule, layout, element size).

Identical collective calls — the same schedule on the same chunk layout and element size — have identical traffic,
so a ledger of many calls (a model's units, step after step) walks each distinct schedule's transfer table once:

* :class:`ScheduleCounts` (per schedule): messages each rank sends and receives, per step, per directed link, the
  busiest link of each step, and the transfers grouped by chunk. None of it depends on the buffer's size.
* :class:`LayoutCounts` (per schedule, layout and element size): the same as :class:`Traffic` values (defined
  here, exported by :mod:`ringemu.ledger`). A transfer carries a whole chunk, so elements are messages ×
  ``chunk_size``; padding is the part of a chunk beyond the buffer's real length, and only the last chunks of a
  buffer (or of each shard, for layouts that split shards) have any, so padding is summed over the transfers of
  those chunks only.

Counts are Python ints (or int64 arrays of message counts, which are at most the schedule's transfer count);
elements and bytes are multiplied out in Python ints, so no count can overflow. The tests compare every figure
with a plain walk of the transfer table, transfer by transfer.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .layout import ChunkLayout
from .schedule import Schedule

__all__ = ["Traffic", "ScheduleCounts", "LayoutCounts"]


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


class ScheduleCounts:
    """Message counts of one schedule, independent of the buffer it runs on (int64 arrays, read-only)."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self._asked = 0  # calls of transfers_of so far
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None  # (transfers by chunk, chunk offsets)

    def _bincount(self, column: int, size: int) -> np.ndarray:
        out = np.bincount(self.schedule.table[:, column], minlength=size).astype(np.int64)
        out.setflags(write=False)
        return out

    @cached_property
    def sent_messages(self) -> np.ndarray:
        """Per rank: transfers it sends."""
        return self._bincount(1, self.schedule.n_ranks)

    @cached_property
    def received_messages(self) -> np.ndarray:
        """Per rank: transfers it receives."""
        return self._bincount(2, self.schedule.n_ranks)

    @cached_property
    def step_messages(self) -> np.ndarray:
        """Per step: transfers in that step."""
        return self._bincount(0, self.schedule.n_steps)

    @cached_property
    def links(self) -> tuple[np.ndarray, np.ndarray]:
        """(directed link keys src·N + dst that carried anything, sorted; transfers on each)."""
        n, t = self.schedule.n_ranks, self.schedule.table
        key = t[:, 1] * n + t[:, 2]
        if n * n <= 1 << 24:
            count = np.bincount(key, minlength=n * n)
            used = np.flatnonzero(count)
            return used, count[used].astype(np.int64)
        used, count = np.unique(key, return_counts=True)
        return used, count.astype(np.int64)

    @cached_property
    def busiest_link_messages(self) -> np.ndarray:
        """Per step: transfers on the step's busiest directed link."""
        t, n = self.schedule.table, self.schedule.n_ranks
        busiest = np.zeros(self.schedule.n_steps, dtype=np.int64)
        if t.shape[0]:
            key = (t[:, 0] * n + t[:, 1]) * n + t[:, 2]
            if np.all(key[1:] >= key[:-1]):  # the schedules' (step, src, dst) keys are sorted: O(T) runs
                starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
                used, count = key[starts], np.diff(np.append(starts, key.size))
            else:
                used, count = np.unique(key, return_counts=True)
            np.maximum.at(busiest, used // (n * n), count)
        return busiest

    def transfers_of(self, chunks: np.ndarray) -> np.ndarray:
        """Indices (ascending) of the transfers that carry any of ``chunks`` (sorted chunk ids; a buffer's padding
        lies in few chunks). A mask over the chunk column while a schedule has seen few layouts; from the ninth on,
        a by-chunk index built once (O(T log T) once, then O(answer) per call)."""
        if chunks.size == 0:
            return np.zeros(0, dtype=np.int64)
        column = self.schedule.table[:, 3]
        self._asked += 1
        if self._asked <= 8:
            wanted = np.zeros(self.schedule.n_chunks, dtype=bool)
            wanted[chunks] = True
            return np.flatnonzero(wanted[column])
        if self._sorted is None:
            order = np.argsort(column, kind="stable")
            self._sorted = (order, np.searchsorted(column[order], np.arange(self.schedule.n_chunks + 1)))
        order, bounds = self._sorted
        return np.sort(np.concatenate([order[bounds[c]:bounds[c + 1]] for c in chunks.tolist()]))


class LayoutCounts:
    """Traffic of one schedule on one chunk layout with one element size: what every identical call sent.

    A textbook :class:`~ringemu.layout.ChunkLayout` puts whole chunks on the wire (elements = messages ×
    ``chunk_size``, padding counted apart); an engine's :class:`~ringemu.partition.Partition` puts each chunk's own
    length on the wire (elements = the sum of the lengths of the chunks sent, no padding)."""

    def __init__(self, counts: ScheduleCounts, layout: ChunkLayout, itemsize: int):
        self.counts, self.layout, self.itemsize = counts, layout, itemsize
        self.uniform = bool(getattr(layout, "pads_on_wire", True))  # every transfer carries chunk_size elements

    @cached_property
    def _padded_transfers(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the transfers that carry padding, the padding elements each carries)."""
        if not self.uniform:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pad = self.layout.chunk_size - self.layout.payloads()  # per chunk, int64; nonzero for few chunks
        index = self.counts.transfers_of(np.flatnonzero(pad))
        return index, pad[self.counts.schedule.table[index, 3]]

    def _padding_by(self, column: int, size: int) -> np.ndarray:
        """Padding elements summed by a table column (src, dst or step): int64, each sum < transfers · n_chunks."""
        index, padding = self._padded_transfers
        out = np.zeros(size, dtype=np.int64)
        if index.size:
            np.add.at(out, self.counts.schedule.table[index, column], padding)
        out.setflags(write=False)
        return out

    @cached_property
    def _transfer_elements(self) -> np.ndarray:
        """Elements each transfer carries (a partition's chunk lengths; int64, each at most S)."""
        return np.asarray(self.layout.wire_elements(), dtype=np.int64)[self.counts.schedule.table[:, 3]]

    def _elements_by(self, column: int, size: int) -> list[int]:
        """Elements summed by a table column: messages × chunk_size (uniform) or the transfers' own lengths."""
        if self.uniform:
            messages = {1: self.counts.sent_messages, 2: self.counts.received_messages,
                        0: self.counts.step_messages}[column]
            return [m * self.layout.chunk_size for m in messages.tolist()]
        out = np.zeros(size, dtype=np.int64)  # each sum <= transfers · S < 2^63 for every schedule built here
        np.add.at(out, self.counts.schedule.table[:, column], self._transfer_elements)
        return out.tolist()

    @cached_property
    def sent_padding(self) -> np.ndarray:
        """Per rank: padding elements it sends."""
        return self._padding_by(1, self.counts.schedule.n_ranks)

    @cached_property
    def received_padding(self) -> np.ndarray:
        """Per rank: padding elements it receives."""
        return self._padding_by(2, self.counts.schedule.n_ranks)

    @cached_property
    def sent_elements(self) -> list[int]:
        """Per rank: elements it sends (padding included where the layout sends it)."""
        return self._elements_by(1, self.counts.schedule.n_ranks)

    @cached_property
    def received_elements(self) -> list[int]:
        return self._elements_by(2, self.counts.schedule.n_ranks)

    def _traffic(self, messages: np.ndarray, elements: list[int], padding: np.ndarray) -> list:
        item = self.itemsize
        return [Traffic(m, e, e * item, pad, pad * item)
                for m, e, pad in zip(messages.tolist(), elements, padding.tolist())]  # Python ints from here on

    @cached_property
    def sent(self) -> list:
        """Per rank: the Traffic it sent."""
        return self._traffic(self.counts.sent_messages, self.sent_elements, self.sent_padding)

    @cached_property
    def received(self) -> list:
        """Per rank: the Traffic it received."""
        return self._traffic(self.counts.received_messages, self.received_elements, self.received_padding)

    @cached_property
    def steps(self) -> list:
        """Per step: everything sent in that step."""
        n_steps = self.counts.schedule.n_steps
        return self._traffic(self.counts.step_messages, self._elements_by(0, n_steps), self._padding_by(0, n_steps))

    @cached_property
    def links(self) -> dict:
        """Per directed link (src, dst) that carried anything: its Traffic."""
        n = self.counts.schedule.n_ranks
        used, messages = self.counts.links
        index, padding = self._padded_transfers
        table = self.counts.schedule.table
        pad = np.zeros(used.size, dtype=np.int64)
        if index.size:
            key = table[index, 1] * n + table[index, 2]
            np.add.at(pad, np.searchsorted(used, key), padding)
        if self.uniform:
            elements = [m * self.layout.chunk_size for m in messages.tolist()]
        else:
            per = np.zeros(used.size, dtype=np.int64)
            np.add.at(per, np.searchsorted(used, table[:, 1] * n + table[:, 2]), self._transfer_elements)
            elements = per.tolist()
        return {(int(k) // n, int(k) % n): t for k, t in zip(used.tolist(), self._traffic(messages, elements, pad))}

    @cached_property
    def max_link_bytes_per_step(self) -> list[int]:
        """Per step: bytes on the busiest link (the step's duration in the α-β model)."""
        if self.uniform:
            return [c * self.layout.chunk_size * self.itemsize for c in self.counts.busiest_link_messages.tolist()]
        t, n = self.counts.schedule.table, self.counts.schedule.n_ranks
        busiest = np.zeros(self.counts.schedule.n_steps, dtype=np.int64)
        if t.shape[0]:
            used, inverse = np.unique((t[:, 0] * n + t[:, 1]) * n + t[:, 2], return_inverse=True)
            per = np.zeros(used.size, dtype=np.int64)
            np.add.at(per, inverse, self._transfer_elements)
            np.maximum.at(busiest, used // (n * n), per)
        return [int(e) * self.itemsize for e in busiest.tolist()]

    @cached_property
    def total(self):
        """Everything every rank sent."""
        m = int(self.counts.sent_messages.sum())
        pad = sum(self.sent_padding.tolist())
        elements = sum(self.sent_elements)
        return Traffic(m, elements, elements * self.itemsize, pad, pad * self.itemsize)
