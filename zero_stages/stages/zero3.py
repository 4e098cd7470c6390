"""ZeRO-3, P_os+g+p: optimizer states, gradients and parameters partitioned (Rajbhandari et al. 2019, §5.3).

Rank r keeps only its shard of everything: 16·Σ_u ceil(S_u/N) bytes of model states per rank (16Ψ/N when N
divides every unit). A unit's full 16-bit parameters exist only while the unit is in use (``gathered``), as in
PyTorch FSDP; the next unit is prefetched, so the peak is the own shard plus the one or two units in flight
(lesson claim M10). One step, per rank:

1. forward: all-gather unit 0 (``param_all_gather_fwd``); for each unit u, prefetch unit u+1, run u's forward,
   free u's full parameters;
2. backward: all-gather the last unit (``param_all_gather_bwd``); for each unit u from the last, prefetch unit
   u−1, run u's backward into a transient bucket, free u's parameters, reduce-scatter the bucket
   (``grad_reduce_scatter``) into this rank's gradient shard, free the bucket;
3. fp16 loss scaling: one all-reduced overflow flag over the shards (``overflow_check``);
4. rank r averages its gradient shard, updates its shard of master, m and v, and rounds it into its 16-bit
   parameter shard. No all-gather: the next forward gathers.
Traffic per rank: two parameter all-gathers and one gradient reduce-scatter, (N−1)·ceil(S_u/N) elements each:
3(N−1)/N·Ψ, 1.5× DP's (§7.2.2).
"""
from __future__ import annotations

from ..buffers import Arena, part, write
from ..job import Job, Recorder, RankResult
from ..optimizer import OptimizerShard
from ..precision import LossScaler
from ..step_guard import StepGuard

__all__ = ["run_rank", "init_state", "forward", "backward", "optimizer_step", "gather_unit", "release_unit"]


def init_state(comm, job: Job):
    """This rank's shards of the 16-bit parameters and gradients and of the optimizer states."""
    flat, wire, units, rank = job.flat, job.wire, job.flat.units(), comm.rank
    arena = Arena(job.memory, rank, job.size_only)
    mine = [flat.shard_slice(u, rank) for u in units]
    shard_numel = [flat.shard_numel(u) for u in units]
    pad = [shard_numel[u] - (mine[u].stop - mine[u].start) for u in units]
    weights16 = [arena.alloc(f"weights16[{u}]", "weights16", shard_numel[u], wire, padding=pad[u]) for u in units]
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", shard_numel[u], wire, padding=pad[u]) for u in units]
    opt = OptimizerShard(arena, mine, shard_numel, job.init_unit, job.adam,
                         resume=job.resume)
    for u in units:
        write(part(weights16[u], 0, mine[u].stop - mine[u].start), opt.weights16(u, wire))
    return arena, mine, weights16, grads16, opt


def gather_unit(comm, job, arena, weights16, mine, gathered: dict, u: int, label: str) -> None:
    """All-gather unit u's full 16-bit parameters into a transient ``gathered`` buffer."""
    gathered[u] = arena.alloc(f"gathered[{u}]", "gathered", job.flat.unit_sizes[u], job.wire)
    shard = part(weights16[u], 0, mine[u].stop - mine[u].start)
    write(gathered[u], comm.all_gather(shard, job.flat.unit_sizes[u], label=label))


def release_unit(arena, gathered: dict, u: int) -> None:
    """Free unit u's full parameters (reshard)."""
    del gathered[u]
    arena.free(f"gathered[{u}]")


def forward(comm, job, arena, weights16, mine, ctx) -> None:
    """Step 1: gather, prefetch the next unit, compute, free."""
    units, gathered = job.flat.units(), {}
    gather_unit(comm, job, arena, weights16, mine, gathered, units[0], "param_all_gather_fwd")
    for u in units:
        if u + 1 < len(units):
            gather_unit(comm, job, arena, weights16, mine, gathered, u + 1, "param_all_gather_fwd")  # prefetch
        ctx.forward(u, gathered[u])
        release_unit(arena, gathered, u)


def backward(comm, job, arena, weights16, grads16, mine, ctx, scale, rec) -> None:
    """Step 2: gather again, prefetch the previous unit, backward into a bucket, reduce-scatter, free."""
    units, gathered = job.flat.units(), {}
    gather_unit(comm, job, arena, weights16, mine, gathered, units[-1], "param_all_gather_bwd")
    for u in reversed(units):
        if u > 0:
            gather_unit(comm, job, arena, weights16, mine, gathered, u - 1, "param_all_gather_bwd")  # prefetch
        bucket = arena.alloc(f"grad_bucket[{u}]", "comm_buffer", job.flat.unit_sizes[u], job.wire)
        ctx.backward(u, gathered[u], bucket, scale)
        rec.local_grad(u, bucket)
        release_unit(arena, gathered, u)
        write(part(grads16[u], 0, mine[u].stop - mine[u].start),
              comm.reduce_scatter(bucket, label="grad_reduce_scatter"))
        arena.free(f"grad_bucket[{u}]")


def optimizer_step(comm, job, weights16, grads16, mine, opt, scaler, rec) -> bool:
    """Steps 3-4: overflow check, then the shard's update and its 16-bit rounding. Returns True if skipped."""
    units = job.flat.units()
    own_grads = [part(grads16[u], 0, mine[u].stop - mine[u].start) for u in units]
    overflow = scaler.found_overflow(comm, own_grads)
    if not overflow:
        opt.next_step()
        for u in units:
            rec.grad32(u, mine[u].start, opt.update(u, own_grads[u], comm.n_ranks, scaler.scale))
            write(part(weights16[u], 0, mine[u].stop - mine[u].start), opt.weights16(u, job.wire))
    return overflow


def run_rank(comm, job: Job) -> RankResult:
    """One rank of ZeRO-3 for ``job.steps`` steps."""
    arena, mine, weights16, grads16, opt = init_state(comm, job)
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, comm.rank)
    held = [(u, mine[u].start, part(weights16[u], 0, mine[u].stop - mine[u].start)) for u in job.flat.units()]
    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        ctx = job.workload.begin_step(arena, step, comm.rank)
        forward(comm, job, arena, weights16, mine, ctx)
        backward(comm, job, arena, weights16, grads16, mine, ctx, scaler.scale, rec)
        ctx.end()
        overflow = optimizer_step(comm, job, weights16, grads16, mine, opt, scaler, rec)
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(comm.rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)
    return rec.result(arena, scaler.scale, held, opt)
