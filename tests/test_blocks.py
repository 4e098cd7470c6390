"""Fixed-seed integer blocks: reproducible, bounded so every partial sum is exact, clear errors."""
import hashlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringemu.blocks import EXACT_LIMITS, check_integer_blocks, integer_blocks, value_bound
from ringemu.dtypes import DTYPES
from strategies import dtype_names, ring_sizes, seeds

# sha256 of the little-endian bits of integer_blocks(8, 1000, 12345, dtype), recorded when the derivation in
# ringemu/blocks.py was fixed; a change here means every saved run and published trace changes too.
GOLDEN = {
    "int32": "9c4dab133f839393259ab4d6218071154bc68bea5a152ae1ed685f31890f33eb",
    "int64": "8b9e6107c916f240df6588bc54bb678eb8cc215d11ee4d80dfe14407b4347493",
    "fp16": "c2072aa21228b238af69cef2e8451288c09cc35a9245cd6679846f07e54b6eda",
    "bf16": "3a83f8aa71c9d17430b3dd173287fb917af64a20e4ae93933220846730baf5ef",
    "fp32": "c61c854092ed964e061fba143e3d10f88b3c9046014ca583e6b5e00837d1d64e",
    "fp64": "dea625ead3cfab854476a5aa851d29ad26df440a0ce1d9126c05bcf25ed60cd1",
}


def digest(blocks: np.ndarray) -> str:
    size = blocks.dtype.itemsize
    return hashlib.sha256(blocks.view(f"u{size}").astype(f"<u{size}").tobytes()).hexdigest()


@pytest.mark.parametrize("dtype", list(GOLDEN))
def test_golden_hash(dtype):
    assert digest(integer_blocks(8, 1000, 12345, dtype)) == GOLDEN[dtype]


def test_same_blocks_in_another_process():
    code = ("import hashlib; from ringemu.blocks import integer_blocks; b = integer_blocks(8, 1000, 12345, 'bf16');"
            "print(hashlib.sha256(b.view('u2').astype('<u2').tobytes()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert out.stdout.strip() == GOLDEN["bf16"]


def test_derivation_is_the_documented_one():
    # blocks.py's docstring: Generator(PCG64(seed)).integers(-B, B, size=(N, S), dtype=int64, endpoint=True)
    bound = (2 ** 31 - 1) // 3
    draws = np.random.Generator(np.random.PCG64(7)).integers(-bound, bound, size=(3, 5), dtype=np.int64,
                                                              endpoint=True)
    np.testing.assert_array_equal(integer_blocks(3, 5, 7, "int32"), draws.astype(np.int32))


@pytest.mark.parametrize("dtype, limit", [("fp16", 2048), ("bf16", 256), ("fp32", 2 ** 24), ("fp64", 2 ** 53),
                                          ("int32", 2 ** 31 - 1), ("int64", 2 ** 63 - 1)])
def test_exactness_limits(dtype, limit):
    # blocks.py's table of limits; for floats every integer up to the limit is representable and limit + 1 is not
    assert EXACT_LIMITS[dtype] == limit
    dt = DTYPES[dtype]
    if dt.kind == "f" or dtype == "bf16":
        assert int(np.array(limit, dtype=np.float64).astype(dt).astype(np.float64)) == limit
        assert int(np.array(limit + 1, dtype=np.float64).astype(dt).astype(np.float64)) != limit + 1
    else:
        assert np.iinfo(dt).max == limit


@given(n=ring_sizes(1, 256), numel=st.integers(0, 40), seed=seeds(), dtype=dtype_names())
def test_every_partial_sum_is_exact(n, numel, seed, dtype):
    blocks = integer_blocks(n, numel, seed, dtype)
    assert blocks.shape == (n, numel) and blocks.dtype == DTYPES[dtype]
    values = blocks.astype(np.float64) if blocks.dtype.kind != "i" else blocks.astype(object)
    bound = value_bound(n, dtype)
    assert np.all(np.abs(values) <= bound) and n * bound <= EXACT_LIMITS[dtype]
    assert np.all(np.floor(values.astype(np.float64)) == values.astype(np.float64))  # whole numbers
    # worst partial sum: the sum of magnitudes; every prefix sum in the dtype equals the exact prefix sum
    assert np.all(np.abs(values).sum(axis=0) <= EXACT_LIMITS[dtype])
    check_integer_blocks(blocks)


@given(n=ring_sizes(1, 64), seed=seeds(), dtype=dtype_names(["fp16", "bf16", "fp32"]))
def test_prefix_sums_in_dtype_equal_exact_sums(n, seed, dtype):
    blocks = integer_blocks(n, 30, seed, dtype)
    acc = blocks[0].copy()
    exact = blocks[0].astype(np.int64)
    for row in blocks[1:]:
        acc = (acc.astype(np.float32) + row.astype(np.float32)).astype(blocks.dtype)  # one wire hop
        exact = exact + row.astype(np.int64)
        np.testing.assert_array_equal(acc.astype(np.float64), exact.astype(np.float64))


def test_max_abs_limits_values():
    blocks = integer_blocks(8, 500, 0, "int32", max_abs=9)
    assert blocks.min() == -9 and blocks.max() == 9  # 500·8 draws from 19 values: both ends occur


@pytest.mark.parametrize("n, dtype", [(257, "bf16"), (2049, "fp16"), (2 ** 24 + 1, "fp32")])
def test_no_bound_for_too_many_ranks(n, dtype):
    with pytest.raises(ValueError, match=f"no integer blocks for n_ranks={n} in {dtype}"):
        integer_blocks(n, 1, 0, dtype)


def test_largest_ring_with_a_bound():
    assert value_bound(256, "bf16") == 1 and value_bound(2048, "fp16") == 1


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(n_ranks=0), ValueError, "n_ranks must be an integer >= 1"),
    (dict(n_ranks=2.0), TypeError, "n_ranks must be an integer"),
    (dict(numel=-1), ValueError, "numel must be an integer >= 0"),
    (dict(numel=1.5), TypeError, "numel must be an integer"),
    (dict(seed=-1), ValueError, "seed must be an integer >= 0"),
    (dict(seed="7"), TypeError, "seed must be an integer"),
    (dict(dtype="float8"), ValueError, "dtype must be one of int32 int64 fp16 bf16 fp32 fp64"),
    (dict(max_abs=10 ** 10), ValueError, "max_abs must be between 0 and"),
])
def test_bad_arguments(kwargs, error, match):
    args = dict(n_ranks=2, numel=3, seed=0, dtype="int32") | kwargs
    with pytest.raises(error, match=match):
        integer_blocks(**args)


@pytest.mark.parametrize("bad, match", [(np.nan, "is nan; integer blocks must be finite"),
                                        (np.inf, "is inf; integer blocks must be finite"),
                                        (0.5, "is 0.5; integer blocks must be whole numbers")])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "fp64"])
def test_check_rejects_non_integers(bad, match, dtype):
    blocks = integer_blocks(3, 4, 0, dtype)
    blocks[1, 2] = bad
    with pytest.raises(ValueError, match=f"rank 1 element 2 {match}"):
        check_integer_blocks(blocks)


@pytest.mark.parametrize("dtype, big", [("fp16", 1024), ("bf16", 128), ("fp32", 2 ** 23), ("int32", 2 ** 30),
                                        ("int64", 2 ** 62), ("fp64", 2 ** 52)])
def test_check_rejects_sums_that_may_not_be_exact(dtype, big):
    blocks = np.zeros((3, 2), dtype=DTYPES[dtype])
    blocks[:, 1] = big  # 3·big > limit: the partial sum 2·big or 3·big leaves the exact range
    with pytest.raises(ValueError, match="element 1 has sum over ranks of"):
        check_integer_blocks(blocks)
    blocks[:, 1] = -big
    with pytest.raises(ValueError, match="element 1"):
        check_integer_blocks(blocks)


def test_check_needs_a_2d_array():
    with pytest.raises(TypeError, match="2-D numpy array"):
        check_integer_blocks(np.zeros(3))
