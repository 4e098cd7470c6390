"""The checks bite: deliberately broken stage variants, kept here, each fail the check meant to catch them.

* ZeRO-2 whose optimizer forgets the 1/N: the averaged gradient and Adam's m differ from the ring-order
  reference, and parity with DP fails (the 16-bit weights alone might not show it: Adam is nearly
  scale-invariant);
* ZeRO-1 that writes its updated shard one element off: parity with DP fails;
* ZeRO-1 whose all-gather sends the shard before the update (stale): parity with DP fails;
* ZeRO-3 without prefetch: the numbers still match DP, but the measured peak is not the prefetching peak.
"""
import functools

import pytest

from zero_stages import AdamConfig, parity_mismatches, parity_with_dp, train
from zero_stages.stages import zero2, zero3
from zero_stages.buffers import Arena, part, write
from zero_stages.job import Recorder
from zero_stages.optimizer import OptimizerShard
from zero_stages.precision import LossScaler

from strategies_zero import zero3_expected_peak
from test_zero_parity import check_gradients_and_moments

N, UNITS, STEPS, SEED = 4, (10, 7, 33), 3, 5
ADAM = AdamConfig(lr=0.05)  # large enough that every step moves the 16-bit weights


def run(stage, grads="blocks", wire="bf16"):
    return train(stage, N, STEPS, wire, SEED, grads, UNITS, adam=ADAM)


@pytest.fixture(scope="module")
def dp():
    return run("dp")


# -- missing 1/N --------------------------------------------------------------------------------------------------
class NoMeanShard(OptimizerShard):
    """Broken: sums instead of averaging (divides by 1·scale instead of N·scale)."""

    def update(self, unit, reduced16, n_ranks, loss_scale):
        return super().update(unit, reduced16, 1, loss_scale)


def test_missing_one_over_n_is_caught(dp, monkeypatch):
    monkeypatch.setattr(zero2, "OptimizerShard", NoMeanShard)
    broken = run("zero2")
    assert not parity_with_dp(broken, dp)
    assert any("m" in x.split() for x in parity_mismatches(broken, dp))
    with pytest.raises(AssertionError, match="averaged gradient"):
        check_gradients_and_moments(broken, "blocks", SEED, ADAM)


def test_the_unbroken_stage_passes_the_same_checks(dp):
    good = run("zero2")
    assert parity_with_dp(good, dp)
    check_gradients_and_moments(good, "blocks", SEED, ADAM)


# -- ZeRO-1 variants: shard offset off by one, stale all-gather ---------------------------------------------------
def zero1_variant(comm, job, offset=0, stale=False):
    """zero_stages/stages/zero1.py with one of two bugs: the updated 16-bit shard is written ``offset`` elements too far
    right (truncated at the unit's end), or the all-gather sends the shard before it is updated."""
    flat, wire, units, rank = job.flat, job.wire, job.flat.units(), comm.rank
    arena = Arena(job.memory, rank)
    mine = [flat.shard_slice(u, rank) for u in units]
    weights16 = [arena.alloc(f"weights16[{u}]", "weights16", s, wire) for u, s in enumerate(flat.unit_sizes)]
    grads16 = [arena.alloc(f"grads16[{u}]", "grads16", s, wire) for u, s in enumerate(flat.unit_sizes)]
    opt = OptimizerShard(arena, mine, [flat.shard_numel(u) for u in units], job.init_unit, job.adam)
    for u in units:
        weights16[u][...] = job.init_unit(u).astype(wire)
    scaler, rec = LossScaler(job.loss_scaling), Recorder(job, rank)
    held = [(u, 0, weights16[u]) for u in units]
    for step in range(job.steps):
        ctx = job.workload.begin_step(arena, step, rank)
        for u in units:
            ctx.forward(u, weights16[u])
        for u in reversed(units):
            ctx.backward(u, weights16[u], grads16[u], scaler.scale)
            rec.local_grad(u, grads16[u])
        for u in reversed(units):
            grads16[u][mine[u]] = comm.reduce_scatter(grads16[u], label="grad_reduce_scatter")
        overflow = scaler.found_overflow(comm, [grads16[u][mine[u]] for u in units])
        if not overflow:
            opt.next_step()
            for u in units:
                rec.grad32(u, mine[u].start, opt.update(u, grads16[u][mine[u]], comm.n_ranks, scaler.scale))
            for u in units:
                if stale:
                    gathered = comm.all_gather(weights16[u][mine[u]], flat.unit_sizes[u], label="param_all_gather")
                new = opt.weights16(u, wire)
                target = weights16[u][mine[u].start + offset:mine[u].stop + offset]
                target[...] = new[:target.size]
                if not stale:
                    gathered = comm.all_gather(weights16[u][mine[u]], flat.unit_sizes[u], label="param_all_gather")
                weights16[u][...] = gathered
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
    return rec.result(arena, scaler.scale, held, opt)


@pytest.mark.parametrize("grads", ["blocks", "model"])
def test_shard_offset_off_by_one_is_caught(grads):
    dp = run("dp", grads)
    assert parity_with_dp(run(zero1_variant, grads), dp)  # the variant without a bug is ZeRO-1
    broken = run(functools.partial(zero1_variant, offset=1), grads)
    assert not parity_with_dp(broken, dp)


@pytest.mark.parametrize("grads", ["blocks", "model"])
def test_stale_all_gather_is_caught(grads):
    dp = run("dp", grads)
    broken = run(functools.partial(zero1_variant, stale=True), grads)
    assert not parity_with_dp(broken, dp)
    assert any("weights16" in x for x in parity_mismatches(broken, dp))


# -- ZeRO-3 without prefetch ----------------------------------------------------------------------------------------
def forward_no_prefetch(comm, job, arena, weights16, mine, ctx):
    gathered = {}
    for u in job.flat.units():
        zero3.gather_unit(comm, job, arena, weights16, mine, gathered, u, "param_all_gather_fwd")
        ctx.forward(u, gathered[u])
        zero3.release_unit(arena, gathered, u)


def backward_no_prefetch(comm, job, arena, weights16, grads16, mine, ctx, scale, rec):
    gathered = {}
    for u in reversed(job.flat.units()):
        zero3.gather_unit(comm, job, arena, weights16, mine, gathered, u, "param_all_gather_bwd")
        bucket = arena.alloc(f"grad_bucket[{u}]", "comm_buffer", job.flat.unit_sizes[u], job.wire)
        ctx.backward(u, gathered[u], bucket, scale)
        rec.local_grad(u, bucket)
        zero3.release_unit(arena, gathered, u)
        write(part(grads16[u], 0, mine[u].stop - mine[u].start), comm.reduce_scatter(bucket, "grad_reduce_scatter"))
        arena.free(f"grad_bucket[{u}]")


def zero3_no_prefetch(comm, job):
    arena, mine, weights16, grads16, opt = zero3.init_state(comm, job)
    scaler, rec = LossScaler(job.loss_scaling), Recorder(job, comm.rank)
    held = [(u, mine[u].start, part(weights16[u], 0, mine[u].stop - mine[u].start)) for u in job.flat.units()]
    for step in range(job.steps):
        ctx = job.workload.begin_step(arena, step, comm.rank)
        forward_no_prefetch(comm, job, arena, weights16, mine, ctx)
        backward_no_prefetch(comm, job, arena, weights16, grads16, mine, ctx, scaler.scale, rec)
        overflow = zero3.optimizer_step(comm, job, weights16, grads16, mine, opt, scaler, rec)
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
    return rec.result(arena, scaler.scale, held, opt)


def test_skipped_prefetch_is_caught_by_the_memory_check(dp):
    expected = zero3_expected_peak(UNITS, N)
    good = run("zero3")
    assert good.peak_bytes_per_rank == [expected] * N
    broken = run(zero3_no_prefetch)
    assert parity_with_dp(broken, dp)  # the numbers cannot see it ...
    assert broken.peak_bytes_per_rank != [expected] * N  # ... the memory ledger does
