"""Tools for your own tests: hypothesis strategies and an oracle that checks a collective against ringemu.

Strategies (they need hypothesis, installed by ``pip install ringemu[test]``; it is imported when a strategy is
first built, so :func:`assert_matches_ringemu` works without it):

* :func:`ring_sizes` — numbers of ranks N, shrinking towards 1;
* :func:`buffer_sizes` — element counts S including the awkward ones: 0, 1, S < N, S not a multiple of N, primes;
* :func:`dtype_names` — ``int32 int64 fp16 bf16 fp32 fp64``;
* :func:`algorithm_names` — the registry's algorithms (:mod:`ringemu.algorithms`), shrinking towards the ring;
  optionally those of one collective that support N ranks;
* :func:`integer_worlds` — fixed-seed (N, S) integer blocks of one or every dtype, exact in any summation order;
* :func:`float_worlds` — fixed-seed (N, S) non-integer floats, where the order of addition shows in the bits.

Oracle: :func:`assert_matches_ringemu` runs your reduce-scatter / all-gather / all-reduce on a world and
compares every rank's result with ringemu's (by the algorithm you name, default the ring) bit for bit, and
optionally the traffic you report per rank with the :class:`~ringemu.ledger.CommLedger`. A mismatch raises
``AssertionError`` naming the first differing rank and element with expected and actual values (and bits).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import algorithms, collectives
from .algorithms import op_names, resolve_op
from .blocks import integer_blocks
from .checks import is_integer
from .dtypes import DTYPES, resolve_dtype
from .layout import ChunkLayout
from .ledger import CommLedger

__all__ = ["AWKWARD_SIZES", "OPS", "ring_sizes", "buffer_sizes", "dtype_names", "algorithm_names", "seeds",
           "integer_worlds", "float_worlds", "shards_of", "run_op", "assert_matches_ringemu"]

AWKWARD_SIZES = (0, 1, 2, 3, 5, 7, 11, 13, 17, 31, 61, 127)  # 0, 1 and primes: never a multiple of N > 1
OPS = op_names()
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
    with ``n_ranks``, only those that support that many ranks."""
    names = [a for a in algorithms.names(collective)
             if n_ranks is None or all(algorithms.algorithm(c, a).unsupported(n_ranks) is None
                                       for c in ((collective,) if collective else algorithms.COLLECTIVES)
                                       if (c, a) in algorithms.REGISTRY)]
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


def shards_of(world: np.ndarray) -> list[np.ndarray]:
    """All-gather input from a world: rank r's shard is chunk r of its row (``ChunkLayout(S, N)`` payload)."""
    n, numel = world.shape
    layout = ChunkLayout(numel, n)
    return [world[r, layout.payload_slice(r)].copy() for r in range(n)]


def run_op(op: str, world, *, algorithm: str | None = None, ledger: CommLedger | None = None, mode: str = "fused",
           ranks_per_node: int | None = None, label: str | None = None, faults=None):
    """Run the collective named ``op`` (:func:`ringemu.algorithms.op_names`) by ``algorithm`` (None: the op's
    default, see :func:`ringemu.algorithms.resolve_op`) on ``world`` (N, S): all-gather gathers
    :func:`shards_of` (world) (or counts a VirtualBuffer world), the others reduce the world. Returns
    :mod:`ringemu.collectives`' result; ``label`` (default the collective's own) names the call in the ledger;
    ``faults`` are passed on (:mod:`ringemu.faults`)."""
    collective, name = resolve_op(op, algorithm)
    run = getattr(collectives, collective.replace("-", "_"))  # reduce_scatter, all_gather, all_reduce
    data = shards_of(world) if collective == "all-gather" and isinstance(world, np.ndarray) else world
    named = {} if label is None else {"label": label}
    return run(data, ledger=ledger, mode=mode, algorithm=name, ranks_per_node=ranks_per_node, faults=faults, **named)


def assert_matches_ringemu(user_fn: Callable, op: str, world: np.ndarray, *, check_traffic: str | None = None,
                           count_padding: bool = True, algorithm: str | None = None):
    """Check ``user_fn`` against ringemu's collective ``op`` on ``world`` (N, S); return ringemu's result.

    ``op`` is an op name of :func:`ringemu.algorithms.op_names` and ``algorithm`` one of the registry's names for
    it (None: the ring, or the op's own). ``user_fn`` gets what
    :mod:`ringemu.collectives` gets — a copy of the world, or for all-gather the list :func:`shards_of` (world)
    — and must return the same form: a list of N chunks for reduce-scatter, an (N, S) array otherwise.
    Results must match bit for bit (dtype and shape included; NaN payloads and signed zeros count).

    With ``check_traffic="elements"`` or ``"bytes"``, ``user_fn`` returns ``(result, sent)``, where ``sent[r]``
    is what rank r sent; it must equal the ledger's count (padding included unless ``count_padding=False``).
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
    collective, algorithm = resolve_op(op, algorithm)
    if check_traffic not in (None, "elements", "bytes"):
        raise ValueError(f"check_traffic must be None, 'elements' or 'bytes'; got {check_traffic!r}")
    world = collectives.as_world(world)
    if not isinstance(world, np.ndarray):
        raise TypeError("assert_matches_ringemu needs real data, not a VirtualBuffer")
    ledger = CommLedger()
    expected = run_op(collective, world, algorithm=algorithm, ledger=ledger)
    got = user_fn(shards_of(world) if collective == "all-gather" else world.copy())
    if check_traffic is not None:
        if not (isinstance(got, tuple) and len(got) == 2):
            raise AssertionError(f"{op}: with check_traffic={check_traffic!r} the function must return "
                                 f"(result, sent per rank); got {type(got).__name__}")
        got, sent = got
    if collective == "reduce-scatter":
        _compare_chunks(op, expected, got)
    else:
        _compare_rows(op, expected, got, world.shape[1])
    if check_traffic is not None:
        _compare_traffic(op, ledger, sent, check_traffic, count_padding)
    return expected


# -- internals -------------------------------------------------------------------------------------------------
def _as_strategy(value, default):
    from hypothesis.strategies import SearchStrategy, just
    if value is None:
        return default
    return value if isinstance(value, SearchStrategy) else just(value)


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(f"u{values.dtype.itemsize}")


def _show(value) -> str:
    return repr(int(value)) if np.asarray(value).dtype.kind in "iu" else repr(float(value))


def _compare_array(what: str, expected: np.ndarray, got, where: Callable[[int], str]) -> None:
    if not isinstance(got, np.ndarray):
        raise AssertionError(f"{what}: expected a numpy array of {expected.dtype}, got {type(got).__name__}")
    if got.dtype != expected.dtype:
        raise AssertionError(f"{what}: expected dtype {expected.dtype}, got {got.dtype}")
    if got.shape != expected.shape:
        raise AssertionError(f"{what}: expected shape {expected.shape}, got {got.shape}")
    want_bits = _bits(np.ascontiguousarray(expected)).ravel()
    got_bits = _bits(np.ascontiguousarray(got)).ravel()
    differ = np.flatnonzero(want_bits != got_bits)
    if differ.size:
        j = int(differ[0])
        hexw = 2 * expected.dtype.itemsize  # hex digits of one element's bits
        raise AssertionError(
            f"{what} element {j}{where(j)}: expected {_show(expected.ravel()[j])} "
            f"(bits 0x{int(want_bits[j]):0{hexw}x}), got {_show(got.ravel()[j])} (bits 0x{int(got_bits[j]):0{hexw}x}); "
            f"{differ.size} of {expected.size} elements differ")


def _compare_chunks(op: str, expected: list, got) -> None:
    n = len(expected)
    if isinstance(got, np.ndarray) and got.ndim == 2:
        got = list(got)
    if not isinstance(got, Sequence) or len(got) != n:
        raise AssertionError(f"{op}: expected a list of {n} per-rank chunks, got {type(got).__name__}"
                             + (f" of length {len(got)}" if hasattr(got, "__len__") else ""))
    numel = sum(e.size for e in expected)
    layout = ChunkLayout(numel, n)
    for r, (e, g) in enumerate(zip(expected, got)):
        _compare_array(f"{op}: rank {r}", e, g, lambda j, r=r: f" (buffer element {layout.start(r) + j})")


def _compare_rows(op: str, expected: np.ndarray, got, numel: int) -> None:
    n = expected.shape[0]
    if isinstance(got, Sequence) and not isinstance(got, np.ndarray) and len(got) == n and \
            all(isinstance(g, np.ndarray) for g in got):
        got = np.stack(got) if n else got
    if not isinstance(got, np.ndarray) or got.shape != expected.shape:
        _compare_array(f"{op}: result", expected, got, lambda j: "")
    layout = ChunkLayout(numel, n)
    for r in range(n):
        _compare_array(f"{op}: rank {r}", expected[r], got[r],
                       lambda j: f" (chunk {j // layout.chunk_size})" if layout.chunk_size else "")


def _compare_traffic(op: str, ledger: CommLedger, sent, unit: str, count_padding: bool) -> None:
    per_rank = ledger.per_rank()
    want = [getattr(t.sent, unit) - (0 if count_padding else getattr(t.sent, f"padding_{unit}")) for t in per_rank]
    try:
        got = list(sent)
    except TypeError:
        got = None
    if got is None or not all(is_integer(x) for x in got):
        raise AssertionError(f"{op}: sent must be a sequence of {len(want)} integers, one per rank "
                             f"(counts are exact); got {sent!r}")
    got = [int(x) for x in got]
    if len(got) != len(want):
        raise AssertionError(f"{op}: sent has {len(got)} entries; expected one per rank ({len(want)})")
    for r, (w, g) in enumerate(zip(want, got)):
        if w != g:
            kind = "padding included" if count_padding else "payload only"
            raise AssertionError(f"{op}: rank {r} sent {g} {unit}; the ledger counts {w} ({kind}; "
                                 f"{ledger.records[0].dtype} elements of "
                                 f"{ledger.records[0].itemsize} B)")
