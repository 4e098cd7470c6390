"""Link classes and the α-β model: textbook costs on one class, bytes per class, messages, bad input.

Expected values are the textbook formulas written out here (Thakur, Rabenseifner & Gropp 2005, §3; Patarasuk & Yuan
2009, §3) or small cases counted by hand in the comments, never values computed by the module under test.
"""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringemu import algorithms
from ringemu.compare import count_algorithm
from ringemu.ledger import CommLedger
from ringemu.layout import ChunkLayout
from ringemu.schedule import ADD, COPY, Schedule
from ringemu.topology import INFINIBAND, NVLINK, LinkClass, LinkProfile, Topology, bytes_per_class, link_model, messages, modelled_time, parse_decimal

ALL_REDUCE = "all-reduce"
RING = algorithms.DEFAULT_ALGORITHM
ENTRIES = [e for e in algorithms.REGISTRY.values() if ":" not in e.name]  # engine orders: test_mpich_orders.py

alphas = st.fractions(min_value=0, max_value=10, max_denominator=1000)
bandwidths = st.fractions(min_value=Fraction(1, 100), max_value=1000, max_denominator=1000)


def uniform(n, alpha, bandwidth, contention="port"):
    return Topology.uniform(n, LinkClass("link", bandwidth, alpha), contention)


@given(n=st.integers(1, 33), per_chunk=st.integers(0, 40), alpha=alphas, bandwidth=bandwidths,
       contention=st.sampled_from(["port", "link"]))
def test_ring_all_reduce_is_the_textbook_cost(n, per_chunk, alpha, bandwidth, contention):
    # Patarasuk & Yuan 2009 §3: 2(N-1)α + 2(N-1)/N·S·β with S divisible by N (β = 1/bandwidth s per byte);
    # every step, every rank sends one chunk to one peer, so ports and links agree
    numel, itemsize = n * per_chunk, 2
    ledger = count_algorithm(ALL_REDUCE, RING, n, numel, "bf16")
    s_bytes, beta = numel * itemsize, 1 / bandwidth
    expected = 2 * (n - 1) * alpha + Fraction(2 * (n - 1), n) * s_bytes * beta
    topology = uniform(n, alpha, bandwidth, contention)
    assert modelled_time(ledger, topology) == expected
    assert algorithms.algorithm(ALL_REDUCE, RING).cost(n, s_bytes, alpha, beta) == expected


POWERS_OF_TWO = (1, 2, 4, 8, 16, 32)


@given(k=st.integers(0, 5), per_chunk=st.integers(0, 20), alpha=alphas, bandwidth=bandwidths,
       contention=st.sampled_from(["port", "link"]))
def test_rabenseifner_and_recursive_doubling_are_their_textbook_costs(k, per_chunk, alpha, bandwidth, contention):
    # Thakur, Rabenseifner & Gropp 2005, §4.4 and §4.1, N a power of two and S a multiple of N:
    # recursive halving + doubling 2·log2(N)·α + 2(N-1)/N·S·β; recursive doubling log2(N)·(α + S·β).
    # Each step pairs every rank with one partner, so ports and links agree.
    n = 2 ** k
    numel = n * per_chunk
    s_bytes, beta = numel * 4, 1 / bandwidth
    topology = uniform(n, alpha, bandwidth, contention)
    halving = count_algorithm(ALL_REDUCE, "halving-doubling", n, numel, "fp32")
    assert modelled_time(halving, topology) == 2 * k * alpha + Fraction(2 * (n - 1), n) * s_bytes * beta
    doubling = count_algorithm(ALL_REDUCE, "recursive-doubling", n, numel, "fp32")
    assert modelled_time(doubling, topology) == k * (alpha + s_bytes * beta)


@given(n=st.integers(3, 24), per_chunk=st.integers(0, 20), alpha=alphas, bandwidth=bandwidths)
def test_bidirectional_ring_halves_the_ring_only_on_separate_links(n, per_chunk, alpha, bandwidth):
    # every step each rank sends half a shard to each neighbour. Separate links: each carries S/(2N) per step,
    # 2(N-1)·(α + S/(2N)·β). One port per rank: the two halves share it and each pays its own α (the one-port
    # model of Thakur, Rabenseifner & Gropp 2005 §3: a port sends one message at a time), 2(N-1)·(2α + S/N·β).
    numel = 2 * n * per_chunk  # every half-shard full
    s_bytes, beta = numel * 4, 1 / bandwidth
    ledger = count_algorithm(ALL_REDUCE, "bidirectional-ring", n, numel, "fp32")
    assert modelled_time(ledger, uniform(n, alpha, bandwidth, "link")) == \
        2 * (n - 1) * (alpha + Fraction(s_bytes, 2 * n) * beta)
    assert modelled_time(ledger, uniform(n, alpha, bandwidth, "port")) == \
        2 * (n - 1) * (2 * alpha + Fraction(s_bytes, n) * beta)


def _cost_cases():
    for entry in ENTRIES:
        if entry.sized:  # an engine order: its cost is the textbook algorithm's, its schedule the engine's own cut
            continue
        for n in POWERS_OF_TWO:
            if entry.unsupported(n) is None:
                yield pytest.param(entry, n, id=f"{entry.collective}:{entry.name}:{n}")


@pytest.mark.parametrize("entry, n", list(_cost_cases()))
def test_every_catalog_entry_meets_its_cost_under_one_contention(entry, n):
    # the registry's cost(n, S, α, β) is each entry's textbook formula; on one link class with N a power of two
    # and S a multiple of every chunk count it must equal the schedule's modelled time under the contention its
    # derivation assumes: one port per rank (naive: N-1 buffers into rank 0) or separate links (bidirectional
    # ring, trees: two neighbours or children at once). Where a rank talks to one peer per step both agree.
    schedule = algorithms.build(entry.collective, n, entry.name)
    alpha, bandwidth = Fraction(7, 3), Fraction(5, 2)
    for per_chunk in (1, 3):
        numel = schedule.n_chunks * n * per_chunk  # every chunk and every shard full, no padding
        ledger = count_algorithm(entry.collective, entry.name, n, numel, "fp32")
        textbook = algorithms.cost(entry.collective, entry.name, n, numel * 4, alpha, 1 / bandwidth)
        modelled = {c: modelled_time(ledger, uniform(n, alpha, bandwidth, c)) for c in ("port", "link")}
        assert textbook in modelled.values(), (textbook, modelled)


@given(n=st.integers(2, 24), numel=st.integers(0, 500), alpha=alphas, bandwidth=bandwidths)
def test_naive_through_one_port_and_through_many_links(n, numel, alpha, bandwidth):
    # rank 0 receives N-1 whole buffers in step 0 and sends N-1 in step 1. One port (Thakur, Rabenseifner &
    # Gropp 2005 §3: one message at a time, each paying α): each step carries N-1 messages and (N-1)·S bytes
    # through rank 0's port, 2(N-1)·(α + S·β) (the lesson's claim C5 contrast). Independent links: each link
    # carries one buffer per step, 2(α + S·β).
    ledger = count_algorithm(ALL_REDUCE, "naive", n, numel, "fp32")
    s_bytes = numel * 4
    messages = 2 * (n - 1) if n > 1 else 0
    assert modelled_time(ledger, uniform(n, alpha, bandwidth, "port")) == \
        messages * alpha + 2 * (n - 1) * s_bytes / bandwidth
    assert modelled_time(ledger, uniform(n, alpha, bandwidth, "link")) == 2 * (alpha + s_bytes / bandwidth)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e.collective}:{e.name}")
def test_link_contention_on_one_class_is_the_ledgers_alpha_beta_time(entry):
    # CommLedger.alpha_beta_time prices each step at α + its busiest link's bytes: the same model, counted by the
    # ledger's own code path
    for n in range(2, 13):
        if entry.unsupported(n) is not None:
            continue
        ledger = count_algorithm(entry.collective, entry.name, n, 1000 + n, "fp16")
        expected = ledger.alpha_beta_time(Fraction(3, 2), Fraction(1, 7))
        assert modelled_time(ledger, uniform(n, Fraction(1, 7), Fraction(3, 2), "link")) == expected


@given(data=st.data(), entry=st.sampled_from(ENTRIES), numel=st.integers(0, 10 ** 6),
       dtype=st.sampled_from(["fp16", "fp32", "fp64"]), contention=st.sampled_from(["port", "link"]))
def test_bytes_per_class_add_up_to_the_ledgers_total(data, entry, numel, dtype, contention):
    n = data.draw(st.integers(1, 33).filter(lambda k: entry.unsupported(k) is None), label="n")
    per_node = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]), label="ranks_per_node")
    ledger = count_algorithm(entry.collective, entry.name, n, numel, dtype)
    topology = Topology(n, per_node, contention=contention)
    per_class = bytes_per_class(ledger, topology)
    assert set(per_class) == {"NVLink", "InfiniBand"}
    assert sum(per_class.values()) == ledger.total().bytes
    if per_node == 1:
        assert per_class["NVLink"] == 0
    if per_node == n:
        assert per_class["InfiniBand"] == 0


@given(nodes=st.integers(1, 8), per_node=st.integers(1, 8), per_chunk=st.integers(0, 50))
def test_ring_on_two_classes(nodes, per_node, per_chunk):
    # ring r -> r+1: of its N directed links, one per node leaves the node (when there are several nodes); each link
    # carries 2(N-1) chunks. Every step every rank sends one chunk, so a step lasts as long as the slower class
    # present: max(α_NV + c/160e9, α_IB + c/50e9) with c the chunk's bytes.
    n = nodes * per_node
    numel = n * per_chunk
    ledger = count_algorithm(ALL_REDUCE, RING, n, numel, "bf16")
    topology = Topology(n, per_node)
    chunk_bytes = per_chunk * 2
    inter_links = nodes if nodes > 1 else 0
    assert bytes_per_class(ledger, topology) == {
        "InfiniBand": inter_links * 2 * (n - 1) * chunk_bytes,
        "NVLink": (n - inter_links) * 2 * (n - 1) * chunk_bytes if n > 1 else 0}
    present = ([NVLINK] if per_node > 1 else []) + ([INFINIBAND] if nodes > 1 else [])
    step = max((c.latency + Fraction(chunk_bytes) / c.bandwidth for c in present), default=0)
    assert modelled_time(ledger, topology) == 2 * (n - 1) * step
    assert messages(ledger, topology) == 2 * (n - 1) * n


def test_chunks_to_one_peer_in_one_step_are_one_message():
    # a hand-made schedule on 3 ranks: step 0, rank 0 sends chunks 0 and 1 to rank 1 (one message of 2 chunks)
    # and chunk 2 to rank 2 (a second message); step 1, rank 1 sends chunk 0 to rank 2
    table = np.array([[0, 0, 1, 0, COPY], [0, 0, 1, 1, COPY], [0, 0, 2, 2, COPY], [1, 1, 2, 0, ADD]], dtype=np.int64)
    schedule = Schedule("hand", 3, 3, 2, table, "all", "all")
    ledger = CommLedger()
    ledger.record(schedule, ChunkLayout(30, 3), "fp32", "hand")  # chunks of 10 fp32 = 40 B
    alpha, bandwidth = Fraction(1), Fraction(10)
    link = uniform(3, alpha, bandwidth, "link")
    port = uniform(3, alpha, bandwidth, "port")
    model = link_model(ledger, link)
    assert model.messages == 3 and model.bytes_per_class == {"link": 160}
    # links: step 0's busiest link 0->1 carries 80 B; step 1 carries 40 B
    assert model.seconds == (1 + Fraction(80, 10)) + (1 + Fraction(40, 10))
    # ports: rank 0's port sends two messages, 120 B, in step 0: 2α + 120 B / bandwidth (one α per message)
    assert modelled_time(ledger, port) == (2 + Fraction(120, 10)) + (1 + Fraction(40, 10))


def test_topology_shape_and_classes():
    t = Topology.from_nodes(64, 8)
    assert (t.n_nodes, t.ranks_per_node) == (8, 8)
    assert t.link_class(0, 7) is NVLINK and t.link_class(7, 8) is INFINIBAND
    assert t.classes() == (NVLINK, INFINIBAND) and t.slowest() is INFINIBAND
    assert Topology.from_nodes(8, 8).classes() == (INFINIBAND,)
    assert Topology.from_nodes(8, 1).classes() == (NVLINK,)
    assert Topology(1, 1).slowest() is None
    # the lesson's numbers: NVLink 160 GB/s, InfiniBand 50 GB/s (GB = 10^9 B)
    assert (NVLINK.bandwidth, INFINIBAND.bandwidth) == (160 * 10 ** 9, 50 * 10 ** 9)


@pytest.mark.parametrize("make, message", [
    (lambda: Topology.from_nodes(8, 3), "n_nodes must divide n_ranks"),
    (lambda: Topology(8, 3), "ranks_per_node must divide n_ranks"),
    (lambda: Topology(0, 1), "n_ranks must be an integer >= 1"),
    (lambda: Topology(8, 1, contention="bus"), "contention must be one of"),
    (lambda: LinkClass("IB", -5), "IB bandwidth must be > 0"),
    (lambda: LinkClass("IB", 0), "IB bandwidth must be > 0"),
    (lambda: LinkClass("IB", 5, -1), "IB latency must be >= 0"),
    (lambda: LinkClass("IB", "1e999999999"), "exponent within"),
    (lambda: LinkClass("IB", "-5"), "non-negative decimal"),
    (lambda: LinkClass("IB", "nan"), "non-negative decimal"),
])
def test_bad_input_is_a_clear_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_floats_are_refused_and_decimals_are_exact():
    with pytest.raises(TypeError, match="floats are not exact"):
        LinkClass("IB", 50e9)
    with pytest.raises(TypeError, match="must be a LinkClass"):
        Topology(2, 1, intra="NVLink")
    assert parse_decimal("9.6e-6", "x") == Fraction(96, 10 ** 7)
    assert parse_decimal("1e30", "x") == 10 ** 30


def test_profile_refuses_a_topology_of_another_size():
    with pytest.raises(ValueError, match="topology has 4 ranks"):
        LinkProfile(algorithms.build(ALL_REDUCE, 8), Topology(4, 1))
    with pytest.raises(ValueError, match="topology has 4 ranks but the ledger counts 8"):
        modelled_time(count_algorithm(ALL_REDUCE, RING, 8, 8, "fp32"), Topology(4, 1))


def test_parse_decimal_names_the_refused_type_and_keeps_numpy_integers_exact():
    """The TypeError names the value and its type; a numpy integer becomes a Fraction of Python ints (operator.index),
    so exact arithmetic cannot wrap around at 2**63: 2**62 · 4 = 2**64, worked by hand."""
    with pytest.raises(TypeError, match=r"^x must be an int, .*floats are not exact\); got 0\.5 \(float\)$"):
        parse_decimal(0.5, "x")
    value = parse_decimal(np.int64(2 ** 62), "x")
    assert type(value.numerator) is int and type(value.denominator) is int
    assert value * 4 == 2 ** 64 and parse_decimal(np.int32(7), "x") == 7


def test_link_class_errors_name_the_class_and_the_field():
    """LinkClass names "<name> bandwidth" / "<name> latency" in parse_decimal's messages (the class docstring:
    both are read by parse_decimal); the exact values on the other side of each check are accepted."""
    with pytest.raises(TypeError, match=r"^IB bandwidth must be an int"):
        LinkClass("IB", 1.5)
    with pytest.raises(ValueError, match=r"^IB bandwidth must be a non-negative decimal"):
        LinkClass("IB", "fast")
    with pytest.raises(TypeError, match=r"^IB latency must be an int"):
        LinkClass("IB", 5, 0.5)
    with pytest.raises(ValueError, match=r"^IB latency must be >= 0 s; got -1/10$"):
        LinkClass("IB", 5, Fraction(-1, 10))
    link = LinkClass("IB", Fraction(1, 10 ** 6), 0)  # the smallest values the checks let through here: > 0, >= 0
    assert (link.bandwidth, link.latency) == (Fraction(1, 10 ** 6), 0)


def test_topology_checks_name_each_argument_at_both_sides_of_its_bound():
    """check_n_ranks's contract, "<name> must be an integer >= 1, got <value>", with the argument's own name:
    0 is refused and 1 accepted for ranks_per_node (Topology) and n_ranks (from_nodes); the launch latency is read
    by parse_decimal under the name "launch latency" and must be >= 0 s (0 accepted, -1/10 refused)."""
    with pytest.raises(ValueError, match=r"^ranks_per_node must be an integer >= 1, got 0$"):
        Topology(4, 0)
    assert Topology(4, 1).ranks_per_node == 1
    with pytest.raises(ValueError, match=r"^n_ranks must be an integer >= 1, got 0$"):
        Topology.from_nodes(0, 1)
    assert Topology.from_nodes(1, 1).n_ranks == 1
    with pytest.raises(TypeError, match=r"^launch latency must be an int"):
        Topology(4, 2, launch=0.5)
    with pytest.raises(ValueError, match=r"^launch latency must be >= 0 s; got -1/10$"):
        Topology(4, 2, launch=Fraction(-1, 10))
    assert Topology(4, 2, launch=0).launch == 0


def test_topology_keeps_python_ints_and_from_nodes_passes_the_links_on():
    """numpy integers are accepted and stored as Python ints (ringemu.checks: "returned as Python ints, so that
    counts stay exact"); from_nodes hands its keyword links, contention and launch to the Topology unchanged."""
    t = Topology(np.int64(4), np.int64(2))
    assert type(t.n_ranks) is int and type(t.ranks_per_node) is int and (t.n_ranks, t.ranks_per_node) == (4, 2)
    a, b = LinkClass("a", 3, 1), LinkClass("b", 2, 5)
    t = Topology.from_nodes(4, 2, intra=a, inter=b, contention="link", launch="0.5")
    assert (t.ranks_per_node, t.intra, t.inter, t.contention, t.launch) == (2, a, b, "link", Fraction(1, 2))


def test_classes_with_two_ranks_per_node_and_the_latency_tie_break():
    """classes(): intra whenever a node holds more than one rank (2 is enough), inter whenever there are several
    nodes; slowest(): least bandwidth, and on a bandwidth tie the larger latency, whichever class it is."""
    assert Topology.from_nodes(4, 2).classes() == (NVLINK, INFINIBAND)
    assert Topology(2, 2).classes() == (NVLINK,)
    quick, laggy = LinkClass("quick", 10, 1), LinkClass("laggy", 10, 2)
    assert Topology(4, 2, intra=quick, inter=laggy).slowest() is laggy
    assert Topology(4, 2, intra=laggy, inter=quick).slowest() is laggy


def test_two_ranks_per_node_price_intra_links_on_the_intra_class():
    """Ring all-reduce on 2 nodes of 2 ranks: links 0->1 and 2->3 stay inside a node, 1->2 and 3->0 leave it. With
    the intra class the slower one (1 B/s against 100 B/s, α = 0) every step lasts one 8 B chunk (8 fp32 per rank,
    4 chunks of 2) at 1 B/s = 8 s, 6 steps: 48 s. Bytes: 4 links × 6 chunks × 8 B = 192, half on each class; with
    one class for both the two halves add up under its name."""
    slow, fast = LinkClass("slow", 1), LinkClass("fast", 100)
    ledger = count_algorithm(ALL_REDUCE, RING, 4, 8, "fp32")
    assert modelled_time(ledger, Topology(4, 2, intra=slow, inter=fast)) == 48
    assert bytes_per_class(ledger, Topology(4, 2, intra=slow, inter=fast)) == {"slow": 96, "fast": 96}
    assert bytes_per_class(ledger, Topology(4, 2, intra=slow, inter=slow)) == {"slow": 192}
    assert LinkProfile(ledger.records[0].schedule, Topology(4, 2, intra=slow, inter=slow)).class_bytes(8) == \
        {"slow": 192}


@pytest.mark.parametrize("contention", ["link", "port"])
def test_unsigned_weights_are_counted_as_exact_integers(contention):
    """LinkProfile takes weights as any integer array (here uint64): step 0, rank 0 sends chunks of 3 and 4
    elements to rank 1, one message of 7 elements; at 2 B per element and 1 B/s that is 14 s, 14 B."""
    table = np.array([[0, 0, 1, 0, COPY], [0, 0, 1, 1, COPY]], dtype=np.int64)
    schedule = Schedule("hand", 2, 2, 1, table, "all", "all")
    profile = LinkProfile(schedule, uniform(2, 0, 1, contention), np.array([3, 4], dtype=np.uint64))
    assert profile.messages == 1 and profile.seconds(2) == 14 and profile.class_bytes(2) == {"link": 14}


def test_a_schedule_without_transfers_has_no_steps_to_price():
    """One rank sends nothing: no message, no step shape (step_shapes lists the shapes of steps that move data),
    0 s and 0 B."""
    profile = LinkProfile(algorithms.build(ALL_REDUCE, 1), Topology(1, 1))
    assert (profile.messages, profile.step_shapes, profile.seconds(8)) == (0, [], 0)
    assert profile.class_bytes(8) == {"NVLink": 0, "InfiniBand": 0}


def test_ledger_and_topology_type_errors_name_what_was_given():
    """The model refuses a ledger that is not a CommLedger and a topology that is not a Topology with a TypeError
    naming the type given (its messages), before reading any attribute: an object with the links a Topology has
    and a plain string are refused alike."""
    from types import SimpleNamespace
    with pytest.raises(TypeError, match=r"^ledger must be a CommLedger; got str$"):
        modelled_time("ledger", Topology(2, 1))
    look_alike = SimpleNamespace(n_ranks=2, intra=NVLINK, inter=INFINIBAND)
    with pytest.raises(TypeError, match=r"^topology must be a Topology; got SimpleNamespace$"):
        modelled_time(CommLedger(), look_alike)
    with pytest.raises(TypeError, match=r"^topology must be a Topology; got str$"):
        modelled_time(CommLedger(), "8 GPUs")


def test_records_add_up_and_each_pays_the_launch_latency_once():
    """link_model's doc: records run one after another, so messages, bytes and seconds add up, and each record
    with a message pays Topology.launch once ("no message, no launch"). By hand, one node of 4 ranks on a class of
    8 B/s, α = 0, launch 1/2 s: ring all-reduce of 8 fp32 (chunks of 8 B) is 6 steps of 1 s, 24 messages; ring
    all-gather of 2 fp32 shards is 3 steps of 1 s, 12 messages; 36 chunks of 8 B in all."""
    import ringemu
    link = LinkClass("L", 8)
    topology = Topology(4, 4, intra=link, inter=link, launch=Fraction(1, 2))
    ledger = CommLedger()
    ringemu.all_reduce(np.ones((4, 8), np.float32), ledger=ledger, label="a")
    ringemu.all_gather([np.ones(2, np.float32)] * 4, ledger=ledger, label="b")
    assert link_model(ledger, topology) == type(link_model(ledger, topology))(36, {"L": 36 * 8}, Fraction(10))
    assert modelled_time(ledger, topology, "a") == Fraction(13, 2) and messages(ledger, topology, "b") == 12
    lone = Topology(1, 1, launch=Fraction(1, 2))
    assert modelled_time(count_algorithm(ALL_REDUCE, RING, 1, 10, "fp32"), lone) == 0
