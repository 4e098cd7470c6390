"""The emulator holds at most one extra world-sized buffer per collective (numpy allocations, via tracemalloc)."""
import tracemalloc

import numpy as np
import pytest

import ringemu
from ringemu.worlds import EmulatedWorld

N, S = 16, 1 << 16  # a world of 4 MiB in fp32; one row is 1/16 of it
WORLD_BYTES = N * S * 4
# allowance beyond the one world: row-sized temporaries (the int64 row sum of the overflow check is 1/8 of the
# world, its masks 1/32) and the schedule table and link counters (O(N^2), a few KiB); a second world is 1.0
SLACK = 0.2


def peak_extra(fn) -> float:
    """Peak bytes allocated while ``fn`` runs, as a multiple of the world's size (after one warm-up call)."""
    fn()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] / WORLD_BYTES
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("op", [ringemu.reduce_scatter, ringemu.all_reduce, ringemu.naive_all_reduce])
def test_collective_on_per_rank_buffers_allocates_one_world(op):
    buffers = [np.full(S, r, dtype=np.float32) for r in range(N)]
    assert peak_extra(lambda: op(buffers)) <= 1 + SLACK


def test_emulated_world_allocates_one_world_per_collective():
    buffers = [np.full(S, r, dtype=np.float32) for r in range(N)]
    world = EmulatedWorld(N)
    assert peak_extra(lambda: world.run(lambda comm: comm.all_reduce(buffers[comm.rank]))) <= 1 + SLACK


def test_integer_overflow_check_does_not_widen_the_world():
    buffers = [np.full(S, r, dtype=np.int32) for r in range(N)]  # an int64 copy would be 2 worlds
    assert peak_extra(lambda: ringemu.all_reduce(buffers)) <= 1 + SLACK
