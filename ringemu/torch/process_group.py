"""``RingemuProcessGroup``: a torch.distributed process group whose collectives run through ringemu.

One object per thread-rank. Every collective call joins the group's :class:`~ringemu.torch.meeting.Meeting`;
the last rank to arrive runs the collective once for all ranks with ringemu's schedules and kernels
(:mod:`ringemu.per_rank`: the direct kernels, straight over every rank's tensors: they share one address space), and
records it in the group's :class:`~ringemu.ledger.CommLedger` under a label made of the call and the module
that made it (``all_reduce:torch.nn.parallel.distributed``). Results are therefore bit-identical to the
emulator's for the chosen algorithm (16-bit tensors rounded per hop), and traffic is counted exactly.

Reductions: :mod:`ringemu.torch.reduce_ops` (SUM in the algorithm's order, AVG, PREMUL_SUM, MIN, MAX, PRODUCT,
BAND, BOR, BXOR). Copy-only calls (broadcast, scatter, gather, all-to-all, send/recv) use
:mod:`ringemu.algorithms.direct`'s patterns. ``barrier()`` is counted as NCCL sends it: a one-element fp32
all-reduce by the group's algorithm (torch 2.x ``ProcessGroupNCCL::barrier`` all-reduces a one-element tensor),
recorded under the label ``barrier:<caller>``.

Collectives must be called on the rank's own thread (the one that created the group); any other thread gets a
RuntimeError saying so.
"""
from __future__ import annotations

import sys
import threading
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceCoalescedOptions, AllreduceOptions,
                                       AllToAllOptions, BarrierOptions, BroadcastOptions, GatherOptions, ReduceOp,
                                       ReduceScatterOptions, ScatterOptions,
                                       _create_work_from_future)
from torch.futures import Future

from .. import per_rank
from ..torch_tensors import as_flat_numpy, check_tensor
from .copies import (all_gather_execute, all_to_all_execute, broadcast_execute, gather_execute, scatter_execute,
                     split_sizes)
from ..layout import ChunkLayout
from .counting import record
from .meeting import Request
from .reduce_ops import op_of, reduce_one

__all__ = ["RingemuProcessGroup"]

_SKIP_MODULES = ("ringemu.torch", "torch.distributed.distributed_c10d", "torch.distributed.c10d_logger", "typing_extensions", "torch._ops",
                 "torch.utils._contextlib", "contextlib")


def _done_work(result=None):
    """A completed c10d Work whose future holds ``result`` (DDP's reducer reads the all-reduced bucket there)."""
    future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


class _CallLabel:
    """``call:module`` for a rank's request, the module found only when a message needs it (a timeout names it):
    a rank that does not run the collective never walks its stack."""

    __slots__ = ("call", "frame")

    def __init__(self, call: str, frame):
        self.call, self.frame = call, frame

    def __format__(self, spec: str) -> str:
        return format(f"{self.call}:{_caller_module(self.frame)}", spec)

    __str__ = __repr__ = lambda self: format(self, "")


def _caller_module(frame=None) -> str:
    """The module of the first frame outside this backend and c10d's wrappers: who made the call."""
    frame = sys._getframe(2) if frame is None else frame
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if not name.startswith(_SKIP_MODULES):
            return name
        frame = frame.f_back
    return "?"


class RingemuProcessGroup(dist.ProcessGroup):
    """Rank ``rank`` of a group of ``world_size`` thread-ranks; ``world`` is the spawn's shared state."""

    def __init__(self, rank: int, world_size: int, world):
        super().__init__(rank, world_size)
        self._rank, self._size, self._world = rank, world_size, world
        self._thread = threading.current_thread()  # c10d creates a group on each rank's own thread
        self._met = None  # (meeting, ledger), looked up on the first call (c10d names the group after creating it)

    def getBackendName(self) -> str:
        return "ringemu"

    def __repr__(self) -> str:
        return f"RingemuProcessGroup(rank={self._rank}, size={self._size}, algorithm={self._world.algorithm!r})"

    @property
    def group_name(self) -> str:
        return self._group_key()

    def _group_key(self) -> str:
        """The group's name, which c10d gives every member of a group alike (kept in its per-thread world)."""
        return dist.distributed_c10d._world.pg_names[self]

    # -- the meeting ------------------------------------------------------------------------------------------
    def _check_thread(self, call: str) -> None:
        here = threading.current_thread()
        if here is not self._thread:
            raise RuntimeError(f"{call} called on thread {here.name!r}, which is not a rank of this ringemu group: "
                               f"rank {self._rank}'s collectives run on its own thread {self._thread.name!r} (the "
                               f"one spawn started for it); call them from fn(rank), not from other threads")

    def _meeting(self, call: str):
        self._check_thread(call)
        if self._met is None:
            self._met = self._world.group(self._group_key(), self._size, dist.get_process_group_ranks(self))
        return self._met

    def _join(self, call: str, signature: tuple, payload, execute: Callable[[list], None], result=None):
        meeting, ledger = self._meeting(call)

        def run(requests):  # on the rank that arrives last, whose own stack names the caller: one label per call
            label = f"{call}:{_caller_module()}"
            if torch._C._current_graph_task_id() != -1:  # called from inside a backward pass
                label += " (backward)"
            execute(requests, ledger, label)

        meeting.call(self._rank, Request(call, signature, _CallLabel(call, sys._getframe(1)), payload), run)
        return _done_work(result)

    def _reduction(self, call: str, collective: str, tensors_of: Callable, op, dtype) -> Callable:
        """Run reduce-scatter or all-reduce of every rank's tensors; ``tensors_of(request)`` -> (inputs, outputs)
        as lists of flat numpy arrays, the i-th of every rank forming one collective."""
        kind, factor = op_of(op, call, dtype)
        algorithm, mode = self._world.algorithm, self._world.mode

        def execute(requests, ledger, label):
            pairs = [tensors_of(r) for r in requests]
            for i in range(len(pairs[0][0])):
                rows = [p[0][i] for p in pairs]
                outs = [p[1][i] for p in pairs]
                reduce_one(collective, kind, factor, rows, outs, ledger, label, algorithm, mode, self._world.schedule)
        return execute

    # -- reductions -------------------------------------------------------------------------------------------
    def allreduce(self, tensors, opts=AllreduceOptions()):
        tensors = [check_tensor(t, "all_reduce") for t in tensors]
        views = [as_flat_numpy(t) for t in tensors]
        sig = (tuple((tuple(t.shape), t.dtype) for t in tensors), _op_signature(opts.reduceOp, "all_reduce", views))
        run = self._reduction("all_reduce", "all-reduce", lambda r: (r.payload, r.payload), opts.reduceOp,
                              views[0].dtype if views else np.float32)
        return self._join("all_reduce", sig, views, run, result=tensors)

    def allreduce_coalesced(self, tensors, opts=AllreduceCoalescedOptions()):
        return self.allreduce(tensors, opts)

    def reduce_scatter_single(self, output, input, opts=ReduceScatterOptions()):
        output, input = check_tensor(output, "reduce_scatter"), check_tensor(input, "reduce_scatter")
        if input.numel() != output.numel() * self._size or input.dtype != output.dtype:
            raise ValueError(f"reduce_scatter: input must hold world_size x output elements of one dtype; got "
                             f"{input.numel()} {input.dtype} and {output.numel()} {output.dtype}")
        views = (as_flat_numpy(input), as_flat_numpy(output))
        sig = (input.numel(), input.dtype, _op_signature(opts.reduceOp, "reduce_scatter", views[:1]))
        run = self._reduction("reduce_scatter", "reduce-scatter", lambda r: ([r.payload[0]], [r.payload[1]]),
                              opts.reduceOp, views[0].dtype)
        return self._join("reduce_scatter", sig, views, run)

    def reduce_scatter(self, outputs, input_lists, opts=ReduceScatterOptions()):
        works = [self.reduce_scatter_single(out, torch.cat([t.reshape(-1) for t in parts]), opts)
                 for out, parts in zip(outputs, input_lists)]
        return works[-1] if works else _done_work()

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=ReduceScatterOptions()):
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1] if works else _done_work()

    # -- gathers and copies -----------------------------------------------------------------------------------
    def all_gather_single(self, output, input, opts=AllgatherOptions()):
        output, input = check_tensor(output, "all_gather"), check_tensor(input, "all_gather")
        if output.numel() != input.numel() * self._size or input.dtype != output.dtype:
            raise ValueError(f"all_gather: output must hold world_size x input elements of one dtype; got "
                             f"{output.numel()} {output.dtype} and {input.numel()} {input.dtype}")
        mode, algorithm = self._world.mode, self._world.algorithm
        execute = all_gather_execute(algorithm, mode, lambda shards, outputs, ledger, label: per_rank.gather_into(
            shards, outputs, ledger=ledger, label=label, mode=mode, algorithm=algorithm,
            schedule=self._world.schedule("all-gather", len(shards))))
        return self._join("all_gather", (input.numel(), input.dtype), (as_flat_numpy(input), as_flat_numpy(output)),
                          execute)

    def allgather(self, output_lists, inputs, opts=AllgatherOptions()):
        for outs, inp in zip(output_lists, inputs):
            flat = torch.empty(inp.numel() * self._size, dtype=inp.dtype)
            self.all_gather_single(flat, inp.contiguous(), opts)
            for r, out in enumerate(outs):
                out.detach().copy_(flat[r * inp.numel():(r + 1) * inp.numel()].view_as(out))
        return _done_work()

    def all_gather_single_coalesced(self, outputs, inputs, opts=AllgatherOptions()):
        for o, i in zip(outputs, inputs):
            self.all_gather_single(o, i, opts)
        return _done_work()

    def allgather_coalesced(self, output_lists, inputs, opts=AllgatherOptions()):
        return self.allgather(output_lists, inputs, opts)

    def broadcast(self, tensors, opts=BroadcastOptions()):
        tensors = [check_tensor(t, "broadcast") for t in tensors]
        sig = (tuple((tuple(t.shape), t.dtype) for t in tensors), opts.rootRank)
        return self._join("broadcast", sig, [as_flat_numpy(t) for t in tensors], broadcast_execute(opts.rootRank),
                          result=tensors)

    def scatter(self, outputs, input_lists, opts=ScatterOptions()):
        out = check_tensor(outputs[0], "scatter")
        pieces = None
        if self._rank == opts.rootRank:
            pieces = [as_flat_numpy(_same(check_tensor(t, "scatter"), out, "scatter")) for t in input_lists[0]]
        sig = (tuple(out.shape), out.dtype, opts.rootRank)
        return self._join("scatter", sig, (as_flat_numpy(out), pieces), scatter_execute(opts.rootRank))

    def gather(self, output_lists, inputs, opts=GatherOptions()):
        inp = check_tensor(inputs[0], "gather")
        pieces = None
        if self._rank == opts.rootRank:
            pieces = [as_flat_numpy(_same(check_tensor(t, "gather"), inp, "gather")) for t in output_lists[0]]
        sig = (tuple(inp.shape), inp.dtype, opts.rootRank)
        return self._join("gather", sig, (as_flat_numpy(inp), pieces), gather_execute(opts.rootRank))

    def alltoall(self, outputs, inputs, opts=AllToAllOptions()):
        outs = [check_tensor(t, "all_to_all") for t in outputs]
        ins = [check_tensor(t, "all_to_all") for t in inputs]
        if len(outs) != self._size or len(ins) != self._size or any(t.dtype != ins[0].dtype for t in outs + ins):
            raise ValueError(f"all_to_all: pass {self._size} output and {self._size} input tensors of one dtype; "
                             f"got {len(outs)} and {len(ins)} of dtypes {sorted({str(t.dtype) for t in outs + ins})}")
        payload = ([as_flat_numpy(t) for t in outs], [as_flat_numpy(t) for t in ins])
        return self._join("all_to_all", (ins[0].dtype,), payload, all_to_all_execute())

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=AllToAllOptions()):
        output, input = check_tensor(output, "all_to_all_single"), check_tensor(input, "all_to_all_single")
        if output.shape[1:] != input.shape[1:] or output.dim() == 0:
            raise ValueError(f"all_to_all_single: input and output must agree beyond dim 0; got shapes "
                             f"{tuple(input.shape)} and {tuple(output.shape)}")
        sends = split_sizes(input_splits, input.shape[0], self._size, "input_split_sizes")
        takes = split_sizes(output_splits, output.shape[0], self._size, "output_split_sizes")
        return self.alltoall(list(output.split(takes)), list(input.split(sends)), opts)

    def send(self, tensors, dst: int, tag: int = 0):
        tensor = check_tensor(tensors[0], "send")
        self._meeting("send")  # the thread check, and the group known by its ranks before its mailbox
        self._world.mailbox(self._group_key(), self._size).send(self._rank, dst, tag, as_flat_numpy(tensor).copy(),
                                                                 f"send:{_caller_module()}")
        return _done_work(tensors)

    def recv(self, tensors, src: int, tag: int = 0):
        tensor = check_tensor(tensors[0], "recv")
        self._meeting("recv")
        data = self._world.mailbox(self._group_key(), self._size).recv(src, self._rank, tag)
        if data.size != tensor.numel() or data.dtype != as_flat_numpy(tensor).dtype:
            raise ValueError(f"recv: rank {src} sent {data.size} {data.dtype} elements; this rank expects "
                             f"{tensor.numel()} {tensor.dtype}")
        np.copyto(as_flat_numpy(tensor), data)
        return _done_work(tensors)

    def barrier(self, opts=BarrierOptions()):
        schedule = self._world.schedule("all-reduce", self._size)

        def execute(requests, ledger, label):  # nothing to move; the bytes NCCL's one-element all-reduce sends
            record(ledger, schedule, ChunkLayout(1, schedule.n_chunks, self._size), np.float32, label)
        return self._join("barrier", (), None, execute)

    def reduce(self, tensors, opts=None):
        raise NotImplementedError("torch.distributed.reduce is not supported by the ringemu backend "
                                  "(use all_reduce)")

    def recv_anysource(self, tensors, tag=0):
        raise NotImplementedError("recv from any source is not supported by the ringemu backend (name the src)")


def _same(piece: torch.Tensor, like: torch.Tensor, call: str) -> torch.Tensor:
    if piece.shape != like.shape or piece.dtype != like.dtype:
        raise ValueError(f"{call}: every piece must have shape {tuple(like.shape)} and dtype {like.dtype}; got "
                         f"{tuple(piece.shape)} {piece.dtype}")
    return piece


def _op_signature(op, call: str, views) -> tuple:
    """What every rank must agree on about a reduce op: its name and PREMUL_SUM's factor."""
    return op_of(op, call, views[0].dtype if views else np.dtype(np.float32))
