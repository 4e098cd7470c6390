"""ZeRO-2, P_os+g: optimizer states and gradients partitioned (Rajbhandari et al. 2019, §5.2).

As ZeRO-1, but rank r keeps only its shard of the 16-bit gradients: 2Ψ + (2 + 12)·Σ_u ceil(S_u/N) bytes per
rank (2Ψ + 14Ψ/N when N divides every unit). Gradients are reduced bucket by bucket as backward produces them
(§5.2, "bucketization"; a bucket here is one unit), and the rest of each bucket is freed at once. One step,
per rank:

1. forward with the full 16-bit weights;
2. backward unit by unit; each unit's 16-bit gradient goes into a transient bucket (``comm_buffer``), is
   reduce-scattered (``grad_reduce_scatter``) into this rank's gradient shard, and the bucket is freed;
3. fp16 loss scaling: one all-reduced overflow flag over the shards (``overflow_check``);
4. rank r averages its gradient shard and updates its shard of master, m and v;
5. rank r rounds its master shard into its part of the 16-bit weights; all-gather (``param_all_gather``).
   Traffic is DP's: 2(N−1)/N·Ψ per rank (§7.2.1).
"""
from __future__ import annotations

from ..buffers import Arena, full_weights16, part, write
from ..job import Job, Recorder, RankResult
from ..optimizer import OptimizerShard
from ..precision import LossScaler
from ..step_guard import StepGuard

__all__ = ["run_rank"]


def run_rank(comm, job: Job) -> RankResult:
    """One rank of ZeRO-2 for ``job.steps`` steps."""
    flat, wire, units, rank = job.flat, job.wire, job.flat.units(), comm.rank
    arena = Arena(job.memory, rank, job.size_only)
    mine = [flat.shard_slice(u, rank) for u in units]
    shard_numel = [flat.shard_numel(u) for u in units]  # ceil(S_u/N), padding included

    # Model states: whole 16-bit weights; this rank's shard of the 16-bit gradients and optimizer states.
    weights16 = full_weights16(arena, job)
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", shard_numel[u], wire,
                           padding=shard_numel[u] - (mine[u].stop - mine[u].start)) for u in units]
    opt = OptimizerShard(arena, mine, shard_numel, job.init_unit, job.adam,
                         resume=job.resume)
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, rank)
    held = [(u, 0, weights16[u]) for u in units]

    def own_grad(u):
        return part(grads16[u], 0, mine[u].stop - mine[u].start)

    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        # 1. Forward with the full weights.
        ctx = job.workload.begin_step(arena, step, rank)
        for u in units:
            ctx.forward(u, weights16[u])
        # 2. Backward bucket by bucket: reduce-scatter each unit's gradient, keep only this rank's shard.
        for u in reversed(units):
            bucket = arena.alloc(f"grad_bucket[{u}]", "comm_buffer", flat.unit_sizes[u], wire)
            ctx.backward(u, weights16[u], bucket, scaler.scale)
            rec.local_grad(u, bucket)
            write(own_grad(u), comm.reduce_scatter(bucket, label="grad_reduce_scatter"))
            arena.free(f"grad_bucket[{u}]")
        ctx.end()

        # 3. Skip the step everywhere if any shard overflowed.
        overflow = scaler.found_overflow(comm, [own_grad(u) for u in units])
        if not overflow:
            # 4. Update this rank's shard of master, m, v.
            opt.next_step()
            for u in units:
                rec.grad32(u, mine[u].start, opt.update(u, own_grad(u), comm.n_ranks, scaler.scale))
            # 5. Round the shard to 16 bits and all-gather the updated weights.
            for u in units:
                own_w = part(weights16[u], mine[u].start, mine[u].stop)
                write(own_w, opt.weights16(u, wire))
                write(weights16[u], comm.all_gather(own_w, flat.unit_sizes[u], label="param_all_gather"))
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)

    return rec.result(arena, scaler.scale, held, opt)
