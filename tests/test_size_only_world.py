"""Size-only runs without threads: SizeOnlyWorld and the class-of-ranks shortcut equal running every rank.

The reference for every comparison is the per-rank walk in the EmulatedWorld (the stage code on every rank,
meeting at every collective), which the stage tests check against closed forms elsewhere."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringemu.worlds import EmulatedWorld, RankFailure, SizeOnlyWorld, check_algorithm, communicator_algorithms
from ringemu.ledger import CommLedger
from ringemu.memory import CATEGORIES, MemoryLedger
from ringemu.virtual import VirtualBuffer
from zero_stages.api import run_job, size_only_job
from zero_stages.memory.closed_forms import STAGES
from zero_stages.flat import FlatParams
from zero_stages.rank_classes import rank_classes

from strategies_zero import examples


@st.composite
def awkward_units(draw, n):
    """Unit sizes around multiples of N (one more or less than k·N, k·N itself), below N, and N·k ± N//2."""
    k = st.integers(min_value=0, max_value=5)
    size = st.one_of(st.integers(min_value=1, max_value=3 * n + 2),
                     st.builds(lambda k, d: max(1, k * n + d), k, st.sampled_from([-1, 0, 1, n // 2, -(n // 2)])))
    return tuple(draw(st.lists(size, min_size=1, max_size=5)))


def ledger_view(comm: CommLedger):
    """Everything a CommLedger reports, per record and summed."""
    records = [(r.label, r.schedule.name, r.layout.numel, r.layout.n_chunks, r.dtype, r.size_only)
               for r in comm.records]
    labels = comm.labels()
    return (records, comm.summary(), {lab: comm.per_rank(lab) for lab in labels}, comm.per_link(),
            comm.per_step(), comm.alpha_beta_time(10 ** 9, 1))


def memory_view(memory: MemoryLedger):
    return [(memory.by_category(r), memory.peak(r), memory.model_states(r)) for r in range(memory.n_ranks)]


def report_view(rep):
    return (rep.model_state_bytes_per_rank, rep.model_state_padding_bytes_per_rank, rep.peak_bytes_per_rank,
            rep.activation_peak_bytes_per_rank, rep.traffic_sent_bytes_per_rank, rep.traffic_sent_elements_per_rank,
            rep.traffic_padding_elements_per_rank, rep.traffic_by_label, rep.memory_by_category_per_rank)


def views(rep):
    return report_view(rep), ledger_view(rep.comm), memory_view(rep.memory)


def supported(name, n):
    try:
        check_algorithm(name, n)
    except ValueError:
        return False
    return True


@settings(max_examples=examples(0.4))
@given(data=st.data(), stage=st.sampled_from(STAGES), n=st.integers(min_value=1, max_value=64),
       dtype=st.sampled_from(["bf16", "fp16"]), act=st.integers(min_value=0, max_value=10 ** 6))
def test_class_shortcut_equals_every_rank(data, stage, n, dtype, act):
    units = data.draw(awkward_units(n))
    algorithm = data.draw(st.sampled_from([a for a in communicator_algorithms() if supported(a, n)]))

    def job():
        return size_only_job(n, unit_sizes=units, wire_dtype=dtype, activation_bytes=act)

    # one rank per class of ranks in a SizeOnlyWorld; every rank one after another; every rank meeting at each
    # collective in the EmulatedWorld
    shortcut = run_job(stage, job(), algorithm=algorithm)
    every = run_job(stage, job(), world_factory=lambda n, c: SizeOnlyWorld(n, c, algorithm=algorithm))
    emulated = run_job(stage, job(), world_factory=lambda n, c: EmulatedWorld(n, c, algorithm=algorithm))
    assert views(shortcut) == views(emulated)
    assert views(every) == views(emulated)


@given(n=st.integers(min_value=1, max_value=200), units=st.lists(st.integers(min_value=1, max_value=10 ** 6),
                                                                min_size=1, max_size=6))
def test_rank_classes_group_ranks_with_equal_shards(n, units):
    flat = FlatParams(tuple(units), n)
    classes = rank_classes(flat)
    assert [r for c in classes for r in c] == list(range(n))  # consecutive, each rank once
    for c in classes:
        sizes = {tuple(flat.layout(u).payload(r) for u in flat.units()) for r in c}
        assert len(sizes) == 1
    assert len(classes) <= 2 * len(set(units)) + 1


def test_equal_units_give_at_most_three_classes_at_1024_ranks():
    # 434,000,000 = 1023·423,829 + 422,933: ranks 0-1022 hold full chunks, rank 1023 the remainder
    assert [(c.start, c.stop) for c in rank_classes(FlatParams((434_000_000,) * 64, 1024))] == [(0, 1023), (1023, 1024)]


def test_size_only_world_reports_a_rank_that_skips_a_collective():
    def lazy(comm):
        if comm.rank != 1:
            comm.all_reduce(VirtualBuffer((4,), "fp32"), label="grads")
    with pytest.raises(RankFailure, match=r"rank 0: all_reduce\('grads', numel=4, fp32, algorithm='ring'\); rank 1: exit"):
        SizeOnlyWorld(3).run(lazy)


def test_size_only_world_reports_an_extra_call():
    def eager(comm):
        for _ in range(2 if comm.rank == 2 else 1):
            comm.all_gather(VirtualBuffer((comm.layout(8).payload(comm.rank),), "bf16"), 8, label="p")
    with pytest.raises(RankFailure, match=r"\(call 1\): rank 0: exit.*rank 2: all_gather\('p', numel=8, bf16, algorithm='ring'\)"):
        SizeOnlyWorld(3).run(eager)


def test_size_only_world_reports_different_labels_and_failures():
    with pytest.raises(RankFailure, match=r"rank 0: reduce_scatter\('a'.*rank 1: reduce_scatter\('b'"):
        SizeOnlyWorld(2).run(lambda c: c.reduce_scatter(VirtualBuffer((6,), "fp32"), label="ab"[c.rank]))

    def boom(comm):
        if comm.rank == 2:
            raise KeyError("lost shard")
    with pytest.raises(RankFailure, match="rank 2 failed: KeyError: 'lost shard'"):
        SizeOnlyWorld(4).run(boom)


def test_size_only_world_refuses_real_arrays_and_wrong_shards():
    with pytest.raises(RankFailure, match="needs a 1-D VirtualBuffer"):
        SizeOnlyWorld(2).run(lambda c: c.all_reduce(np.zeros(3)))
    with pytest.raises(RankFailure, match=r"rank 3 passed a shard of 3 elements; ChunkLayout\(10, 4\) gives it 1"):
        SizeOnlyWorld(4).run(lambda c: c.all_gather(VirtualBuffer((3,), "fp32"), 10))
    with pytest.raises(ValueError, match=r"ranks must be a non-empty list of ranks in \[0, 4\)"):
        SizeOnlyWorld(4).run_ranks([4], lambda c: None)


def test_size_only_world_shares_one_schedule_per_collective():
    ledger = CommLedger()
    SizeOnlyWorld(16, ledger).run(lambda c: [c.all_reduce(VirtualBuffer((s,), "bf16")) for s in (5, 16, 5, 100)])
    assert len({id(r.schedule) for r in ledger.records}) == 1
    assert len({id(r.counts) for r in ledger.records}) == 3  # sizes 5, 16, 100


def test_copy_rank_copies_the_row_and_writes_apart():
    mem = MemoryLedger(3)
    mem.alloc(0, "w", "weights16", 10)
    mem.alloc(0, "g", "gathered", 5)
    mem.free(0, "g")
    mem.copy_rank(0, 2)
    assert mem.by_category(2) == mem.by_category(0) and mem.peak(2) == 15
    mem.free(2, "w")  # rank 2's table is its own once it writes
    assert mem.current(0) == 10 and mem.current(2) == 0
    mem.alloc(0, "x", "adam_m", 1)
    with pytest.raises(ValueError, match="holds no buffer named 'x'"):
        mem.free(2, "x")
    assert set(mem.by_category(1)) == set(CATEGORIES)
