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
