"""Block-wise quantisation (zero_stages.quantize): codes in range, error at most half a scale step per element,
exact values on the grid kept, and the bytes on the wire counted as the paper's layout gives them."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from zero_stages.quantize import INT4, INT8, QuantSpec, decode, encode, n_blocks, n_words, wire_bytes

from strategies_zero import examples

specs = st.builds(QuantSpec, st.sampled_from([4, 8]), st.integers(min_value=1, max_value=40))
values = st.integers(min_value=0, max_value=200).flatmap(
    lambda n: arrays(np.float32, n, elements=st.floats(-1e4, 1e4, width=32)))


@settings(max_examples=examples(1.0))
@given(x=values, spec=specs)
def test_error_is_at_most_half_a_step(x, spec):
    """Property: |x − x'| ≤ scale/2 (+ fp32 rounding of q·scale) in every block, with scale = max|x|/q_max."""
    words, scales = encode(x, spec)
    assert words.shape == (n_words(x.size, spec),) and scales.shape == (n_blocks(x.size, spec),)
    y = decode(words, scales, x.size, spec)
    for b in range(n_blocks(x.size, spec)):
        block = x[b * spec.block:(b + 1) * spec.block].astype(np.float64)
        step = np.abs(block).max() / spec.q_max  # independent of the code: the block's step in float64
        got = y[b * spec.block:(b + 1) * spec.block].astype(np.float64)
        assert np.all(np.abs(got - block) <= step / 2 * (1 + 1e-5) + 1e-30)


@settings(max_examples=examples(1.0))
@given(q=st.lists(st.integers(-7, 7), min_size=1, max_size=64), unit=st.sampled_from([0.5, 1.0, 0.125]))
def test_values_on_the_grid_come_back_exactly(q, unit):
    """Property: a block whose largest |x| is q_max·unit and whose values are multiples of unit is exact in int4."""
    x = np.array(q + [7], dtype=np.float32) * np.float32(unit)
    words, scales = encode(x, QuantSpec(4, len(x)))
    np.testing.assert_array_equal(decode(words, scales, x.size, QuantSpec(4, len(x))), x)


def test_wire_bytes_by_hand():
    # 1,000 int8 codes: 250 words of 4 B; 4 scales of 4 B (blocks of 256). int4: 125 words.
    assert wire_bytes(1000, INT8) == (1000, 16)
    assert wire_bytes(1000, INT4) == (500, 16)
    assert wire_bytes(1, INT4) == (4, 4)


def test_bad_specs():
    with pytest.raises(ValueError, match="bits"):
        QuantSpec(2, 16)
    with pytest.raises((ValueError, TypeError)):
        QuantSpec(8, 0)
