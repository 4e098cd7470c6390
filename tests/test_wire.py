"""16-bit wire arithmetic on the bits equals numpy's (fp16) and ml_dtypes' (bf16) astype, bit for bit.

Oracles: ``x.astype(float32)`` for widening, ``f.astype(dtype)`` for rounding, and
``(a.astype(float32) + b.astype(float32)).astype(dtype)`` for one hop (ringemu.reference.hop_add). Widening is
checked on all 65,536 patterns; rounding on every fp32 exponent with the mantissa patterns around each rounding
boundary plus a large random sample; hop additions on every pair of special values plus a random sample. (All
2^32 fp32 patterns were also checked once, outside the suite: 0 mismatches for fp16 and bf16.)
"""
import numpy as np
import pytest

from ringemu import kernels, wire
from ringemu._jit import JIT_ENABLED
from ringemu.dtypes import BFLOAT16
from ringemu.reference import hop_add as reference_hop_add

WIRE16 = {"fp16": np.dtype(np.float16), "bf16": BFLOAT16}
# random sample sizes: large with the JIT, small in the JIT-disabled pass (same code, interpreted)
SAMPLE = 1 << 20 if JIT_ENABLED else 1 << 11

SPECIAL16 = {
    # +0, -0, smallest/largest subnormal, smallest normal, 1, -1, largest finite, inf, -inf, quiet NaN,
    # signalling NaN with payload, negative NaN with payload
    "fp16": [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01,
             0xFE3F, 0x8001, 0x83FF, 0xFBFF],
    "bf16": [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81,
             0xFFC1, 0x8001, 0x807F, 0xFF7F],
}


def bits16(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint16)


def is_nan16(bits: np.ndarray, name: str) -> np.ndarray:
    return np.isnan(bits.view(WIRE16[name]).astype(np.float32))


def test_wire_kinds_are_the_kernels_constants():
    # Example: kernels.py repeats the wire kinds so that its numba cache depends on that file only.
    assert (wire.WIRE_NATIVE, wire.WIRE_FP16, wire.WIRE_BF16) == (kernels._NATIVE, kernels._FP16, kernels._BF16)
    assert [wire.wire_kind(d) for d in ("int32", "int64", "fp32", "fp64", "fp16", "bf16")] == [0, 0, 0, 0, 1, 2]


@pytest.mark.parametrize("name", WIRE16)
def test_widening_every_pattern(name):
    # Exhaustive: all 65,536 16-bit patterns widen to the same fp32 bits as astype (NaN payloads kept).
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(WIRE16[name])
    got = wire.to_fp32(patterns)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), patterns.astype(np.float32).view(np.uint32))


def rounding_boundaries() -> np.ndarray:
    """fp32 patterns: every sign and exponent, with mantissas around bf16's and fp16's rounding points."""
    low = np.array([0, 1, 0x7FF, 0x800, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000, 0x3001, 0x7FFF, 0x8000,
                    0x8001, 0x10000, 0x18000, 0x7FFFFF, 0x7FE000, 0x7FF000, 0x7FEFFF, 0x400000, 0x401000],
                   dtype=np.uint32)
    top = np.arange(1 << 9, dtype=np.uint32) << 23  # sign and exponent
    return (top[:, None] | low[None, :]).ravel()


@pytest.mark.parametrize("name", WIRE16)
def test_rounding_matches_astype(name):
    # Boundaries on every exponent (ties to even, overflow to inf, subnormals, NaN payloads) plus a random sample
    # of fp32 patterns round to the same 16-bit bits as astype.
    rng = np.random.default_rng(2024)
    patterns = np.concatenate([rounding_boundaries(),
                               rng.integers(0, 1 << 32, size=SAMPLE, dtype=np.uint64).astype(np.uint32)])
    values = patterns.view(np.float32)
    with np.errstate(all="ignore"):  # NaN inputs; the JIT-disabled pass computes with numpy scalars
        expected = values.astype(WIRE16[name])
        got = wire.from_fp32(values, name)
    assert got.dtype == WIRE16[name]
    bad = np.flatnonzero(bits16(got) != bits16(expected))
    assert bad.size == 0, [(hex(patterns[i]), hex(bits16(got)[i]), hex(bits16(expected)[i])) for i in bad[:5]]


def check_hop(name: str, a_bits: np.ndarray, b_bits: np.ndarray) -> None:
    a, b = a_bits.view(WIRE16[name]), b_bits.view(WIRE16[name])
    with np.errstate(all="ignore"):
        expected = bits16(reference_hop_add(a, b))
        got = bits16(wire.hop_add(a, b))
    both_nan = is_nan16(a_bits, name) & is_nan16(b_bits, name)
    # Exactly the reference's bits, except that a NaN + NaN may return either operand's NaN (the hardware's
    # choice; x86 SIMD returns the left one): then the result must be one of the two operands' NaNs after the
    # fp32 round trip.
    strict = ~both_nan
    bad = np.flatnonzero(strict & (got != expected))
    assert bad.size == 0, [(hex(a_bits[i]), hex(b_bits[i]), hex(got[i]), hex(expected[i])) for i in bad[:5]]
    with np.errstate(all="ignore"):
        left = bits16(reference_hop_add(a, a))  # x + x for a NaN x is x's NaN, quieted as the hop quiets it
        right = bits16(reference_hop_add(b, b))
    ok = (got == left) | (got == right)
    assert np.all(ok[both_nan]), "a NaN + NaN gave a NaN that is neither operand's"


@pytest.mark.parametrize("name", WIRE16)
def test_hop_add_special_pairs(name):
    # Every ordered pair of special values (zeros, subnormals, extremes, infinities, NaNs with payloads).
    special = np.array(SPECIAL16[name], dtype=np.uint16)
    a, b = np.meshgrid(special, special, indexing="ij")
    check_hop(name, a.ravel(), b.ravel())


@pytest.mark.parametrize("name", WIRE16)
def test_hop_add_random_pairs(name):
    # A random sample of all 2^32 ordered pairs of 16-bit patterns (seed 5).
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << 16, size=SAMPLE, dtype=np.uint32).astype(np.uint16)
    b = rng.integers(0, 1 << 16, size=SAMPLE, dtype=np.uint32).astype(np.uint16)
    check_hop(name, a, b)


@pytest.mark.parametrize("name", WIRE16)
def test_hop_add_rounds_once_per_hop(name):
    # Example: 1 + 2^-11 (fp16) / 1 + 2^-8 (bf16) is a tie that rounds to even (1.0), so adding the small value
    # twice in two hops leaves 1.0, while fp32 would hold 1 + 2^-10 / 1 + 2^-7 exactly.
    eps = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}[name]
    dt = WIRE16[name]
    one = np.array([1.0], dtype=dt)
    small = np.array([eps], dtype=dt)
    once = wire.hop_add(one, small)
    twice = wire.hop_add(once, small)
    assert twice.astype(np.float64).tolist() == [1.0]


def test_wire_functions_reject_bad_input():
    with pytest.raises(ValueError, match="fp16 or bf16"):
        wire.to_fp32(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="numpy array"):
        wire.to_fp32([1, 2])
    with pytest.raises(ValueError, match="fp16 or bf16"):
        wire.from_fp32(np.zeros(3, np.float32), "fp32")
    with pytest.raises(TypeError, match="float32"):
        wire.from_fp32(np.zeros(3, np.float64), "fp16")
    with pytest.raises(ValueError, match="share shape and dtype"):
        wire.hop_add(np.zeros(3, np.float16), np.zeros(4, np.float16))
    with pytest.raises(ValueError, match="dtype must be one of"):
        wire.wire_kind("float8")
