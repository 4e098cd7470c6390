"""Size-only buffers: a shape and a dtype, no storage.

A :class:`VirtualBuffer` stands where an array would, so the same collective or stage code runs at the lesson's
full scale (Ψ = 27,781,427,952 parameters) with only the ledgers doing work (DESIGN.md, "size-only mode").
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from .checks import is_integer
from .dtypes import resolve_dtype

__all__ = ["VirtualBuffer", "is_virtual"]


@dataclass(frozen=True)
class VirtualBuffer:
    """An array's shape and dtype without its elements. ``nbytes`` is exact (a Python int)."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape, dtype) -> None:
        dims = (shape,) if is_integer(shape) else tuple(shape)
        for d in dims:
            if not is_integer(d):
                raise TypeError(f"VirtualBuffer shape must be non-negative integers, got {shape!r}")
            if d < 0:
                raise ValueError(f"VirtualBuffer shape must be non-negative integers, got {shape!r}")
        object.__setattr__(self, "shape", tuple(operator.index(d) for d in dims))
        object.__setattr__(self, "dtype", resolve_dtype(dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index):
        """Indexing a world buffer's rank (``world[r]``) gives that rank's row, still size-only."""
        if self.ndim >= 1 and isinstance(index, (int, np.integer)):
            if not -self.shape[0] <= index < self.shape[0]:
                raise IndexError(f"index {index} out of range for {self.shape[0]} rows")
            return VirtualBuffer(self.shape[1:], self.dtype)
        raise TypeError("a VirtualBuffer supports only integer row indexing")


def is_virtual(buffer: object) -> bool:
    """True for a size-only buffer."""
    return isinstance(buffer, VirtualBuffer)
