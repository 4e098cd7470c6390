"""``RingemuProcessGroup``: a torch.distributed process group whose collectives run through ringemu.

One object per thread-rank. Every collective call joins the group's :class:`~ringemu.torch.meeting.Meeting`;
the last rank to arrive runs the collective once for all ranks with ringemu's schedules and kernels
(:mod:`ringemu.collectives`), writing straight into every rank's tensors (they share one address space), and
records it in the group's :class:`~ringemu.ledger.CommLedger` under a label made of the call and the module
that made it (``all_reduce:torch.nn.parallel.distributed``). Results are therefore bit-identical to the
emulator's for the chosen algorithm (16-bit tensors rounded per hop), and traffic is counted exactly.

Reductions: SUM in the algorithm's order; AVG as the algorithm's entry says (``Algorithm.average``): that sum
divided by N in the tensor's dtype, or each input × T(1/N) before the sum, or refused (gloo has none; float only);
MIN and MAX are exact in any order; PRODUCT multiplies in rank order (16-bit tensors in fp32, rounded per rank).
MIN, MAX and PRODUCT are counted as the algorithm's traffic for that collective. Copy-only calls (broadcast,
scatter, gather, all-to-all, send/recv) use :mod:`ringemu.algorithms.direct`'s patterns.
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceCoalescedOptions, AllreduceOptions,
                                       AllToAllOptions, BarrierOptions, BroadcastOptions, GatherOptions, ReduceOp,
                                       ReduceScatterOptions, ScatterOptions,
                                       _create_work_from_future)
from torch.futures import Future

from .. import algorithms, collectives
from ..layout import ChunkLayout
from ..virtual import VirtualBuffer
from .copies import all_to_all_execute, broadcast_execute, gather_execute, scatter_execute
from .meeting import Request
from ..torch_tensors import as_flat_numpy, check_tensor

__all__ = ["RingemuProcessGroup"]

_SKIP_MODULES = ("ringemu.torch", "torch.distributed.distributed_c10d", "torch.distributed.c10d_logger", "typing_extensions", "torch._ops",
                 "torch.utils._contextlib", "contextlib")


def _done_work(result=None):
    """A completed c10d Work whose future holds ``result`` (DDP's reducer reads the all-reduced bucket there)."""
    future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _caller_module() -> str:
    """The module of the first frame outside this backend and c10d's wrappers: who made the call."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "?")
        if not name.startswith(_SKIP_MODULES):
            return name
        frame = frame.f_back
    return "?"


def _reduce_kind(op) -> str:
    for name in ("SUM", "AVG", "MIN", "MAX", "PRODUCT"):
        if op == getattr(ReduceOp, name):
            return name
    raise NotImplementedError(f"reduce op {op} is not supported by the ringemu backend "
                              f"(supported: SUM, AVG, MIN, MAX, PRODUCT)")


class RingemuProcessGroup(dist.ProcessGroup):
    """Rank ``rank`` of a group of ``world_size`` thread-ranks; ``world`` is the spawn's shared state."""

    def __init__(self, rank: int, world_size: int, world):
        super().__init__(rank, world_size)
        self._rank, self._size, self._world = rank, world_size, world

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
    def _join(self, call: str, signature: tuple, payload, execute: Callable[[list], None], result=None):
        meeting, ledger = self._world.group(self._group_key(), self._size)
        label = f"{call}:{_caller_module()}"
        if torch._C._current_graph_task_id() != -1:  # called from inside a backward pass
            label += " (backward)"
        meeting.call(self._rank, Request(call, signature, label, payload), lambda reqs: execute(reqs, ledger, label))
        return _done_work(result)

    def _reduction(self, call: str, collective: str, tensors_of: Callable, op) -> Callable:
        """Run reduce-scatter or all-reduce of every rank's tensors; ``tensors_of(request)`` -> (inputs, outputs)
        as lists of flat numpy arrays, the i-th of every rank forming one collective."""
        kind = _reduce_kind(op)
        algorithm, mode = self._world.algorithm, self._world.mode

        def execute(requests, ledger, label):
            pairs = [tensors_of(r) for r in requests]
            for i in range(len(pairs[0][0])):
                rows = [p[0][i] for p in pairs]
                outs = [p[1][i] for p in pairs]
                _reduce_one(collective, kind, rows, outs, ledger, label, algorithm, mode, lambda shape, dtype: self._world.scratch(self._group_key(), shape, dtype))
        return execute

    # -- reductions -------------------------------------------------------------------------------------------
    def allreduce(self, tensors, opts=AllreduceOptions()):
        tensors = [check_tensor(t, "all_reduce") for t in tensors]
        sig = (tuple((tuple(t.shape), t.dtype) for t in tensors), _reduce_kind(opts.reduceOp))
        views = [as_flat_numpy(t) for t in tensors]
        run = self._reduction("all_reduce", "all-reduce", lambda r: (r.payload, r.payload), opts.reduceOp)
        return self._join("all_reduce", sig, views, run, result=tensors)

    def allreduce_coalesced(self, tensors, opts=AllreduceCoalescedOptions()):
        return self.allreduce(tensors, opts)

    def reduce_scatter_single(self, output, input, opts=ReduceScatterOptions()):
        output, input = check_tensor(output, "reduce_scatter"), check_tensor(input, "reduce_scatter")
        if input.numel() != output.numel() * self._size or input.dtype != output.dtype:
            raise ValueError(f"reduce_scatter: input must hold world_size x output elements of one dtype; got "
                             f"{input.numel()} {input.dtype} and {output.numel()} {output.dtype}")
        sig = (input.numel(), input.dtype, _reduce_kind(opts.reduceOp))
        run = self._reduction("reduce_scatter", "reduce-scatter", lambda r: ([r.payload[0]], [r.payload[1]]),
                              opts.reduceOp)
        return self._join("reduce_scatter", sig, (as_flat_numpy(input), as_flat_numpy(output)), run)

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

        def execute(requests, ledger, label):
            shards = [r.payload[0] for r in requests]
            gathered = collectives.all_gather(shards, ledger=ledger, label=label, mode=mode,
                                              algorithm=algorithm)
            for r, req in zip(range(len(requests)), requests):
                np.copyto(req.payload[1], gathered[r])
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
        if len(outs) != self._size or len(ins) != self._size or any(
                t.shape != ins[0].shape or t.dtype != ins[0].dtype for t in outs + ins):
            raise NotImplementedError("all_to_all: the ringemu backend moves equal pieces of one shape and dtype")
        sig = (tuple(ins[0].shape), ins[0].dtype)
        payload = ([as_flat_numpy(t) for t in outs], [as_flat_numpy(t) for t in ins])
        return self._join("all_to_all", sig, payload, all_to_all_execute())

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=AllToAllOptions()):
        output, input = check_tensor(output, "all_to_all_single"), check_tensor(input, "all_to_all_single")
        if output_splits or input_splits:
            even = [input.shape[0] // self._size] * self._size
            if list(output_splits or even) != even or list(input_splits or even) != even:
                raise NotImplementedError("all_to_all_single: uneven splits are not supported by the ringemu "
                                          "backend (equal pieces only)")
        if input.numel() % self._size or output.shape != input.shape:
            raise NotImplementedError("all_to_all_single: the ringemu backend needs equal input and output shapes "
                                      "divisible into world_size pieces")
        return self.alltoall(list(output.chunk(self._size)), list(input.chunk(self._size)), opts)

    def send(self, tensors, dst: int, tag: int = 0):
        tensor = check_tensor(tensors[0], "send")
        self._world.mailbox(self._group_key(), self._size).send(self._rank, dst, tag, as_flat_numpy(tensor).copy(),
                                                                 f"send:{_caller_module()}")
        return _done_work(tensors)

    def recv(self, tensors, src: int, tag: int = 0):
        tensor = check_tensor(tensors[0], "recv")
        data = self._world.mailbox(self._group_key(), self._size).recv(src, self._rank, tag)
        if data.size != tensor.numel() or data.dtype != as_flat_numpy(tensor).dtype:
            raise ValueError(f"recv: rank {src} sent {data.size} {data.dtype} elements; this rank expects "
                             f"{tensor.numel()} {tensor.dtype}")
        np.copyto(as_flat_numpy(tensor), data)
        return _done_work(tensors)

    def barrier(self, opts=BarrierOptions()):
        return self._join("barrier", (), None, lambda requests, ledger, label: None)

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


def _reduce_one(collective, kind, rows, outs, ledger, label, algorithm, mode, scratch) -> None:
    """One reduce-scatter or all-reduce over the ranks' flat inputs ``rows``; rank r's result into ``outs[r]``.
    ``scratch(shape, dtype)`` lends a reusable (N, S) world for all-reduce, so that repeated calls (DDP's buckets)
    do not pay for fresh memory."""
    n = len(rows)
    if kind in ("SUM", "AVG"):
        average = algorithms.algorithm(collective, algorithm).average if kind == "AVG" else None
        if kind == "AVG" and (average is None or rows[0].dtype.kind not in "fV"):
            raise NotImplementedError(f"AVG with algorithm {algorithm!r}: " + (
                "its engine has no AVG; use SUM and divide" if average is None else
                "AVG of integer tensors is not supported; use SUM and divide"))
        if average == "premultiply":  # each input × T(1/N) in its own type (16-bit: fp32 product, rounded)
            wide = np.float64 if rows[0].dtype.itemsize == 8 else np.float32
            scale = np.asarray(1.0 / n).astype(np.float64 if wide is np.float64 else np.float32).astype(
                rows[0].dtype).astype(wide)  # NCCL: float(1.0/nRanks), then the op's type (enqueue.cc)
            rows = [(row.astype(wide) * scale).astype(row.dtype) for row in rows]
        if collective == "all-reduce":
            result = collectives.all_reduce(rows, ledger=ledger, label=label, mode=mode, algorithm=algorithm,
                                            out=scratch((n, rows[0].size), rows[0].dtype))
        else:
            result = collectives.reduce_scatter(rows, ledger=ledger, label=label, mode=mode, algorithm=algorithm)
        for r in range(n):
            np.copyto(outs[r], result[r])
        if average == "divide":
            for out in outs:
                np.copyto(out, (out.astype(np.float64) / n).astype(out.dtype) if out.dtype.itemsize == 8
                          else (out.astype(np.float32) / np.float32(n)).astype(out.dtype))
        return
    world = np.stack(rows)
    if kind == "MIN":
        total = np.min(world, axis=0)
    elif kind == "MAX":
        total = np.max(world, axis=0)
    else:  # PRODUCT in rank order; 16-bit floats multiply in fp32 and round per rank, as per hop on a wire
        wide = np.float32 if world.dtype.itemsize == 2 else world.dtype
        total = world[0]
        for row in world[1:]:
            total = (total.astype(wide) * row.astype(wide)).astype(world.dtype)
    # the traffic is the algorithm's for this collective, counted on size-only buffers
    run = collectives.all_reduce if collective == "all-reduce" else collectives.reduce_scatter
    run(VirtualBuffer((n, world.shape[1]), world.dtype), ledger=ledger, label=label, algorithm=algorithm)
    if collective == "all-reduce":
        for out in outs:
            np.copyto(out, total)
    else:
        layout = ChunkLayout(world.shape[1], n)
        for r, out in enumerate(outs):
            np.copyto(out, total[layout.start(r):layout.start(r) + layout.payload(r)])
