"""Point-to-point messages between thread-ranks: ``send`` never waits (the data is copied into the mailbox, as
an eager engine buffers small messages), ``recv`` waits, bounded by the group's timeout, for the matching
(src, dst, tag) message. Each send is recorded in the group's ledger as one transfer
(:func:`ringemu.algorithms.direct.point_to_point`)."""
from __future__ import annotations

import threading
from collections import defaultdict, deque

import numpy as np

from ..algorithms.direct import point_to_point
from ..layout import ChunkLayout
from ..ledger import CommLedger
from .meeting import CollectiveTimeout, PeerFailure

__all__ = ["Mailbox"]


class Mailbox:
    """The messages in flight in one group of ``n_ranks`` thread-ranks."""

    def __init__(self, n_ranks: int, timeout_s: float, ledger: CommLedger | None):
        self.n_ranks, self.timeout_s, self.ledger = n_ranks, timeout_s, ledger
        self._cond = threading.Condition()
        self._queues: dict[tuple[int, int, int], deque] = defaultdict(deque)
        self._failed: dict[int, str] = {}

    def _check_peer(self, rank: int, name: str) -> None:
        if not 0 <= rank < self.n_ranks:
            raise ValueError(f"{name} must be a rank in 0..{self.n_ranks - 1}; got {rank}")

    def fail(self, rank: int, why: str) -> None:
        with self._cond:
            self._failed.setdefault(rank, why)
            self._cond.notify_all()

    def send(self, src: int, dst: int, tag: int, data: np.ndarray, label: str) -> None:
        self._check_peer(dst, "dst")
        with self._cond:
            if self.ledger is not None:
                self.ledger.record(point_to_point(self.n_ranks, src, dst), ChunkLayout(data.size, 1), data.dtype,
                                   label)
            self._queues[(src, dst, tag)].append(data)
            self._cond.notify_all()

    def recv(self, src: int, dst: int, tag: int) -> np.ndarray:
        self._check_peer(src, "src")
        key = (src, dst, tag)
        with self._cond:
            ready = self._cond.wait_for(lambda: self._queues[key] or src in self._failed, timeout=self.timeout_s)
            if self._queues[key]:
                return self._queues[key].popleft()
            if ready:
                raise PeerFailure(f"rank {dst} waited for a message from rank {src} (tag {tag}), which failed: "
                                  f"{self._failed[src]}")
            raise CollectiveTimeout(f"rank {dst} waited {self.timeout_s:g} s for a message from rank {src} "
                                    f"(tag {tag}) that never came")
