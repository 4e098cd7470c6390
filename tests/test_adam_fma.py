"""fma32: the fp32 fused multiply-add that zero_stages.adam uses to follow torch's CPU kernels."""
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from zero_stages.adam import fma32


def _round_to_fp32(exact: Fraction) -> np.float32:
    """Oracle: the fp32 nearest to ``exact`` (ties to even), by comparing exact distances to the neighbours."""
    guess = np.float32(float(exact))  # within one ulp of the answer
    candidates = {guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))}
    finite = [c for c in candidates if np.isfinite(c)]
    best = min(finite, key=lambda c: (abs(Fraction(float(c)) - exact), int(np.array(c).view(np.uint32)) & 1))
    return np.float32(best)


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(finite32, finite32, finite32)
def test_fma32_is_a_single_rounding(a, b, c):
    """Property: fma32(a, b, c) is the fp32 nearest to the exact a·b + c (Fractions), when that is finite."""
    a, b, c = np.float32(a), np.float32(b), np.float32(c)
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    if abs(exact) >= Fraction(float(np.finfo(np.float32).max)):
        return  # overflow: not a rounding question
    got = fma32(a, b, c)
    if exact == 0:  # the sign of a zero follows IEEE 754 §6.3; fp64 computes it exactly (the product is exact)
        want = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    else:
        want = _round_to_fp32(exact)
    assert got.view(np.uint32) == np.array(want).view(np.uint32), (a, b, c, got, want)


def test_fma32_double_rounding_case():
    """Example built by hand: a·b + c = 1 + 2^-23 + 2^-24 - 2^-70 lies just below the midpoint between the fp32
    values 1 + 2^-23 and 1 + 2^-22, so the single rounding gives 1 + 2^-23; rounding through fp64 first lands on
    the midpoint and then (ties to even) on 1 + 2^-22."""
    a = np.float32(1 + 2 ** -23)
    b = np.float32(2 ** -24 - 2 ** -47)
    c = np.float32(1 + 2 ** -23)
    assert fma32(a, b, c) == np.float32(1 + 2 ** -23)
    assert np.float32(np.float64(a) * np.float64(b) + np.float64(c)) == np.float32(1 + 2 ** -22)


@given(st.floats(2.0 ** -60, 2.0 ** 60, width=32), st.integers(1, 2 ** 11), st.sampled_from([-1, 1]),
       st.booleans())
def test_fma32_near_midpoints(c, k, sign, negative):
    """Property, aimed at the hard cases: a = 1 + k·2^-23 and b = (ulp(c)/2)·(1 + sign·k·2^-23), so that
    a·b + c = c ± ulp(c)/2 · (1 - k²·2^-46) + ...: within 2^-70·|c| of the midpoint next to c, which fp64 cannot
    resolve. Rounding through fp64 then lands on the midpoint and ties to even: wrong for about half the cases.
    fma32 must still equal the exact rounding."""
    c = np.float32(-c if negative else c)
    a = np.float32(1 + k * 2.0 ** -23)
    b = np.float32(float(np.spacing(np.float32(abs(c)))) / 2 * (1 + sign * k * 2.0 ** -23))
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    assert fma32(a, b, c).view(np.uint32) == np.array(_round_to_fp32(exact)).view(np.uint32), (a, b, c)
