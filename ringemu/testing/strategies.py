"""Hypothesis strategies for collectives: ring sizes, awkward buffer sizes, dtypes, algorithms and worlds.

They need hypothesis (``pip install 'ringemu[test]'``), imported when a strategy is first built:

* :func:`ring_sizes` — numbers of ranks N, shrinking towards 1;
* :func:`buffer_sizes` — element counts S including the awkward ones: 0, 1, S < N, S not a multiple of N, primes;
* :func:`dtype_names` — ``int32 int64 fp16 bf16 fp32 fp64``;
* :func:`algorithm_names` — the registry's algorithms (:mod:`ringemu.algorithms`), shrinking towards the ring;
  optionally those of one collective that support N ranks;
* :func:`integer_worlds` — fixed-seed (N, S) integer blocks of one or every dtype, exact in any summation order;
* :func:`float_worlds` — fixed-seed (N, S) non-integer floats, where the order of addition shows in the bits;
* :func:`independent_worlds` — several worlds of one shape with distinct seeds, so that they never shrink to the
  same data (two ``float_worlds`` of one example both shrink to seed 0, which hides bugs that swap or alias
  inputs);
* :func:`uneven_ring_sizes` — N that leaves a remainder for the sizes drawn with it (3, 5, 6, 7, ...);
* :func:`shard_layouts` — how a flat buffer of S elements is cut into N shards: ``ChunkLayout(S, N)`` (unpadded;
  trailing shards may be empty), ``np.array_split`` (the first S mod N one longer) or gloo's segments;
* :func:`sharding_jobs` — ZeRO/FSDP-style jobs: N, parameter units of awkward sizes, a dtype, steps and a seed.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import algorithms
from ..blocks import integer_blocks
from ..dtypes import DTYPES, resolve_dtype

__all__ = ["AWKWARD_SIZES", "FLOAT_DTYPES", "LAYOUT_KINDS", "ring_sizes", "buffer_sizes", "dtype_names",
           "algorithm_names", "seeds", "integer_worlds", "float_worlds", "independent_worlds", "uneven_ring_sizes",
           "shard_layouts", "sharding_jobs"]

LAYOUT_KINDS = ("chunk-layout", "array-split", "gloo")

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
    """Algorithm names of the registry (for ``collective``, or any), shrinking towards the first (the ring);
    with ``n_ranks``, only those that support that many ranks. Without ``collective``: the names a world's
    Communicators run (every collective, any buffer; engine orders, cut per buffer, only for one collective)."""
    names = [a for a in algorithms.names(collective)
             if (collective or all((c, a) in algorithms.REGISTRY and not algorithms.REGISTRY[(c, a)].sized
                                   for c in algorithms.COLLECTIVES))
             and (n_ranks is None or all(algorithms.algorithm(c, a).unsupported(n_ranks) is None
                                         for c in ((collective,) if collective else algorithms.COLLECTIVES)
                                         if (c, a) in algorithms.REGISTRY))]
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


def float_worlds(n_ranks=None, numel=None, dtype=None, max_ranks: int = 64, max_numel: int = 200, seed=None):
    """(N, S) fixed-seed standard-normal floats rounded to ``dtype`` (fp16 bf16 fp32 fp64): sums are not exact,
    so any change in the order or precision of the additions changes the bits. ``seed`` (an int or a strategy;
    default :func:`seeds`) picks the data; for several worlds in one example use :func:`independent_worlds`."""
    st = _st()

    @st.composite
    def build(draw):
        n = draw(_as_strategy(n_ranks, ring_sizes(1, max_ranks)))
        s = draw(_as_strategy(numel, buffer_sizes(n, max_numel)))
        dt = resolve_dtype(draw(_as_strategy(dtype, dtype_names(FLOAT_DTYPES))))
        if dt.kind == "i":
            raise ValueError(f"float_worlds needs a float dtype ({' '.join(FLOAT_DTYPES)}); got {dt}")
        rng = np.random.Generator(np.random.PCG64(draw(_as_strategy(seed, seeds()))))
        return rng.standard_normal((n, s)).astype(dt)

    return build()


def independent_worlds(count: int, kind: str = "float", n_ranks=None, numel=None, dtype=None, max_ranks: int = 64,
                       max_numel: int = 200, unique: bool = True):
    """A tuple of ``count`` (N, S) worlds of one shape and dtype (``kind`` "float" or "integer"), each from its own
    seed; with ``unique=True`` (default) the seeds are distinct, so no two worlds hold the same data even after
    shrinking (N >= 1, S >= 1)."""
    st = _st()
    if kind not in ("float", "integer"):
        raise ValueError(f"kind must be 'float' or 'integer'; got {kind!r}")
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an int >= 1; got {count!r}")

    @st.composite
    def build(draw):
        n = draw(_as_strategy(n_ranks, ring_sizes(1, max_ranks)))
        s = draw(_as_strategy(numel, buffer_sizes(n, max_numel)))
        dt = draw(_as_strategy(dtype, dtype_names(FLOAT_DTYPES if kind == "float" else tuple(DTYPES))))
        keys = draw(st.lists(seeds(), min_size=count, max_size=count, unique=unique))
        if kind == "integer":
            return tuple(integer_blocks(n, s, k, dt) for k in keys)
        return tuple(np.random.Generator(np.random.PCG64(k)).standard_normal((n, s)).astype(resolve_dtype(dt))
                     for k in keys)

    return build()


def uneven_ring_sizes(min_value: int = 3, max_value: int = 64):
    """N in [min_value, max_value] that is not a power of two (3, 5, 6, 7, 9, ...): odd rings, trees with a
    ragged last level, halving-doubling refused."""
    return ring_sizes(min_value, max_value).filter(lambda n: n & (n - 1) != 0)


def shard_layouts(numel=None, n_ranks=None, kinds: Sequence[str] = LAYOUT_KINDS, max_ranks: int = 16,
                  max_numel: int = 200):
    """(kind, [(start, stop) per rank]) for a flat buffer of S elements on N ranks: ``chunk-layout`` is
    ``ChunkLayout(S, N)`` (shards of ceil(S/N), trailing ones short or empty), ``array-split`` is
    ``np.array_split`` (the first S mod N shards one longer), ``gloo`` gloo's per-rank chunks of its ring
    all-reduce (:func:`ringemu.algorithms.gloo.gloo_segments`, fp32: P consecutive segments per rank)."""
    from ..algorithms.gloo import gloo_segments
    from ..layout import ChunkLayout

    st = _st()
    for k in kinds:
        if k not in LAYOUT_KINDS:
            raise ValueError(f"kinds must be among {', '.join(LAYOUT_KINDS)}; got {k!r}")

    @st.composite
    def build(draw):
        n = draw(_as_strategy(n_ranks, ring_sizes(1, max_ranks)))
        s = draw(_as_strategy(numel, buffer_sizes(n, max_numel)))
        kind = draw(st.sampled_from(list(kinds)))
        if kind == "chunk-layout":
            layout = ChunkLayout(s, n)
            bounds = [(layout.payload_slice(r).start, layout.payload_slice(r).stop) for r in range(n)]
        elif kind == "array-split":
            edges = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(s), n)])
            bounds = [(int(edges[r]), int(edges[r + 1])) for r in range(n)]
        else:
            _, per_rank, segment_bytes = gloo_segments(n, s, 4)
            chunk = per_rank * segment_bytes // 4  # elements per rank's run of segments
            bounds = [(min(s, r * chunk), min(s, (r + 1) * chunk)) for r in range(n)]
        return kind, bounds

    return build()


def sharding_jobs(max_ranks: int = 8, max_units: int = 4, max_unit_numel: int = 40, max_steps: int = 3):
    """ZeRO/FSDP-style jobs as dicts: ``n_ranks``, ``units`` (parameter counts of the model's units: awkward sizes,
    none a multiple of N by design of :func:`buffer_sizes`), ``numel`` (their sum), ``dtype`` (fp16, bf16 or fp32
    for the 16-bit weights and gradients), ``steps`` and ``seed``."""
    st = _st()

    @st.composite
    def build(draw):
        n = draw(ring_sizes(1, max_ranks))
        units = draw(st.lists(buffer_sizes(n, max_unit_numel).filter(lambda v: v > 0), min_size=1,
                              max_size=max_units))
        return {"n_ranks": n, "units": units, "numel": sum(units),
                "dtype": draw(st.sampled_from(["bf16", "fp16", "fp32"])),
                "steps": draw(st.integers(1, max_steps)), "seed": draw(seeds())}

    return build()


def _as_strategy(value, default):
    from hypothesis.strategies import SearchStrategy, just
    if value is None:
        return default
    return value if isinstance(value, SearchStrategy) else just(value)
