"""Public collectives: bit-identical to the slow reference, exact on integer blocks, clear errors."""
import numpy as np
import pytest
from hypothesis import given

from ringemu import collectives
from ringemu.blocks import integer_blocks
from ringemu.dtypes import DTYPES
from ringemu.layout import ChunkLayout
from ringemu.reference import hop_add, ring_sum_reference, run_schedule_reference
from ringemu.algorithms.ring import naive_reduce_broadcast
from ringemu.testing import shards_of
from ringemu.virtual import VirtualBuffer
from strategies import float_worlds, integer_worlds, ops

MODES = ("fused", "step", "reference")


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def assert_bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(bits(got), bits(want))


def naive_reference(world: np.ndarray) -> np.ndarray:
    """Rank 0 adds rank 1, 2, ..., N-1 in order, one wire hop each (no schedule involved)."""
    acc = world[0].copy()
    for row in world[1:]:
        acc = hop_add(acc, row)
    return acc


@given(world=float_worlds(max_ranks=32, max_numel=100))
def test_results_equal_the_reference_bit_for_bit(world):
    n, numel = world.shape
    lay = ChunkLayout(numel, n)
    ring = ring_sum_reference(world)
    chunks = collectives.reduce_scatter(world)
    for r in range(n):
        assert_bits_equal(chunks[r], ring[lay.payload_slice(r)])
    assert_bits_equal(collectives.all_reduce(world), np.broadcast_to(ring, world.shape))
    assert_bits_equal(collectives.naive_all_reduce(world), np.broadcast_to(naive_reference(world), world.shape))
    gathered = collectives.all_gather(shards_of(world))
    assert_bits_equal(gathered, np.broadcast_to(np.concatenate(shards_of(world)), world.shape))


@given(world=float_worlds(max_ranks=16, max_numel=60))
def test_schedule_reference_and_closed_order_reference_agree(world):
    # two independent oracles: walking the naive schedule, and summing in rank order directly
    padded = world.copy()
    run_schedule_reference(naive_reduce_broadcast(world.shape[0]), padded)
    assert_bits_equal(padded, np.broadcast_to(naive_reference(world), world.shape))


@given(op=ops(), world=float_worlds(max_ranks=16, max_numel=80))
def test_every_mode_gives_the_same_bits(op, world):
    results = []
    for mode in MODES:
        if op == "all-gather":
            results.append(collectives.all_gather(shards_of(world), mode=mode))
        elif op == "reduce-scatter":
            results.append(np.concatenate(collectives.reduce_scatter(world, mode=mode)))
        else:
            run = collectives.all_reduce if op == "all-reduce" else collectives.naive_all_reduce
            results.append(run(world, mode=mode))
    for other in results[1:]:
        assert_bits_equal(other, results[0])


@given(world=integer_worlds(max_ranks=64, max_numel=150))
def test_integer_blocks_sum_exactly(world):
    wide = np.int64 if world.dtype.kind == "i" else np.float64
    exact = np.sum(world.astype(wide), axis=0)
    assert np.array_equal(collectives.all_reduce(world).astype(wide), np.broadcast_to(exact, world.shape))
    assert np.array_equal(collectives.naive_all_reduce(world).astype(wide), np.broadcast_to(exact, world.shape))
    assert np.array_equal(np.concatenate(collectives.reduce_scatter(world)).astype(wide), exact)


@given(world=float_worlds(max_ranks=32, max_numel=100))
def test_all_reduce_is_reduce_scatter_then_all_gather(world):
    # same bits, so DP's all-reduce and ZeRO's reduce-scatter + all-gather agree exactly (claim M11)
    chunks = collectives.reduce_scatter(world)
    assert_bits_equal(collectives.all_gather(chunks), collectives.all_reduce(world))


@given(world=integer_worlds(max_ranks=16, max_numel=50))
def test_inputs_are_not_modified_and_lists_work(world):
    before = world.copy()
    from_rows = collectives.all_reduce(list(world))
    assert_bits_equal(world, before)
    assert_bits_equal(from_rows, collectives.all_reduce(world))
    shards = shards_of(world)
    copies = [s.copy() for s in shards]
    collectives.all_gather(shards)
    for s, c in zip(shards, copies):
        assert_bits_equal(s, c)


def test_reduce_scatter_chunk_lengths_follow_the_layout():
    chunks = collectives.reduce_scatter(integer_blocks(5, 13, 0, "int32"))
    assert [c.size for c in chunks] == [3, 3, 3, 3, 1]
    chunks = collectives.reduce_scatter(integer_blocks(8, 3, 0, "int32"))  # S < N: five empty chunks
    assert [c.size for c in chunks] == [1, 1, 1, 0, 0, 0, 0, 0]


def test_a_small_example_by_hand():
    world = np.array([[1, 2, 3], [10, 20, 30]], dtype=np.int32)
    assert collectives.all_reduce(world).tolist() == [[11, 22, 33], [11, 22, 33]]
    assert [c.tolist() for c in collectives.reduce_scatter(world)] == [[11, 22], [33]]


def test_16_bit_hops_round_each_partial_sum():
    # fp16: 2048 + 1 rounds to 2048 (spacing 2 above 2048), so the ring order is visible in the result.
    # chunk 0 of 3 ranks is summed as (x1 + x2) + x0.
    world = np.array([[2048], [1], [1]], dtype=np.float16)
    assert collectives.all_reduce(world)[0, 0] == 2050  # (1 + 1) + 2048: exact
    world = np.array([[1], [2048], [1]], dtype=np.float16)
    assert collectives.all_reduce(world)[0, 0] == 2048  # (2048 + 1) → 2048, + 1 → 2048


def test_size_only_results_have_the_right_shapes():
    v = VirtualBuffer((4, 10), "bf16")
    assert [c.shape for c in collectives.reduce_scatter(v)] == [(3,), (3,), (3,), (1,)]
    assert collectives.all_reduce(v) == VirtualBuffer((4, 10), "bf16")
    assert collectives.all_gather(v).shape == (4, 10)


@pytest.mark.parametrize("bad, error, match", [
    (np.zeros(5, dtype=np.float32), ValueError, r"world must have shape \(n_ranks >= 1, numel\)"),
    (np.zeros((2, 2, 2), dtype=np.float32), ValueError, "world must have shape"),
    (np.zeros((0, 4), dtype=np.float32), ValueError, "world must have shape"),
    (np.zeros((2, 4), dtype=np.complex64), ValueError, "dtype must be one of int32 int64 fp16 bf16 fp32 fp64"),
    (np.zeros((2, 4), dtype=np.uint8), ValueError, "dtype must be one of"),
    ([np.zeros(3, np.float32), np.zeros(4, np.float32)], ValueError, "one shape and dtype"),
    ([np.zeros(3, np.float32), np.zeros(3, np.float64)], ValueError, "one shape and dtype"),
    ([[1.0, 2.0]], TypeError, "world must be an"),
    ("abc", TypeError, "world must be an"),
])
def test_bad_worlds(bad, error, match):
    for run in (collectives.reduce_scatter, collectives.all_reduce, collectives.naive_all_reduce):
        with pytest.raises(error, match=match):
            run(bad)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_overflowing_integer_blocks_are_rejected(dtype):
    world = np.full((3, 4), np.iinfo(DTYPES[dtype]).max // 2, dtype=DTYPES[dtype])
    with pytest.raises(ValueError, match=f"sum over ranks of element 0 is .* outside {dtype}"):
        collectives.all_reduce(world)
    world[:, 0] = np.iinfo(DTYPES[dtype]).min // 2
    with pytest.raises(ValueError, match="outside"):
        collectives.reduce_scatter(world)


def test_bad_shards():
    with pytest.raises(ValueError, match=r"shards must be 1-D with lengths \[3, 3, 3, 3, 1\]"):
        collectives.all_gather([np.zeros(k, np.float32) for k in (3, 3, 3, 1, 3)])
    with pytest.raises(ValueError, match="shards must share one dtype"):
        collectives.all_gather([np.zeros(2, np.float32), np.zeros(1, np.float64)])
    with pytest.raises(TypeError, match="shards must be a non-empty list"):
        collectives.all_gather([])


def test_unknown_mode():
    with pytest.raises(ValueError, match="mode must be one of fused, step, reference"):
        collectives.all_reduce(np.zeros((2, 4), np.float32), mode="fast")
