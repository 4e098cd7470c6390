"""Fixed-seed integer test blocks whose sums are exact in every supported dtype.

:func:`integer_blocks` returns an (N, S) world of whole numbers, one row per rank. Each value is bounded by
:func:`value_bound` so that *every* partial sum over any subset of the N ranks is exactly representable in the
dtype. Then the result of a ring collective does not depend on the order of addition (nor on the per-hop
rounding of the 16-bit wire types), and it must equal ``numpy.sum`` exactly — an independent oracle.

Exactness limits L (largest magnitude up to which every integer is representable, IEEE 754-2008 §3.3):

=====  ===============  =============================================
dtype  L                why
=====  ===============  =============================================
fp16   2048 = 2^11      11-bit significand (10 stored + 1 implicit)
bf16   256 = 2^8        8-bit significand (7 stored + 1 implicit)
fp32   2^24             24-bit significand
fp64   2^53             53-bit significand
int32  2^31 - 1         no overflow
int64  2^63 - 1         no overflow
=====  ===============  =============================================

With |value| ≤ B = floor(L / N), any sum of at most N values has magnitude ≤ N·B ≤ L. If B < 1 (e.g. bf16 with
N > 256) no such blocks exist and a ValueError says so.

Seed derivation (documented so that other tools can reproduce the blocks): the generator is
``numpy.random.Generator(numpy.random.PCG64(seed))`` — PCG64 seeded through ``SeedSequence(seed)`` — and the
blocks are one draw ``generator.integers(-B, B, size=(N, S), dtype=int64, endpoint=True)`` in row-major order,
converted exactly to the dtype. PCG64's output is specified bit for bit and does not depend on the platform;
a golden-hash test pins the result.
"""
from __future__ import annotations


import numpy as np

from .dtypes import dtype_name, resolve_dtype
from .checks import check_budget, check_int, check_n_ranks, check_numel

__all__ = ["EXACT_LIMITS", "MAX_BLOCK_ELEMENTS", "value_bound", "integer_blocks", "check_integer_blocks"]

# Largest L such that every integer in [-L, L] is exactly representable (and no integer op overflows).
EXACT_LIMITS = {
    "fp16": 2 ** 11,  # 11-bit significand
    "bf16": 2 ** 8,  # 8-bit significand
    "fp32": 2 ** 24,  # 24-bit significand
    "fp64": 2 ** 53,  # 53-bit significand
    "int32": 2 ** 31 - 1,  # np.iinfo(np.int32).max
    "int64": 2 ** 63 - 1,  # np.iinfo(np.int64).max
}


def value_bound(n_ranks: int, dtype: object) -> int:
    """B = floor(L / N): the largest |value| for which every partial sum over N ranks is exact in ``dtype``.

    Raises ValueError if B < 1, i.e. no nonzero block of this dtype can be summed exactly over N ranks.
    """
    n = check_n_ranks(n_ranks)
    name = dtype_name(dtype)
    bound = EXACT_LIMITS[name] // n
    if bound < 1:
        raise ValueError(f"no integer blocks for n_ranks={n} in {name}: sums of {n} values stay exact only up to "
                         f"{EXACT_LIMITS[name]}; use at most {EXACT_LIMITS[name]} ranks or a wider dtype")
    return bound


MAX_BLOCK_ELEMENTS = 2 ** 28  # n_ranks·numel of one draw (`ringemu run`'s bound): 2 GiB of int64 draws at most


def integer_blocks(n_ranks: int, numel: int, seed: int, dtype: object = "int32", *,
                   max_abs: int | None = None) -> np.ndarray:
    """An (n_ranks, numel) array of whole numbers in ``dtype``, reproducible from ``seed`` on any machine.

    Values lie in [-B, B] with B = :func:`value_bound` (or ``max_abs`` if given, which must be between 0 and B;
    small values make printed traces readable). Every partial sum over the ranks is exact in ``dtype``.
    """
    n = check_n_ranks(n_ranks)
    s = check_numel(numel)
    check_budget(n * s, MAX_BLOCK_ELEMENTS, "n_ranks·numel of integer blocks",
                 "the blocks are drawn as int64 first: 8 B per element")
    seed = check_int(seed, "seed", minimum=0)
    dt = resolve_dtype(dtype)
    bound = value_bound(n, dt)
    if max_abs is not None:
        max_abs = check_int(max_abs, "max_abs")
        if not 0 <= max_abs <= bound:
            raise ValueError(f"max_abs must be between 0 and {bound} for n_ranks={n} in {dtype_name(dt)}; "
                             f"got {max_abs}")
        bound = max_abs
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(-bound, bound, size=(n, s), dtype=np.int64, endpoint=True)
    return draws.astype(dt)  # exact: |value| <= B <= L


def check_integer_blocks(world: np.ndarray, name: str = "world") -> None:
    """Raise ValueError unless ``world`` (N, S) holds whole numbers whose every partial sum over ranks is exact.

    Checks, with the first offending (rank, element) in the message: no NaN or infinity, no fractional value,
    and sum over ranks of |value| ≤ L of the dtype (which bounds every partial sum in any order).
    """
    if not isinstance(world, np.ndarray) or world.ndim != 2:
        raise TypeError(f"{name} must be a 2-D numpy array (n_ranks, numel); got {type(world).__name__} of shape "
                        f"{getattr(world, 'shape', None)}")
    dt_name = dtype_name(world.dtype)
    limit = EXACT_LIMITS[dt_name]
    if world.dtype.kind == "f" or dt_name == "bf16":
        wide = world.astype(np.float64)  # exact for every supported float
        bad = ~np.isfinite(wide)
        if bad.any():
            r, j = np.argwhere(bad)[0]
            raise ValueError(f"{name}: rank {r} element {j} is {float(wide[r, j])}; integer blocks must be finite")
        frac = wide != np.floor(wide)
        if frac.any():
            r, j = np.argwhere(frac)[0]
            raise ValueError(f"{name}: rank {r} element {j} is {float(wide[r, j])!r}; "
                             f"integer blocks must be whole numbers")
        magnitude = np.abs(wide).sum(axis=0)  # exact: every term and partial sum is an integer < 2^53 · N
        over = np.flatnonzero(magnitude > limit)
        if over.size:  # float64 may round above 2^53; recheck exactly before reporting
            over = [j for j in over if _exact_magnitude(world[:, j]) > limit]
    else:
        if world.dtype.itemsize <= 4:
            magnitude = np.abs(world.astype(np.int64)).sum(axis=0)  # exact: N · 2^31 < 2^63 for N < 2^32
            over = np.flatnonzero(magnitude > limit)
        else:
            approx = np.abs(world.astype(np.float64)).sum(axis=0)  # screen; exact Python ints below
            suspect = np.flatnonzero(approx >= 2.0 ** 62)
            over = [j for j in suspect if _exact_magnitude(world[:, j]) > limit]
    if len(over):
        j = int(over[0])
        raise ValueError(f"{name}: element {j} has sum over ranks of |value| = {_exact_magnitude(world[:, j])}, "
                         f"above {limit}, so a partial sum may not be exact in {dt_name}")


def _exact_magnitude(column: np.ndarray) -> int:
    """Sum of |value| over one column, in Python integers (the column holds whole numbers)."""
    values = column.astype(np.float64) if column.dtype.kind != "i" else column
    return sum(abs(int(v)) for v in values.tolist())
