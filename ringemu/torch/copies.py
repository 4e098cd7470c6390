"""Copy-only collectives of the torch backend: the data moves by plain copies (no order of addition to keep),
and the traffic is recorded from :mod:`ringemu.algorithms.direct`'s schedules.

Each ``*_execute`` returns the executor that the last rank to arrive runs for everyone: it takes the ranks'
requests, the group's ledger and the call's label.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.direct import chain_broadcast, direct_gather, direct_scatter, pairwise_all_to_all
from ..layout import ChunkLayout

__all__ = ["broadcast_execute", "scatter_execute", "gather_execute", "all_to_all_execute"]


def _record(ledger, schedule, numel: int, dtype, label: str) -> None:
    if ledger is not None:
        ledger.record(schedule, ChunkLayout(numel, schedule.n_chunks), dtype, label)


def broadcast_execute(root: int):
    """Every rank's i-th tensor becomes the root's i-th tensor (NCCL's chain from the root)."""

    def execute(requests, ledger, label):
        schedule = chain_broadcast(len(requests), root)
        for i, src in enumerate(requests[root].payload):
            for rank, req in enumerate(requests):
                if rank != root:
                    np.copyto(req.payload[i], src)
            _record(ledger, schedule, src.size, src.dtype, label)
    return execute


def scatter_execute(root: int):
    """Rank r's output becomes piece r of the root's list (payload: (output, pieces or None))."""

    def execute(requests, ledger, label):
        pieces = requests[root].payload[1]
        for rank, req in enumerate(requests):
            np.copyto(req.payload[0], pieces[rank])
        first = requests[0].payload[0]
        _record(ledger, direct_scatter(len(requests), root), first.size * len(requests), first.dtype, label)
    return execute


def gather_execute(root: int):
    """Piece r of the root's list becomes rank r's input (payload: (input, pieces or None))."""

    def execute(requests, ledger, label):
        pieces = requests[root].payload[1]
        for rank, req in enumerate(requests):
            np.copyto(pieces[rank], req.payload[0])
        first = requests[0].payload[0]
        _record(ledger, direct_gather(len(requests), root), first.size * len(requests), first.dtype, label)
    return execute


def all_to_all_execute():
    """Piece d of rank s's input becomes piece s of rank d's output (payload: (output pieces, input pieces))."""

    def execute(requests, ledger, label):
        for src, req in enumerate(requests):
            for dst, piece in enumerate(req.payload[1]):
                np.copyto(requests[dst].payload[0][src], piece)
        first = requests[0].payload[1][0]
        _record(ledger, pairwise_all_to_all(len(requests)), first.size * len(requests), first.dtype, label)
    return execute
