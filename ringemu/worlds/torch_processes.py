"""A Communicator on a torch.distributed process group: the same per-rank stage code on a real engine.

:class:`TorchCommunicator` implements :class:`~ringemu.worlds.Communicator` for one process (one rank) of an
initialised process group: gloo on the CPU, NCCL when the group's backend is NCCL (buffers then travel through
this rank's CUDA device). Buffers go in and come out as flat numpy arrays, padded inside to
``ChunkLayout(S, N)`` exactly as the emulator pads them, so rank r's reduce-scatter result is chunk r's payload.

Two kinds of algorithm:

* ``algorithm="native"`` (default): the engine's own collectives, ``reduce_scatter_tensor``,
  ``all_gather_into_tensor`` (called ``reduce_scatter_single`` / ``all_gather_single`` since torch 2.13) and
  ``all_reduce``. Their algorithm and summation order are the engine's, not the
  ring's: integer blocks (:mod:`ringemu.blocks`), whose sums do not depend on order, come out bit-identical to the
  emulator; floating-point sums in general do not (measured in ``docs/real_engine.md``).
* ``algorithm=A`` for any name A of the registry (:func:`ringemu.algorithms.names`: ``"ring"``, the trees,
  recursive doubling, ...): A's :class:`~ringemu.schedule.Schedule` itself executed over point-to-point
  ``isend``/``irecv``, step by step, with the emulator's per-hop arithmetic (16-bit wire types add in fp32 and
  round per hop, :func:`ringemu.reference.hop_add`), padded by A's :class:`~ringemu.layout.ChunkLayout` as the
  emulator pads. Every send carries the value its chunk held at the start of the step (the payload is copied
  before any message of the step is applied), so exchange schedules (two ranks swapping a chunk in one step) need
  nothing more. Bit-identical to the emulator for every dtype.

Either way the :class:`~ringemu.ledger.CommLedger` is filled from the registry's schedules as the emulator's is
(the ring's for ``native``, A's otherwise), so its counts are *modelled* traffic (``traffic_source``), not bytes
observed on the wire; for what the engine actually sends see ``zero_stages/torch/wire_bytes.py``. Every rank
records the whole world's modelled traffic. Size-only buffers (:class:`~ringemu.virtual.VirtualBuffer`) are only
counted; nothing is sent.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from .. import algorithms
from ..checks import check_timeout
from ..dtypes import resolve_dtype
from ..faults.plan import as_plan
from ..layout import ChunkLayout
from ..partition import layout_for
from ..ledger import CommLedger
from ..reference import hop_add
from ..schedule import ADD, COPY, Schedule
from ..virtual import VirtualBuffer, is_virtual
from .base import NATIVE, check_algorithm, communicator_algorithms
from ..torch_tensors import TORCH_OF, to_numpy, to_torch
from ..faults.torch_faults import faulty_step, faults_for

__all__ = ["TorchCommunicator", "NATIVE", "check_torch_algorithm", "torch_algorithms"]



def torch_algorithms() -> tuple[str, ...]:
    """The Communicator algorithms this backend runs over send/recv: those whose sums are the schedule's adds as
    they are (an entry that accumulates 16-bit floats in fp32 or starts its sum from +0, XLA CPU's, is reduction
    semantics the collectives apply around the schedule, which messages between processes do not carry)."""
    return tuple(a for a in communicator_algorithms()
                 if not any(algorithms.algorithm(c, a).accumulate or algorithms.algorithm(c, a).sum_from_zero
                            for c in algorithms.COLLECTIVES))


def check_torch_algorithm(name: object, n_ranks: int, ranks_per_node: int | None = None) -> str:
    """``"native"``, or a registry algorithm of :func:`torch_algorithms` that runs all three collectives on
    ``n_ranks`` ranks (:func:`ringemu.worlds.base.check_algorithm`); else a ValueError listing both kinds."""
    if name == NATIVE:
        return NATIVE
    if name not in torch_algorithms():
        raise ValueError(f"algorithm must be {NATIVE!r} (the engine's own collectives) or one of "
                         f"{', '.join(torch_algorithms())}; got {name!r}")
    return check_algorithm(name, n_ranks, ranks_per_node)

# torch 2.13 renamed reduce_scatter_tensor / all_gather_into_tensor (the old names warn); same semantics
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

class TorchCommunicator:
    """This process's rank of a torch.distributed process group (implements ``Communicator``).

    ``group`` is a process group (None: the default group, which must be initialised). ``ledger`` records every
    call under its label from the registry's schedules (modelled traffic). ``algorithm`` is ``"native"`` or a
    registry name (module doc); each call may name another with ``algorithm=``. ``ranks_per_node`` is passed to
    the hierarchical algorithms. Every rank must make the same calls in the same order, as on any real engine.
    Unlike the emulator, an integer sum that overflows its dtype is not detected (each rank sees only its own
    buffer; the engine wraps around).
    """

    traffic_source = "modelled"  # the ledger counts the ring schedule, not the bytes the engine sent

    def __init__(self, group=None, ledger: CommLedger | None = None, algorithm: str = NATIVE,
                 ranks_per_node: int | None = None, faults=None, fault_wait: float = 5.0):
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("TorchCommunicator needs an initialised torch.distributed process group "
                             "(torch.distributed.init_process_group)")
        self.group = group
        self.rank = dist.get_rank(group)
        self.n_ranks = dist.get_world_size(group)
        self.ranks_per_node = (None if ranks_per_node is None
                               else algorithms.check_ranks_per_node(ranks_per_node, self.n_ranks))
        self.algorithm = check_torch_algorithm(algorithm, self.n_ranks, self.ranks_per_node)
        self.ledger = ledger
        self.backend = str(dist.get_backend(group))
        self.device = (torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl"
                       else torch.device("cpu"))
        self.faults = as_plan(faults)  # this process's own copy: every rank counts the same calls
        if self.faults is not None and self.algorithm == NATIVE:
            raise ValueError("faults run on a registry algorithm's send/recv path (e.g. algorithm='ring'), not on "
                             "the engine's native collectives")
        self.fault_wait = check_timeout(fault_wait, "fault_wait")

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)

    # -- internals -------------------------------------------------------------------------------------------------
    def _check(self, op: str, buffer) -> None:
        if not ((isinstance(buffer, np.ndarray) or is_virtual(buffer)) and buffer.ndim == 1):
            raise TypeError(f"rank {self.rank}: {op} needs a 1-D numpy array or VirtualBuffer; got "
                            f"{type(buffer).__name__} of shape {getattr(buffer, 'shape', None)}")
        resolve_dtype(buffer.dtype)

    def _plan(self, collective: str, algorithm: str | None, numel: int, dtype, label: str, size_only: bool):
        """(algorithm name, its schedule, the schedule's layout), the call recorded in the ledger. ``native``
        records the ring's schedule: the model of what the engine's collectives move."""
        name = self.algorithm if algorithm is None else check_torch_algorithm(algorithm, self.n_ranks,
                                                                               self.ranks_per_node)
        modelled = algorithms.DEFAULT_ALGORITHM if name == NATIVE else name
        schedule = algorithms.build(collective, self.n_ranks, modelled, ranks_per_node=self.ranks_per_node,
                                    numel=numel, itemsize=resolve_dtype(dtype).itemsize)
        layout = layout_for(schedule, numel)
        if self.ledger is not None:
            self.ledger.record(schedule, layout, dtype, label, size_only=size_only)
        return name, schedule, layout

    def _padded(self, values: np.ndarray, layout: ChunkLayout, offset: int = 0) -> np.ndarray:
        padded = np.zeros(layout.padded_numel, dtype=values.dtype)
        padded[offset:offset + values.shape[0]] = values
        return padded

    def _padded_row(self, buffer: np.ndarray, layout: ChunkLayout) -> np.ndarray:
        """This rank's whole buffer placed as the schedule's layout places it (zeros in the padding)."""
        row = np.empty((1, layout.padded_numel), dtype=buffer.dtype)
        return layout.pad(buffer[None, :], row)[0]

    def _dev(self, array: np.ndarray) -> torch.Tensor:
        return to_torch(array).to(self.device)

    # -- the three collectives -----------------------------------------------------------------------------------
    def reduce_scatter(self, buffer, label: str = "reduce_scatter", algorithm: str | None = None):
        """Sum ``buffer`` (length S) over ranks; return this rank's shard of ``ChunkLayout(S, N)`` (its payload)."""
        self._check("reduce_scatter", buffer)
        name, schedule, layout = self._plan("reduce-scatter", algorithm, buffer.shape[0], buffer.dtype, label,
                                            is_virtual(buffer))
        if is_virtual(buffer):
            return VirtualBuffer((layout.shard_payload(self.rank),), buffer.dtype)
        if name != NATIVE:
            row = self._run_schedule(schedule, self._padded_row(buffer, layout), layout, label)
            return np.array(layout.shard(row, self.rank))
        shards = self.layout(buffer.shape[0])
        padded = self._padded(buffer, shards)
        result = torch.empty(shards.chunk_size, dtype=TORCH_OF[padded.dtype], device=self.device)
        _reduce_scatter(result, self._dev(padded), group=self.group)
        return to_numpy(result)[:shards.payload(self.rank)].copy()

    def all_gather(self, shard, numel: int, label: str = "all_gather", algorithm: str | None = None):
        """Concatenate every rank's shard (rank r's = chunk r of ``ChunkLayout(numel, N)``); length ``numel``."""
        self._check("all_gather", shard)
        shards = self.layout(numel)
        if shard.shape[0] != shards.payload(self.rank):
            raise ValueError(f"{label}: rank {self.rank} passed a shard of {shard.shape[0]} elements; "
                             f"ChunkLayout({numel}, {self.n_ranks}) gives it {shards.payload(self.rank)}")
        name, schedule, layout = self._plan("all-gather", algorithm, numel, shard.dtype, label, is_virtual(shard))
        if is_virtual(shard):
            return VirtualBuffer((numel,), shard.dtype)
        if name != NATIVE:
            row = np.zeros(layout.padded_numel, dtype=shard.dtype)
            layout.place_shard(row, self.rank, shard)
            return layout.unpad(self._run_schedule(schedule, row, layout, label)[None, :])[0].copy()
        padded = self._padded(shard, shards, shards.start(self.rank))
        mine = padded[shards.start(self.rank):shards.start(self.rank) + shards.chunk_size]
        result = torch.empty(shards.padded_numel, dtype=TORCH_OF[padded.dtype], device=self.device)
        _all_gather(result, self._dev(mine), group=self.group)
        return to_numpy(result)[:numel].copy()

    def all_reduce(self, buffer, label: str = "all_reduce", algorithm: str | None = None):
        """Sum ``buffer`` over ranks; every rank gets the whole sum, in the algorithm's order of additions."""
        self._check("all_reduce", buffer)
        name, schedule, layout = self._plan("all-reduce", algorithm, buffer.shape[0], buffer.dtype, label,
                                            is_virtual(buffer))
        if is_virtual(buffer):
            return VirtualBuffer(buffer.shape, buffer.dtype)
        if name != NATIVE:
            row = self._run_schedule(schedule, self._padded_row(buffer, layout), layout, label)
            return layout.unpad(row[None, :])[0].copy()
        tensor = self._dev(np.array(buffer, copy=True))
        dist.all_reduce(tensor, group=self.group)
        return to_numpy(tensor).copy()

    # -- a registry schedule over point-to-point messages ---------------------------------------------------------
    def _run_schedule(self, schedule: Schedule, row: np.ndarray, layout: ChunkLayout, label: str = "") -> np.ndarray:
        """Execute ``schedule`` on this rank's padded row in place, as :func:`run_schedule_reference` does for
        the whole world: in each step every source sends what it held at the step's start (its payload is copied
        before any incoming message of the step is applied, which stages exchange schedules); additions into
        one destination happen in listed order. Returns ``row``."""
        chunk = layout.chunk_size
        if chunk == 0:
            return row
        bounds = schedule.step_bounds()
        dtype = TORCH_OF[row.dtype]
        faults = faults_for(self.faults, schedule, label)  # [] without faults (ringemu.faults.plan; torch_faults)
        for step in range(schedule.n_steps):
            rows = schedule.table[bounds[step]:bounds[step + 1]].tolist()
            here = [f for f in faults if f.step == step]
            if here:
                faulty_step(self, schedule, row, chunk, step, rows, here, label)
                continue
            ops, incoming = [], []
            for tag, (_, src, dst, c, op) in enumerate(rows):
                if src == self.rank:
                    data = self._dev(row[c * chunk:(c + 1) * chunk].copy())
                    ops.append(dist.P2POp(dist.isend, data, self._peer(dst), self.group, tag))
                if dst == self.rank:
                    box = torch.empty(chunk, dtype=dtype, device=self.device)
                    ops.append(dist.P2POp(dist.irecv, box, self._peer(src), self.group, tag))
                    incoming.append((c, op, box))
            if ops:
                for work in dist.batch_isend_irecv(ops):
                    work.wait()
            for c, op, box in incoming:
                target = row[c * chunk:(c + 1) * chunk]
                data = to_numpy(box)
                if op == COPY:
                    target[...] = data
                elif op == ADD:
                    with np.errstate(over="ignore", invalid="ignore"):  # inf/NaN propagate as on the emulator
                        target[...] = hop_add(target, data)
                else:
                    raise ValueError(f"unknown op {op} in {schedule.name}")
        return row

    def _peer(self, rank: int) -> int:
        """Global rank of group rank ``rank`` (point-to-point calls take global ranks)."""
        return rank if self.group is None else dist.get_global_rank(self.group, rank)
