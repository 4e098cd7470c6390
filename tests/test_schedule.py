"""Schedules as data: the structure of ring reduce-scatter, all-gather, all-reduce and the naive contrast."""
import numpy as np
import pytest
from hypothesis import given

from ringemu.algorithms import schedule_for
from ringemu.algorithms.ring import naive_reduce_broadcast, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from ringemu.schedule import ADD, COPY, Transfer
from strategies import SCHEDULES
from strategies import large_ring_sizes, ring_sizes


@given(n=large_ring_sizes())
def test_ring_steps_send_one_chunk_to_the_next_rank(n):
    # Patarasuk & Yuan §3: in every step every rank sends exactly one chunk to rank + 1 and receives one
    for build, op in ((ring_reduce_scatter, ADD), (ring_all_gather, COPY)):
        s = build(n)
        assert (s.n_ranks, s.n_chunks, s.n_steps, s.n_transfers) == (n, n, n - 1, n * (n - 1))
        table = s.table
        np.testing.assert_array_equal(table[:, 2], (table[:, 1] + 1) % n)
        assert (table[:, 4] == op).all()
        by_step = table.reshape(n - 1, n, 5)  # rows are sorted by step, n per step
        assert (by_step[:, :, 0] == np.arange(n - 1)[:, None]).all()
        assert (np.sort(by_step[:, :, 1], axis=1) == np.arange(n)).all()  # every rank sends once per step
        assert (np.sort(by_step[:, :, 3], axis=1) == np.arange(n)).all()  # each chunk moves once per step


@given(n=ring_sizes(1, 64))
def test_reduce_scatter_walks_chunk_c_from_rank_c_plus_1_to_rank_c(n):
    # chunk c starts at rank c+1 and is summed around the ring c+1, c+2, ..., c (the convention in DESIGN.md)
    table = ring_reduce_scatter(n).table
    for c in range(n):
        rows = table[table[:, 3] == c]
        assert rows[:, 0].tolist() == list(range(n - 1))  # one hop per step
        assert rows[:, 1].tolist() == [(c + 1 + k) % n for k in range(n - 1)]
        assert (rows[-1, 2] if n > 1 else c) == c  # ends at rank c


@given(n=ring_sizes(1, 64))
def test_all_gather_forwards_own_chunk_first(n):
    table = ring_all_gather(n).table
    first = table[table[:, 0] == 0]
    np.testing.assert_array_equal(first[:, 3], first[:, 1])  # at step 0 rank r sends chunk r


@given(n=ring_sizes(1, 64))
def test_all_reduce_is_reduce_scatter_then_all_gather(n):
    ar, rs, ag = ring_all_reduce(n), ring_reduce_scatter(n), ring_all_gather(n)
    assert ar.n_steps == 2 * (n - 1)
    shifted = ag.table.copy()
    shifted[:, 0] += n - 1
    np.testing.assert_array_equal(ar.table, np.concatenate([rs.table, shifted]))


def assert_no_send_while_receiving(n: int) -> None:
    for s in (ring_all_reduce(n), naive_reduce_broadcast(n)):
        t, bounds = s.table, s.step_bounds()
        receiving = np.zeros(n * s.n_chunks, dtype=bool)  # (rank, chunk) received in the current step
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            rows = t[lo:hi]
            receiving[rows[:, 2] * s.n_chunks + rows[:, 3]] = True
            assert not receiving[rows[:, 1] * s.n_chunks + rows[:, 3]].any()
            receiving[rows[:, 2] * s.n_chunks + rows[:, 3]] = False


@given(n=ring_sizes(1, 64))
def test_no_rank_sends_a_chunk_it_receives_in_the_same_step(n):
    # the property that lets kernels work in place without a staging buffer (DESIGN.md facts)
    assert_no_send_while_receiving(n)


@pytest.mark.parametrize("n", [255, 1024])
def test_no_send_while_receiving_on_large_rings(n):
    assert_no_send_while_receiving(n)


@given(n=ring_sizes(1, 64))
def test_naive_gathers_to_rank_0_then_broadcasts(n):
    s = naive_reduce_broadcast(n)
    assert s.n_chunks == 1 and s.n_steps == (2 if n > 1 else 0)
    steps = s.steps()
    if n > 1:
        assert steps[0] == tuple(Transfer(r, 0, 0, "add") for r in range(1, n))  # added in rank order
        assert steps[1] == tuple(Transfer(0, r, 0, "copy") for r in range(1, n))


def test_readable_steps_of_a_small_ring():
    # written out by hand from the rule "at step s rank r sends chunk (r - s - 1) mod N to r + 1"
    assert ring_reduce_scatter(3).steps() == [
        (Transfer(0, 1, 2, "add"), Transfer(1, 2, 0, "add"), Transfer(2, 0, 1, "add")),
        (Transfer(0, 1, 1, "add"), Transfer(1, 2, 2, "add"), Transfer(2, 0, 0, "add")),
    ]


def test_table_is_read_only():
    s = ring_all_reduce(4)
    with pytest.raises(ValueError):
        s.table[0, 0] = 5


def test_schedule_for_names():
    for name, build in SCHEDULES.items():
        assert schedule_for(name, 5).name == build(5).name
    with pytest.raises(ValueError, match="op must be one of reduce-scatter, all-gather, all-reduce"):
        schedule_for("allreduce", 4)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-3, ValueError), (2.0, TypeError), ("4", TypeError),
                                        (True, TypeError)])
def test_bad_rank_counts(bad, error):
    for build in SCHEDULES.values():
        with pytest.raises(error, match="n_ranks must be an integer >= 1"):
            build(bad)
