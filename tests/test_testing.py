"""ringemu.testing: the oracle accepts a correct ring written from scratch and catches wrong ones."""
import sys

import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from ringemu import collectives
from ringemu.blocks import check_integer_blocks
from ringemu.dtypes import DTYPES
from ringemu.testing import assert_matches_ringemu, buffer_sizes, dtype_names, float_worlds, integer_worlds, ring_sizes, shards_of
from strategies import ops


# -- a user's implementation, written from the textbook (Patarasuk & Yuan §3), not from ringemu ---------------
def hop(acc, incoming):
    if acc.dtype.itemsize == 2 and acc.dtype.kind != "i":  # 16-bit wire types: fp32 add, one rounding
        return (acc.astype(np.float32) + incoming.astype(np.float32)).astype(acc.dtype)
    return acc + incoming


def textbook_ring(world, phases=("rs", "ag"), chunk_shift=1):
    """Ring all-reduce on a copy of ``world``; returns (buffers, chunk size, elements sent per rank)."""
    n, s = world.shape
    c = -(-s // n)  # chunk size, padding included
    buf = np.zeros((n, c * n), world.dtype)
    buf[:, :s] = world
    sent = [0] * n
    for phase in phases:
        for step in range(n - 1):
            moves = []
            for r in range(n):
                k = (r - step - chunk_shift) % n if phase == "rs" else (r - step) % n
                moves.append((r, (r + 1) % n, k, buf[r, k * c:(k + 1) * c].copy()))
                sent[r] += c
            for src, dst, k, data in moves:
                part = buf[dst, k * c:(k + 1) * c]
                part[...] = hop(part, data) if phase == "rs" else data
    return buf, c, sent


def user_all_reduce(world):
    buf, _, sent = textbook_ring(world)
    return buf[:, :world.shape[1]], sent


def user_reduce_scatter(world, chunk_shift=1):
    n, s = world.shape
    buf, c, sent = textbook_ring(world, phases=("rs",), chunk_shift=chunk_shift)
    return [buf[r, r * c:min((r + 1) * c, s)] if r * c < s else buf[r, :0] for r in range(n)], sent


# -- the oracle accepts correct implementations ---------------------------------------------------------------
@given(world=float_worlds(max_ranks=12, max_numel=60))
def test_a_correct_textbook_ring_passes(world):
    assert_matches_ringemu(user_all_reduce, "all-reduce", world, check_traffic="elements")
    assert_matches_ringemu(user_reduce_scatter, "reduce-scatter", world, check_traffic="elements")
    def in_bytes(w):
        out, sent = user_all_reduce(w)
        return out, [x * w.dtype.itemsize for x in sent]
    assert_matches_ringemu(in_bytes, "all-reduce", world, check_traffic="bytes")


def user_all_gather(shards):
    """Textbook ring all-gather: shard r starts in chunk r of rank r's buffer; N-1 steps of the copy phase."""
    n, s = len(shards), sum(x.size for x in shards)
    c = -(-s // n)
    world = np.zeros((n, s), shards[0].dtype)
    for r, x in enumerate(shards):
        world[r, r * c:r * c + x.size] = x
    buf, _, sent = textbook_ring(world, phases=("ag",))
    return buf[:, :s], sent


def user_naive_all_reduce(world):
    """The lesson's contrast: rank 0 adds every buffer in rank order and sends the sum back to every rank."""
    n, s = world.shape
    acc = world[0].copy()
    for row in world[1:]:
        acc = hop(acc, row)
    sent = [(n - 1) * s] + [s] * (n - 1)
    return np.broadcast_to(acc, world.shape).copy(), sent


USER_OPS = {"reduce-scatter": user_reduce_scatter, "all-gather": user_all_gather,
            "all-reduce": user_all_reduce, "naive-all-reduce": user_naive_all_reduce}


@pytest.mark.parametrize("dtype", list(DTYPES))
@given(op=ops(), data=st.data())
def test_textbook_implementations_of_every_op_pass_for_every_dtype(dtype, op, data):
    """Independent implementations of all four ops (written above from the textbook, not from ringemu) pass
    the oracle, traffic included, on exact integer worlds of every dtype; and the reductions equal the exact
    sum computed by numpy in int64 / float64."""
    world = data.draw(integer_worlds(max_ranks=12, max_numel=60, dtype=dtype))
    expected = assert_matches_ringemu(USER_OPS[op], op, world, check_traffic="elements")
    wide = np.int64 if world.dtype.kind == "i" else np.float64
    exact = world.astype(wide).sum(axis=0)
    if op in ("all-reduce", "naive-all-reduce"):
        assert np.array_equal(expected.astype(wide), np.broadcast_to(exact, world.shape))
    elif op == "reduce-scatter":
        assert np.array_equal(np.concatenate(expected).astype(wide), exact)


# -- and catches wrong ones -------------------------------------------------------------------------------------
def test_off_by_one_chunk_is_caught():
    world = np.arange(24, dtype=np.int32).reshape(4, 6)
    with pytest.raises(AssertionError, match=r"reduce-scatter: rank 0 element 0 \(buffer element 0\): expected 36 "
                                             r"\(bits 0x00000024\), got"):
        assert_matches_ringemu(lambda w: user_reduce_scatter(w, chunk_shift=0)[0], "reduce-scatter", world)


@given(world=float_worlds(max_ranks=12, max_numel=60, dtype=st.sampled_from(["fp32", "fp64", "bf16"])))
def test_oracle_fails_exactly_when_the_summation_order_changes_the_bits(world):
    def rank_order(w):  # sums rank 0, 1, 2, ... instead of the ring's order
        acc = w[0].copy()
        for row in w[1:]:
            acc = hop(acc, row)
        return np.broadcast_to(acc, w.shape).copy()
    want = collectives.all_reduce(world)
    differs = not np.array_equal(want.view(f"u{world.dtype.itemsize}"),
                                 rank_order(world).view(f"u{world.dtype.itemsize}"))
    if differs:
        with pytest.raises(AssertionError, match="all-reduce: rank 0 element .* elements differ"):
            assert_matches_ringemu(rank_order, "all-reduce", world)
    else:
        assert_matches_ringemu(rank_order, "all-reduce", world)


def test_numpy_sum_order_is_caught_in_float():
    # a fixed world where numpy's pairwise order and the ring's order round differently (seed found by trying 0)
    world = np.random.Generator(np.random.PCG64(0)).standard_normal((8, 64)).astype(np.float32)
    with pytest.raises(AssertionError, match="elements differ"):
        assert_matches_ringemu(lambda w: np.broadcast_to(w.sum(axis=0), w.shape).copy(), "all-reduce", world)


def test_missing_padding_is_caught():
    # np.array_split cuts 10 elements on 4 ranks as 3, 3, 2, 2; the padded layout gives 3, 3, 3, 1
    world = np.arange(40, dtype=np.int64).reshape(4, 10)
    def unpadded(w):
        total = w.sum(axis=0)
        return np.array_split(total, w.shape[0])
    with pytest.raises(AssertionError, match=r"reduce-scatter: rank 2: expected shape \(3,\), got \(2,\)"):
        assert_matches_ringemu(unpadded, "reduce-scatter", world)


def test_over_counted_traffic_is_caught():
    world = np.ones((8, 100), dtype=np.float32)
    def whole_buffer_each_step(w):  # counts S per step instead of one chunk of ceil(S/N) = 13
        return user_all_reduce(w)[0], [2 * 7 * 100] * 8
    with pytest.raises(AssertionError, match=r"all-reduce: 8 of 8 ranks differ \(padding included.*"
                                             r"rank 0: you report 1,400 elements sent, ringemu's ledger counts 182; "
                                             r"rank 1: "):
        assert_matches_ringemu(whole_buffer_each_step, "all-reduce", world, check_traffic="elements")


def test_payload_only_traffic_needs_count_padding_false():
    world = np.ones((4, 10), dtype=np.float32)  # chunks of 3: 2 padding elements in chunk 3
    # rank r forwards every chunk but r (RS) and every chunk but r + 1 (AG): chunk 3's 2 padding elements are
    # sent twice by ranks 0 and 1, once by ranks 2 and 3
    pads = [4, 4, 2, 2]
    assert_matches_ringemu(lambda w: (user_all_reduce(w)[0], [18 - p for p in pads]), "all-reduce", world,
                           check_traffic="elements", count_padding=False)
    with pytest.raises(AssertionError, match="rank 0: you report 14 elements sent, ringemu's ledger counts 18; rank 1: you report 14"):
        assert_matches_ringemu(lambda w: (user_all_reduce(w)[0], [18 - p for p in pads]), "all-reduce", world,
                               check_traffic="elements")


def test_wrong_dtype_and_shape_are_caught():
    world = np.ones((3, 5), dtype=np.float32)
    with pytest.raises(AssertionError, match="expected dtype float32, got float64"):
        assert_matches_ringemu(lambda w: w.astype(np.float64).sum(axis=0) + np.zeros((3, 1)), "all-reduce", world)
    with pytest.raises(AssertionError, match=r"expected shape \(3, 5\), got \(5,\)"):
        assert_matches_ringemu(lambda w: w.sum(axis=0), "all-reduce", world)
    with pytest.raises(AssertionError, match="expected a list of 3 per-rank chunks"):
        assert_matches_ringemu(lambda w: w.sum(axis=0), "reduce-scatter", world)


def test_shifted_all_gather_is_caught():
    world = np.arange(12, dtype=np.int32).reshape(3, 4)
    def shifted(shards):
        return np.broadcast_to(np.concatenate(shards[1:] + shards[:1]), (3, 4)).copy()
    with pytest.raises(AssertionError, match=r"all-gather: rank 0 element 0 \(chunk 0\): expected 0"):
        assert_matches_ringemu(shifted, "all-gather", world)


def test_traffic_must_be_returned_when_asked():
    with pytest.raises(AssertionError, match=r"must return \(result, sent per rank\)"):
        assert_matches_ringemu(collectives.all_reduce, "all-reduce", np.ones((2, 2), np.float32),
                               check_traffic="bytes")


def test_bad_oracle_arguments():
    with pytest.raises(ValueError, match="op must be one of"):
        assert_matches_ringemu(collectives.all_reduce, "allreduce", np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="check_traffic must be None, 'elements' or 'bytes'"):
        assert_matches_ringemu(collectives.all_reduce, "all-reduce", np.ones((2, 2), np.float32),
                               check_traffic="messages")


# -- the strategies generate what they promise -----------------------------------------------------------------
@given(world=integer_worlds())
def test_integer_worlds_are_exact(world):
    assert 1 <= world.shape[0] <= 64
    check_integer_blocks(world)


@given(world=float_worlds(dtype="bf16", n_ranks=3))
def test_float_worlds_take_fixed_arguments(world):
    assert world.dtype == DTYPES["bf16"] and world.shape[0] == 3


def test_strategies_reach_awkward_cases():
    assert find(ring_sizes(), lambda n: n > 1) == 2  # shrinks towards small rings
    n, s = find(ring_sizes(2, 64).flatmap(lambda n: st.tuples(st.just(n), buffer_sizes(n))),
                lambda t: 0 < t[1] < t[0])
    assert 0 < s < n
    find(buffer_sizes(8), lambda s: s == 0)
    find(buffer_sizes(8), lambda s: s % 8 and s > 8)
    assert {find(dtype_names(), lambda d, x=x: d == x) for x in DTYPES} == set(DTYPES)
    find(integer_worlds(dtype="fp16"), lambda w: w.dtype == np.float16 and w.size > 0)


def test_shards_of_cuts_chunk_r_of_row_r():
    world = np.arange(15).reshape(3, 5)  # chunks of 2: [0 1] [2 3] [4 _]
    assert [s.tolist() for s in shards_of(world)] == [[0, 1], [7, 8], [14]]


def test_strategy_arguments_are_checked():
    with pytest.raises(ValueError, match="1 <= min_value <= max_value"):
        ring_sizes(0, 4)
    with pytest.raises(ValueError, match="dtype must be one of"):
        dtype_names(["fp8"])


def test_oracle_works_without_hypothesis(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # as if hypothesis were not installed
    assert_matches_ringemu(collectives.all_reduce, "all-reduce", np.ones((3, 4), np.float32))
    with pytest.raises(ImportError, match=r"strategies need hypothesis: pip install 'ringemu\[test\]'"):
        ring_sizes()


# -- independent worlds, layouts, jobs --------------------------------------------------------------------------
from ringemu.layout import ChunkLayout  # noqa: E402
from ringemu.testing import (SendLog, assert_sharded_matches, first_difference, independent_worlds,  # noqa: E402
                             shard_layouts, sharding_jobs, uneven_ring_sizes)


@given(independent_worlds(3, n_ranks=st.integers(1, 4), numel=st.integers(1, 6), dtype="fp64"))
def test_independent_worlds_share_a_shape_and_never_the_data(worlds):
    """Property: the three worlds have one shape, and no two are equal (distinct seeds of standard normals in
    fp64 collide with probability 0)."""
    assert len({w.shape for w in worlds}) == 1
    assert not any(np.array_equal(a, b) for i, a in enumerate(worlds) for b in worlds[i + 1:])


def test_independent_worlds_stay_apart_when_shrunk():
    """Two plain float_worlds of one example shrink to the same data (both seeds to 0); independent ones cannot:
    the smallest pair hypothesis finds still differs."""
    pair = find(st.tuples(float_worlds(n_ranks=1, numel=1, dtype="fp64"), float_worlds(n_ranks=1, numel=1,
                                                                                       dtype="fp64")),
                lambda p: True)
    assert np.array_equal(pair[0], pair[1])  # the correlation the strategy below removes
    apart = find(independent_worlds(2, n_ranks=1, numel=1, dtype="fp64"), lambda p: True)
    assert not np.array_equal(apart[0], apart[1])


@given(shard_layouts(max_ranks=9, max_numel=40))
def test_shard_layouts_cover_the_buffer_in_order(drawn):
    """Property: every layout's shards are contiguous, in rank order, and cover [0, S) exactly once."""
    kind, bounds = drawn
    assert bounds[0][0] == 0 and all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert all(lo <= hi for lo, hi in bounds)


@given(uneven_ring_sizes(3, 40))
def test_uneven_ring_sizes_are_not_powers_of_two(n):
    assert n >= 3 and bin(n).count("1") > 1


@given(sharding_jobs())
def test_sharding_jobs_are_consistent(job):
    """Property: the units are positive and sum to numel."""
    assert all(u > 0 for u in job["units"]) and sum(job["units"]) == job["numel"] and 1 <= job["n_ranks"] <= 8


# -- the sharded-optimizer diff ---------------------------------------------------------------------------------
def _sgd_states(n_ranks, numel, steps, plant=None):
    """A DP reference and a sharded run of plain momentum SGD (m = 0.9 m + g; w -= 0.1 m) in fp32, the shards
    cut by ChunkLayout(numel, n_ranks); ``plant`` = (step, rank) skips that rank's momentum decay once."""
    rng = np.random.Generator(np.random.PCG64(7))
    grads = rng.standard_normal((steps, numel)).astype(np.float32)
    w, m = np.zeros(numel, np.float32), np.zeros(numel, np.float32)
    layout = ChunkLayout(numel, n_ranks)
    sw = [w[layout.payload_slice(r)].copy() for r in range(n_ranks)]
    sm = [m[layout.payload_slice(r)].copy() for r in range(n_ranks)]
    reference, sharded = [], []
    for t in range(steps):
        m = np.float32(0.9) * m + grads[t]
        w = w - np.float32(0.1) * m
        reference.append({"w": w.copy(), "m": m.copy()})
        for r in range(n_ranks):
            decay = np.float32(1.0) if plant == (t, r) else np.float32(0.9)
            sm[r] = decay * sm[r] + grads[t][layout.payload_slice(r)]
            sw[r] = sw[r] - np.float32(0.1) * sm[r]
        sharded.append([{"w": sw[r].copy(), "m": sm[r].copy()} for r in range(n_ranks)])
    return reference, sharded


def test_a_correct_sharded_optimizer_has_no_difference():
    assert first_difference(*_sgd_states(3, 10, 3)) is None


def test_the_first_differing_step_state_shard_and_element_are_named():
    reference, sharded = _sgd_states(3, 10, 3, plant=(1, 2))
    # ChunkLayout(10, 3): rank 2 holds elements [8, 10); the planted step is 1 and "w" comes first in the dict,
    # but "w" at step 1 depends on m at step 1, so both differ there: w is named, at rank 2's first element, 8
    with pytest.raises(AssertionError, match=r"step 1, state 'w', shard 2 \(rank 2\), element 8 \(offset 0 in the "
                                             r"shard\): the reference holds .* \(bits 0x[0-9a-f]{8}\), the sharded"):
        assert_sharded_matches(reference, sharded)
    sharded[0][1]["m"] = sharded[0][1]["m"][:-1]  # rank 1 holds [4, 8) of ChunkLayout(10, 3): one element short
    assert "step 0, state 'm', shard 1 (rank 1): the shard holds 3 float32 elements; elements [4, 8) of the " \
           "reference are 4 float32" in \
        first_difference(reference, sharded).message()


# -- the send log against the ledger ----------------------------------------------------------------------------
def test_a_send_log_matches_the_ledger_row_by_row_and_names_every_row_that_differs():
    from ringemu.ledger import CommLedger

    world = np.ones((3, 7), np.int32)  # ChunkLayout(7, 3): chunks of 3, 3, 1 element
    ledger = CommLedger()
    collectives.reduce_scatter(world, ledger=ledger, label="rs")
    log = SendLog(3)
    layout = ChunkLayout(7, 3)
    for step in range(2):  # the textbook ring's reduce-scatter: at step t rank r sends chunk r - t - 1 to r + 1
        for r in range(3):
            log.send(r, (r + 1) % 3, world[r, layout.payload_slice((r - step - 1) % 3)], label="rs", step=step)
    log.assert_matches(ledger)  # payload only: an engine that never pads
    assert log.differences(ledger, count="padded")  # the ledger's padded chunk 2 carries 2 elements of padding
    wrong = SendLog(3)
    for r in range(3):
        wrong.send(r, (r + 1) % 3, world[r], label="rs")  # the whole buffer, once
    rows = wrong.differences(ledger)
    assert any(row.startswith("rank 0 sent: yours 1 messages, 7 elements = 28 B; ringemu's ledger") for row in rows)
    assert {row.split(":")[0] for row in rows} >= {"rank 0 sent", "rank 1 sent", "rank 2 sent"}, rows


def test_the_oracle_takes_a_declared_order_and_its_traffic():
    """A user's "sum from the last rank down" all-reduce, declared in a local Orders object: the oracle accepts it
    with the declared order's results and bytes, and still catches wrong bytes, naming every rank."""
    from ringemu.testing import Orders

    def last_rank_first(w):
        total = w[-1].copy()
        for row in w[-2::-1]:
            total = total + row
        return np.broadcast_to(total, w.shape).copy()

    every_rank_sends_all = lambda n, s, itemsize: [s * itemsize] * n  # noqa: E731  (the user's own model)
    mine = Orders().declare("last first", "all-reduce", results=lambda w: list(last_rank_first(w)),
                            traffic=every_rank_sends_all)
    world = np.random.Generator(np.random.PCG64(3)).standard_normal((5, 6)).astype(np.float32)
    assert_matches_ringemu(lambda w: (last_rank_first(w), [24] * 5), "all-reduce", world, algorithm="last first",
                           orders=mine, check_traffic="bytes")  # 6 fp32 = 24 B per rank, from the model above
    with pytest.raises(AssertionError, match="rank 0: you report 20 bytes sent, the declared traffic model gives "
                                             "24; rank 1: you report 20"):
        assert_matches_ringemu(lambda w: (last_rank_first(w), [20] * 5), "all-reduce", world,
                               algorithm="last first", orders=mine, check_traffic="bytes")
