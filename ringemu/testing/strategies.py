"""Hypothesis strategies for collectives: ring sizes, awkward buffer sizes, dtypes, algorithms and worlds.

They need hypothesis (``pip install 'ringemu[test]'``), imported when a strategy is first built:

* :func:`ring_sizes` — numbers of ranks N, shrinking towards 1;
* :func:`buffer_sizes` — element counts S including the awkward ones: 0, 1, S < N, S not a multiple of N, primes;
* :func:`dtype_names` — ``int32 int64 fp16 bf16 fp32 fp64``;
* :func:`algorithm_names` — the registry's algorithms (:mod:`ringemu.algorithms`), shrinking towards the ring;
  optionally those of one collective that support N ranks;
* :func:`integer_worlds` — fixed-seed (N, S) integer blocks of one or every dtype, exact in any summation order;
* :func:`float_worlds` — fixed-seed (N, S) non-integer floats, where the order of addition shows in the bits.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import algorithms
from ..blocks import integer_blocks
from ..dtypes import DTYPES, resolve_dtype

__all__ = ["AWKWARD_SIZES", "FLOAT_DTYPES", "ring_sizes", "buffer_sizes", "dtype_names", "algorithm_names",
           "seeds", "integer_worlds", "float_worlds"]

AWKWARD_SIZES = (0, 1, 2, 3, 5, 7, 11, 13, 17, 31, 61, 127)  # 0, 1 and primes: never a multiple of N > 1
FLOAT_DTYPES = ("fp16", "bf16", "fp32", "fp64")


def _st():
    try:
        from hypothesis import strategies
    except ImportError as exc:
        raise ImportError("ringemu.testing's strategies need hypothesis: pip install 'ringemu[test]'") from exc
    return strategies


def ring_sizes(min_value: int = 1, max_value: int = 64):
    """Numbers of ranks N in [min_value, max_value]; shrinks towards min_value."""
    if not 1 <= min_value <= max_value:
        raise ValueError(f"need 1 <= min_value <= max_value; got {min_value}, {max_value}")
    return _st().integers(min_value, max_value)


def buffer_sizes(n_ranks: int | None = None, max_value: int = 200):
    """Element counts S in [0, max_value], weighted towards awkward sizes: 0, 1, primes and, if ``n_ranks`` is
    given, N-1, N, N+1, 2N-1 and 2N+1 (sizes near N may exceed max_value; negative ones are dropped)."""
    st = _st()
    special = [s for s in AWKWARD_SIZES if s <= max_value]
    if n_ranks is not None:
        special += [s for s in (n_ranks - 1, n_ranks, n_ranks + 1, 2 * n_ranks - 1, 2 * n_ranks + 1) if s >= 0]
    return st.one_of(st.sampled_from(sorted(set(special))), st.integers(0, max_value))


def dtype_names(names: Sequence[str] = tuple(DTYPES)):
    """Dtype names, shrinking towards the first (``int32``)."""
    for name in names:
        resolve_dtype(name)
    return _st().sampled_from(list(names))


def algorithm_names(collective: str | None = None, n_ranks: int | None = None):
    """Algorithm names of the registry (for ``collective``; without one, the names that every collective has for
    any buffer length, which a Communicator runs), shrinking towards the first (the ring); with ``n_ranks``, only
    those that support that many ranks."""
    everywhere = [a for a in algorithms.names(collective)
                  if collective or all((c, a) in algorithms.REGISTRY and not algorithms.REGISTRY[(c, a)].sized
                                       for c in algorithms.COLLECTIVES)]
    names = [a for a in everywhere
             if n_ranks is None or all(algorithms.algorithm(c, a).unsupported(n_ranks) is None
                                       for c in ((collective,) if collective else algorithms.COLLECTIVES))]
    if not names:
        raise ValueError(f"no algorithm of {collective or 'any collective'} supports n_ranks={n_ranks}")
    return _st().sampled_from(names)


def seeds():
    """Seeds for :func:`ringemu.blocks.integer_blocks` (32-bit, shrinking towards 0)."""
    return _st().integers(0, 2 ** 32 - 1)


def integer_worlds(n_ranks=None, numel=None, dtype=None, max_ranks: int = 64, max_numel: int = 200):
    """(N, S) fixed-seed integer blocks (:func:`~ringemu.blocks.integer_blocks`): every sum is exact.

    ``n_ranks``, ``numel`` and ``dtype`` may be fixed values or strategies; by default N comes from
    :func:`ring_sizes`, S from :func:`buffer_sizes` for that N, the dtype from :func:`dtype_names`.
    """
    st = _st()

    @st.composite
    def build(draw):
        n = draw(_as_strategy(n_ranks, ring_sizes(1, max_ranks)))
        s = draw(_as_strategy(numel, buffer_sizes(n, max_numel)))
        dt = draw(_as_strategy(dtype, dtype_names()))
        return integer_blocks(n, s, draw(seeds()), dt)

    return build()


def float_worlds(n_ranks=None, numel=None, dtype=None, max_ranks: int = 64, max_numel: int = 200):
    """(N, S) fixed-seed standard-normal floats rounded to ``dtype`` (fp16 bf16 fp32 fp64): sums are not exact,
    so any change in the order or precision of the additions changes the bits."""
    st = _st()

    @st.composite
    def build(draw):
        n = draw(_as_strategy(n_ranks, ring_sizes(1, max_ranks)))
        s = draw(_as_strategy(numel, buffer_sizes(n, max_numel)))
        dt = resolve_dtype(draw(_as_strategy(dtype, dtype_names(FLOAT_DTYPES))))
        if dt.kind == "i":
            raise ValueError(f"float_worlds needs a float dtype ({' '.join(FLOAT_DTYPES)}); got {dt}")
        rng = np.random.Generator(np.random.PCG64(draw(seeds())))
        return rng.standard_normal((n, s)).astype(dt)

    return build()


def _as_strategy(value, default):
    from hypothesis.strategies import SearchStrategy, just
    if value is None:
        return default
    return value if isinstance(value, SearchStrategy) else just(value)
