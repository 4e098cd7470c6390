"""How a flat buffer of ``numel`` elements is cut into the chunks a schedule moves, with padding.

Convention (DESIGN.md): the shard map is ``ChunkLayout(S, N)``: a buffer whose length S is not a multiple of N is
padded to N·ceil(S/N), and chunk (shard) r covers ``[r·ceil(S/N), (r+1)·ceil(S/N))``; its payload is the part
below S. It is ZeRO's shard map (Rajbhandari et al. 2019, §5.1): rank r owns chunk r.

Some algorithms move finer or coarser pieces than shards. ``ChunkLayout(S, n_chunks, n_shards)`` keeps the shard
map of ``ChunkLayout(S, n_shards)`` whatever the schedule's chunking:

* ``n_chunks == n_shards`` (the ring): the plain layout above;
* ``n_chunks = k·n_shards`` (the bidirectional ring's halves, the double binary tree's two trees): every shard of
  ``ceil(S/N)`` elements is cut into k sub-chunks of ``ceil(ceil(S/N)/k)``; sub-chunk j of shard r is chunk
  ``r·k + j``. A shard's payload comes first and its sub-chunks' padding after it, so padding may sit inside the
  world row (:attr:`contiguous` is False), and :meth:`pad` / :meth:`unpad` / :meth:`shard_slice` place the data;
* ``n_chunks == 1`` (whole-buffer algorithms: naive, recursive doubling): one chunk of S elements, no padding;
  shard r is still the slice ``[r·ceil(S/N), ...)`` of it.

Every chunk has ``chunk_size`` elements in the padded world row (the ledger counts whole chunks), and
:meth:`payloads` says exactly how many of them are data, so the ledger reports padding exactly in every case.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import MAX_NUMEL, check_int, check_numel  # check_numel, MAX_NUMEL kept importable from here

__all__ = ["ChunkLayout"]


@dataclass(frozen=True)
class ChunkLayout:
    """``numel`` elements in ``n_chunks`` chunks of ``chunk_size`` elements; shards as ``ChunkLayout(numel,
    n_shards)`` (``n_shards`` defaults to ``n_chunks``; it must divide ``n_chunks``, or ``n_chunks`` must be 1)."""

    numel: int
    n_chunks: int
    n_shards: int | None = None

    pads_on_wire = True  # a transfer carries a whole chunk, padding included (the emulated textbook ring pads)

    def __post_init__(self) -> None:
        object.__setattr__(self, "numel", check_numel(self.numel))
        object.__setattr__(self, "n_chunks", check_int(self.n_chunks, "n_chunks", minimum=1, maximum=MAX_NUMEL))
        shards = self.n_chunks if self.n_shards is None else check_int(self.n_shards, "n_shards", minimum=1,
                                                                       maximum=MAX_NUMEL)
        if self.n_chunks % shards and self.n_chunks != 1:
            raise ValueError(f"n_chunks must be a multiple of n_shards, or 1; got n_chunks={self.n_chunks}, "
                             f"n_shards={shards}")
        object.__setattr__(self, "n_shards", shards)

    # -- the shard map -----------------------------------------------------------------------------------------
    @property
    def split(self) -> int:
        """Chunks per shard (1 for the plain layout), or 0 for a whole-buffer layout (one chunk, many shards)."""
        return self.n_chunks // self.n_shards

    @property
    def shard_size(self) -> int:
        """Elements per shard, padding included: ceil(numel / n_shards)."""
        return -(-self.numel // self.n_shards)

    def shard_payload(self, shard: int) -> int:
        """Elements of shard ``shard`` that are real data."""
        return max(0, min(self.shard_size, self.numel - shard * self.shard_size))

    def shard_slice(self, shard: int) -> slice:
        """Where shard ``shard``'s payload sits in a padded world row."""
        lo = self.start(shard * self.split) if self.split else min(self.numel, shard * self.shard_size)
        return slice(lo, lo + self.shard_payload(shard))

    # -- the chunks a schedule moves ---------------------------------------------------------------------------
    @property
    def chunk_size(self) -> int:
        """Elements per chunk, padding included: ceil(numel / n_chunks) for the plain and whole-buffer layouts,
        ceil(ceil(numel / n_shards) / split) for split shards."""
        if self.split > 1:
            return -(-self.shard_size // self.split)
        return -(-self.numel // self.n_chunks)

    @property
    def padded_numel(self) -> int:
        """n_chunks · chunk_size: the buffer length the schedule runs on."""
        return self.chunk_size * self.n_chunks

    @property
    def padding(self) -> int:
        """Padding elements in the whole buffer: padded_numel - numel (< n_chunks for the plain layout)."""
        return self.padded_numel - self.numel

    @property
    def contiguous(self) -> bool:
        """True when the payload is the first ``numel`` elements of a padded row, in order."""
        return self.split <= 1 or self.chunk_size * self.split == self.shard_size

    def start(self, chunk: int) -> int:
        """Offset of ``chunk`` in the padded buffer."""
        return chunk * self.chunk_size

    def _chunk_origin(self, chunk: int) -> tuple[int, int]:
        """(offset of the chunk's first element in the unpadded buffer, elements of data its shard has left)."""
        if self.split > 1:
            shard, part = divmod(chunk, self.split)
            return (shard * self.shard_size + part * self.chunk_size,
                    self.shard_payload(shard) - part * self.chunk_size)
        return chunk * self.chunk_size, self.numel - chunk * self.chunk_size

    def payload(self, chunk: int) -> int:
        """Elements of ``chunk`` that are real data (the rest of the chunk is padding)."""
        return max(0, min(self.chunk_size, self._chunk_origin(chunk)[1]))

    def payloads(self) -> np.ndarray:
        """Payload elements of every chunk, as an int64 array of length n_chunks."""
        if self.split > 1:
            shards = np.arange(self.n_shards, dtype=np.int64) * self.shard_size
            left = np.clip(self.numel - shards, 0, self.shard_size)[:, None] \
                - np.arange(self.split, dtype=np.int64)[None, :] * self.chunk_size
            return np.clip(left.reshape(-1), 0, self.chunk_size)
        starts = np.arange(self.n_chunks, dtype=np.int64) * self.chunk_size
        return np.clip(self.numel - starts, 0, self.chunk_size)

    def payload_slice(self, chunk: int) -> slice:
        """The slice of the unpadded buffer that ``chunk`` holds (empty if the chunk is all padding)."""
        lo = min(self.numel, self._chunk_origin(chunk)[0])
        return slice(lo, lo + self.payload(chunk))

    # -- moving data in and out of the padded world ------------------------------------------------------------
    def pad(self, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write ``rows`` (k, numel) into ``out`` (k, padded_numel) at the payload positions, zeros elsewhere."""
        if self.contiguous:
            out[:, :self.numel] = rows
            out[:, self.numel:] = 0
            return out
        k, width, c = out.shape[0], self.split * self.chunk_size, self.shard_size
        by_shard = out.reshape(k, self.n_shards, width)
        full = self.numel // c  # shards with no padding of their own
        by_shard[:, :full, :c] = rows[:, :full * c].reshape(k, full, c)
        by_shard[:, :full, c:] = 0
        if full < self.n_shards:
            tail = self.numel - full * c
            by_shard[:, full, :tail] = rows[:, full * c:]
            by_shard[:, full, tail:] = 0
            by_shard[:, full + 1:] = 0
        return out

    def unpad(self, world: np.ndarray) -> np.ndarray:
        """The (k, numel) data of a padded (k, padded_numel) world: a view when :attr:`contiguous`, else a copy."""
        if self.contiguous:
            return world[:, :self.numel]
        k, c = world.shape[0], self.shard_size
        by_shard = world.reshape(k, self.n_shards, self.split * self.chunk_size)
        full = self.numel // c
        out = np.empty((k, self.numel), dtype=world.dtype)
        out[:, :full * c] = by_shard[:, :full, :c].reshape(k, full * c)
        if full < self.n_shards:
            out[:, full * c:] = by_shard[:, full, :self.numel - full * c]
        return out

    # -- shards in a padded world row, and what a transfer carries ----------------------------------------------
    def wire_elements(self) -> np.ndarray:
        """Elements a transfer of each chunk carries: the whole chunk, padding included (int64, length n_chunks)."""
        return np.full(self.n_chunks, self.chunk_size, dtype=np.int64)

    def shard(self, world_row: np.ndarray, shard: int) -> np.ndarray:
        """Shard ``shard``'s payload in one padded world row (a view)."""
        return world_row[self.shard_slice(shard)]

    def place_shard(self, world_row: np.ndarray, shard: int, values: np.ndarray) -> None:
        """Write shard ``shard``'s values into one padded world row."""
        world_row[self.shard_slice(shard)] = values
