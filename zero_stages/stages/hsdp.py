"""HSDP: shard inside a node, replicate across nodes (PyTorch FSDP2 on a 2-D ``DeviceMesh``, FSDP1's
``HYBRID_SHARD``; Zhao et al. 2023, "PyTorch FSDP", arXiv 2304.11277, §3.2.2 "hybrid sharding").

N = R nodes × K ranks per node; local rank l of node m (world rank m·K + l) keeps chunk l of ``ChunkLayout(S_u, K)``
of every unit, padded to ceil(S_u/K): 16·Σ_u ceil(S_u/K) bytes of model states per rank (16Ψ/K when K divides
every unit). Rank (m, l) holds the same shard as every (m', l): ZeRO-3 inside the node, DP across nodes. One step:

1. forward: all-gather each unit inside the node (``param_all_gather_fwd``; K ranks, NVLink), prefetching the next;
2. backward: all-gather again inside the node (``param_all_gather_bwd``), backward into a bucket, reduce-scatter the
   bucket inside the node (``grad_reduce_scatter``), then all-reduce the padded ceil(S_u/K)-element shard across
   the R nodes among the ranks of one local index (``grad_all_reduce_cross``: 2(R−1)·ceil(ceil(S_u/K)/R) elements
   per rank, the only traffic that leaves a node: 2(R−1)/R·Ψ/K);
3. fp16 loss scaling over the whole world (``overflow_check``); the shard is averaged over all N ranks;
4. Adam on the shard and its 16-bit rounding, as ZeRO-3.

Order of addition: the intra-node ring sums K ranks, then the cross-node ring sums the R node sums; DP's ring sums
all N ranks in one ring. With integer test blocks the sums are exact and HSDP equals DP bit for bit; with floats
the two orders round differently (and each 16-bit hop rounds).
"""
from __future__ import annotations

from ringemu.worlds.groups import group_communicator

from ..buffers import Arena, part, write
from ..flat import FlatParams
from ..job import Job, Recorder, RankResult
from ..optimizer import OptimizerShard
from ..precision import LossScaler
from ..step_guard import StepGuard
from . import zero3

__all__ = ["run_rank", "mesh", "node_flat", "CROSS_LABEL"]

CROSS_LABEL = "grad_all_reduce_cross"


def mesh(comm, job: Job):
    """(node communicator, cross-node communicator) of this rank; K = ``job.ranks_per_node``."""
    k = job.ranks_per_node
    if k is None:
        raise ValueError("this stage needs ranks_per_node (K ranks per node, dividing n_ranks)")
    return group_communicator(comm, "node", k), group_communicator(comm, "cross", k)


def node_flat(job: Job) -> FlatParams:
    """The model sharded over the K ranks of a node."""
    return FlatParams(job.flat.unit_sizes, job.ranks_per_node)


def init_state(comm, node, job: Job):
    """This rank's node shard (chunk l of every unit over K) of weights, gradients and optimizer states."""
    flat = node_flat(job)
    units = flat.units()
    arena = Arena(job.memory, comm.rank, job.size_only)
    mine = [flat.shard_slice(u, node.rank) for u in units]
    numel = [flat.shard_numel(u) for u in units]
    pad = [numel[u] - (mine[u].stop - mine[u].start) for u in units]
    weights16 = [arena.alloc(f"weights16[{u}]", "weights16", numel[u], job.wire, padding=pad[u]) for u in units]
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", numel[u], job.wire, padding=pad[u]) for u in units]
    opt = OptimizerShard(arena, mine, numel, job.init_unit, job.adam, resume=job.resume)
    for u in units:
        write(part(weights16[u], 0, mine[u].stop - mine[u].start), opt.weights16(u, job.wire))
    return arena, mine, weights16, grads16, opt


def backward(node, cross, job, arena, weights16, grads16, mine, ctx, scale, rec) -> None:
    """Step 2: gather inside the node, backward, reduce-scatter inside the node, all-reduce across nodes."""
    units, gathered = job.flat.units(), {}
    zero3.gather_unit(node, job, arena, weights16, mine, gathered, units[-1], "param_all_gather_bwd")
    for u in reversed(units):
        if u > 0:
            zero3.gather_unit(node, job, arena, weights16, mine, gathered, u - 1, "param_all_gather_bwd")
        bucket = arena.alloc(f"grad_bucket[{u}]", "comm_buffer", job.flat.unit_sizes[u], job.wire)
        ctx.backward(u, gathered[u], bucket, scale)
        rec.local_grad(u, bucket)
        zero3.release_unit(arena, gathered, u)
        write(part(grads16[u], 0, mine[u].stop - mine[u].start),
              node.reduce_scatter(bucket, label="grad_reduce_scatter"))
        arena.free(f"grad_bucket[{u}]")
        # the padded shard (its padding is zero on every rank), so every cross group sends the same length
        write(grads16[u], cross.all_reduce(grads16[u], label=CROSS_LABEL))


def run_rank(comm, job: Job) -> RankResult:
    """One rank of HSDP for ``job.steps`` steps."""
    node, cross = mesh(comm, job)
    arena, mine, weights16, grads16, opt = init_state(comm, node, job)
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, comm.rank)
    held = [(u, mine[u].start, part(weights16[u], 0, mine[u].stop - mine[u].start)) for u in job.flat.units()]

    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        ctx = job.workload.begin_step(arena, step, comm.rank)
        zero3.forward(node, job, arena, weights16, mine, ctx)
        backward(node, cross, job, arena, weights16, grads16, mine, ctx, scaler.scale, rec)
        ctx.end()
        overflow = zero3.optimizer_step(comm, job, weights16, grads16, mine, opt, scaler, rec)
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(comm.rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)
    return rec.result(arena, scaler.scale, held, opt)
