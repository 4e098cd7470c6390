"""The order in which gloo's CPU all-reduce adds floats: a model that reproduces its bits.

gloo's ``allreduce`` (``gloo/allreduce.cc``, the algorithm torch's ProcessGroupGloo runs for dense CPU tensors)
is a ring too, but not ringemu's ring:

* it runs the other way round: each rank sends to rank − 1 and receives from rank + 1, so chunk c is added as
  ``((x[c-1] + x[c-2]) + ...) + x[c]`` (ringemu: ``((x[c+1] + x[c+2]) + ...) + x[c]``);
* its chunks are not ``ceil(S/N)`` elements: the buffer is cut into segments of ``roundUp(ceil(bytes / 2N),
  itemsize)`` bytes, their count rounded up to a multiple of N (at least 2N), and chunk c is the c-th run of
  ``segments / N`` consecutive segments. (The 1 MiB segment cap declared in ``gloo/allreduce.h`` does not
  show in what torch 2.13 computes.)

Scope, measured against torch 2.13 gloo on this machine: bit for bit on every element for buffers up to 3
million elements (fp32 3,000,001 at N = 3; bf16 3,000,003 at N = 4; fp32, bf16 and fp16 at N = 3..8 below).
At 5 million elements (bf16 and fp32, N = 4) gloo places chunk boundaries differently; this model then
differs on the elements near the boundaries only.

For N = 2 and N = 3 the two chains are the same additions (a + b = b + a exactly; for N = 3, c-1 = c+2 and
c-2 = c+1), so only elements between the two chunk boundaries can differ. For N ≥ 4 they differ on a share
of the elements that grows with N (measured, random fp32: 23 % at N = 4, 50 % at N = 8); both are equally
accurate, just different bits. Integer blocks (:mod:`ringemu.blocks`) are exact in any order.
torch's ``reduce_scatter_tensor`` on gloo returns the slice of this same all-reduce (its traffic is an
all-reduce's, :mod:`ringemu.backends.wire_bytes`). 16-bit types add in fp32 and round per hop, as ringemu's
wire arithmetic does (:func:`ringemu.reference.hop_add`).
"""
from __future__ import annotations

import numpy as np

from ..dtypes import resolve_dtype
from ..reference import hop_add

__all__ = ["gloo_chunk_bounds", "gloo_ring_sum"]


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def gloo_chunk_bounds(numel: int, n_ranks: int, itemsize: int) -> list[tuple[int, int]]:
    """Element range [start, stop) of every rank's chunk in gloo's ring all-reduce (module doc)."""
    total = numel * itemsize
    if total == 0:
        return [(0, 0)] * n_ranks
    if n_ranks == 1:
        return [(0, numel)]
    segment = _round_up(-(-total // (2 * n_ranks)), itemsize)  # bytes; >= 2 segments per chunk
    segments = _round_up(max(-(-total // segment), 2 * n_ranks), n_ranks)
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
