"""ZeRO-Offload: ZeRO-2 with the optimizer states and the update on the host CPU (Ren et al. 2021,
"ZeRO-Offload", arXiv 2101.06840, §4: "offload strategy", §4.2 "single GPU schedule", §4.3 "multi-GPU").

The GPU keeps the whole 16-bit weights (2Ψ B) and its shard of the 16-bit gradients (2·Σ_u ceil(S_u/N) B):
2Ψ + 2Ψ/N per rank when N divides every unit. The host keeps the fp32 master, m and v of the shard and the 16-bit
gradient shard it receives (14·Σ_u ceil(S_u/N) B), recorded in its own MemoryLedger (``OffloadHost.memory``):
not less stored, stored elsewhere. One step, per rank:

1. forward with the full 16-bit weights; backward unit by unit into a bucket, reduce-scattered into the GPU's
   gradient shard (``grad_reduce_scatter``), as ZeRO-2;
2. the shard's 16-bit gradient is copied down over PCIe (``grad_offload``: 2 B per element of the payload);
3. fp16 loss scaling over the whole world (``overflow_check``); the host averages and runs Adam on the shard;
4. the shard's new 16-bit weights are copied up over PCIe (``param_upload``: 2 B per element) and all-gathered
   (``param_all_gather``).

PCIe bytes per step: 2·p_r down and 2·p_r up for rank r's payload p_r, Σ_r p_r = Ψ: 4Ψ over all ranks, the
paper's 2Ψ of gradients and 2Ψ of parameters (§4.2, with N = 1: 4Ψ on one GPU's link). The arithmetic is
ZeRO-2's, on another device: every result equals DP's bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

from ringemu.link_bytes import HostLink
from ringemu.memory import MemoryLedger

from ..buffers import Arena, full_weights16, part, write
from ..job import Job, Recorder, RankResult
from ..optimizer import OptimizerShard
from ..precision import LossScaler
from ..step_guard import StepGuard

__all__ = ["run_rank", "OffloadHost", "DOWN_LABEL", "UP_LABEL"]

DOWN_LABEL, UP_LABEL = "grad_offload", "param_upload"


@dataclass
class OffloadHost:
    """The hosts of a run: their memory (one row per rank's host share) and their PCIe copies."""

    memory: MemoryLedger
    link: HostLink

    @classmethod
    def for_ranks(cls, n_ranks: int) -> "OffloadHost":
        return cls(MemoryLedger(n_ranks), HostLink(n_ranks))


def run_rank(comm, job: Job) -> RankResult:
    """One rank of ZeRO-Offload for ``job.steps`` steps."""
    host = job.options
    if not isinstance(host, OffloadHost):
        raise TypeError("the offload stage needs job.options = OffloadHost (zero_stages.api builds it)")
    flat, wire, units, rank = job.flat, job.wire, job.flat.units(), comm.rank
    arena, host_arena = Arena(job.memory, rank, job.size_only), Arena(host.memory, rank, job.size_only)
    mine = [flat.shard_slice(u, rank) for u in units]
    shard_numel = [flat.shard_numel(u) for u in units]
    length = [mine[u].stop - mine[u].start for u in units]

    # GPU: whole 16-bit weights, this rank's 16-bit gradient shard. Host: the gradient shard and the optimizer.
    weights16 = full_weights16(arena, job)
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", shard_numel[u], wire, padding=shard_numel[u] - length[u])
               for u in units]
    host_grads16 = [host_arena.alloc(f"grads16[{u}]", "grads16", shard_numel[u], wire,
                                     padding=shard_numel[u] - length[u]) for u in units]
    opt = OptimizerShard(host_arena, mine, shard_numel, job.init_unit, job.adam, resume=job.resume)
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, rank)
    held = [(u, 0, weights16[u]) for u in units]
    itemsize = wire.itemsize

    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        ctx = job.workload.begin_step(arena, step, rank)
        for u in units:
            ctx.forward(u, weights16[u])
        for u in reversed(units):  # 1. backward bucket by bucket, reduce-scatter into the GPU's shard
            bucket = arena.alloc(f"grad_bucket[{u}]", "comm_buffer", flat.unit_sizes[u], wire)
            ctx.backward(u, weights16[u], bucket, scaler.scale)
            rec.local_grad(u, bucket)
            write(part(grads16[u], 0, length[u]), comm.reduce_scatter(bucket, label="grad_reduce_scatter"))
            arena.free(f"grad_bucket[{u}]")
            # 2. down over PCIe: the payload of the shard, 2 B per element
            write(part(host_grads16[u], 0, length[u]), part(grads16[u], 0, length[u]))
            host.link.copy(rank, DOWN_LABEL, "down", length[u] * itemsize)
        ctx.end()

        own = [part(host_grads16[u], 0, length[u]) for u in units]
        overflow = scaler.found_overflow(comm, own)
        if not overflow:  # 3. the host's update of the shard
            opt.next_step()
            for u in units:
                rec.grad32(u, mine[u].start, opt.update(u, own[u], comm.n_ranks, scaler.scale))
            for u in units:  # 4. up over PCIe, then all-gather on the GPUs
                own_w = part(weights16[u], mine[u].start, mine[u].stop)
                write(own_w, opt.weights16(u, wire))
                host.link.copy(rank, UP_LABEL, "up", length[u] * itemsize)
                write(weights16[u], comm.all_gather(own_w, flat.unit_sizes[u], label="param_all_gather"))
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)
    return rec.result(arena, scaler.scale, held, opt)
