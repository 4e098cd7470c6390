"""EmulatedWorld: per-rank code on N threads gets the same bits as the collectives; mismatches fail loudly."""
import numpy as np
import pytest
from hypothesis import given, settings

from ringemu import collectives
from ringemu.backends import Communicator, EmulatedWorld, RankFailure
from ringemu.ledger import CommLedger
from ringemu.testing import shards_of
from ringemu.virtual import VirtualBuffer
from strategies import float_worlds


def assert_bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))


@settings(max_examples=10)  # each example starts N threads
@given(world=float_worlds(max_ranks=8, max_numel=40))
def test_results_match_the_collectives(world):
    n, numel = world.shape

    def step(comm, world):
        mine = world[comm.rank].copy()
        chunk = comm.reduce_scatter(mine, label="grads")
        full = comm.all_gather(chunk, numel, label="params")
        return chunk, full, comm.all_reduce(mine, label="grads")

    ledger = CommLedger()
    results = EmulatedWorld(n, ledger).run(step, world)
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


def test_communicators_follow_the_protocol():
    world = EmulatedWorld(3)
    assert all(isinstance(c, Communicator) for c in world.communicators())
    assert world.communicators()[2].layout(10).payloads().tolist() == [4, 4, 2]


def test_size_only_buffers_only_count():
    ledger = CommLedger()
    out = EmulatedWorld(4, ledger).run(lambda comm: comm.all_reduce(VirtualBuffer((10,), "bf16")))
    assert out == [VirtualBuffer((10,), "bf16")] * 4
    assert ledger.records[0].size_only and ledger.total().bytes == 4 * 6 * 3 * 2


def test_mismatched_collectives_raise_rank_failure():
    def diverge(comm):
        buf = np.ones(6, np.float32)
        return comm.all_reduce(buf) if comm.rank else comm.reduce_scatter(buf)
    with pytest.raises(RankFailure, match=r"ranks made different collective calls: rank 0: reduce_scatter"):
        EmulatedWorld(3).run(diverge)


def test_mismatched_sizes_raise_rank_failure():
    with pytest.raises(RankFailure, match="different collective calls"):
        EmulatedWorld(2).run(lambda comm: comm.all_reduce(np.ones(4 + comm.rank, np.float32)))


def test_a_rank_that_skips_a_collective_is_reported():
    def lazy(comm):
        if comm.rank != 1:
            comm.all_reduce(np.ones(4, np.float32))
    with pytest.raises(RankFailure, match="rank 1: exit"):
        EmulatedWorld(3).run(lazy)


def test_a_failing_rank_is_named():
    def boom(comm):
        if comm.rank == 2:
            raise KeyError("lost shard")
        return comm.all_reduce(np.ones(4, np.float32))
    with pytest.raises(RankFailure, match="rank 2 failed: KeyError: 'lost shard'"):
        EmulatedWorld(4).run(boom)


def test_wrong_shard_length_is_reported():
    with pytest.raises(RankFailure, match=r"rank 3 passed a shard of 3 elements; ChunkLayout\(10, 4\) gives it 1"):
        EmulatedWorld(4).run(lambda comm: comm.all_gather(np.ones(3, np.float32), 10))


def test_non_buffers_are_rejected():
    with pytest.raises(RankFailure, match="needs a 1-D numpy array or VirtualBuffer"):
        EmulatedWorld(2).run(lambda comm: comm.all_reduce(np.ones((2, 2), np.float32)))


def test_one_rank_world():
    out = EmulatedWorld(1).run(lambda comm: comm.all_reduce(np.arange(3, dtype=np.int32)))
    assert out[0].tolist() == [0, 1, 2]


def test_bad_rank_count():
    with pytest.raises(ValueError, match="n_ranks must be an integer >= 1"):
        EmulatedWorld(0)
