"""The order in which gloo's CPU all-reduce adds floats: a model that reproduces its bits (a test oracle for
the torch backend's tests: it explains measured bits and is not part of the emulator).

gloo's ``allreduce`` (``gloo/allreduce.cc``, the algorithm torch's ProcessGroupGloo runs for dense CPU tensors)
is a ring too, but not ringemu's ring:

* it runs the other way round: each rank sends to rank − 1 and receives from rank + 1, so chunk c is added as
  ``((x[c-1] + x[c-2]) + ...) + x[c]`` (ringemu: ``((x[c+1] + x[c+2]) + ...) + x[c]``);
* its chunks are not ``ceil(S/N)`` elements. The buffer is cut into ``segments = roundUp(max(ceil(bytes /
  1 MiB), 2N), N)`` segments of ``roundUp(ceil(bytes / segments), itemsize)`` bytes each (at least two per rank,
  none above gloo's 1 MiB ``kMaxSegmentSize`` before rounding), and chunk c is the c-th run of ``segments / N``
  consecutive segments.

Scope, measured against torch 2.13's gloo on this machine: every element bit for bit, fp32 / bf16 / fp16, N = 3 to
8, from 1 element up to 5,000,003 fp32 (20 MB) and 7,000,001 fp16 elements, below and above the segment cap.

For N = 2 and N = 3 the two chains are the same additions (a + b = b + a exactly; for N = 3, c-1 = c+2 and
c-2 = c+1), so only elements between the two chunk boundaries can differ. For N ≥ 4 they differ on a share
of the elements that grows with N (measured, random fp32: 23 % at N = 4, 50 % at N = 8); both are equally
accurate, just different bits. Integer blocks (:mod:`ringemu.blocks`) are exact in any order.
torch's ``reduce_scatter_tensor`` on gloo returns the slice of this same all-reduce (its traffic is an
all-reduce's, ``zero_stages/torch/wire_bytes.py``). 16-bit types add in fp32 and round per hop, as ringemu's
wire arithmetic does (:func:`ringemu.reference.hop_add`).
"""
from __future__ import annotations

import numpy as np

from ringemu.dtypes import resolve_dtype
from ringemu.reference import hop_add

__all__ = ["gloo_chunk_bounds", "gloo_ring_sum", "GLOO_MAX_SEGMENT_BYTES"]

GLOO_MAX_SEGMENT_BYTES = 1 << 20  # AllreduceOptions kMaxSegmentSize, gloo/allreduce.h


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def gloo_chunk_bounds(numel: int, n_ranks: int, itemsize: int,
                      max_segment_bytes: int = GLOO_MAX_SEGMENT_BYTES) -> list[tuple[int, int]]:
    """Element range [start, stop) of every rank's chunk in gloo's ring all-reduce (module doc)."""
    total = numel * itemsize
    if total == 0:
        return [(0, 0)] * n_ranks
    if n_ranks == 1:
        return [(0, numel)]
    max_segment = itemsize * (max_segment_bytes // itemsize)
    segments = _round_up(max(-(-total // max_segment), 2 * n_ranks), n_ranks)  # >= 2 per rank, N | segments
    segment = _round_up(-(-total // segments), itemsize)  # bytes
    chunk = segments // n_ranks * segment // itemsize  # elements per chunk
    return [(min(numel, c * chunk), min(numel, (c + 1) * chunk)) for c in range(n_ranks)]


def gloo_ring_sum(world: np.ndarray) -> np.ndarray:
    """The sum over ranks of an (N, S) world with gloo's order of addition (module doc); length S."""
    if not isinstance(world, np.ndarray) or world.ndim != 2 or world.shape[0] < 1:
        raise TypeError(f"world must be an (n_ranks, numel) numpy array; got {type(world).__name__} "
                        f"of shape {getattr(world, 'shape', None)}")
    dt = resolve_dtype(world.dtype)
    n, numel = world.shape
    out = np.empty(numel, dtype=dt)
    for c, (lo, hi) in enumerate(gloo_chunk_bounds(numel, n, dt.itemsize)):
        acc = world[(c - 1) % n, lo:hi].copy()
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(2, n + 1):
                acc = hop_add(acc, world[(c - k) % n, lo:hi])
        out[lo:hi] = acc
    return out
