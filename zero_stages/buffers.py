"""One rank's buffers: every allocation and release goes through an :class:`Arena` into the MemoryLedger.

The same stage code runs on real numpy arrays and on size-only :class:`~ringemu.virtual.VirtualBuffer`
(``size_only=True``): the arena then hands out VirtualBuffers and records the same bytes, and the functions below
(:func:`part`, :func:`write`, :func:`cast`) do no element work. A Communicator result that stands for a buffer
the rank already holds (an all-gather into the weights, a reduce-scatter into the gradient shard) is written
into that buffer with :func:`write`; it is not counted twice.
"""
from __future__ import annotations

import numpy as np

from ringemu.memory import MemoryLedger
from ringemu.virtual import VirtualBuffer, is_virtual

__all__ = ["Arena", "part", "write", "cast", "snapshot", "quiet_signalling_nans", "full_weights16"]


class Arena:
    """Allocator of one rank. ``padding_bytes`` is the model-state padding it holds now (ZeRO shards)."""

    def __init__(self, memory: MemoryLedger, rank: int, size_only: bool = False):
        self.memory, self.rank, self.size_only = memory, rank, size_only
        self._padding: dict[str, int] = {}

    def alloc(self, name: str, category: str, numel: int, dtype, padding: int = 0):
        """A zero-filled 1-D buffer (or its size-only stand-in) of ``numel`` elements, recorded in the ledger.

        ``padding`` says how many of the elements are padding (reported, still allocated)."""
        dtype = np.dtype(dtype)
        self.memory.alloc(self.rank, name, category, numel * dtype.itemsize)
        self._padding[name] = padding * dtype.itemsize
        return VirtualBuffer((numel,), dtype) if self.size_only else np.zeros(numel, dtype=dtype)

    def free(self, name: str) -> None:
        self.memory.free(self.rank, name)
        del self._padding[name]

    def live_names(self) -> list[str]:
        """Names of the buffers this arena holds now."""
        return list(self._padding)

    @property
    def padding_bytes(self) -> int:
        return sum(self._padding.values())


def part(buffer, start: int, stop: int):
    """``buffer[start:stop]`` as a view (size-only: a stand-in of that length)."""
    if is_virtual(buffer):
        return VirtualBuffer((stop - start,), buffer.dtype)
    return buffer[start:stop]


def write(dst, src) -> None:
    """Copy ``src`` into ``dst`` (same length); nothing to do for size-only buffers."""
    if is_virtual(dst) or is_virtual(src):
        if dst.shape != src.shape:
            raise ValueError(f"size-only write of {src.shape} into {dst.shape}")
        return
    dst[...] = src


def quiet_signalling_nans(values: np.ndarray) -> np.ndarray:
    """fp32 ``values`` with every signalling NaN made quiet (quiet bit 0x00400000 set, payload and sign kept)."""
    bits = values.view(np.uint32)
    signalling = np.isnan(values) & ((bits & np.uint32(0x00400000)) == 0)
    return np.where(signalling, bits | np.uint32(0x00400000), bits).view(np.float32) if signalling.any() else values


def cast(src, dtype):
    """``src`` converted to ``dtype`` (round to nearest even); size-only stays size-only. fp32 -> bf16/fp16 of a
    1-D array runs the compiled kernel when the JIT is on: the same bits as ``astype``, except that an fp32
    signalling NaN becomes a quiet fp16 NaN (the CPU's F16C conversion quiets it); the JIT-off path quiets it the
    same way first, so both paths agree."""
    if is_virtual(src):
        return VirtualBuffer(src.shape, dtype)
    from ringemu._jit import JIT_ENABLED

    from .averaging import kernel_kind16
    kind = kernel_kind16(dtype)
    if src.dtype == np.float32 and np.dtype(dtype) == np.float16:
        src_for_astype = quiet_signalling_nans(src)
    else:
        src_for_astype = src
    if not JIT_ENABLED or kind is None or src.dtype != np.float32 or src.ndim != 1:
        return src_for_astype.astype(dtype)
    from ._adam_kernel import cast16_kernel
    out = np.empty(src.shape, dtype)
    cast16_kernel(src, kind, out.view(np.uint16))
    return out


def snapshot(buffer):
    """A private copy for the run's history (None for size-only)."""
    return None if is_virtual(buffer) else np.array(buffer, copy=True)


def full_weights16(arena, job) -> list:
    """Every unit's whole 16-bit parameters (2 B each, ZeRO §3.1), allocated through the MemoryLedger and filled
    with the job's initial fp32 values rounded once to the 16-bit type (nothing to fill when size-only)."""
    weights16 = [arena.alloc(f"weights16[{u}]", "weights16", s, job.wire) for u, s in enumerate(job.flat.unit_sizes)]
    for u, buf in enumerate(weights16):
        initial = job.init_unit(u)
        if initial is not None:
            write(buf, initial.astype(job.wire))
    return weights16
