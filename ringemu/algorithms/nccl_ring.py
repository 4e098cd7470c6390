"""NCCL's ring all-reduce (Simple protocol), modelled from source: ``nccl:ring``. NOT run against NCCL (no GPUs).

Source: NVIDIA/nccl @ 5067397c2676d5aed50042fc39e5c8ee96eb0027 (v2.30.7, makefiles/version.mk). The order was
checked only against a per-element formula written separately from the kernel loops (the study's self-check,
2,760 cases); it has not met a GPU.

* **Channels** (:func:`nccl_channel_parts`): a port of ``scheduleCollTasksToPlan`` (src/enqueue.cc:576-720) for one
  collective alone in its plan: MinTrafficPerChannel 32 KiB, trafficPerByte 2 for all-reduce (enqueue.cc:91),
  cells of 16 KiB, lo / mid / hi channels. The number of channels is a parameter (default 1): the tuner's choice
  (``task->nMaxChannels``) is not modelled.
* **Chunks** (``runRing``, src/device/all_reduce.h:14-83): per channel, loops of ``N·chunkCount`` elements with
  ``chunkCount = chunkSize / itemsize``; Simple's ``chunkSize = stepSize·chunkSteps = (4 MiB / NCCL_STEPS 8)·4 =
  2 MiB`` (DEFAULT_BUFFSIZE src/init.cc:813, NCCL_STEPS src/include/device.h:26, ALLREDUCE_CHUNKSTEPS
  src/include/collectives.h:19, src/enqueue.cc:2222-2225), aligned down to the 512 B Simple grain; the last,
  partial loop uses ``alignUp(ceil(rem / N), 16 / itemsize)``. Slices (1 MiB, enqueue.cc:2367) pipeline inside a
  chunk and change neither bits nor bytes, so they are not steps here.
* **Order**: ring position p sends chunk p-1 first; chunk c is reduced along c+1, c+2, ..., c, each hop ``acc =
  own ⊕ received`` (prims_simple.h:223 ``srcs[0] = userInput``; common_kernel.h:92-120): ringemu's forward ring
  order, ``((x[c+1] + x[c+2]) + ...) + x[c]``, then N-1 copy steps. 2(N-1) steps per loop; loop l of every
  channel runs in the same steps (a dependency model, not timing). Ring = rank order (the topology search's
  ring is not modelled).
* 16-bit sums (``__hadd``, correctly rounded) equal an fp32 add and one rounding per hop: ringemu's wire
  arithmetic. **AVG** (``ncclAvg`` on floats → ``ncclDevPreMulSum``, enqueue.cc:2550-2565; reduce_kernel.h:707-766
  ``Apply_PreOp`` on the own input only): each rank's input × T(1/N) in its own type, then the sum
  (``average="premultiply"``).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..checks import check_int, check_numel
from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps
from .ring import _ring_half

__all__ = ["NCCL_SOURCE", "RING_CHUNK_BYTES", "GRAIN_BYTES", "nccl_channel_parts", "nccl_ring_all_reduce",
           "ALGORITHMS"]

NCCL_SOURCE = "NVIDIA/nccl @ 5067397c2676d5aed50042fc39e5c8ee96eb0027 (v2.30.7)"
RING_CHUNK_BYTES = (4 << 20) // 8 * 4  # DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS 8 × CHUNKSTEPS 4 = 2 MiB (Simple)
GRAIN_BYTES = 512  # ncclProtoGrainSize for Simple (src/include/device.h)
_MIN_TRAFFIC = 32 << 10  # MinTrafficPerChannel, src/enqueue.cc


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def nccl_channel_parts(numel: int, itemsize: int, n_channels: int,
                       traffic_per_byte: int = 2) -> list[tuple[int, int, int]]:
    """[(channel, element offset, element count)] of one collective alone in its plan (src/enqueue.cc:585-720,
    the non-CollNet branch; ``traffic_per_byte``: ncclFuncTrafficPerByte, all-reduce 2)."""
    traffic = max(_MIN_TRAFFIC, numel * itemsize * traffic_per_byte)
    per_channel = _ceil(traffic // n_channels, 16) * 16
    cell = _ceil(_ceil(_MIN_TRAFFIC, traffic_per_byte), 16) * 16  # bytes: 16 KiB for all-reduce
    per_cell, cells = cell // itemsize, _ceil(numel * itemsize, cell)
    cell_traffic = cell * traffic_per_byte
    cells_per_channel = min(cells, _ceil(per_channel, cell_traffic))
    channel = 0
    lo = cells if n_channels == 1 else min(cells, _ceil(per_channel, cell_traffic))
    mid = (cells - lo) // cells_per_channel if cells_per_channel else 0
    hi = (cells - lo) % cells_per_channel if cells_per_channel else 0
    if n_channels < (1 if lo else 0) + mid + (1 if hi else 0):
        mid = n_channels - 2
        cells_per_channel = (cells - lo) // (mid + 1)
        hi = cells_per_channel + (cells - lo) % (mid + 1)
    if hi == 0 and mid != 0:
        hi, mid = cells_per_channel, mid - 1
    if lo == 0:
        channel += 1
        if mid == 0:
            lo, hi = hi, 0
        else:
            lo, mid = cells_per_channel, mid - 1
    counts = [lo * per_cell] + [cells_per_channel * per_cell] * mid + ([hi * per_cell] if hi else [])
    counts[-1] -= cells * per_cell - numel  # the padding of the last cell comes off the last channel
    parts, offset = [], 0
    for k, count in enumerate(counts):
        parts.append((channel + k, offset, count))
        offset += count
    return parts


def _loop_bounds(n: int, offset: int, count: int, itemsize: int, chunk_bytes: int) -> list[list[int]]:
    """Per loop of one channel, the N+1 element bounds of its ring chunks (all_reduce.h runRing)."""
    chunk = chunk_bytes // GRAIN_BYTES * GRAIN_BYTES // itemsize
    loops, done = [], 0
    while done < count:
        rem = count - done
        here = chunk if rem >= n * chunk else _ceil(_ceil(rem, n), max(1, 16 // itemsize)) * max(1, 16 // itemsize)
        loops.append([offset + done + min(rem, c * here) for c in range(n + 1)])
        done += n * chunk
    return loops


def _check_sizes(numel: object, itemsize: object, n_channels: object, chunk_bytes: object) -> None:
    """A clear error for sizes NCCL's loops cannot run on: a chunk must hold at least one element once aligned down
    to the 512 B grain (a chunk of 0 elements would never advance the loop)."""
    check_numel(numel)
    check_int(n_channels, "n_channels", minimum=1)
    chunk_bytes = check_int(chunk_bytes, "chunk_bytes", minimum=GRAIN_BYTES, why="the Simple protocol's grain")
    grains = chunk_bytes // GRAIN_BYTES * GRAIN_BYTES  # bytes of a chunk, aligned down to the grain
    check_int(itemsize, "itemsize", minimum=1, maximum=grains,
              why=f"one element must fit in a chunk of {grains} B, chunk_bytes aligned down to {GRAIN_BYTES} B")


def nccl_ring_all_reduce(n_ranks: int, numel: int, itemsize: int, n_channels: int = 1,
                         chunk_bytes: int = RING_CHUNK_BYTES) -> Schedule:
    """NCCL's ring all-reduce, Simple protocol (module doc): chunks are the ring chunks of every loop of every
    channel, in buffer order."""
    n = check_n_ranks(n_ranks)
    _check_sizes(numel, itemsize, n_channels, chunk_bytes)
    channels = [_loop_bounds(n, off, cnt, itemsize, chunk_bytes)
                for _, off, cnt in nccl_channel_parts(numel, itemsize, n_channels)]
    bounds, ids = [0], []  # ids[channel][loop]: chunk id of ring chunk 0 of that loop
    for loops in channels:
        ids.append([])
        for edges in loops:
            ids[-1].append(len(bounds) - 1)
            bounds += edges[1:]
    if bounds[-1] != numel or len(bounds) == 1:  # an empty buffer: one empty chunk
        bounds.append(numel)
    b = np.asarray(bounds, dtype=np.int64)
    p = np.arange(n, dtype=np.int64)
    k = np.arange(2 * (n - 1), dtype=np.int64)[:, None]  # step within a loop: N-1 adds, then N-1 copies
    offset = np.where(k < n - 1, (p - 1 - k) % n, (p - (k - (n - 1))) % n)  # ring chunk position p sends
    cols = []
    for first in ids:  # channel by channel: within a step, channels in order, then positions
        first = np.asarray(first, dtype=np.int64)[:, None, None]
        loop = np.arange(first.shape[0], dtype=np.int64)[:, None, None]
        chunk = first + offset[None]
        step = np.broadcast_to(loop * k.size + k[None], chunk.shape)
        op = np.broadcast_to(np.where(k < n - 1, ADD, COPY)[None], chunk.shape)
        src = np.broadcast_to(p, chunk.shape)
        sent = b[chunk + 1] > b[chunk]
        cols.append((step[sent], src[sent], (src[sent] + 1) % n, chunk[sent], op[sent]))
    steps = Steps()
    if cols:
        steps.add_columns(*(np.concatenate([c[j] for c in cols]) for j in range(5)))
    s = steps.schedule("nccl_ring_all_reduce", n, len(bounds) - 1, "all", "reduced-all")
    return Schedule(s.name, n, s.n_chunks, s.n_steps, s.table, "all", "reduced-all", False, tuple(bounds))


def _cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """2(N-1)α + 2(N-1)/N·S·β: the textbook ring all-reduce (NCCL repeats it per 2 MiB loop)."""
    return 2 * _ring_half(n, nbytes, alpha, beta)


ALGORITHMS = (
    Algorithm("all-reduce", "nccl:ring", nccl_ring_all_reduce,
              "ring over loops of N chunks of <= 2 MiB, 2(N-1) steps per loop; ringemu's ring order per chunk; "
              "AVG pre-multiplies by T(1/N)",
              f"{NCCL_SOURCE}: src/device/all_reduce.h runRing", "NCCL (GPUs; modelled, not run here)", _cost,
              options=("numel", "itemsize"), average="premultiply",
              modelled=f"{NCCL_SOURCE}: src/device/all_reduce.h runRing, src/enqueue.cc scheduleCollTasksToPlan; "
                       "1 channel, Simple chunk 2 MiB (src/enqueue.cc:2225), grain 512 B; ring = rank order"),
)
