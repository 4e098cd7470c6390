"""The Communicator interface that per-rank code (the ZeRO stages) is written against.

One Communicator belongs to one rank. Buffers are flat (1-D) and unpadded; the communicator pads to
``ChunkLayout(numel, n_ranks)`` internally, as a real engine's flat-parameter code must. Size-only buffers
(:class:`~ringemu.virtual.VirtualBuffer`) are accepted wherever an array is, and only count.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..layout import ChunkLayout
from ..ledger import CommLedger

__all__ = ["Communicator", "RankFailure"]


@runtime_checkable
class Communicator(Protocol):
    """Ring collectives seen from one rank. Every rank of the world must make the same calls in the same order.

    Guarantees shared by every implementation: results are bit-identical to the ring schedule's order of
    addition (:mod:`ringemu.schedule`), and ``ledger`` (if not None) records each call under ``label``.
    """

    rank: int
    n_ranks: int
    ledger: CommLedger | None

    def reduce_scatter(self, buffer: np.ndarray, label: str = "reduce_scatter") -> np.ndarray:
        """Sum ``buffer`` (length S) over ranks; return this rank's chunk of ``ChunkLayout(S, n_ranks)``."""

    def all_gather(self, shard: np.ndarray, numel: int, label: str = "all_gather") -> np.ndarray:
        """Concatenate every rank's shard (rank r's shard = chunk r of ``ChunkLayout(numel, n_ranks)``)."""

    def all_reduce(self, buffer: np.ndarray, label: str = "all_reduce") -> np.ndarray:
        """Sum ``buffer`` over ranks (ring reduce-scatter then all-gather); every rank gets the sum."""

    def layout(self, numel: int) -> ChunkLayout:
        """The shard map of a flat buffer of ``numel`` elements: rank r owns chunk r."""


class RankFailure(RuntimeError):
    """A rank raised, or the ranks' collective calls did not match (raised by the in-process worlds)."""
