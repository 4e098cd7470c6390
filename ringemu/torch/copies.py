"""Copy-only collectives of the torch backend: the data moves by plain copies (no order of addition to keep),
and the traffic is recorded from :mod:`ringemu.algorithms.direct`'s schedules.

Each ``*_execute`` returns the executor that the last rank to arrive runs for everyone: it takes the ranks'
requests, the group's ledger and the call's label.
"""
from __future__ import annotations

import numpy as np

from ..algorithms.direct import chain_broadcast, direct_gather, direct_scatter, pairwise_all_to_all, point_to_point
from ..layout import ChunkLayout
from ..torch_tensors import EXACT_NUMPY_OF
from .counting import record, record_collective

__all__ = ["broadcast_execute", "scatter_execute", "gather_execute", "all_to_all_execute", "all_gather_execute",
           "split_sizes"]

_NARROW = frozenset(EXACT_NUMPY_OF.values())  # dtypes ringemu's kernels do not take: moved by plain copies


def _record(ledger, schedule, numel: int, dtype, label: str) -> None:
    record(ledger, schedule, ChunkLayout(numel, schedule.n_chunks), dtype, label)


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
    """Piece d of rank s's input becomes piece s of rank d's output (payload: (output pieces, input pieces)).
    Pieces may differ in size (``all_to_all_single``'s split sizes) as long as every rank's piece for rank d is
    as long as the piece rank d expects from it; equal pieces are counted as N-1 pairwise steps, unequal ones as
    one direct message per (src, dst) pair that carries anything (a rank's piece for itself never leaves it)."""

    def execute(requests, ledger, label):
        n = len(requests)
        sizes = [[piece.size for piece in req.payload[1]] for req in requests]  # sizes[src][dst]
        for src in range(n):
            for dst in range(n):
                want = requests[dst].payload[0][src].size
                if sizes[src][dst] != want:
                    raise ValueError(f"all_to_all: rank {src} sends {sizes[src][dst]} elements to rank {dst}, "
                                     f"which expects {want} from it (input and output split sizes must match)")
        for src, req in enumerate(requests):
            for dst, piece in enumerate(req.payload[1]):
                np.copyto(requests[dst].payload[0][src], piece)
        dtype = requests[0].payload[1][0].dtype
        flat = {size for row in sizes for size in row}
        if len(flat) == 1:
            _record(ledger, pairwise_all_to_all(n), flat.pop() * n, dtype, label)
            return
        for src in range(n):
            for dst in range(n):
                if src != dst and sizes[src][dst]:
                    record(ledger, point_to_point(n, src, dst), ChunkLayout(sizes[src][dst], 1), dtype, label)
    return execute


def all_gather_execute(algorithm: str, mode: str, gather):
    """Every rank's output becomes the concatenation of the ranks' inputs (payload: (input, output)), by
    ``gather(shards, outputs, ledger, label)`` (ringemu's all-gather into the outputs, for its dtypes) or, for the dtypes its kernels do
    not take, by plain copies with the algorithm's all-gather counted: a copy-only collective's result does not
    depend on its order."""

    def execute(requests, ledger, label):
        shards = [r.payload[0] for r in requests]
        if shards[0].dtype in _NARROW:
            n, size = len(shards), shards[0].size
            for req in requests:
                for r, shard in enumerate(shards):
                    np.copyto(req.payload[1][r * size:(r + 1) * size], shard)
            record_collective(ledger, "all-gather", n, n * size, shards[0].dtype, label, algorithm)
            return
        gather(shards, [r.payload[1] for r in requests], ledger, label)
    return execute


def split_sizes(splits, rows: int, n: int, what: str) -> list[int]:
    """``all_to_all_single``'s split sizes (a list, a tuple, a 1-D tensor or array, or empty for equal pieces of
    dim 0) as N non-negative ints summing to ``rows``, or a clear error."""
    if splits is None or len(splits) == 0:
        if rows % n:
            raise ValueError(f"all_to_all_single: without {what}, dim 0 ({rows}) must divide into {n} equal pieces")
        return [rows // n] * n
    values = splits.tolist() if hasattr(splits, "tolist") else list(splits)
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
        raise ValueError(f"all_to_all_single: {what} must be {n} non-negative ints (one per rank); got {values}")
    if sum(values) != rows:
        raise ValueError(f"all_to_all_single: {what} {values} sum to {sum(values)}, but dim 0 has {rows} rows")
    return values
