"""ZeRO-1, P_os: optimizer states partitioned (Rajbhandari et al. 2019, §5.1).

Rank r keeps the optimizer states (fp32 master, m, v: K = 12 B per parameter) only for its shard, chunk r of
every unit; the 16-bit weights and gradients stay whole: 2Ψ + 2Ψ + 12·Σ_u ceil(S_u/N) bytes per rank
(4Ψ + KΨ/N when N divides every unit). One step, per rank:

1. forward and backward with the full 16-bit weights into the full 16-bit gradient buffer;
2. reduce-scatter each unit's gradient (``grad_reduce_scatter``): rank r receives the sum of its shard, in the
   ring's order, bit-identical to DP's all-reduce; it lands in r's own part of the gradient buffer;
3. fp16 loss scaling: every rank tests its reduced shard; one all-reduced flag (``overflow_check``);
4. rank r averages its shard of the gradient and updates only its shard of master, m and v;
5. rank r rounds its new master shard into its part of the 16-bit weights, and an all-gather
   (``param_all_gather``) gives every rank every updated shard. Traffic: (N−1)·ceil(S_u/N) elements each way,
   2(N−1)/N·Ψ in all, the same as DP (§7.2.1).
"""
from __future__ import annotations

from ..buffers import Arena, full_weights16, part, write
from ..job import Job, Recorder, RankResult
from ..optimizer import OptimizerShard
from ..precision import LossScaler
from ..step_guard import StepGuard

__all__ = ["run_rank"]


def run_rank(comm, job: Job) -> RankResult:
    """One rank of ZeRO-1 for ``job.steps`` steps."""
    flat, wire, units, rank = job.flat, job.wire, job.flat.units(), comm.rank
    arena = Arena(job.memory, rank, job.size_only)
    mine = [flat.shard_slice(u, rank) for u in units]  # rank r's chunk of each unit

    # Model states: whole 16-bit weights and gradients, the optimizer states of this rank's shard only.
    weights16 = full_weights16(arena, job)
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", s, wire) for u, s in enumerate(flat.unit_sizes)]
    opt = OptimizerShard(arena, mine, [flat.shard_numel(u) for u in units], job.init_unit, job.adam,
                         resume=job.resume)
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, rank)
    held = [(u, 0, weights16[u]) for u in units]

    def own(buffers, u):
        return part(buffers[u], mine[u].start, mine[u].stop)

    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        # 1. Forward and backward: the full gradient, as in DP.
        ctx = job.workload.begin_step(arena, step, rank)
        for u in units:
            ctx.forward(u, weights16[u])
        for u in reversed(units):
            ctx.backward(u, weights16[u], grads16[u], scaler.scale)
            rec.local_grad(u, grads16[u])
        ctx.end()

        # 2. Reduce-scatter: this rank receives the reduced gradient of its shard only.
        for u in reversed(units):
            write(own(grads16, u), comm.reduce_scatter(grads16[u], label="grad_reduce_scatter"))

        # 3. Skip the step everywhere if any shard overflowed.
        overflow = scaler.found_overflow(comm, [own(grads16, u) for u in units])
        if not overflow:
            # 4. Update this rank's shard of master, m, v.
            opt.next_step()
            for u in units:
                rec.grad32(u, mine[u].start, opt.update(u, own(grads16, u), comm.n_ranks, scaler.scale))
            # 5. Round the shard to 16 bits and all-gather the updated weights.
            for u in units:
                write(own(weights16, u), opt.weights16(u, wire))
                write(weights16[u], comm.all_gather(own(weights16, u), flat.unit_sizes[u], label="param_all_gather"))
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)

    return rec.result(arena, scaler.scale, held, opt)
