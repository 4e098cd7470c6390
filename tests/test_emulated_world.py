"""EmulatedWorld: per-rank code (greenlets or threads) gets the same bits as the collectives; mismatches fail
loudly. Every test runs under both schedulers."""
import numpy as np
import pytest
from hypothesis import given, settings

from ringemu import collectives
from ringemu.worlds import Communicator, EmulatedWorld, RankFailure
from ringemu.worlds.scheduling import SCHEDULERS
from ringemu.ledger import CommLedger
from ringemu.testing import shards_of
from ringemu.virtual import VirtualBuffer
from strategies import float_worlds


each_scheduler = pytest.mark.parametrize("scheduler", SCHEDULERS)


def assert_bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))


@settings(max_examples=10)  # each example starts N ranks
@given(world=float_worlds(max_ranks=8, max_numel=40))
@each_scheduler
def test_results_match_the_collectives(scheduler, world):
    n, numel = world.shape

    def step(comm, world):
        mine = world[comm.rank].copy()
        chunk = comm.reduce_scatter(mine, label="grads")
        full = comm.all_gather(chunk, numel, label="params")
        return chunk, full, comm.all_reduce(mine, label="grads")

    ledger = CommLedger()
    results = EmulatedWorld(n, ledger, scheduler=scheduler).run(step, world)
    chunks = collectives.reduce_scatter(world)
    summed = collectives.all_reduce(world)
    for r, (chunk, full, reduced) in enumerate(results):
        assert_bits_equal(chunk, chunks[r])
        assert_bits_equal(full, summed[r])
        assert_bits_equal(reduced, summed[r])
    assert ledger.labels() == ["grads", "params"]
    reference = CommLedger()
    collectives.reduce_scatter(world, ledger=reference, label="grads")
    collectives.all_gather(shards_of(world), ledger=reference, label="params")
    collectives.all_reduce(world, ledger=reference, label="grads")
    assert ledger.summary() == reference.summary()


@each_scheduler
def test_communicators_follow_the_protocol(scheduler):
    world = EmulatedWorld(3, scheduler=scheduler)
    assert all(isinstance(c, Communicator) for c in world.communicators())
    assert world.communicators()[2].layout(10).payloads().tolist() == [4, 4, 2]


@each_scheduler
def test_size_only_buffers_only_count(scheduler):
    ledger = CommLedger()
    out = EmulatedWorld(4, ledger, scheduler=scheduler).run(lambda comm: comm.all_reduce(VirtualBuffer((10,), "bf16")))
    assert out == [VirtualBuffer((10,), "bf16")] * 4
    assert ledger.records[0].size_only and ledger.total().bytes == 4 * 6 * 3 * 2


@each_scheduler
def test_mismatched_collectives_raise_rank_failure(scheduler):
    def diverge(comm):
        buf = np.ones(6, np.float32)
        return comm.all_reduce(buf) if comm.rank else comm.reduce_scatter(buf)
    with pytest.raises(RankFailure, match=r"ranks made different collective calls: rank 0: reduce_scatter"):
        EmulatedWorld(3, scheduler=scheduler).run(diverge)


@each_scheduler
def test_mismatched_sizes_raise_rank_failure(scheduler):
    with pytest.raises(RankFailure, match="different collective calls"):
        EmulatedWorld(2, scheduler=scheduler).run(lambda comm: comm.all_reduce(np.ones(4 + comm.rank, np.float32)))


@each_scheduler
def test_a_rank_that_skips_a_collective_is_reported(scheduler):
    def lazy(comm):
        if comm.rank != 1:
            comm.all_reduce(np.ones(4, np.float32))
    with pytest.raises(RankFailure, match="rank 1: exit"):
        EmulatedWorld(3, scheduler=scheduler).run(lazy)


@each_scheduler
def test_a_failing_rank_is_named(scheduler):
    def boom(comm):
        if comm.rank == 2:
            raise KeyError("lost shard")
        return comm.all_reduce(np.ones(4, np.float32))
    with pytest.raises(RankFailure, match="rank 2 failed: KeyError: 'lost shard'"):
        EmulatedWorld(4, scheduler=scheduler).run(boom)


@each_scheduler
def test_wrong_shard_length_is_reported(scheduler):
    with pytest.raises(RankFailure, match=r"rank 3 passed a shard of 3 elements; ChunkLayout\(10, 4\) gives it 1"):
        EmulatedWorld(4, scheduler=scheduler).run(lambda comm: comm.all_gather(np.ones(3, np.float32), 10))


@each_scheduler
def test_non_buffers_are_rejected(scheduler):
    with pytest.raises(RankFailure, match="needs a 1-D numpy array or VirtualBuffer"):
        EmulatedWorld(2, scheduler=scheduler).run(lambda comm: comm.all_reduce(np.ones((2, 2), np.float32)))


@each_scheduler
def test_one_rank_world(scheduler):
    out = EmulatedWorld(1, scheduler=scheduler).run(lambda comm: comm.all_reduce(np.arange(3, dtype=np.int32)))
    assert out[0].tolist() == [0, 1, 2]


@each_scheduler
def test_bad_rank_count(scheduler):
    with pytest.raises(ValueError, match="n_ranks must be an integer >= 1"):
        EmulatedWorld(0, scheduler=scheduler)


@each_scheduler
def test_a_slow_first_rank_is_reported(scheduler):
    import time

    def late(comm):
        if comm.rank == 0:
            time.sleep(0.6)  # longer than the timeout before its first collective
        return comm.all_reduce(np.zeros(3), "grads")

    with pytest.raises(RankFailure, match=r"ranks \[1, 2\] waited more than 0.2 s at 'grads'; ranks \[0\] did not"):
        EmulatedWorld(3, timeout=0.2, scheduler=scheduler).run(late)


def test_ranks_left_waiting_are_unwound():
    unwound = []

    def rank_fn(comm):
        try:
            if comm.rank == 1:
                raise ValueError("no")
            comm.all_reduce(np.zeros(2))
        finally:
            unwound.append(comm.rank)

    with pytest.raises(RankFailure, match="rank 1 failed: ValueError: no"):
        EmulatedWorld(3, scheduler="greenlet").run(rank_fn)
    assert sorted(unwound) == [0, 1, 2]  # ranks 0 and 2 waited at the all-reduce; their finally blocks ran


def test_a_world_runs_again_after_a_failure():
    world = EmulatedWorld(2, scheduler="greenlet")
    with pytest.raises(RankFailure):
        world.run(lambda comm: comm.all_reduce(np.ones(1 + comm.rank)))
    assert [r.tolist() for r in world.run(lambda comm: comm.all_reduce(np.ones(2)))] == [[2.0, 2.0]] * 2
