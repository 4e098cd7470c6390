"""Size-only runs without threads: SizeOnlyWorld and the class-of-ranks shortcut equal running every rank.

The reference for every comparison is the per-rank walk in the EmulatedWorld (the stage code on every rank,
meeting at every collective), which the stage tests check against closed forms elsewhere."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringemu.algorithms import build
from ringemu.dtypes import resolve_dtype
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


def _grouped(comm, make, numel=10):
    """Per-rank code of an HSDP-like step on node and cross-node groups of 6 ranks, 2 per node (node groups
    of 2, cross groups of 3): every group collective, an all-to-all among them."""
    from ringemu.worlds.groups import group_communicator
    node, cross = group_communicator(comm, "node", 2), group_communicator(comm, "cross", 2)
    shard = node.reduce_scatter(make(numel), label="grads")
    summed = cross.all_reduce(shard, label="grads_cross")
    full = node.all_gather(summed, numel, label="params")
    pieces = cross.all_to_all(make(3 * 4), label="tokens")
    world = comm.all_reduce(make(7), label="loss")
    return [x.shape for x in (shard, summed, full, pieces, world)]


def test_group_calls_count_what_the_emulated_world_records():
    """The size-only world's group collectives (sub-group schedules lifted to the world) record exactly what the
    emulated world records for the same per-rank code, record by record, and answer each rank the same shapes."""
    real, counted = CommLedger(), CommLedger()
    shapes = EmulatedWorld(6, real).run(_grouped, lambda m: np.ones(m, np.float32))
    counted_shapes = SizeOnlyWorld(6, counted).run(_grouped, lambda m: VirtualBuffer((m,), "fp32"))
    assert counted_shapes == shapes
    # node groups of 2 cut 10 elements 5 + 5; the cross groups of 3 hold 2 + 2 + 1 of a shard of 5
    assert shapes[0] == [(5,), (5,), (10,), (12,), (7,)]
    counted_view, real_view = ledger_view(counted), ledger_view(real)
    assert [r[:5] for r in counted_view[0]] == [r[:5] for r in real_view[0]] and counted_view[1:] == real_view[1:]
    assert [r.label for r in counted.records] == ["grads", "grads_cross", "params", "tokens", "loss"]
    assert all(r.size_only for r in counted.records) and not any(r.size_only for r in real.records)


def test_group_calls_are_recorded_once_per_partition_and_op():
    world = SizeOnlyWorld(6, CommLedger())
    world.run(lambda c: [_grouped(c, lambda m: VirtualBuffer((m,), "bf16")) for _ in range(2)])
    records = world.ledger.records
    assert len(records) == 10
    assert records[0].schedule is records[5].schedule and records[1].schedule is records[6].schedule
    assert records[0].schedule is not records[2].schedule  # reduce-scatter and all-gather of the node groups


def test_a_size_only_world_without_a_ledger_counts_nothing_and_still_answers():
    assert SizeOnlyWorld(6).run(_grouped, lambda m: VirtualBuffer((m,), "fp32"))[5] == [(5,), (5,), (10,), (12,),
                                                                                       (7,)]


def test_group_calls_that_differ_between_ranks_name_the_group():
    from ringemu.worlds.groups import group_communicator

    def uneven(comm):
        group = group_communicator(comm, "node" if comm.rank == 0 else "cross", 2)
        group.all_reduce(VirtualBuffer((4,), "fp32"), label="g")
    with pytest.raises(RankFailure, match=r"\(call 0\): rank 0: all_reduce\('g', numel=4, fp32, algorithm='ring', "
                                          r"group=node/2\); rank 1: all_reduce\('g', numel=4, fp32, "
                                          r"algorithm='ring', group=cross/2\)"):
        SizeOnlyWorld(4).run(uneven)
    with pytest.raises(RankFailure, match="rank 0: group all_reduce needs a 1-D numpy array or VirtualBuffer"):
        SizeOnlyWorld(4).run(lambda c: group_communicator(c, "node", 2).all_reduce([1.0]))
    with pytest.raises(RankFailure, match="rank 0: all_reduce in a size-only world needs a 1-D VirtualBuffer; "
                                          "got ndarray"):
        SizeOnlyWorld(4).run(lambda c: group_communicator(c, "node", 2).all_reduce(np.zeros(4)))


def test_communicators_are_one_per_rank_in_rank_order():
    world = SizeOnlyWorld(3, CommLedger(), algorithm="tree")
    comms = world.communicators()
    assert [c.rank for c in comms] == [0, 1, 2] and all(c.world is world and c.n_ranks == 3 for c in comms)
    assert all(c.algorithm == "tree" and c.ledger is world.ledger for c in comms)


def test_collective_of_names_the_registry_collective_or_lists_the_methods():
    from ringemu.worlds.size_only import collective_of
    assert [collective_of(op) for op in ("reduce_scatter", "all_gather", "all_reduce")] == [
        "reduce-scatter", "all-gather", "all-reduce"]
    with pytest.raises(ValueError, match=r"^op must be a Communicator collective \(reduce_scatter, all_gather, "
                                         r"all_reduce\); got 'broadcast'$"):
        collective_of("broadcast")


def test_traffic_as_dict_names_each_count():
    from ringemu.ledger_counts import Traffic
    assert Traffic(1, 2, 3, 4, 5).as_dict() == {"messages": 1, "elements": 2, "bytes": 3, "padding_elements": 4,
                                               "padding_bytes": 5}
    assert (Traffic(1, 2, 3, 4, 5) + Traffic(10, 20, 30, 40, 50)).as_tuple() == (11, 22, 33, 44, 55)


def test_default_labels_and_per_call_algorithms_are_the_emulated_worlds():
    """Unlabelled calls carry the Communicator protocol's default labels (the method names), and an algorithm
    named per call is the one recorded, in both worlds alike."""
    def calls(comm, make):
        comm.reduce_scatter(make(9), algorithm="tree")
        comm.all_gather(make(comm.layout(9).payload(comm.rank)), 9, algorithm="recursive-doubling")
        comm.all_reduce(make(9), algorithm="halving-doubling")
    real, counted = CommLedger(), CommLedger()
    EmulatedWorld(4, real).run(calls, lambda m: np.ones(m, np.float32))
    SizeOnlyWorld(4, counted).run(calls, lambda m: VirtualBuffer((m,), "fp32"))
    want = [("reduce_scatter", "tree_reduce_scatter"), ("all_gather", "doubling_all_gather"),
            ("all_reduce", "rabenseifner_all_reduce")]  # the registry's schedule names of those orders
    for ledger in (real, counted):
        assert [(r.label, r.schedule.name) for r in ledger.records] == want


def test_hierarchical_orders_and_accumulating_engines_count_as_the_emulated_world():
    """The world's ranks_per_node reaches the hierarchical schedules, and an engine that sums bf16 in fp32 (XLA's
    CPU collectives: ``accumulate``) is counted at fp32, as the emulated world records it."""
    def calls(comm, make):
        comm.all_reduce(make(13), label="a")
        comm.reduce_scatter(make(13), label="b")
    for algorithm, rpn, dtype in (("hierarchical-ring", 4, "fp32"), ("xla-cpu:in-process", None, "bf16")):
        real, counted = CommLedger(), CommLedger()
        EmulatedWorld(8, real, algorithm=algorithm, ranks_per_node=rpn).run(
            calls, lambda m: np.ones(m, resolve_dtype(dtype)))
        SizeOnlyWorld(8, counted, algorithm=algorithm, ranks_per_node=rpn).run(
            calls, lambda m: VirtualBuffer((m,), dtype))
        assert [r[:5] for r in ledger_view(counted)[0]] == [r[:5] for r in ledger_view(real)[0]], algorithm
        assert ledger_view(counted)[1:] == ledger_view(real)[1:], algorithm
    assert [r.dtype for r in counted.records] == ["fp32", "fp32"]


def test_engine_orders_are_built_per_buffer_and_textbook_orders_once():
    from ringemu.worlds.size_only import ScheduleCache
    cache = ScheduleCache(5)
    assert cache.get("all_reduce", "ring", 10, 4) is cache.get("all_reduce", "ring", 99, 2)
    ompi = [cache.get("all_reduce", "ompi:ring", s, 4) for s in (10, 99, 10)]
    assert ompi[0] is ompi[2] and ompi[0] is not ompi[1] and ompi[0].partition != ompi[1].partition
    assert cache.get("all_reduce", "ompi:ring", 10, 2) is not ompi[0]  # the element size is part of the cut
    hier = ScheduleCache(8, ranks_per_node=4).get("all_reduce", "hierarchical-ring")
    assert hier.name == build("all-reduce", 8, "hierarchical-ring", ranks_per_node=4).name == \
        "hierarchical_all_reduce[4/node]"  # not the default of 2 ranks per node


def test_size_only_world_checks_its_arguments_and_passes_keywords():
    with pytest.raises(TypeError, match="^ledger must be a CommLedger or None; got dict$"):
        SizeOnlyWorld(2, {})
    with pytest.raises(ValueError, match=r"ranks must be a non-empty list of ranks in \[0, 3\); got \[True\]"):
        SizeOnlyWorld(3).run_ranks([True], lambda c: None)
    assert SizeOnlyWorld(3).run(lambda c, a, b=0: (c.rank, a, b), 7, b=9) == [(0, 7, 9), (1, 7, 9), (2, 7, 9)]
    with pytest.raises(ValueError, match="ranks_per_node"):
        SizeOnlyWorld(6, ranks_per_node=4)
    with pytest.raises(RankFailure, match="rank 0: all_reduce label must be a str; got 3"):
        SizeOnlyWorld(2).run(lambda c: c.all_reduce(VirtualBuffer((4,), "fp32"), label=3))


def test_a_rank_that_stops_early_is_named_with_the_call_it_skipped():
    def short(comm):
        comm.all_reduce(VirtualBuffer((4,), "fp32"), label="one")
        if comm.rank == 0:
            comm.all_reduce(VirtualBuffer((4,), "fp32"), label="two")
    with pytest.raises(RankFailure, match=r"^ranks made different collective calls \(call 1\): rank 0: "
                                          r"all_reduce\('two', numel=4, fp32, algorithm='ring'\); rank 1: exit"):
        SizeOnlyWorld(2).run(short)
