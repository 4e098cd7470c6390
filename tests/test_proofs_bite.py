"""The run checks bite: broken stages and perturbed printed values make claims fail.

Each broken stage is a per-rank function handed to the real ``zero_stages`` entry points through a stage
provider, so the claim's run check executes it exactly as it executes the real stage.
"""
from dataclasses import replace
from fractions import Fraction

import pytest

import zero_stages
from proofs import CATALOG, CLAIMS, RunContext, evaluate
from proofs.rounding import Decimals, Exactly, Stated, decimal_str, parse_number
from ringemu.virtual import VirtualBuffer
from zero_stages.stages import dp, zero2, zero3

BY_ID = {c.id: c for c in CLAIMS}


class Provider:
    """zero_stages with some stages swapped for broken per-rank functions."""

    def __init__(self, **swap):
        self.swap = swap

    def __getattr__(self, name):
        return getattr(zero_stages, name)

    def run_size_only(self, stage, n_ranks, **kwargs):
        return zero_stages.run_size_only(self.swap.get(stage, stage), n_ranks, **kwargs)

    def train(self, stage, n_ranks, steps, wire_dtype="bf16", seed=0, **kwargs):
        return zero_stages.train(self.swap.get(stage, stage), n_ranks, steps, wire_dtype, seed, **kwargs)


class _NoBackwardGather:
    """A communicator that skips ZeRO-3's backward parameter all-gather (the stale forward copy stands in)."""

    def __init__(self, comm):
        self._comm = comm

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def all_gather(self, shard, numel, label="all_gather"):
        if label == "param_all_gather_bwd":
            return VirtualBuffer((numel,), shard.dtype)
        return self._comm.all_gather(shard, numel, label=label)


def zero3_without_backward_gather(comm, job):
    return zero3.run_rank(_NoBackwardGather(comm), job)


def zero1_unsharded(comm, job):
    """'ZeRO-1' that keeps the whole optimizer state on every rank (it is DP)."""
    return dp.run_rank(comm, job)


def zero2_wrong_lr(comm, job):
    """ZeRO-2 whose shard update uses twice the learning rate."""
    return zero2.run_rank(comm, replace(job, adam=replace(job.adam, lr=job.adam.lr * 2)))


def zero3_activations_grow_with_n(comm, job):
    """ZeRO-3 that also keeps 64·N bytes of activations (a halo that grows with N)."""
    job.memory.alloc(comm.rank, "halo", "activations", 64 * comm.n_ranks)
    result = zero3.run_rank(comm, job)
    job.memory.free(comm.rank, "halo")
    return result


def _status(claim_id, **swap):
    return evaluate(BY_ID[claim_id], RunContext(Provider(**swap)))


def test_the_real_stages_pass():
    ctx = RunContext()
    for cid in ("M2", "C2", "C3"):
        assert evaluate(BY_ID[cid], ctx).status == "pass"


def test_zero3_without_backward_all_gather_fails_c2_and_c3():
    for cid in ("C2", "C3"):
        result = _status(cid, zero3=zero3_without_backward_gather)
        assert result.status == "fail", cid
        assert [p.part.label for p in result.parts if p.status == "fail"] == \
            (["ZeRO-3"] if cid == "C2" else ["N = 8", "N = 64"])
    # its memory is unchanged, so the memory claims still pass: the check is specific
    assert _status("M2", zero3=zero3_without_backward_gather).status == "pass"


def test_unsharded_optimizer_state_fails_m2():
    result = _status("M2", zero1=zero1_unsharded)
    assert result.status == "fail"
    assert [p.part.label for p in result.parts if p.status == "fail"] == ["ZeRO-1"]


def test_a_numerically_different_stage_fails_m11():
    result = _status("M11", zero2=zero2_wrong_lr)
    assert result.status == "fail"
    assert [p.part.label for p in result.parts if p.status == "fail"] == ["zero2 bf16"]


def test_activations_that_grow_with_n_fail_m8():
    assert _status("M8", zero3=zero3_activations_grow_with_n).status == "fail"


@pytest.fixture(scope="module")
def ctx():
    return RunContext()


@pytest.mark.parametrize("cid", ["M1", "M2", "M3", "M4", "M7", "M10", "C2", "C3", "C4", "C5", "C6", "C7", "X3"])
def test_perturbed_printed_values_fail(ctx, cid):
    claim = next(c for c in CATALOG if c.id == cid)
    assert evaluate(claim, ctx).status in ("pass", "not-checkable")
    for i, part in enumerate(claim.parts):
        rule = part.rule
        if isinstance(rule, Decimals):
            delta = Fraction(1, 10 ** rule.places)
        elif isinstance(rule, Exactly):
            delta = Fraction(1, 2)
        else:
            continue
        text = decimal_str(parse_number(part.printed) + delta)
        parts = claim.parts[:i] + (replace(part, printed=text),) + claim.parts[i + 1:]
        assert evaluate(replace(claim, parts=parts), ctx).status in ("fail", "not-checkable"), (cid, text)


def test_perturbed_stated_values_fail(ctx):
    m6 = BY_ID["M6"]
    wrong = replace(m6.parts[0], rule=Stated(frozenset({"zero2", "zero3"})))
    assert evaluate(replace(m6, parts=(wrong,)), ctx).status == "fail"
    m9 = BY_ID["M9"]
    flipped = tuple(replace(p, rule=Stated(not p.rule.value)) if isinstance(p.rule, Stated) else p
                    for p in m9.parts)
    assert evaluate(replace(m9, parts=flipped), ctx).status == "fail"
