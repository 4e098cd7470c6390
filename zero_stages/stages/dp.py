"""Data parallelism: the baseline ZeRO starts from (Rajbhandari et al. 2019, §3.1; the lesson's naive scheme).

Every rank holds every model state: 16-bit weights (2Ψ B), 16-bit gradients (2Ψ B) and the K = 12 B/parameter
optimizer states (fp32 master, m, v): 16Ψ bytes per rank. One step, per rank:

1. forward and backward on this rank's micro-batch with the full 16-bit weights;
2. as backward finishes unit u, all-reduce its 16-bit gradient in place (``grad_all_reduce``, a ring
   reduce-scatter then all-gather: each rank sends 2(N−1)·ceil(S_u/N) elements);
3. fp16 loss scaling: one overflow flag, all-reduced (``overflow_check``); an overflow skips the step;
4. every rank averages the whole reduced gradient and runs the same Adam update on all Ψ parameters;
5. every rank rounds its new master weights to the 16-bit weights.
"""
from __future__ import annotations

from ..buffers import Arena, write
from ..job import Job, Recorder, RankResult
from ..optimizer import OptimizerShard
from ..precision import LossScaler
from ..step_guard import StepGuard

__all__ = ["run_rank"]


def run_rank(comm, job: Job) -> RankResult:
    """One rank of data parallelism for ``job.steps`` steps."""
    flat, wire, units = job.flat, job.wire, job.flat.units()
    arena = Arena(job.memory, comm.rank, job.size_only)

    # Model states, all replicated: 2Ψ + 2Ψ + 12Ψ bytes.
    weights16 = [arena.alloc(f"weights16[{u}]", "weights16", s, wire) for u, s in enumerate(flat.unit_sizes)]
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", s, wire) for u, s in enumerate(flat.unit_sizes)]
    opt = OptimizerShard(arena, [slice(0, s) for s in flat.unit_sizes], list(flat.unit_sizes),
                         job.init_unit, job.adam, resume=job.resume)
    for u in units:
        write(weights16[u], opt.weights16(u, wire))
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, comm.rank)
    held = [(u, 0, weights16[u]) for u in units]

    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        # 1-2. Forward, backward; all-reduce each unit's gradient as soon as backward has produced it.
        ctx = job.workload.begin_step(arena, step, comm.rank)
        for u in units:
            ctx.forward(u, weights16[u])
        for u in reversed(units):
            ctx.backward(u, weights16[u], grads16[u], scaler.scale)
            rec.local_grad(u, grads16[u])
            write(grads16[u], comm.all_reduce(grads16[u], label="grad_all_reduce"))
        ctx.end()

        # 3. Skip the step everywhere if the reduced gradient overflowed.
        overflow = scaler.found_overflow(comm, grads16)
        if not overflow:
            # 4-5. The full update, identical on every rank.
            opt.next_step()
            for u in units:
                rec.grad32(u, 0, opt.update(u, grads16[u], comm.n_ranks, scaler.scale))
                write(weights16[u], opt.weights16(u, wire))
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(comm.rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)

    return rec.result(arena, scaler.scale, held, opt)
