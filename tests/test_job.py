"""What a rank reads and hands back (zero_stages.job) and the step guard's contract (zero_stages.step_guard), on
small hand-made objects and on short real runs whose gradients are integer blocks (known exactly)."""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from ringemu.blocks import integer_blocks
from ringemu.faults.spec import CollectiveFault
from ringemu.memory import MemoryLedger
from ringemu.virtual import VirtualBuffer
from zero_stages.api import run_job, training_job
from zero_stages.job import Job, Recorder
from zero_stages.step_guard import StepGuard, _Attempt
from zero_stages.workload import block_seed


class FakeOpt:
    """An optimizer's state as Recorder and StepGuard read it: per-unit master, m, v and a step counter."""

    def __init__(self):
        self.master = [np.arange(3, dtype=np.float32)]
        self.m, self.v = [np.zeros(3, np.float32)], [np.ones(3, np.float32)]
        self.step_count, self.forgot = 0, 0

    def pieces(self, per_unit):
        return [(u, 0, a) for u, a in enumerate(per_unit)]

    def forget_fresh(self):
        self.forgot += 1


def _job(**kw):
    base = dict(flat=None, wire=np.dtype(np.float16), steps=3, workload=None, adam=None, loss_scaling=None,
                memory=MemoryLedger(2))
    return Job(**{**base, **kw})


# -- Job -----------------------------------------------------------------------------------------------------------
def test_step_range_starts_at_first_step():
    assert _job(steps=3, first_step=5).step_range() == range(5, 8) and _job(steps=2).step_range() == range(2)


def test_init_unit_reads_the_resumed_master_once_read_only_and_apart():
    resumed = SimpleNamespace(master={0: np.arange(4, dtype=np.float32)})
    job = _job(resume=resumed, workload=SimpleNamespace(init_unit=lambda u: np.full(4, 9, np.float32)))
    first = job.init_unit(0)
    assert first.tolist() == [0, 1, 2, 3] and not first.flags.writeable and job.init_unit(0) is first
    resumed.master[0][0] = 7  # the job kept its own copy
    assert first[0] == 0
    fresh = _job(workload=SimpleNamespace(init_unit=lambda u: np.full(2, u, np.float32))).init_unit(1)
    assert fresh.tolist() == [1, 1] and not fresh.flags.writeable


def test_end_step_hands_every_rank_and_step_to_the_hook():
    """The hook (a checkpoint writer) gets each rank's step, optimizer, scaler and 16-bit pieces after every step:
    the pieces of the last step are the rank's final weights."""
    calls = []

    def hook(rank, step, opt, scaler, weights16):
        calls.append((rank, step, opt.step_count, scaler.scale, [(u, s, np.array(a)) for u, s, a in weights16]))
    job = dataclasses.replace(training_job(2, 3, grads="blocks", unit_sizes=(5, 7)), on_step_end=hook)
    report = run_job("zero2", job)
    assert sorted((r, s) for r, s, *_ in calls) == [(r, s) for r in range(2) for s in range(3)]
    assert all(count == s + 1 for _, s, count, _, _ in calls)  # Adam has taken step s + 1 when step s ends
    assert all(scale == report.loss_scales[s] for _, s, _, scale, _ in calls)
    for rank in range(2):
        last = [pieces for r, s, _, _, pieces in calls if r == rank and s == 2][0]
        held = report.weights16_per_rank[rank]
        assert [(u, s) for u, s, _ in last] == [(u, s) for u, s, _ in held]
        assert all(a.tobytes() == b.tobytes() for (_, _, a), (_, _, b) in zip(last, held))


# -- Recorder ------------------------------------------------------------------------------------------------------
def test_recorder_keeps_copies_per_step_and_forgets_a_rolled_back_step():
    job, opt = _job(steps=2), FakeOpt()
    rec = Recorder(job, 1)
    g16, g32 = np.full(3, 2, np.float16), np.full(3, 0.5, np.float32)
    rec.local_grad(0, g16)
    rec.grad32(1, 0, g32)
    rec.grad32(0, 4, g32)
    rec.grad32(0, 1, g32)
    g16[:], g32[:] = 0, 0  # the records are copies
    weights = [(0, 0, np.ones(3, np.float16))]
    rec.end_step(0, False, 4.0, weights, opt)
    first = rec.history[0]
    assert (first.step, first.skipped, first.loss_scale) == (0, False, 4.0)
    assert first.local_grads16[0].tolist() == [2, 2, 2]
    # sorted by unit, and within a unit as recorded
    assert [(u, s, a.tolist()) for u, s, a in first.grad32] == [(0, 4, [0.5] * 3), (0, 1, [0.5] * 3),
                                                                 (1, 0, [0.5] * 3)]
    assert first.master[0][2].tolist() == [0, 1, 2] and first.v[0][2].tolist() == [1, 1, 1]
    opt.master[0][:] = 5
    assert first.master[0][2].tolist() == [0, 1, 2] and first.weights16[0][2] is not weights[0][2]
    rec.local_grad(0, g16)
    rec.rollback(1)
    rec.end_step(1, True, 2.0, weights, opt)  # the rolled-back step's gradient is gone
    assert len(rec.history) == 2 and rec.history[1].local_grads16 == {} and rec.history[1].grad32 == []
    rec.rollback(0)
    assert rec.history == []


def test_recorder_result_is_the_last_step_and_the_ranks_memory_row():
    memory = MemoryLedger(2)
    memory.alloc(1, "w", "weights16", 10)
    memory.alloc(1, "x", "gathered", 6)
    memory.free(1, "x")
    job, opt = _job(steps=4, memory=memory), FakeOpt()
    rec = Recorder(job, 1)
    result = rec.result(SimpleNamespace(padding_bytes=3), 8.0, [(0, 0, np.ones(3, np.float16))], opt)
    assert (result.rank, result.model_state_padding_bytes) == (1, 3)
    assert (result.model_state_bytes, result.peak_bytes) == (memory.model_states(1), 16)
    assert result.memory_by_category == memory.by_category(1)
    assert (result.final.step, result.final.skipped, result.final.loss_scale) == (3, False, 8.0)


def test_recorder_records_nothing_unless_asked_and_nothing_size_only():
    opt, weights = FakeOpt(), [(0, 0, np.ones(3, np.float16))]
    quiet = Recorder(_job(record_history=False), 0)
    quiet.local_grad(0, np.ones(3, np.float16))
    quiet.grad32(0, 0, np.ones(3, np.float32))
    quiet.end_step(0, False, 1.0, weights, opt)
    assert quiet.history == [] and quiet._local == {} and quiet._grad32 == []
    assert quiet.result(SimpleNamespace(padding_bytes=0), 1.0, weights, opt).final is not None
    counted = Recorder(_job(size_only=True), 0)
    counted.end_step(0, False, 1.0, weights, opt)
    assert counted.history == [] and counted.result(SimpleNamespace(padding_bytes=0), 1.0, weights, opt).final is None


def test_a_runs_history_holds_each_ranks_block_gradients_and_their_average():
    """DP on 4 ranks with integer-block gradients (bf16, loss scale 1): after step s, rank r's own 16-bit gradient of
    unit u is row r of integer_blocks(4, size, block_seed(0, s, u)), and the averaged fp32 gradient is their sum
    over 4 (exact: the sum of blocks is exact, and dividing by 4 is)."""
    units = (5, 7)
    report = run_job("dp", training_job(4, 2, grads="blocks", unit_sizes=units))
    for s, h in enumerate(report.history):
        blocks = [integer_blocks(4, size, block_seed(0, s, u), "bf16") for u, size in enumerate(units)]
        for r in range(4):
            assert sorted(h["local_grads16"][r]) == [0, 1]
            for u in range(2):
                assert h["local_grads16"][r][u].tobytes() == blocks[u][r].tobytes()
        mean = np.concatenate([b.astype(np.float64).sum(axis=0) / 4 for b in blocks]).astype(np.float32)
        assert h["grad32"].tobytes() == mean.tobytes()


# -- StepGuard -----------------------------------------------------------------------------------------------------
def _guard(plan, size_only=False, weights=None):
    comm = SimpleNamespace(rank=0, faults=plan)
    arena = SimpleNamespace(live_names=lambda: [], free=lambda name: None)
    rec = SimpleNamespace(history=[], rollback=lambda n: None)
    return StepGuard(comm, _job(size_only=size_only), arena, rec, FakeOpt(), SimpleNamespace(scale=1.0,
                     _clean_steps=0), weights if weights is not None else [np.zeros(2, np.float16)])


def _fault():
    return CollectiveFault("lost", "grads", 0, (1,))


def test_the_guard_is_active_only_with_a_fault_plan_and_real_numbers():
    assert _guard(SimpleNamespace(retry=True)).active and _guard(SimpleNamespace(retry=True)).retry
    assert not _guard(None).active and not _guard(SimpleNamespace(retry=True), size_only=True).active
    assert _guard(SimpleNamespace()).retry is False  # a plan without retry: the fault is re-raised
    kept = _guard(SimpleNamespace(), weights=[np.zeros(2, np.float16), VirtualBuffer((3,), "bf16")]).weights16
    assert len(kept) == 1 and isinstance(kept[0], np.ndarray)


def test_an_unguarded_step_lets_every_error_through():
    with pytest.raises(CollectiveFault, match="lost"):
        _guard(None).run(range(1), lambda step: (_ for _ in ()).throw(_fault()))
    with _Attempt(True) as attempt:
        raise _fault()
    assert isinstance(attempt.error, CollectiveFault)
    with pytest.raises(ValueError, match="not a fault"):
        with _Attempt(True):
            raise ValueError("not a fault")  # only collective faults are rolled back
    with pytest.raises(CollectiveFault):
        with _Attempt(False):
            raise _fault()


def test_a_guarded_step_restores_the_state_and_re_raises_or_retries():
    guard = _guard(SimpleNamespace(retry=False))
    tries = []

    def step(s):
        tries.append(s)
        guard.opt.master[0][:] = -1
        guard.opt.step_count += 1
        guard.scaler.scale = 0.5
        raise _fault()
    with pytest.raises(CollectiveFault) as info:
        guard.run(range(3), step)
    assert tries == [0] and info.value.train_step == 0 and info.value.states[0]["step_count"] == 0
    assert guard.opt.master[0].tolist() == [0, 1, 2] and guard.opt.step_count == 0 and guard.scaler.scale == 1.0
    retrying = _guard(SimpleNamespace(retry=True))
    seen = []

    def flaky(s):
        seen.append(s)
        if len(seen) == 1:
            raise _fault()
    retrying.run(range(2), flaky)
    assert seen == [0, 0, 1]
