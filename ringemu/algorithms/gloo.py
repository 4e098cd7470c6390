"""gloo's collectives as torch 2.13's ProcessGroupGloo runs them on CPU: ``gloo:ring`` for all three collectives.

Source: facebookincubator/gloo @ cc441984208d0b54b4fc614301f41e82e951e5cd (the gloo torch 2.13 builds), and
pytorch/pytorch ``torch/csrc/distributed/c10d/ProcessGroupGloo.cpp``. Checked bit for bit against torch 2.13.0's
gloo on this machine by ``benchmarks/engines/gloo.py`` (every rank, fp32 and fp64; fp16 and bf16 in the study
that preceded it).

* **all-reduce** (``gloo/allreduce.cc``, ``allreduce()`` → ``ring()``): the buffer is cut into
  ``segments = roundUp(max(ceil(bytes / maxSegmentBytes), 2N), N)`` segments of ``roundUp(ceil(bytes / segments),
  itemsize)`` bytes (``maxSegmentBytes = itemsize·max(1, 1 MiB / itemsize)``, ``kMaxSegmentSize`` in
  ``gloo/allreduce.h``); rank block b is segments ``bP .. bP + P - 1`` with ``P = segments / N >= 2``. The ring is
  pipelined over segments: loop iteration i of the reduce-scatter phase (``i < (N-1)P``) has rank r send segment
  ``((r+1)P + i) mod segments`` to rank r - 1, which adds it (``out = out + tmp``); iteration i of the all-gather
  phase has rank r send segment ``(rP + i) mod segments`` to r - 1, a copy. Segments past the end are empty and
  not sent. So there are 2(N-1)P steps of one segment per rank, each rank sends 2(N-1)/N of its buffer, and block
  b's sum is ``x[b] + (x[b+1] + (... + (x[b-2] + x[b-1])))``.
* **reduce-scatter** (``reduce_scatter_tensor`` → ``ProcessGroupGloo::reduce_scatter_tensor_coalesced``): the
  whole all-reduce above on a clone of the input, then each rank keeps its own ``chunk(N)[rank]``: the bits and
  the bytes of an all-reduce (measured: loopback bytes 1.002× the all-reduce's payload at N = 4, 5 and 8).
* **all-gather** (``all_gather_into_tensor`` → ``gloo/allgather.cc allgather()``): a forward ring (send to r + 1)
  in 2(N-1) steps; each shard is cut in two halves at byte ``inBytes/2`` and in step i rank r sends half ``i & 1``
  of block ``(r - i//2) mod N``. Modelled in elements: the first half is ``len // 2`` elements, so where the byte
  split falls inside an element (an odd shard) each half message carries half an element more or less than gloo's
  (the shard's total is exact, and copies give the same bits either way). gloo posts 0-byte messages for empty
  halves; they move nothing and are left out.

16-bit types add in fp32 and round at every hop (``gloo::sum`` on ``c10::Half`` / ``c10::BFloat16``), which is
ringemu's wire arithmetic. gloo has no AVG (``average=None``). Shards are ``ChunkLayout(S, N)``'s, as for every
ringemu collective; torch requires S divisible by N for reduce-scatter and all-gather, where they are gloo's own.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..layout import ChunkLayout
from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps
from .ring import _ring_half

__all__ = ["GLOO_MAX_SEGMENT_BYTES", "gloo_segments", "gloo_all_reduce", "gloo_reduce_scatter",
           "gloo_all_gather", "ALGORITHMS"]

GLOO_MAX_SEGMENT_BYTES = 1 << 20  # kMaxSegmentSize, gloo/allreduce.h: 1 MiB


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def gloo_segments(n_ranks: int, numel: int, itemsize: int,
                  max_segment_bytes: int = GLOO_MAX_SEGMENT_BYTES) -> tuple[int, int, int]:
    """(segments, segments per rank P, segment bytes) of gloo's ring all-reduce (gloo/allreduce.cc ``ring()``)."""
    total = numel * itemsize  # bytes
    max_segment = itemsize * max(1, max_segment_bytes // itemsize)
    segments = _round_up(max(-(-total // max_segment), 2 * n_ranks), n_ranks)  # >= 2 per rank, N | segments
    return segments, segments // n_ranks, _round_up(-(-total // segments), itemsize)


def _with_partition(steps: Steps, name: str, n: int, bounds, initial: str, final: str) -> Schedule:
    s = steps.schedule(name, n, len(bounds) - 1, initial, final)
    return Schedule(s.name, n, s.n_chunks, s.n_steps, s.table, initial, final, False, tuple(int(b) for b in bounds))


def gloo_all_reduce(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """gloo's pipelined ring all-reduce for a buffer of ``numel`` elements of ``itemsize`` bytes (module doc):
    chunks are gloo's segments, one step per loop iteration."""
    n = check_n_ranks(n_ranks)
    steps = Steps()
    if n == 1 or numel == 0:
        return _with_partition(steps, "gloo_ring_all_reduce", n, (0, numel), "all", "reduced-all")
    segments, per_rank, segment_bytes = gloo_segments(n, numel, itemsize)
    bounds = np.minimum(numel, np.arange(segments + 1, dtype=np.int64) * (segment_bytes // itemsize))
    loop = np.arange((n - 1) * per_rank, dtype=np.int64)[:, None]  # iteration i of one phase
    ranks = np.arange(n, dtype=np.int64)[None, :]
    for base, op in ((1, ADD), (0, COPY)):  # the reduce-scatter phase, then the all-gather phase
        segment = ((ranks + base) * per_rank + loop) % segments
        sent = bounds[segment + 1] > bounds[segment]  # empty segments: no send
        src = np.broadcast_to(ranks, segment.shape)[sent]
        steps.add_columns(np.broadcast_to(loop, segment.shape)[sent], src, (src - 1) % n, segment[sent],
                          np.full(src.size, op, dtype=np.int64))
    return _with_partition(steps, "gloo_ring_all_reduce", n, bounds, "all", "reduced-all")


def gloo_reduce_scatter(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """torch's gloo reduce-scatter: the whole ring all-reduce, each rank keeping its own shard (module doc)."""
    return gloo_all_reduce(n_ranks, numel, itemsize).renamed("gloo_ring_reduce_scatter")


def gloo_all_gather(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """gloo's ring all-gather of an ``numel``-element output: shard b (``ChunkLayout(numel, N)``) is chunks 2b and
    2b + 1, its halves (the first ``len // 2`` elements, then the rest); step i has rank r send half ``i & 1`` of
    block ``(r - i//2) mod N`` to rank r + 1 (module doc)."""
    n = check_n_ranks(n_ranks)
    shards = ChunkLayout(numel, n)
    lo = np.minimum(numel, np.arange(n, dtype=np.int64) * shards.shard_size)
    hi = np.minimum(numel, lo + shards.shard_size)
    bounds = np.empty(2 * n + 1, dtype=np.int64)
    bounds[0], bounds[1:-1:2], bounds[2::2] = 0, lo + (hi - lo) // 2, hi
    steps = Steps()
    i = np.arange(2 * (n - 1), dtype=np.int64)[:, None]
    ranks = np.arange(n, dtype=np.int64)[None, :]
    chunk = 2 * ((ranks - i // 2) % n) + (i & 1)
    sent = bounds[chunk + 1] > bounds[chunk]  # gloo's 0-byte messages move nothing
    src = np.broadcast_to(ranks, chunk.shape)[sent]
    steps.add_columns(np.broadcast_to(i, chunk.shape)[sent], src, (src + 1) % n, chunk[sent],
                      np.full(int(sent.sum()), COPY, dtype=np.int64))
    return _with_partition(steps, "gloo_ring_all_gather", n, bounds, "own", "gathered")


def _all_reduce_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2(N-1)α + 2(N-1)/N·S·β: the textbook ring all-reduce (gloo pipelines it over 2N or more segments)."""
    return 2 * _ring_half(n, nbytes, alpha, beta)


_SOURCE = ("gloo @ cc441984208d0b54b4fc614301f41e82e951e5cd (torch 2.13.0 ProcessGroupGloo): {}")
_ENGINE = "gloo (torch 2.13 ProcessGroupGloo, CPU)"
_SIZED = dict(options=("numel", "itemsize"), average=None)  # gloo has no ReduceOp.AVG
ALGORITHMS = (
    Algorithm("reduce-scatter", "gloo:ring", gloo_reduce_scatter,
              "gloo's ring all-reduce of the whole buffer, each rank keeping its own shard: the all-reduce's bits "
              "and bytes, 2.00x a ring reduce-scatter's",
              _SOURCE.format("ProcessGroupGloo.cpp reduce_scatter_tensor_coalesced, gloo/allreduce.cc ring()"),
              _ENGINE, _all_reduce_cost, **_SIZED),
    Algorithm("all-gather", "gloo:ring", gloo_all_gather,
              "forward ring over shard halves, 2(N-1) steps; halves cut in elements (gloo cuts at byte inBytes/2: "
              "for an odd shard each half message departs from gloo's by half an element)",
              _SOURCE.format("gloo/allgather.cc allgather()"), _ENGINE, _ring_half, **_SIZED),
    Algorithm("all-reduce", "gloo:ring", gloo_all_reduce,
              "ring to rank-1, pipelined over >= 2N segments of <= 1 MiB: 2(N-1)·segments/N steps",
              _SOURCE.format("gloo/allreduce.cc allreduce() -> ring()"), _ENGINE, _all_reduce_cost,
              **_SIZED),
)
