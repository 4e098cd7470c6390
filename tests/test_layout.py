"""ChunkLayout: padding to N·ceil(S/N) and the payload of every chunk."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringemu.layout import ChunkLayout
from strategies import large_ring_sizes, lesson_sizes, ring_sizes, world_shapes


@given(shape=world_shapes(max_ranks=64, max_numel=500))
def test_chunks_partition_the_buffer(shape):
    n, numel = shape
    lay = ChunkLayout(numel, n)
    assert lay.chunk_size == -(-numel // n) and lay.padded_numel == n * lay.chunk_size
    assert 0 <= lay.padding < n or numel == 0
    covered = np.concatenate([np.arange(numel)[lay.payload_slice(c)] for c in range(n)])
    np.testing.assert_array_equal(covered, np.arange(numel))  # payloads in order, no gap, no overlap
    assert lay.payloads().tolist() == [lay.payload(c) for c in range(n)]
    assert sum(lay.payloads().tolist()) == numel


@given(n=large_ring_sizes(), numel=lesson_sizes())
def test_padding_is_exact_at_any_size(n, numel):
    lay = ChunkLayout(numel, n)
    assert lay.padding == lay.padded_numel - numel == (-numel) % n
    assert sum(lay.payloads().tolist()) == numel


@given(shape=ring_sizes(2, 64).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_small_buffers_leave_trailing_chunks_empty(shape):
    # S < N: chunks of one element; chunks S .. N-1 are all padding
    n, numel = shape
    lay = ChunkLayout(numel, n)
    assert lay.payloads().tolist() == [1] * numel + [0] * (n - numel)
    assert lay.padding == (n - numel if numel else 0)


def test_example_13_over_5():
    # 13 = 3 + 3 + 3 + 3 + 1: padded to 15
    lay = ChunkLayout(13, 5)
    assert (lay.chunk_size, lay.padded_numel, lay.padding) == (3, 15, 2)
    assert lay.payloads().tolist() == [3, 3, 3, 3, 1] and lay.payload_slice(4) == slice(12, 13)


@pytest.mark.parametrize("numel, n, error, match", [(-1, 4, ValueError, "numel must be an integer >= 0"),
                                                    (2.5, 4, TypeError, "numel must be an integer"),
                                                    (4, 0, ValueError, "n_chunks must be an integer >= 1"),
                                                    (4, 1.0, TypeError, "n_chunks must be an integer >= 1")])
def test_bad_layouts(numel, n, error, match):
    with pytest.raises(error, match=match):
        ChunkLayout(numel, n)


@given(st.integers(0, 10 ** 15))
def test_one_chunk_has_no_padding(numel):
    assert ChunkLayout(numel, 1).padding == 0


# -- split shards and the whole-buffer layout, worked by hand ------------------------------------------------
def test_split_shards_with_padding_inside_the_row():
    """10 elements, 2 shards cut in 2: shards of ceil(10/2) = 5, chunks of ceil(5/2) = 3, rows of 12; each shard's
    data first (5 elements), then one element of its sub-chunks' padding: payloads 3, 2, 3, 2."""
    lay = ChunkLayout(10, 4, 2)
    assert (lay.split, lay.shard_size, lay.chunk_size, lay.padded_numel, lay.padding) == (2, 5, 3, 12, 2)
    assert not lay.contiguous and lay.payloads().tolist() == [3, 2, 3, 2]
    assert [lay.payload(c) for c in range(4)] == [3, 2, 3, 2] and lay.wire_elements().tolist() == [3] * 4
    assert [lay.payload_slice(c) for c in range(4)] == [slice(0, 3), slice(3, 5), slice(5, 8), slice(8, 10)]
    assert [lay.shard_slice(r) for r in range(2)] == [slice(0, 5), slice(6, 11)] and lay.start(3) == 9
    rows = np.arange(1, 11).reshape(1, 10)
    padded = lay.pad(rows, np.full((1, 12), -1))
    assert padded.tolist() == [[1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10, 0]]
    assert lay.unpad(padded).tolist() == rows.tolist()
    assert lay.shard(padded[0], 1).tolist() == [6, 7, 8, 9, 10]


def test_split_shards_with_a_short_last_shard_and_empty_ones():
    """7 elements in 3 shards cut in 2: shards of 3 (data 3, 3, 1), chunks of 2, rows of 12; and 2 elements in 4
    shards of 1 cut in 2: the last two shards hold no data at all and stay zero."""
    lay = ChunkLayout(7, 6, 3)
    assert lay.payloads().tolist() == [2, 1, 2, 1, 1, 0] and [lay.shard_payload(r) for r in range(3)] == [3, 3, 1]
    rows = np.arange(1, 8).reshape(1, 7)
    padded = lay.pad(rows, np.full((1, 12), -1))
    assert padded.tolist() == [[1, 2, 3, 0, 4, 5, 6, 0, 7, 0, 0, 0]] and lay.unpad(padded).tolist() == rows.tolist()
    tiny = ChunkLayout(2, 8, 4)
    assert not tiny.contiguous and tiny.payloads().tolist() == [1, 0, 1, 0, 0, 0, 0, 0]
    padded = tiny.pad(np.array([[5, 6]]), np.full((1, 8), -1))
    assert padded.tolist() == [[5, 0, 6, 0, 0, 0, 0, 0]] and tiny.unpad(padded).tolist() == [[5, 6]]
    assert tiny.shard_slice(3) == slice(6, 6) and tiny.place_shard(padded[0], 1, np.array([9])) is None
    assert padded.tolist() == [[5, 0, 9, 0, 0, 0, 0, 0]]


def test_split_shards_that_divide_evenly_are_contiguous():
    """12 elements in 3 shards of 4 cut in 2 chunks of 2: no padding anywhere, the row is the data."""
    lay = ChunkLayout(12, 6, 3)
    assert lay.contiguous and lay.padding == 0 and lay.payloads().tolist() == [2] * 6
    rows = np.arange(12).reshape(1, 12)
    assert lay.pad(rows, np.full((1, 12), -1)).tolist() == rows.tolist()


def test_a_whole_buffer_layout_keeps_the_shard_map():
    """One chunk of all 10 elements, no padding; shard r of 4 is still [3r, 3r + 3) cut at 10."""
    lay = ChunkLayout(10, 1, 4)
    assert (lay.split, lay.chunk_size, lay.padded_numel, lay.payload(0)) == (0, 10, 10, 10)
    assert [lay.shard_slice(r) for r in range(4)] == [slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 10)]
    assert lay.shard_slice(5) == slice(10, 10)


def test_shards_must_divide_the_chunks():
    with pytest.raises(ValueError) as err:
        ChunkLayout(10, 6, 4)
    assert str(err.value) == "n_chunks must be a multiple of n_shards, or 1; got n_chunks=6, n_shards=4"
    with pytest.raises(ValueError, match=r"^n_shards must be an integer >= 1 and <= 9_223_372_036_854_775_807, got 0$"):
        ChunkLayout(10, 6, 0)


def test_a_layout_holds_plain_ints_and_refuses_more_chunks_than_int64_counts():
    """numpy counts become Python ints (exact arithmetic); at most 2^63 − 1 chunks."""
    lay = ChunkLayout(np.int64(10), np.int64(4), np.int32(2))
    assert [type(v) for v in (lay.numel, lay.n_chunks, lay.n_shards)] == [int, int, int]
    with pytest.raises(ValueError, match=r"^n_chunks must be an integer >= 1 and <= 9_223_372_036_854_775_807, got "
                                         r"9223372036854775808$"):
        ChunkLayout(0, 2 ** 63)


@pytest.mark.parametrize("numel, n_chunks, n_shards, padded_rows", [
    (5, 3, None, [[1, 2, 3, 4, 5, 0], [6, 7, 8, 9, 10, 0]]),
    (5, 4, 2, [[1, 2, 3, 0, 4, 5, 0, 0], [6, 7, 8, 0, 9, 10, 0, 0]]),
])
def test_pad_and_unpad_move_every_row_and_keep_its_type(numel, n_chunks, n_shards, padded_rows):
    """Each of k rows is placed on its own (padding zeroed, whatever ``out`` held) and read back in the world's
    dtype: 5 elements in 3 chunks of 2 (one element of padding at the end), or in 2 shards of 3 cut in 2 chunks
    of 2 (each shard's data, then its padding)."""
    lay = ChunkLayout(numel, n_chunks, n_shards)
    rows = np.arange(1, 11, dtype=np.int16).reshape(2, 5)
    padded = lay.pad(rows, np.full((2, lay.padded_numel), -1, dtype=np.int16))
    assert padded.tolist() == padded_rows
    back = lay.unpad(padded)
    assert back.dtype == np.int16 and back.tolist() == rows.tolist()
