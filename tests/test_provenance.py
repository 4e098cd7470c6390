"""The symbolic provenance check proves each schedule's postcondition and rejects broken schedules."""
import numpy as np
import pytest
from hypothesis import given

from ringemu.provenance import ProvenanceError, check_provenance, expected_provenance, run_provenance
from ringemu.algorithms.ring import _fill_ring, naive_reduce_broadcast, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from ringemu.schedule import ADD, COPY, Schedule, new_table
from strategies import ring_sizes

def _ring_table(n: int, chunk_offset: int, op: int) -> np.ndarray:
    return _fill_ring(new_table((n - 1) * n), n, 0, chunk_offset, op)


BUILDERS = (ring_reduce_scatter, ring_all_gather, ring_all_reduce, naive_reduce_broadcast)


def variant(schedule: Schedule, table: np.ndarray, **changes) -> Schedule:
    """A copy of ``schedule`` with another transfer table (and optionally other fields)."""
    fields = dict(name=schedule.name + "-broken", n_ranks=schedule.n_ranks, n_chunks=schedule.n_chunks,
                  n_steps=schedule.n_steps, table=table, initial=schedule.initial, final=schedule.final)
    return Schedule(**(fields | changes))


@given(n=ring_sizes(1, 64))
def test_every_schedule_meets_its_postcondition(n):
    for build in BUILDERS:
        check_provenance(build(n))


@pytest.mark.parametrize("n", [255, 256, 1024])
def test_large_rings(n):
    check_provenance(ring_reduce_scatter(n))
    check_provenance(naive_reduce_broadcast(n))


def test_all_reduce_at_256_ranks():
    check_provenance(ring_all_reduce(256))


@given(n=ring_sizes(2, 32))
def test_reduce_scatter_accumulates_in_ring_order(n):
    # after step s chunk c has reached rank c+s+2 (mod N), which holds the contributions of ranks c+1, ..., c+s+2
    _, history = run_provenance(ring_reduce_scatter(n), record_steps=True)
    for s, state in enumerate(history):
        for c in range(n):
            holder = (c + s + 2) % n
            assert state[holder][c] == sum(1 << ((c + 1 + k) % n) for k in range(s + 2))


def test_final_states_for_three_ranks():
    # bitmasks written out: RS gives rank r chunk r from all of {0, 1, 2} = 0b111
    final = run_provenance(ring_reduce_scatter(3))
    assert [final[r][r] for r in range(3)] == [0b111] * 3
    assert run_provenance(ring_all_gather(3)) == [[0b001, 0b010, 0b100]] * 3
    assert expected_provenance(ring_all_reduce(3)) == [[0b111] * 3] * 3


@given(n=ring_sizes(2, 16))
def test_a_dropped_transfer_is_rejected(n):
    s = ring_reduce_scatter(n)
    broken = variant(s, np.delete(s.table, s.n_transfers - 1, axis=0))  # the last hop of one chunk
    with pytest.raises(ProvenanceError, match=f"N={n}: rank .* chunk .* holds contributions"):
        check_provenance(broken)


@given(n=ring_sizes(2, 16))
def test_off_by_one_chunk_is_rejected(n):
    s = ring_reduce_scatter(n)
    broken = variant(s, _ring_table(n, 0, ADD))  # starts chunk c at rank c instead of c + 1
    with pytest.raises(ProvenanceError):
        check_provenance(broken)


@given(n=ring_sizes(3, 16))
def test_a_contribution_added_twice_is_rejected(n):
    s = ring_reduce_scatter(n)
    repeat = s.table[:n].copy()  # step 0 again, as a step of its own
    repeat[:, 0] = s.n_steps
    broken = variant(s, np.concatenate([s.table, repeat]), n_steps=s.n_steps + 1)
    with pytest.raises(ProvenanceError, match="added twice"):
        check_provenance(broken)


def test_reading_an_undefined_chunk_is_rejected():
    s = ring_all_gather(4)
    broken = variant(s, _ring_table(4, 1, COPY))  # rank r starts by forwarding chunk r + 1, which it lacks
    with pytest.raises(ProvenanceError, match="step 0: 0 -> 1, chunk 1: rank 0 sends an undefined chunk"):
        check_provenance(broken)


def test_sending_what_one_receives_in_the_same_step_is_rejected():
    s = ring_reduce_scatter(3)
    table = s.table.copy()
    table[1, 3] = table[0, 3]  # rank 1 sends chunk 2, which rank 0 sends to rank 1 in this step
    with pytest.raises(ProvenanceError, match="rank 1 sends chunk 2 while receiving it"):
        check_provenance(variant(s, table))


def test_adding_into_an_undefined_chunk_is_rejected():
    s = ring_all_gather(3)
    table = s.table.copy()
    table[:, 4] = ADD
    with pytest.raises(ProvenanceError, match="adds into an undefined chunk"):
        check_provenance(variant(s, table))
