"""The oracle: check a user's collective against ringemu's bit for bit, and its traffic against the ledger.

:func:`assert_matches_ringemu` runs your reduce-scatter / all-gather / all-reduce on a world and compares every
rank's result with ringemu's (by the algorithm you name, default the ring) bit for bit, and optionally the traffic
you report per rank with the :class:`~ringemu.ledger.CommLedger`. A mismatch raises ``AssertionError`` naming the
first differing rank and element with expected and actual values (and bits). :func:`run_op` runs any op by any
algorithm of the registry.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import collectives
from ..algorithms import COLLECTIVES, op_names, resolve_op
from ..checks import is_integer
from ..layout import ChunkLayout
from ..ledger import CommLedger

__all__ = ["OPS", "shards_of", "run_op", "assert_matches_ringemu", "compare_array"]

OPS = op_names()


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
    ``faults`` are passed on (:mod:`ringemu.faults.plan`)."""
    collective, name = resolve_op(op, algorithm)
    run = getattr(collectives, collective.replace("-", "_"))  # reduce_scatter, all_gather, all_reduce
    data = shards_of(world) if collective == "all-gather" and isinstance(world, np.ndarray) else world
    named = {} if label is None else {"label": label}
    return run(data, ledger=ledger, mode=mode, algorithm=name, ranks_per_node=ranks_per_node, faults=faults, **named)


def assert_matches_ringemu(user_fn: Callable, op: str, world: np.ndarray, *, check_traffic: str | None = None,
                           count_padding: bool = True, algorithm: str | None = None, orders=None):
    """Check ``user_fn`` against ringemu's collective ``op`` on ``world`` (N, S); return ringemu's result.

    ``op`` is an op name of :func:`ringemu.algorithms.op_names` and ``algorithm`` one of the registry's names for
    it (None: the ring, or the op's own). ``user_fn`` gets what
    :mod:`ringemu.collectives` gets — a copy of the world, or for all-gather the list :func:`shards_of` (world)
    — and must return the same form: a list of N chunks for reduce-scatter, an (N, S) array otherwise.
    Results must match bit for bit (dtype and shape included; NaN payloads and signed zeros count).

    With ``check_traffic="elements"`` or ``"bytes"``, ``user_fn`` returns ``(result, sent)``, where ``sent[r]``
    is what rank r sent; it must equal the ledger's count (padding included unless ``count_padding=False``).

    ``orders`` (a :class:`~ringemu.testing.local_registry.Orders`) makes the orders declared in it valid
    ``algorithm`` names: the expected results are the declared order's, and its traffic model (bytes, payload
    only) the expected traffic.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    if orders is not None and algorithm is not None and (_declared(orders, op, algorithm)):
        return _matches_declared(user_fn, op, world, orders, algorithm, check_traffic)
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


def _declared(orders, op: str, name: str) -> bool:
    return op in COLLECTIVES and name in orders.names(op) and \
        name not in orders.__class__(builtin=True).names(op)


def _matches_declared(user_fn, op, world, orders, name, check_traffic):
    world = collectives.as_world(world)
    expected = orders.results(op, name, world)
    got = user_fn(shards_of(world) if op == "all-gather" else world.copy())
    if check_traffic is not None:
        got, sent = got
    if op == "reduce-scatter":
        _compare_chunks(f"{op} ({name})", expected, got)
    else:
        _compare_rows(f"{op} ({name})", np.stack(expected), got, world.shape[1])
    if check_traffic == "bytes":
        want = orders.sent_bytes(op, name, *world.shape, world.dtype, "payload")
        differ = [r for r in range(len(want)) if int(sent[r]) != want[r]]
        if differ:
            raise AssertionError(f"{op} ({name}): " + "; ".join(
                f"rank {r}: you report {int(sent[r]):,} bytes sent, the declared traffic model gives {want[r]:,}"
                for r in differ))
    return expected


# -- internals -------------------------------------------------------------------------------------------------
def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(f"u{values.dtype.itemsize}")


def _show(value) -> str:
    return repr(int(value)) if np.asarray(value).dtype.kind in "iu" else repr(float(value))


def compare_array(what: str, expected: np.ndarray, got, where: Callable[[int], str]) -> None:
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
        compare_array(f"{op}: rank {r}", e, g, lambda j, r=r: f" (buffer element {layout.start(r) + j})")


def _compare_rows(op: str, expected: np.ndarray, got, numel: int) -> None:
    n = expected.shape[0]
    if isinstance(got, Sequence) and not isinstance(got, np.ndarray) and len(got) == n and \
            all(isinstance(g, np.ndarray) for g in got):
        got = np.stack(got) if n else got
    if not isinstance(got, np.ndarray) or got.shape != expected.shape:
        compare_array(f"{op}: result", expected, got, lambda j: "")
    layout = ChunkLayout(numel, n)
    for r in range(n):
        compare_array(f"{op}: rank {r}", expected[r], got[r],
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
    differ = [r for r, (w, g) in enumerate(zip(want, got)) if w != g]
    if differ:
        kind = "padding included" if count_padding else "payload only"
        raise AssertionError(f"{op}: {len(differ)} of {len(want)} ranks differ ({kind}; {ledger.records[0].dtype} "
                             f"elements of {ledger.records[0].itemsize} B): " + "; ".join(
                                 f"rank {r}: you report {got[r]:,} {unit} sent, ringemu's ledger counts {want[r]:,}"
                                 for r in differ))
