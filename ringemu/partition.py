"""An engine's own cut of a buffer into chunks: explicit chunk bounds, uneven or empty chunks, no padding on the wire.

Engines split a buffer their own way (DESIGN.md, "A schedule carries its partition"): Open MPI's ring gives the
first S mod N blocks one element more (``COLL_BASE_COMPUTE_BLOCKCOUNT``, ompi/mca/coll/base/coll_base_util.h);
gloo cuts segments of at most 1 MiB, at least 2N of them (gloo/allreduce.cc); NCCL cuts channels × chunks ×
slices. Such a schedule carries its chunk bounds (:attr:`ringemu.schedule.Schedule.partition`), and
:class:`Partition` is the layout the kernels, the ledger and the trace read for it, with the same interface as
:class:`~ringemu.layout.ChunkLayout` (the textbook partition, which pads every chunk to ``ceil(S/n_chunks)``).

Guarantees:

* chunk ``c`` holds elements ``[bounds[c], bounds[c+1])`` of the buffer; ``bounds[0] = 0``, ``bounds[-1] = S``;
* in the world the kernels run on, every chunk sits in a slot of :attr:`chunk_size` = the largest chunk's length,
  chunk ``c`` at ``c · chunk_size`` (the kernels' own addressing); the slot's tail beyond the chunk is zeros that
  no engine sends: :meth:`wire_elements` is each chunk's true length, so the ledger counts exactly the bytes the
  engine puts on the wire and reports no padding;
* the shard map stays ``ChunkLayout(S, n_shards)``: the shard a rank owns after a reduce-scatter, or brings to an
  all-gather, is the textbook shard; for schedules whose chunks belong to shards (reduce-scatter and all-gather
  orders) every chunk lies inside one shard, which owns it (:meth:`Partition.owners`).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from .checks import check_int
from .layout import ChunkLayout

__all__ = ["Partition", "layout_for"]


class Partition:
    """Chunk bounds over a buffer of ``bounds[-1]`` elements, and the shard map ``ChunkLayout(S, n_shards)``.

    ``aligned``: the schedule's chunks belong to shards (a reduce-scatter or all-gather order: ``n_chunks =
    k·n_shards``, chunk c in shard c // k), so their bounds must fall on the shard bounds; an all-reduce order's
    chunks need not."""

    pads_on_wire = False  # engines send a chunk's own elements only

    def __init__(self, bounds, n_shards: int, aligned: bool = False):
        b = np.asarray(bounds, dtype=np.int64)
        if b.ndim != 1 or b.size < 2 or b[0] != 0 or np.any(np.diff(b) < 0):
            raise ValueError(f"partition bounds must be a non-decreasing sequence from 0 with at least 2 entries; "
                             f"got {list(bounds)[:8]}")
        b.setflags(write=False)
        self.bounds = b
        self.numel = int(b[-1])
        self.n_chunks = int(b.size - 1)
        self.n_shards = check_int(n_shards, "n_shards", minimum=1)
        self.shard_map = ChunkLayout(self.numel, self.n_shards)
        self.aligned = bool(aligned)
        if self.aligned and self.numel:
            owners = self.owners()
            ends = np.minimum(self.n_shards, -(-b[1:] // self.shard_map.shard_size))  # shard after each chunk's end
            crossing = np.flatnonzero((np.diff(b) > 0) & (ends - 1 != owners))
            if crossing.size:
                c = int(crossing[0])
                raise ValueError(f"chunk {c} [{int(b[c])}, {int(b[c + 1])}) crosses a shard bound of "
                                 f"ChunkLayout({self.numel}, {self.n_shards}): a reduce-scatter or all-gather "
                                 f"order's chunks must each lie in one shard")

    def __repr__(self) -> str:
        return f"Partition(numel={self.numel}, n_chunks={self.n_chunks}, n_shards={self.n_shards})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Partition) and other.n_shards == self.n_shards and other.aligned == self.aligned
                and np.array_equal(other.bounds, self.bounds))

    def __hash__(self) -> int:
        return hash((self.n_shards, self.aligned, self.bounds.tobytes()))

    # -- the interface ChunkLayout offers ------------------------------------------------------------------------
    @property
    def split(self) -> int:
        """1 when the chunks belong to shards (each lies in one; :meth:`owners`), 0 when they need not."""
        return 1 if self.aligned else 0

    def owners(self) -> np.ndarray:
        """The shard each chunk's elements belong to (an empty chunk: the shard at its offset, at most the last)."""
        size = max(1, self.shard_map.shard_size)
        return np.minimum(self.n_shards - 1, self.bounds[:-1] // size)

    @cached_property
    def _sizes(self) -> np.ndarray:
        sizes = np.diff(self.bounds)
        sizes.setflags(write=False)
        return sizes

    @property
    def chunk_size(self) -> int:
        """The slot every chunk gets in the kernels' world: the largest chunk's length (at least 1)."""
        return max(1, int(self._sizes.max()))

    @property
    def padded_numel(self) -> int:
        return self.chunk_size * self.n_chunks

    @property
    def padding(self) -> int:
        """Zeros in the kernels' world beyond the data (never sent)."""
        return self.padded_numel - self.numel

    @property
    def contiguous(self) -> bool:
        """True when the data is the first S elements of a world row, in order (every chunk but the last full)."""
        return bool(np.all(self._sizes[:-1] == self.chunk_size))

    @property
    def shard_size(self) -> int:
        return self.shard_map.shard_size

    def shard_payload(self, shard: int) -> int:
        return self.shard_map.shard_payload(shard)

    def start(self, chunk: int) -> int:
        """Offset of ``chunk``'s slot in a world row."""
        return chunk * self.chunk_size

    def payload(self, chunk: int) -> int:
        return int(self._sizes[chunk])

    def payloads(self) -> np.ndarray:
        return self._sizes

    def wire_elements(self) -> np.ndarray:
        """Elements a transfer of each chunk carries: its own length (no padding on the wire)."""
        return self._sizes

    def payload_slice(self, chunk: int) -> slice:
        return slice(int(self.bounds[chunk]), int(self.bounds[chunk + 1]))

    @cached_property
    def _gather_index(self) -> np.ndarray:
        """World-row position of every data element, in buffer order."""
        sizes = self._sizes
        starts = np.arange(self.n_chunks, dtype=np.int64) * self.chunk_size
        index = np.repeat(starts - self.bounds[:-1], sizes) + np.arange(self.numel, dtype=np.int64)
        index.setflags(write=False)
        return index

    def pad(self, rows: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write ``rows`` (k, S) into ``out`` (k, padded_numel): chunk c into its slot, zeros in the slots' tails."""
        if self.contiguous:
            out[:, :self.numel] = rows
            out[:, self.numel:] = 0
            return out
        out[...] = 0
        out[:, self._gather_index] = rows
        return out

    def unpad(self, world: np.ndarray) -> np.ndarray:
        """The (k, S) data of a (k, padded_numel) world (a view when :attr:`contiguous`, else a copy)."""
        if self.contiguous:
            return world[:, :self.numel]
        return np.take(world, self._gather_index, axis=1)  # C order (fancy indexing on axis 1 gives F order)

    # -- shards in the kernels' world ----------------------------------------------------------------------------
    def shard(self, world_row: np.ndarray, shard: int) -> np.ndarray:
        """Shard ``shard`` (the textbook shard map) of one world row."""
        sl = self.shard_map.payload_slice(shard)
        return world_row[self._gather_index[sl]]

    def place_shard(self, world_row: np.ndarray, shard: int, values: np.ndarray) -> None:
        """Write shard ``shard``'s values into one world row."""
        world_row[self._gather_index[self.shard_map.payload_slice(shard)]] = values


def layout_for(schedule, numel: int):
    """The layout ``schedule`` runs on for a buffer of ``numel`` elements per rank: its own :class:`Partition`
    when it carries one (which must be for that size), else the textbook ``ChunkLayout(S, n_chunks, n_ranks)``."""
    bounds = getattr(schedule, "partition", None)
    if bounds is None:
        layouts = schedule.__dict__.setdefault("_chunk_layouts", {})  # a cache: a function of (schedule, numel)
        if numel not in layouts:
            if len(layouts) >= 64:  # a schedule reused for many sizes keeps the last few
                layouts.pop(next(iter(layouts)))
            layouts[numel] = ChunkLayout(numel, schedule.n_chunks, schedule.n_ranks)
        return layouts[numel]
    if int(bounds[-1]) != numel:
        raise ValueError(f"schedule {schedule.name} was built for {int(bounds[-1])} elements per rank; got {numel} "
                         f"(engine orders cut each buffer size their own way: build the schedule for this size)")
    cached = schedule.__dict__.get("_partition_layout")
    if cached is None:  # a cache, not state: schedules are immutable and this is a function of the schedule
        aligned = schedule.initial == "own" or schedule.final in ("reduced-own", "gathered")
        cached = Partition(bounds, schedule.n_ranks, aligned=aligned)
        object.__setattr__(schedule, "_partition_layout", cached)
    return cached
