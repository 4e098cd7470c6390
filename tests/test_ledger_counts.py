"""The CommLedger's shared and summed counts equal a plain walk of every record's transfer table, row by row.

The walk below is written from the schedule semantics (ringemu/schedule.py: a transfer carries one whole chunk of
ceil(S / n_chunks) elements, the part of chunk c beyond S is padding) and uses nothing from ringemu.ledger."""
from collections import defaultdict
from fractions import Fraction

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

from ringemu import algorithms
from ringemu.algorithms import REGISTRY, schedule_for
from ringemu.dtypes import DTYPES
from ringemu.layout import ChunkLayout
from ringemu import ledger as ledger_module
from ringemu.ledger import CommLedger

FIELDS = ("messages", "elements", "bytes", "padding_elements", "padding_bytes")


def chunk_sizes(numel, n_chunks, n_shards):
    """(elements per chunk, payload of each chunk), from ringemu/layout.py's docstring: shards of ceil(S/N); a
    schedule with k·N chunks cuts each shard into k sub-chunks of ceil(ceil(S/N)/k), payload first; one chunk
    holds the whole buffer, unpadded."""
    if n_chunks == 1:
        return numel, [numel]
    k, shard = n_chunks // n_shards, -(-numel // n_shards)
    sub = -(-shard // k)
    payloads = []
    for c in range(n_chunks):
        in_shard = max(0, min(shard, numel - (c // k) * shard))
        payloads.append(max(0, min(sub, in_shard - (c % k) * sub)))
    return sub, payloads


def walk(calls, n):
    """calls: (schedule, numel, itemsize) per record -> per-rank sent/received, per link, per step, busiest."""
    sent, received = defaultdict(lambda: [0] * 5), defaultdict(lambda: [0] * 5)
    links, steps, busiest = defaultdict(lambda: [0] * 5), [], []
    for schedule, numel, item in calls:
        chunk, payloads = chunk_sizes(numel, schedule.n_chunks, n)
        per_step = [[0] * 5 for _ in range(schedule.n_steps)]
        on_link = defaultdict(int)
        for step, src, dst, c, _op in schedule.table.tolist():
            payload = payloads[c]
            row = (1, chunk, chunk * item, chunk - payload, (chunk - payload) * item)
            for table in (sent[src], received[dst], links[(src, dst)], per_step[step]):
                for i, v in enumerate(row):
                    table[i] += v
            on_link[(step, src, dst)] += chunk * item
        steps += per_step
        busiest += [max([b for (s, _, _), b in on_link.items() if s == step], default=0)
                    for step in range(schedule.n_steps)]
    return sent, received, links, steps, busiest


ALGORITHMS = sorted(k for k in REGISTRY if ":" not in k[1])  # (collective, algorithm) pairs of the textbook catalog
calls_strategy = st.lists(st.tuples(st.sampled_from(ALGORITHMS), st.integers(min_value=0, max_value=60),
                                    st.sampled_from(sorted(DTYPES))), min_size=1, max_size=12)


@given(n=st.integers(min_value=1, max_value=9), calls=calls_strategy, huge=st.booleans(),
       int64_limit=st.sampled_from([1 << 62, 0, 40]))
def test_ledger_equals_a_walk_of_every_transfer(n, calls, huge, int64_limit):
    saved, ledger_module._INT64_SUM_LIMIT = ledger_module._INT64_SUM_LIMIT, int64_limit  # both ways of adding
    try:
        check_against_walk(n, calls, huge)
    finally:
        ledger_module._INT64_SUM_LIMIT = saved


def check_against_walk(n, calls, huge):
    def build(collective, name):
        return algorithms.build(collective, n, name)

    ledger = CommLedger()
    walked = []
    cache = {}
    calls = [c for c in calls if REGISTRY[c[0]].unsupported(n) is None]
    assume(calls)
    for key, numel, dtype in calls:
        if huge:  # near the int64 limit: sums of bytes and padding pass 2^63 and must stay exact
            numel = 2 ** 61 - 1 - numel
        schedule = cache.setdefault(key, build(*key)) if numel % 2 else build(*key)  # shared or a fresh copy
        layout = ChunkLayout(numel, schedule.n_chunks, n)
        ledger.record(schedule, layout, dtype, "/".join(key))
        walked.append((schedule, numel, DTYPES[dtype].itemsize))
    sent, received, links, steps, busiest = walk(walked, n)
    per_rank = ledger.per_rank()
    assert [list(t.sent.as_tuple()) for t in per_rank] == [sent[k] for k in range(n)]
    assert [list(t.received.as_tuple()) for t in per_rank] == [received[k] for k in range(n)]
    assert {k: list(t.as_tuple()) for k, t in ledger.per_link().items()} == dict(links)
    assert [list(t.as_tuple()) for _, _, t in ledger.per_step()] == steps
    assert list(ledger.total().as_tuple()) == [sum(sent[k][i] for k in range(n)) for i in range(5)]
    assert ledger.alpha_beta_time(1) == sum(busiest, Fraction(0))
    padded = sum(-(-numel // s.n_chunks) * s.n_chunks for s, numel, _ in walked)
    busiest_rank = max(sent[k][1] for k in range(n))
    assert ledger.bus_bandwidth_factor() == (Fraction(busiest_rank, padded) if padded else 0)
    for key in {key for key, _, _ in calls}:  # selection by label sums only that label's records
        mine = [w for w, (k, _, _) in zip(walked, calls) if k == key]
        assert [list(t.sent.as_tuple()) for t in ledger.per_rank("/".join(key))] == \
            [walk(mine, n)[0][k] for k in range(n)]


def test_equal_schedules_are_stored_once():
    ledger = CommLedger()
    for _ in range(3):
        ledger.record(schedule_for("all-reduce", 8), ChunkLayout(100, 8), "fp32", "g")  # a new object each call
    assert len({id(r.schedule) for r in ledger.records}) == 1
    assert len({id(r.counts) for r in ledger.records}) == 1


def test_padding_of_the_ring_all_reduce_worked_by_hand():
    """Ring all-reduce, N = 4, S = 10: chunks of 3, chunk 3 holds 1 element and 2 of padding. Step s of the
    reduce-scatter has rank r send chunk (r - s - 1) mod 4, so chunk 3 leaves ranks 0, 1, 2 at steps 0, 1, 2 and
    (all-gather, step s' = s - 3: chunk (r - s') mod 4) ranks 3, 0, 1 at steps 3, 4, 5; it arrives at the next rank."""
    from ringemu.ledger_counts import LayoutCounts, ScheduleCounts
    counts = ScheduleCounts(algorithms.build("all-reduce", 4, "ring"))
    layout = LayoutCounts(counts, ChunkLayout(10, 4), 2)
    assert layout.sent_padding.tolist() == [4, 4, 2, 2] and layout.received_padding.tolist() == [2, 4, 4, 2]
    assert layout.sent_elements == [18] * 4 and layout.received_elements == [18] * 4  # 6 messages of 3
    assert counts.step_messages.tolist() == [4] * 6
    for array in (layout.sent_padding, layout.received_padding, counts.sent_messages, counts.received_messages,
                  counts.step_messages):
        assert array.dtype == np.int64 and not array.flags.writeable


def test_counts_of_a_schedule_that_sends_nothing_have_one_entry_per_rank_and_step():
    from ringemu.ledger_counts import ScheduleCounts
    one = ScheduleCounts(algorithms.build("all-reduce", 1, "ring"))
    assert one.sent_messages.tolist() == [0] and one.received_messages.tolist() == [0]
    tree = ScheduleCounts(algorithms.build("reduce-scatter", 5, "tree"))  # rank 0 receives and never sends last
    assert tree.sent_messages.size == 5 and tree.received_messages.size == 5
    assert tree.step_messages.size == tree.schedule.n_steps


@given(n=st.integers(min_value=2, max_value=9), name=st.sampled_from(["ring", "tree", "halving-doubling"]),
       chunk_sets=st.lists(st.lists(st.integers(min_value=0, max_value=17), max_size=5), min_size=1, max_size=14))
def test_transfers_of_is_the_transfers_carrying_those_chunks_on_every_call(n, name, chunk_sets):
    """Whichever of its two ways it answers (a mask for the first 8 calls, a by-chunk index after), it answers the
    indices, ascending, of the table rows whose chunk is one asked for."""
    from ringemu.ledger_counts import ScheduleCounts
    counts = ScheduleCounts(algorithms.build("all-reduce", n, name))
    column = counts.schedule.table[:, 3]
    for chunks in chunk_sets * 2:  # at least two calls; past the ninth where the sets are many
        chunks = np.array(sorted({c % counts.schedule.n_chunks for c in chunks}), dtype=np.int64)
        got = counts.transfers_of(chunks)
        assert got.tolist() == np.flatnonzero(np.isin(column, chunks)).tolist()
    for _ in range(9):
        counts.transfers_of(np.array([0]))
    assert counts.transfers_of(np.array([0, 1])).tolist() == np.flatnonzero(column <= 1).tolist()
