"""`ringemu compare`: every catalog algorithm in one table, the lesson's ring numbers, the crossover sweep, bad input.

Expected values: the lesson's claims C4 (97.2 GB per card, exactly 97,234,997,832 B for Ψ = 27,781,427,952 bf16
on 8 ranks) and C6 (1.94 s at 50 GB/s), printed in claims.md; and the textbook formulas written out in the tests.
"""
import json
from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from ringemu import algorithms
from ringemu.cli import main
from ringemu.compare import compare, sweep, sweep_sizes
from ringemu.topology import LinkClass, Topology
from ringemu.units import round_half_up

PSI = 27_781_427_952  # the lesson's anchor model, parameters
ANCHOR = ["compare", "--op", "all-reduce", "--ranks", "8", "--numel", str(PSI), "--dtype", "bf16", "--nodes", "8"]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_done_when_the_lesson_anchor_on_eight_nodes(capsys):
    code, out, err = run_cli(capsys, *ANCHOR)
    assert code == 0 and err == ""
    for name in algorithms.names("all-reduce"):  # every algorithm: a row, or named on the "not run" line
        assert f" {name} " in out or f"{name} (" in out
    ring_row = next(line for line in out.splitlines() if line[2:].startswith("ring "))
    assert "97,234,997,832" in ring_row and "1.945 s" in ring_row  # claims C4 and C6
    d = json.loads(run_cli(capsys, *ANCHOR, "--json")[1])
    ring = next(r for r in d["rows"] if r["algorithm"] == "ring")
    assert ring["max_bytes_per_rank"] == 97_234_997_832
    assert ring["bytes_per_class"] == {"NVLink": 0, "InfiniBand": 8 * 97_234_997_832}  # one rank per node
    assert round_half_up(Fraction(ring["seconds_exact"]), 3) == Fraction("1.945")
    shown = {r["algorithm"] for r in d["rows"]} | {u["algorithm"] for u in d["unsupported"]}
    assert shown == set(algorithms.names("all-reduce"))


def test_zero_latency_ring_is_the_lessons_division(capsys):
    # with α = 0 the ring's time is exactly bytes per rank / 50 GB/s = 97,234,997,832 / (50·10^9) s (claim C6)
    d = json.loads(run_cli(capsys, *ANCHOR, "--inter-latency-us", "0", "--launch-latency-us", "0", "--json")[1])
    ring = next(r for r in d["rows"] if r["algorithm"] == "ring")
    assert Fraction(ring["seconds_exact"]) == Fraction(97_234_997_832, 50 * 10 ** 9)
    assert ring["busbw_GBps"] == 50.0  # ring at zero latency: busbw is the link bandwidth (nccl-tests' point)


@given(n=st.integers(1, 20), nodes=st.sampled_from([1, 2]), numel=st.integers(0, 10 ** 7))
def test_rows_match_the_registry(n, nodes, numel):
    if n % nodes:
        nodes = 1
    result = compare("all-reduce", Topology.from_nodes(n, nodes), numel, "fp32")
    runnable = [a for a in algorithms.names("all-reduce") if algorithms.algorithm("all-reduce", a).unsupported(n)
                is None]  # engine orders included: each cut for this size
    assert [r.name for r in result.rows] == runnable
    assert [a for a, _ in result.unsupported] == [a for a in algorithms.names("all-reduce") if a not in runnable]
    best = min(r.seconds for r in result.rows)
    assert result.fastest and all(r.seconds >= best for r in result.rows)
    for r in result.rows:
        assert sum(r.class_bytes.values()) == r.total_bytes and r.max_rank_bytes <= r.total_bytes


def test_sweep_finds_the_crossover_of_recursive_doubling_and_halving_doubling():
    # one class, α = 1 s, 1 B/s, fp16 (2 B), N = 4, ports. By hand (c = ceil(S/4) elements per chunk):
    # recursive doubling, 2 steps of the whole buffer: 2·(1 + 2S); halving-doubling, steps of 2, 1, 1, 2 chunks:
    # 4 + 12c; ring, 6 steps of one chunk: 6·(1 + 2c).
    topology = Topology.uniform(4, LinkClass("link", 1, 1))
    doubling = lambda s: 2 * (1 + 2 * s)
    halving = lambda s: 4 + 12 * -(-s // 4)
    ring = lambda s: 6 * (1 + 2 * -(-s // 4))
    result = sweep("all-reduce", topology, sweep_sizes(1024), "fp16")
    for p in result.points:
        assert (p.seconds["recursive-doubling"], p.seconds["halving-doubling"], p.seconds["ring"]) == \
            (doubling(p.numel), halving(p.numel), ring(p.numel))
    first = result.crossovers[0]
    assert (first.before, first.after) == ("recursive-doubling", "halving-doubling")
    # the first S at which halving-doubling is strictly faster, by brute force over the hand formulas
    assert first.numel + 1 == next(s for s in range(1, 1000) if halving(s) < doubling(s)) == 4
    for x in result.crossovers:  # each crossover holds when counted the other way, through compare()
        assert compare("all-reduce", topology, x.numel, "fp16").fastest[0] == x.before
        assert compare("all-reduce", topology, x.numel + 1, "fp16").fastest[0] == x.after


def test_sweep_text_and_json(capsys):
    argv = ["compare", "--op", "all-reduce", "--ranks", "64", "--nodes", "8", "--numel", "4194304", "--sweep"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and err == "" and "crossover" in out
    d = json.loads(run_cli(capsys, *argv, "--json")[1])
    assert [p["numel"] for p in d["points"]] == [2 ** k for k in range(23)]
    for x in d["crossovers"]:  # the sweep's textbook orders (engine orders, cut per size, are not swept)
        def fastest(numel):
            rows = [r for r in compare("all-reduce", Topology.from_nodes(64, 8), numel, "bf16").rows
                    if not algorithms.algorithm("all-reduce", r.name).sized]
            best = min(r.seconds for r in rows)
            return [r.name for r in rows if r.seconds == best]
        assert fastest(x["numel"])[0] == x["before"] and fastest(x["numel"] + 1)[0] == x["after"]


def test_sweep_sizes():
    assert sweep_sizes(10) == [1, 2, 4, 8, 10] and sweep_sizes(8) == [1, 2, 4, 8] and sweep_sizes(0) == []


@pytest.mark.parametrize("extra, message", [
    (["--nodes", "3"], "n_nodes must divide n_ranks"),
    (["--nodes", "0"], "n_nodes must be an integer >= 1"),
    (["--inter-bandwidth", "-5"], "--inter-bandwidth"),
    (["--inter-bandwidth", "0"], "--inter-bandwidth must be > 0"),
    (["--intra-bandwidth", "1e999999999"], "exponent within"),
    (["--inter-latency-us", "1e999999999"], "exponent within"),
    (["--inter-latency-us", "-1"], "--inter-latency-us"),
    (["--numel", "1e999999999"], "--numel"),
    (["--numel", str(2 ** 63)], "numel must be below 2**63"),
    (["--ranks", "100000", "--nodes", "1"], "ranks must be <= 1024"),
    (["--dtype", "complex64"], "dtype"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    argv = ["compare", "--op", "all-reduce", "--ranks", "8", "--numel", "100", *extra]
    try:
        code = main(argv)
    except SystemExit as refused:  # argparse's own refusal (a non-integer --numel) exits the same way
        code = refused.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("ringemu: error:") and err.count("\n") == 1 and message in err


@pytest.mark.parametrize("nodes, inter_per_element", [(8, 14), (4, 6), (2, 2)])
def test_hierarchical_ring_is_built_for_the_topologys_nodes(nodes, inter_per_element):
    # 64 ranks, R = 64/nodes per node. The hierarchical ring reduce-scatters inside each node (NVLink), then each
    # rank all-reduces its 1/R shard on a ring of the `nodes` ranks with its local index (InfiniBand): it sends
    # 2(nodes-1)/nodes · S/R elements across nodes. Summed over 64 ranks that is 2(nodes-1)·S elements:
    # 14·S for 8 nodes, 6·S for 4, 2·S for 2 (S a multiple of 64·64, so no padding anywhere).
    numel = 64 * 64 * 3
    result = compare("all-reduce", Topology.from_nodes(64, nodes), numel, "bf16")
    row = next(r for r in result.rows if r.name == "hierarchical-ring")
    assert row.class_bytes["InfiniBand"] == inter_per_element * numel * 2
    assert row.slowest_class_bytes == row.class_bytes["InfiniBand"]


def test_one_rank_has_nothing_to_send(capsys):
    result = compare("all-reduce", Topology(1, 1), 10, "fp32")
    assert {r.seconds for r in result.rows} == {0} and all(r.busbw is None for r in result.rows)
    assert result.fastest == tuple(r.name for r in result.rows)
    code, out, _ = run_cli(capsys, "compare", "--op", "all-reduce", "--ranks", "1", "--numel", "10")
    assert code == 0 and "0 s" in out


def test_the_table_names_algorithms_that_do_not_support_n():
    # every entry of today's catalog runs on every N, so the "not run" line is checked on a hand-made comparison
    from ringemu.compare import Comparison
    from ringemu.cli.compare import _table_lines
    shown = Comparison("all-reduce", Topology(4, 1), 8, "fp32", Fraction(3, 2), (),
                       (("some-algorithm", "needs N a power of two"),))
    assert _table_lines(shown)[-1] == "not run on this N: some-algorithm (needs N a power of two)"


@given(numel=st.integers(0, 10 ** 6), nodes=st.sampled_from([1, 2, 3, 6]))
def test_sweep_prices_what_compare_counts(numel, nodes):
    # the sweep builds each schedule once and re-prices it per size; compare runs the public collectives on
    # size-only buffers per size: both must give the same time for every algorithm
    topology = Topology.from_nodes(12, nodes)
    point = sweep("all-reduce", topology, [numel], "fp16").points[0]
    table = compare("all-reduce", topology, numel, "fp16")
    swept = {r.name: r.seconds for r in table.rows if not algorithms.algorithm("all-reduce", r.name).sized}
    assert point.seconds == swept  # engine orders, cut per size, are in the table and not swept


def test_a_link_class_prices_one_message_as_alpha_plus_bytes_over_bandwidth():
    """α + n/β, exact: 3 µs and 2 GB/s move 1 MB (10^6 B) in 3 µs + 500 µs."""
    link = LinkClass("L", Fraction(2 * 10 ** 9), Fraction(3, 10 ** 6))
    assert link.seconds(10 ** 6) == Fraction(503, 10 ** 6)
    assert link.seconds(0) == Fraction(3, 10 ** 6) and LinkClass("Z", Fraction(7)).seconds(14) == 2


def test_the_model_of_one_label_counts_only_its_records():
    """A ledger of two calls: the ring all-reduce ('a') and the ring all-gather ('b') of 8 elements on 4 ranks of
    one node (160 GB/s, 3.4 µs). Messages: 2(N-1)·N = 24 and (N-1)·N = 12; every byte on the one link class."""
    from ringemu.ledger import CommLedger
    from ringemu.topology import bytes_per_class, messages, modelled_time
    import numpy as np
    import ringemu
    ledger = CommLedger()
    ringemu.all_reduce(np.ones((4, 8), np.float32), ledger=ledger, label="a")
    ringemu.all_gather([np.ones(2, np.float32)] * 4, ledger=ledger, label="b")
    topo = Topology(4, 4)
    assert messages(ledger, topo, "a") == 24 and messages(ledger, topo, "b") == 12 and messages(ledger, topo) == 36
    assert bytes_per_class(ledger, topo, "a") == {"NVLink": 24 * 8, "InfiniBand": 0}  # 24 chunks of 2 fp32
    assert bytes_per_class(ledger, topo, "b") == {"NVLink": 12 * 8, "InfiniBand": 0}
    one_step = topo.intra.seconds(8)  # every step: one chunk of 8 B on each link, all links at once
    assert modelled_time(ledger, topo, "a") == 6 * one_step and modelled_time(ledger, topo, "b") == 3 * one_step
    assert modelled_time(ledger, topo) == 9 * one_step


def test_a_single_call_ledger_is_what_count_algorithm_records():
    """compare's own record of a schedule (one size-only call, the collectives' layout) equals the ledger of the
    public collective run on size-only buffers, for textbook and engine orders alike."""
    from ringemu.compare import _record, count_algorithm
    for collective, name in (("all-reduce", "ring"), ("reduce-scatter", "ompi:ring"), ("all-gather", "gloo:ring")):
        want = count_algorithm(collective, name, 5, 23, "bf16")
        schedule = algorithms.build(collective, 5, name, numel=23, itemsize=2)
        got = _record(schedule, 23, "bf16", name)
        assert [(r.label, r.schedule.name, r.layout.numel, r.dtype, r.size_only) for r in got.records] == [
            (r.label, r.schedule.name, r.layout.numel, r.dtype, r.size_only) for r in want.records] == [
            (name, schedule.name, 23, "bf16", True)]
        assert got.summary() == want.summary()


def test_sweep_sizes_are_the_powers_of_two_and_the_top():
    assert sweep_sizes(1) == [1] and sweep_sizes(2) == [1, 2] and sweep_sizes(5) == [1, 2, 4, 5]
    assert sweep_sizes(8) == [1, 2, 4, 8] and sweep_sizes(0) == []
    with pytest.raises(ValueError, match="^numel must be"):
        sweep_sizes(-1)


def test_a_sweeps_dict_carries_every_point_crossover_and_refusal():
    topo = Topology.from_nodes(8, 2)
    result = sweep("all-reduce", topo, [1, 1 << 20], "bf16")
    d = result.as_dict()
    assert set(d) >= {"op", "dtype", "points", "crossovers", "steps", "unsupported"}
    assert d["op"] == "all-reduce" and d["dtype"] == "bf16" and d["steps"] == dict(result.steps)
    for point, p in zip(d["points"], result.points):
        assert point["numel"] == p.numel and point["fastest"] == p.fastest
        assert {a: Fraction(t) for a, t in point["seconds_exact"].items()} == p.seconds
        assert point["seconds"] == {a: float(t) for a, t in p.seconds.items()}
    assert d["crossovers"] == [{"numel": c.numel, "before": c.before, "after": c.after} for c in result.crossovers]
    assert d["unsupported"] == [{"algorithm": a, "reason": why} for a, why in result.unsupported]
    engine = [u for u in d["unsupported"] if u["algorithm"] == "ompi:ring"]
    assert engine == [{"algorithm": "ompi:ring",
                       "reason": "cut for each buffer size (an engine's own partition): in the table, not swept"}]


def test_each_crossover_is_where_the_winner_changes_between_adjacent_sizes():
    """For every pair of neighbouring swept sizes whose fastest algorithms differ, one crossover, narrowed to
    adjacent integers n and n + 1: the fastest at n (priced by compare, the public collectives on size-only
    buffers) is its ``before`` and at n + 1 its ``after``; none where the neighbours agree."""
    topology = Topology.from_nodes(8, 2)
    result = sweep("all-reduce", topology, [1, 1 << 10, 1 << 20], "fp32")

    def fastest(numel):  # the first in catalog order on a tie, as SweepPoint.fastest
        rows = [(r.seconds, i, r.name) for i, r in enumerate(compare("all-reduce", topology, numel, "fp32").rows)
                if not algorithms.algorithm("all-reduce", r.name).sized]
        return min(rows)[2]
    changes = [(a, b) for a, b in zip(result.points, result.points[1:]) if a.fastest != b.fastest]
    assert changes and len(result.crossovers) == len(changes)
    for crossover, (a, b) in zip(result.crossovers, changes):
        assert a.numel <= crossover.numel < b.numel
        assert fastest(crossover.numel) == crossover.before != crossover.after == fastest(crossover.numel + 1)
    assert result.steps == {name: algorithms.build("all-reduce", 8, name, ranks_per_node=4).n_steps
                            for name in result.steps}


def test_a_comparisons_dict_carries_every_row_and_the_fastest():
    table = compare("reduce-scatter", Topology.from_nodes(8, 2), 1000, "bf16")
    d = table.as_dict()
    assert d["op"] == "reduce-scatter" and d["numel"] == 1000 and d["dtype"] == "bf16"
    assert Fraction(d["bus_factor"]) == table.bus_factor and d["fastest"] == list(table.fastest)
    assert d["unsupported"] == [{"algorithm": a, "reason": why} for a, why in table.unsupported]
    assert len(d["rows"]) == len(table.rows)
    for row, r in zip(d["rows"], table.rows):
        assert row == {"algorithm": r.name, "steps": r.steps, "messages": r.messages,
                       "max_bytes_per_rank": r.max_rank_bytes, "total_bytes": r.total_bytes,
                       "bytes_per_class": r.class_bytes, "slowest_class_bytes": r.slowest_class_bytes,
                       "seconds": float(r.seconds), "seconds_exact": str(r.seconds),
                       "busbw_GBps": float(r.busbw / 10 ** 9)}
    free = compare("all-reduce", Topology.uniform(2, LinkClass("free", Fraction(10 ** 9))), 0, "fp32")
    assert all(row["busbw_GBps"] is None for row in free.as_dict()["rows"])  # no time: no bandwidth


def test_a_comparisons_topology_is_written_out_in_gb_per_s_and_microseconds():
    """Two nodes of 4 (the lesson's links: NVLink 160 GB/s and 3.4 µs inside a node, InfiniBand 50 GB/s and
    14 µs between nodes, NCCL's tuning.cc latencies), exact decimals as strings."""
    d = compare("all-reduce", Topology.from_nodes(8, 2), 64, "fp32").as_dict()
    assert (d["ranks"], d["nodes"], d["ranks_per_node"], d["contention"]) == (8, 2, 4, "port")
    assert d["link_classes"] == [
        {"name": "NVLink", "bandwidth_GBps": "160", "latency_us": "17/5", "inside_node": True},
        {"name": "InfiniBand", "bandwidth_GBps": "50", "latency_us": "14", "inside_node": False}]


def test_link_classes_and_topologies_keep_exact_decimals_and_name_what_is_wrong():
    link = LinkClass("L", "2.5", "0.000001")  # numbers a person types: parsed as decimals, kept exact
    assert (link.bandwidth, link.latency) == (Fraction(5, 2), Fraction(1, 10 ** 6))
    topo = Topology(6, 3, intra=link, inter=link, contention="link", launch="0.5")
    assert (topo.n_ranks, topo.ranks_per_node, topo.launch, topo.contention) == (6, 3, Fraction(1, 2), "link")
    with pytest.raises(ValueError, match=r"^contention must be one of port, link; got 'bus'$"):
        Topology(4, 2, contention="bus")
    with pytest.raises(ValueError, match="launch latency"):
        Topology(4, 2, launch="-1")
    with pytest.raises(ValueError, match="ranks_per_node"):
        Topology(6, 4)
    with pytest.raises((TypeError, ValueError), match="name"):
        LinkClass("", Fraction(1))


def test_a_comparisons_dict_names_each_refused_algorithm_and_its_reason():
    """as_dict writes every (algorithm, reason) of ``unsupported`` under the keys "algorithm" and "reason" (today's
    catalog runs on every N, so the refusal is a hand-made comparison's)."""
    from ringemu.compare import Comparison
    shown = Comparison("all-reduce", Topology(4, 1), 8, "fp32", Fraction(3, 2), (),
                       (("some-algorithm", "needs N a power of two"), ("other", "needs N even")))
    assert shown.as_dict()["unsupported"] == [{"algorithm": "some-algorithm", "reason": "needs N a power of two"},
                                              {"algorithm": "other", "reason": "needs N even"}]


def test_count_algorithm_names_an_unknown_algorithm_before_it_builds_anything():
    """count_algorithm's first line is "a clear error for unknown names": an unknown name is reported as such (the
    catalog's ValueError) even when the buffer it would build is bad too; a known name with good input runs."""
    from ringemu.compare import count_algorithm
    with pytest.raises(ValueError, match=r"^algorithm for all-reduce must be one of ring, .*; got 'nope'$"):
        count_algorithm("all-reduce", "nope", 4, -1, "fp32")
    assert count_algorithm("all-reduce", "ring", 4, 4, "fp32").n_steps() == 6  # 2(N-1) ring steps


@pytest.mark.parametrize("run", [lambda t, numel: compare("all-reduce", t, numel, "fp32"),
                                 lambda t, numel: sweep("all-reduce", t, [numel], "fp32")],
                         ids=["compare", "sweep"])
def test_compare_and_sweep_check_the_topology_and_admit_up_to_1024_ranks(run):
    """_check's contract (MAX_RANKS = 1024, "ranks must be <= 1024"): a non-Topology is a TypeError naming its type;
    1025 ranks are refused with the bound's message; 1024 pass the rank check, which the next check shows: a
    negative numel is then what is refused (so nothing is built at N = 1024)."""
    with pytest.raises(TypeError, match=r"^topology must be a Topology; got str$"):
        run("8 ranks", 8)
    with pytest.raises(ValueError, match=r"^ranks must be <= 1024 \(every transfer of every schedule is walked\); "
                                         r"got 1025$"):
        run(Topology(1025, 1), -1)
    with pytest.raises(ValueError, match=r"^numel must be an integer >= 0, got -1$"):
        run(Topology(1024, 1), -1)


@pytest.mark.parametrize("collective, factor", [("all-reduce", Fraction(4, 3)), ("reduce-scatter", Fraction(2, 3)),
                                                ("all-gather", Fraction(2, 3))])
def test_bus_factor_is_the_default_rings_and_zero_latency_ring_busbw_is_the_link_bandwidth(collective, factor):
    """The module doc: F is nccl-tests' bus factor read from the default (ring) algorithm's ledger, 2(N-1)/N for
    all-reduce and (N-1)/N for reduce-scatter and all-gather (N = 3: 4/3 and 2/3; 300 fp32 split evenly, no padding),
    whatever the other algorithms send; busbw = S / time · F. With α = 0 the ring sends F·S bytes per rank over one
    link at a time, so time = F·S / B and busbw = B exactly (nccl-tests doc/PERFORMANCE.md's point)."""
    bandwidth = Fraction(10 ** 9)
    result = compare(collective, Topology.uniform(3, LinkClass("L", bandwidth)), 300, "fp32")
    assert result.bus_factor == factor
    ring = next(r for r in result.rows if r.name == "ring")
    assert ring.seconds == factor * 300 * 4 / bandwidth and ring.busbw == bandwidth
    for row in result.rows:  # every row against the one yardstick: S / time · F, S = 300 · 4 B
        assert row.busbw == 1200 / row.seconds * factor


def test_one_rank_sends_nothing_over_any_class():
    """A single rank uses no link class (Topology.slowest() is None): every row has 0 bytes on the slowest class."""
    rows = compare("all-reduce", Topology(1, 1), 10, "fp32").rows
    assert rows and all(r.slowest_class_bytes == 0 and r.total_bytes == 0 for r in rows)


def test_the_bisection_prices_at_most_log2_of_the_gap_more_sizes(monkeypatch):
    """Bisection halves [lo, hi] until the sizes are adjacent: between two swept sizes 1023 apart that is at most
    ceil(log2(1023)) = 10 midpoints, so 12 sizes in all, each priced once per swept algorithm (LinkProfile.seconds
    is counted; past the bound it raises, so a bisection that never ends fails here instead of hanging). The one
    crossover found lies between adjacent sizes and holds when counted through compare (fastest first on ties).
    Setting: the existing crossover test's (one class, α = 1 s, 1 B/s, fp16, N = 4)."""
    from ringemu.topology import LinkProfile
    topology = Topology.uniform(4, LinkClass("link", 1, 1))
    swept = [a for a in algorithms.names("all-reduce") if not algorithms.algorithm("all-reduce", a).sized]
    limit, calls, price = 12 * len(swept), [], LinkProfile.seconds

    def counted(self, chunk_bytes):
        calls.append(chunk_bytes)
        if len(calls) > limit:
            raise AssertionError(f"more than {limit} prices: the bisection does not narrow")
        return price(self, chunk_bytes)
    monkeypatch.setattr(LinkProfile, "seconds", counted)
    result = sweep("all-reduce", topology, [1, 1024], "fp16")
    monkeypatch.undo()
    assert [p.numel for p in result.points] == [1, 1024] and len(result.crossovers) == 1
    crossover = result.crossovers[0]
    assert 1 <= crossover.numel < 1024
    assert compare("all-reduce", topology, crossover.numel, "fp16").fastest[0] == crossover.before
    assert compare("all-reduce", topology, crossover.numel + 1, "fp16").fastest[0] == crossover.after
