"""CommLedger counts equal the closed forms exactly; size-only counting equals real-data counting."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ringemu import collectives
from ringemu.dtypes import DTYPES
from ringemu.layout import ChunkLayout
from ringemu.ledger import CommLedger
from ringemu.execute import run_schedule
from ringemu.algorithms import schedule_for
from ringemu.algorithms.ring import ring_all_reduce, ring_reduce_scatter
from ringemu.testing import shards_of
from ringemu.virtual import VirtualBuffer
from strategies import dtype_names, integer_worlds, large_ring_sizes, lesson_sizes, ops, ring_sizes

RUN = {"reduce-scatter": collectives.reduce_scatter, "all-gather": collectives.all_gather,
       "all-reduce": collectives.all_reduce, "naive-all-reduce": collectives.naive_all_reduce}
PSI = 27_781_427_952  # the lesson's anchor model, parameters


def count(op: str, n: int, numel: int, dtype) -> CommLedger:
    ledger = CommLedger()
    RUN[op](VirtualBuffer((n, numel), dtype), ledger=ledger)
    return ledger


def closed_form_sent(op: str, n: int, numel: int) -> list[int]:
    """Elements each rank sends, padding included: (N-1)·ceil(S/N) per ring pass; naive (N-1)·S at rank 0."""
    c = -(-numel // n)  # ceil(S/N)
    if op in ("reduce-scatter", "all-gather"):
        return [(n - 1) * c] * n
    if op == "all-reduce":
        return [2 * (n - 1) * c] * n
    return [(n - 1) * numel] + [numel] * (n - 1)  # naive: rank 0 sends the sum to N-1 ranks


def closed_form_received(op: str, n: int, numel: int) -> list[int]:
    if op == "naive-all-reduce":
        return [(n - 1) * numel] + [numel] * (n - 1)  # rank 0 receives N-1 whole buffers
    return closed_form_sent(op, n, numel)


def closed_form_sent_padding(op: str, n: int, numel: int) -> list[int]:
    """Padding elements each rank sends: the padding of every chunk it forwards. Written out here, not read from
    ChunkLayout: chunks hold c = ceil(S/N) elements, chunk k holds the real elements [k·c, (k+1)·c) ∩ [0, S),
    and the rest of it, c − payload, is padding (N·c − S padding elements in all)."""
    c = -(-numel // n)
    pad = [c - max(0, min(c, numel - k * c)) for k in range(n)]
    assert sum(pad) == n * c - numel
    if op == "reduce-scatter":  # rank r sends every chunk but its own
        return [sum(pad) - pad[r] for r in range(n)]
    if op == "all-gather":  # rank r sends every chunk but chunk r + 1, which it receives last
        return [sum(pad) - pad[(r + 1) % n] for r in range(n)]
    if op == "all-reduce":
        return [2 * sum(pad) - pad[r] - pad[(r + 1) % n] for r in range(n)]
    return [0] * n  # one chunk of the whole buffer: never padded


@given(op=ops(), n=large_ring_sizes(), numel=lesson_sizes(), dtype=dtype_names())
def test_size_only_counts_equal_closed_forms(op, n, numel, dtype):
    ledger = count(op, n, numel, dtype)
    item = DTYPES[dtype].itemsize
    per_rank = ledger.per_rank()
    assert [t.sent.elements for t in per_rank] == closed_form_sent(op, n, numel)
    assert [t.received.elements for t in per_rank] == closed_form_received(op, n, numel)
    assert [t.sent.bytes for t in per_rank] == [e * item for e in closed_form_sent(op, n, numel)]
    assert [t.sent.padding_elements for t in per_rank] == closed_form_sent_padding(op, n, numel)
    assert ledger.total().elements == sum(closed_form_sent(op, n, numel))
    steps = {"reduce-scatter": n - 1, "all-gather": n - 1, "all-reduce": 2 * (n - 1),
             "naive-all-reduce": 2 if n > 1 else 0}[op]
    assert ledger.n_steps() == steps


@given(op=ops(), world=integer_worlds(max_ranks=24, max_numel=100))
def test_size_only_ledger_equals_real_data_ledger(op, world):
    real, virtual = CommLedger(), CommLedger()
    RUN[op](shards_of(world) if op == "all-gather" else world, ledger=real)
    RUN[op](VirtualBuffer(world.shape, world.dtype), ledger=virtual)
    assert real.per_rank() == virtual.per_rank()
    assert real.per_link() == virtual.per_link()
    assert real.per_step() == virtual.per_step()
    assert real.summary() == virtual.summary()
    assert [r.size_only for r in real.records] == [False] and [r.size_only for r in virtual.records] == [True]


@example(n=1024, numel=PSI)
@given(n=ring_sizes(1, 128), numel=st.integers(1, 10 ** 12))
def test_ring_uses_only_links_to_the_next_rank(n, numel):
    ledger = count("all-reduce", n, numel, "fp32")
    links = ledger.per_link()
    c = -(-numel // n)
    if n == 1:
        assert links == {}
    else:
        assert set(links) == {(r, (r + 1) % n) for r in range(n)}
        assert {t.elements for t in links.values()} == {2 * (n - 1) * c}
    assert [t.messages for _, _, t in ledger.per_step()] == [n] * (2 * (n - 1))


@example(n=1024)
@given(n=ring_sizes(1, 128))
def test_bus_bandwidth_factor(n):
    # nccl-tests doc/PERFORMANCE.md: all-reduce 2(N-1)/N, reduce-scatter and all-gather (N-1)/N
    assert count("all-reduce", n, 10 ** 9, "bf16").bus_bandwidth_factor() == Fraction(2 * (n - 1), n)
    assert count("reduce-scatter", n, 10 ** 9, "bf16").bus_bandwidth_factor() == Fraction(n - 1, n)
    assert count("all-gather", n, 3, "bf16").bus_bandwidth_factor() == Fraction(n - 1, n)


def test_lesson_anchor_traffic():
    # the lesson: DP ring traffic per card with 16-bit gradients, 97.2 GB at N = 8, 109.4 GB at N = 64 (C4);
    # naive reduce-to-rank-0 receives 388.9 GB at N = 8 (C5); 97.2 GB over 50 GB/s takes 1.94 s (C6)
    n8 = count("all-reduce", 8, PSI, "bf16")
    assert {t.sent.bytes for t in n8.per_rank()} == {97_234_997_832}  # 2·7·ceil(Ψ/8)·2 B
    assert {t.sent.bytes for t in count("all-reduce", 64, PSI, "bf16").per_rank()} == {109_389_372_624}
    naive = count("naive-all-reduce", 8, PSI, "bf16")
    assert naive.per_rank()[0].received.bytes == 388_939_991_328
    seconds = n8.alpha_beta_time(50 * 10 ** 9)
    assert seconds == Fraction(97_234_997_832, 50 * 10 ** 9) and round(float(seconds), 2) == 1.94


def test_lesson_anchor_at_1024_ranks():
    ledger = count("all-reduce", 1024, PSI, "bf16")
    c = -(-PSI // 1024)
    assert {t.sent.elements for t in ledger.per_rank()} == {2 * 1023 * c}
    assert ledger.total().padding_elements == 2 * 1023 * (1024 * c - PSI)  # every chunk moves 2(N-1) times


def test_alpha_beta_adds_latency_per_step():
    ledger = count("all-reduce", 4, 400, "fp32")  # 6 steps of one 100-element fp32 chunk per link
    assert ledger.alpha_beta_time(400, latency=Fraction(1, 10)) == 6 * (Fraction(1, 10) + 1)
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        ledger.alpha_beta_time(0)


def test_labels_select_records():
    ledger = CommLedger()
    collectives.all_reduce(VirtualBuffer((4, 10), "fp32"), ledger=ledger, label="grads")
    collectives.all_gather(VirtualBuffer((4, 10), "bf16"), ledger=ledger, label="params")
    assert ledger.labels() == ["grads", "params"]
    assert ledger.total("grads").bytes == 4 * 6 * 3 * 4 and ledger.total("params").bytes == 4 * 3 * 3 * 2
    assert ledger.total() == ledger.total("grads") + ledger.total("params")


def test_one_ledger_one_world():
    ledger = CommLedger()
    collectives.all_reduce(VirtualBuffer((4, 10), "fp32"), ledger=ledger)
    with pytest.raises(ValueError, match="this ledger counts a world of 4 ranks; got a collective on 3 ranks"):
        collectives.all_reduce(VirtualBuffer((3, 10), "fp32"), ledger=ledger)


def test_record_checks_layout_against_schedule():
    with pytest.raises(ValueError, match="layout has 3 chunks but schedule ring_all_reduce uses 4"):
        CommLedger().record(ring_all_reduce(4), ChunkLayout(10, 3), "fp32", "x")


def test_zero_sized_buffers_count_messages_but_no_bytes():
    ledger = count("reduce-scatter", 5, 0, "fp32")
    assert ledger.total().messages == 20 and ledger.total().bytes == 0
    assert ledger.bus_bandwidth_factor() == 0


def test_closed_forms_agree_with_a_hand_count():
    # N = 3, S = 7: chunks of 3 with payloads 3, 3, 1; RS rank 0 sends chunks 2 and 1 → 6 elements, 2 padding
    assert closed_form_sent("reduce-scatter", 3, 7) == [6, 6, 6]
    assert closed_form_sent_padding("reduce-scatter", 3, 7) == [2, 2, 0]
    ledger = CommLedger()
    ledger.record(ring_reduce_scatter(3), ChunkLayout(7, 3), np.float32, "rs")
    assert [t.sent.padding_elements for t in ledger.per_rank()] == [2, 2, 0]


@given(op=ops(), world=integer_worlds(max_ranks=16, max_numel=80))
def test_kernel_link_counters_equal_the_ledger(op, world):
    # run_schedule returns the elements each directed link carried, counted by the kernels themselves
    n, numel = world.shape
    schedule = schedule_for(op, n)
    layout = ChunkLayout(numel, schedule.n_chunks)
    ledger = CommLedger()
    ledger.record(schedule, layout, world.dtype, op)
    want = np.zeros((n, n), dtype=np.int64)
    for (src, dst), t in ledger.per_link().items():
        want[src, dst] = t.elements
    for mode in ("fused", "step", "reference"):
        padded = np.zeros((n, layout.padded_numel), dtype=world.dtype)
        padded[:, :numel] = world
        np.testing.assert_array_equal(run_schedule(schedule, padded, mode), want)
