"""Copy-only collectives of the torch backend: the data moves by plain copies (no order of addition to keep),
and the traffic is recorded from :mod:`ringemu.algorithms.direct`'s schedules."""
from __future__ import annotations

import numpy as np

from ..algorithms.direct import chain_broadcast
from ..layout import ChunkLayout

__all__ = ["broadcast_execute"]


def broadcast_execute(root: int):
    """The executor of a broadcast from ``root``: every rank's i-th tensor becomes the root's i-th tensor."""

    def execute(requests, ledger, label):
        source = requests[root].payload
        schedule = chain_broadcast(len(requests), root)
        for i, src in enumerate(source):
            for rank, req in enumerate(requests):
                if rank != root:
                    np.copyto(req.payload[i], src)
            if ledger is not None:
                ledger.record(schedule, ChunkLayout(src.size, 1), src.dtype, label)
    return execute
