"""How a flat buffer of ``numel`` elements is cut into ``n_chunks`` equal chunks, with padding.

Convention (DESIGN.md): a buffer whose length S is not a multiple of N is padded to N·ceil(S/N). Chunk c covers
``[c·chunk_size, (c+1)·chunk_size)`` of the padded buffer; its payload is the part below S. The same map is
ZeRO's shard map (Rajbhandari et al. 2019, §5.1): rank r owns chunk r.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import MAX_NUMEL, check_int, check_numel  # check_numel, MAX_NUMEL kept importable from here

__all__ = ["ChunkLayout"]


@dataclass(frozen=True)
class ChunkLayout:
    """``numel`` elements in ``n_chunks`` chunks of ``chunk_size = ceil(numel / n_chunks)`` elements."""

    numel: int
    n_chunks: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "numel", check_numel(self.numel))
        object.__setattr__(self, "n_chunks", check_int(self.n_chunks, "n_chunks", minimum=1, maximum=MAX_NUMEL))

    @property
    def chunk_size(self) -> int:
        """Elements per chunk, padding included: ceil(numel / n_chunks)."""
        return -(-self.numel // self.n_chunks)

    @property
    def padded_numel(self) -> int:
        """n_chunks · chunk_size: the buffer length the schedule runs on."""
        return self.chunk_size * self.n_chunks

    @property
    def padding(self) -> int:
        """Padding elements in the whole buffer: padded_numel - numel (always < n_chunks)."""
        return self.padded_numel - self.numel

    def start(self, chunk: int) -> int:
        """Offset of ``chunk`` in the padded buffer."""
        return chunk * self.chunk_size

    def payload(self, chunk: int) -> int:
        """Elements of ``chunk`` that are real data (the rest of the chunk is padding)."""
        return max(0, min(self.chunk_size, self.numel - chunk * self.chunk_size))

    def payloads(self) -> np.ndarray:
        """Payload elements of every chunk, as an int64 array of length n_chunks."""
        starts = np.arange(self.n_chunks, dtype=np.int64) * self.chunk_size
        return np.clip(self.numel - starts, 0, self.chunk_size)

    def payload_slice(self, chunk: int) -> slice:
        """The slice of the unpadded buffer that ``chunk`` holds (empty if the chunk is all padding)."""
        lo = min(self.numel, chunk * self.chunk_size)
        return slice(lo, lo + self.payload(chunk))
