"""Conformance of a user's Communicator: values, order of addition and bytes, over hypothesis-drawn worlds.

:func:`check_communicator` takes ``make_world(n_ranks)``: anything whose ``run(fn, *args)`` calls
``fn(comm, *args)`` once per rank with that rank's Communicator (:class:`~ringemu.worlds.base.Communicator`:
``reduce_scatter``, ``all_gather``, ``all_reduce`` on flat numpy buffers) and returns the per-rank results in rank
order — :class:`~ringemu.worlds.EmulatedWorld`, :class:`~ringemu.worlds.torch_launch.TorchWorld`, or a few
lines around an mpi4py communicator or your own class (``docs/testing.md``). Hypothesis draws awkward examples:
N (1 … ``max_ranks``), S (0, 1, primes, N±1, 2N±1, …: :func:`~ringemu.testing.buffer_sizes`) and dtypes. Each
example is one ``world.run`` in which every rank calls each collective twice: on integer blocks
(:mod:`ringemu.blocks`, exact in any order) and on random floats (where the order of addition shows in the bits).

Per collective the report says:

* **values** — every rank's result on integer blocks equals the exact sum (or gather), element for element;
* **bits** — on floats, which orders of addition reproduce every rank's bits on every example: each algorithm
  ringemu's registry names for that collective (:func:`ringemu.algorithms.names`: the ring, trees, halving-doubling,
  ...; one that does not support the example's N is not judged on it) and, for sums, gloo's own order
  (:data:`GLOO_NATIVE`, :mod:`ringemu.testing.gloo_order`); ``none`` if no order does;
* **bytes** — if the communicator reports what it sends (a method ``bytes_sent()`` returning this rank's
  cumulative bytes), every rank's bytes per call must equal the :class:`~ringemu.ledger.CommLedger` of one
  ringemu algorithm whose bits its results match (of any algorithm, if none matches), padding included.

A value or byte mismatch, or bits that miss ``expect_order`` when one is given, fails the example; hypothesis then
shrinks it, and the report carries the smallest failing example and a readable message (first differing rank
and element, expected and got, with bits).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from .. import algorithms
from ..blocks import integer_blocks
from ..dtypes import DTYPES, dtype_name, resolve_dtype
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..schedule import ADD
from ..virtual import VirtualBuffer
from .gloo_order import gloo_ring_sum
from .oracle import compare_array, run_op

__all__ = ["GLOO_NATIVE", "CollectiveReport", "ConformanceReport", "check_communicator", "assert_conforms",
           "expected_results"]



GLOO_NATIVE = "gloo native"  # gloo's own order of addition (:mod:`.gloo_order`); the registry's "gloo" is its traffic


@dataclass
class CollectiveReport:
    """One collective's verdicts over every example run."""

    collective: str
    values: str = "pass"  # "pass" or "fail" (the message is the report's failure)
    orders: list[str] = field(default_factory=list)  # orders whose bits matched every float example
    bytes: str = "not reported"  # "pass", "not reported" or "fail"

    @property
    def bits(self) -> str:
        if len(self.orders) > 1 and set(self.orders) == set(_orders(self.collective)):
            return f"all {len(self.orders)} orders (none told apart on these examples)"
        return ", ".join(self.orders) if self.orders else "none"

    @property
    def ok(self) -> bool:
        return self.values == "pass" and self.bytes in ("pass", "not reported")


@dataclass
class ConformanceReport:
    """What :func:`check_communicator` found; ``text()`` is the readable table, ``failure`` the shrunk failure."""

    name: str
    collectives: dict[str, CollectiveReport]
    examples: int = 0
    failure: str | None = None  # the message of the smallest failing example, with the example

    @property
    def ok(self) -> bool:
        return self.failure is None and all(c.ok for c in self.collectives.values())

    def text(self) -> str:
        lines = [f"conformance of {self.name}: {self.examples} examples drawn"]
        for c in self.collectives.values():
            values = "exact" if c.values == "pass" else "WRONG"
            nbytes = {"pass": "match the ledger", "not reported": "not reported"}.get(c.bytes, "WRONG")
            lines.append(f"  {c.collective:<15} values {values:<6} bytes {nbytes:<17} bits equal to: {c.bits}")
        if self.failure:
            lines.append("smallest failing example:")
            lines.extend("  " + line for line in self.failure.splitlines())
        return "\n".join(lines)


def expected_results(collective: str, world: np.ndarray, order: str) -> list[np.ndarray] | None:
    """Every rank's result of ``collective`` on ``world`` (N, S) when the sums follow ``order`` (an algorithm name
    of :func:`ringemu.algorithms.names`, or :data:`GLOO_NATIVE`), or None where that algorithm does not support N
    ranks. All-gather: rank r contributes chunk r of its own row; reduce-scatter: rank r's shard is chunk r of
    ``ChunkLayout(S, N)`` of the all-reduce in the same order (the Communicator's guarantee). No ledger is touched."""
    n, numel = world.shape
    layout = ChunkLayout(numel, n)
    if order == GLOO_NATIVE:
        with np.errstate(over="ignore", invalid="ignore"):
            rows = np.broadcast_to(gloo_ring_sum(world), world.shape)
    elif collective == "all-gather":
        if algorithms.algorithm(collective, order).unsupported(n) is not None:
            return None
        rows = run_op("all-gather", world, algorithm=order)
    else:
        if any(algorithms.algorithm(c, order).unsupported(n) is not None for c in (collective, "all-reduce")):
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            rows = run_op("all-reduce", world, algorithm=order)
    if collective == "reduce-scatter":
        return [np.array(rows[r][layout.payload_slice(r)]) for r in range(n)]
    return [np.array(rows[r]) for r in range(n)]


def _adds(collective: str) -> bool:
    """Whether the collective sums (its default schedule has an add): only then does an order of addition show."""
    table = algorithms.build(collective, 2).table
    return bool((table[:, 4] == ADD).any())


def _orders(collective: str) -> tuple[str, ...]:
    """The textbook orders (whose reduce-scatter is the all-reduce's shards; engine orders, cut per buffer, are
    checked against their engines) and gloo's own."""
    textbook = tuple(o for o in algorithms.names(collective) if not algorithms.algorithm(collective, o).sized)
    return textbook + ((GLOO_NATIVE,) if _adds(collective) else ())


def _rank_body(comm, worlds: dict, collectives: Sequence[str]) -> dict:
    """One rank's part of an example: every collective on every world; results and bytes sent per call."""
    out = {}
    counter = getattr(comm, "bytes_sent", None)
    for kind, world in worlds.items():
        n, numel = world.shape
        row = world[comm.rank]
        for c in collectives:
            before = counter() if counter else None
            label = f"conformance/{kind}/{c}"
            if c == "reduce-scatter":
                got = comm.reduce_scatter(row.copy(), label=label)
            elif c == "all-gather":
                got = comm.all_gather(row[ChunkLayout(numel, n).payload_slice(comm.rank)].copy(), numel, label=label)
            else:
                got = comm.all_reduce(row.copy(), label=label)
            out[(kind, c)] = (np.asarray(got), None if counter is None else int(counter()) - int(before))
    return out


def _ledger_bytes(collective: str, order: str, n: int, numel: int, dtype) -> list[int]:
    ledger = CommLedger()
    run_op(collective, VirtualBuffer((n, numel), dtype), algorithm=order, ledger=ledger)
    return [t.sent.bytes for t in ledger.per_rank()]


def _bytes_problem(collective: str, matched: list[str], sent: list[int], dtype, numel: int) -> str | None:
    """None if every rank's bytes equal the ledger of an algorithm whose bits the results matched (of any
    algorithm that runs on N, when none of the registry's matched); else the message against the first of them."""
    n = len(sent)
    candidates = [o for o in matched if o != GLOO_NATIVE] or [
        o for o in _orders(collective) if o != GLOO_NATIVE and algorithms.algorithm(collective, o).unsupported(n) is None]
    ledgers = {o: _ledger_bytes(collective, o, n, numel, dtype) for o in candidates}
    if any(want == sent for want in ledgers.values()):
        return None
    order, want = next(iter(ledgers.items()))
    r = next(r for r in range(n) if sent[r] != want[r])
    return (f"{collective}: rank {r} reported {sent[r]:,} bytes sent for {numel} {dtype_name(dtype)} elements on "
            f"{n} ranks; the ledger of the {order} algorithm counts {want[r]:,} (padding included)"
            + (f", and no other algorithm whose bits match ({', '.join(candidates[1:])}) counts that" if
               len(candidates) > 1 else ""))


def check_communicator(make_world: Callable[[int], object], *, name: str = "communicator",
                       collectives: Sequence[str] = algorithms.COLLECTIVES, max_ranks: int = 8,
                       min_ranks: int = 1, max_numel: int = 64, min_numel: int = 0,
                       dtypes: Sequence[str] | None = None,
                       max_examples: int = 20, expect_order: str | None = None) -> ConformanceReport:
    """Run the conformance examples (module doc) and return the report; never raises for a wrong result.

    N is drawn from [``min_ranks``, ``max_ranks``], S from [``min_numel``, ``max_numel``] (awkward sizes first),
    the integer blocks' dtype from ``dtypes`` and the floats' from its float types. ``expect_order`` (an order
    name) makes bits that miss it a failure."""
    from hypothesis import HealthCheck, Verbosity, given, settings
    from hypothesis import strategies as st

    from .strategies import buffer_sizes, dtype_names, ring_sizes, seeds

    for c in collectives:
        algorithms.names(c)  # a ValueError naming the collectives for an unknown one
    dtypes = tuple(DTYPES) if dtypes is None else tuple(dtypes)
    float_dtypes = [d for d in dtypes if resolve_dtype(d).kind == "f"] or ["fp32"]
    if expect_order is not None and expect_order not in {o for c in collectives for o in _orders(c)}:
        known = ", ".join(sorted({o for c in collectives for o in _orders(c)}))
        raise ValueError(f"expect_order must be one of {known} or None; got {expect_order!r}")
    reports = {c: CollectiveReport(c, orders=list(_orders(c))) for c in collectives}
    report = ConformanceReport(name, reports)

    @st.composite
    def examples(draw):
        n = draw(ring_sizes(min_ranks, max_ranks))
        s = draw(st.one_of(buffer_sizes(n, max_numel).filter(lambda v: v >= min_numel),
                           st.integers(min_numel, max(min_numel, max_numel))))
        int_dtype = draw(dtype_names(dtypes))
        float_dtype = draw(dtype_names(float_dtypes))
        seed = draw(seeds())
        rng = np.random.Generator(np.random.PCG64(seed))
        return {"integer": integer_blocks(n, s, seed, int_dtype),
                "float": rng.standard_normal((n, s)).astype(resolve_dtype(float_dtype))}

    @settings(max_examples=max_examples, deadline=None, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False)
    @given(examples())
    def run(worlds):
        report.examples += 1
        n, numel = worlds["integer"].shape
        example = (f"N = {n} ranks, S = {numel} elements, integer blocks {dtype_name(worlds['integer'].dtype)}, "
                   f"floats {dtype_name(worlds['float'].dtype)}")
        try:
            out = make_world(n).run(_rank_body, worlds, tuple(collectives))
        except Exception as exc:  # a rank raised or the world hung: a failure of this example, shrunk too
            raise AssertionError(f"{example}\nthe world failed: {type(exc).__name__}: {exc}") from exc
        problems = []
        for c in collectives:
            rep = reports[c]
            try:
                want = expected_results(c, worlds["integer"], algorithms.DEFAULT_ALGORITHM)
                layout = ChunkLayout(numel, n)
                for r in range(n):
                    shard = (f" (its shard: elements [{layout.start(r)}, {layout.start(r) + layout.payload(r)}) "
                             f"of ChunkLayout({numel}, {n}))" if c == "reduce-scatter" else "")
                    compare_array(f"{c} on integer blocks ({dtype_name(worlds['integer'].dtype)}): rank {r}{shard}",
                                  want[r], out[r][("integer", c)][0], lambda j: "")
            except AssertionError as exc:
                rep.values = "fail"
                problems.append(str(exc))
            matched = _matching_orders(c, worlds["float"], [out[r][("float", c)][0] for r in range(n)], rep)
            if expect_order is not None and expect_order in _orders(c) and expect_order not in matched \
                    and expected_results(c, worlds["float"], expect_order) is not None:
                problems.append(_order_message(c, worlds["float"], out, expect_order))
            sent = [out[r][("integer", c)][1] for r in range(n)]
            if sent[0] is not None:
                problem = _bytes_problem(c, matched, sent, worlds["integer"].dtype, numel)
                if problem:
                    rep.bytes = "fail"
                    problems.append(problem)
                elif rep.bytes == "not reported":
                    rep.bytes = "pass"
        if problems:
            raise AssertionError("\n".join([example] + problems))

    try:
        run()
    except AssertionError as exc:
        report.failure = str(exc)
    return report


def _matching_orders(collective: str, world: np.ndarray, got: list, rep: CollectiveReport) -> list[str]:
    """The orders that reproduce every rank's bits on this example; drops from ``rep.orders`` those that run on
    this N and differ (an order that does not support N is not judged here)."""
    matched, differ = [], []
    for order in _orders(collective):
        want = expected_results(collective, world, order)
        if want is None:
            continue
        try:
            for r, g in enumerate(got):
                compare_array("", want[r], g, lambda j: "")
        except AssertionError:
            differ.append(order)
            continue
        matched.append(order)
    rep.orders = [o for o in rep.orders if o not in differ]
    return matched


def _order_message(collective: str, world: np.ndarray, out: list, order: str) -> str:
    want = expected_results(collective, world, order)
    if want is None:
        return f"{collective}: the {order} algorithm does not support {world.shape[0]} ranks"
    for r in range(world.shape[0]):
        try:
            compare_array(f"{collective} on floats ({world.dtype}): rank {r}", want[r],
                          out[r][("float", collective)][0], lambda j: f" (the {order} order)")
        except AssertionError as exc:
            return str(exc)
    return f"{collective}: bits differ from the {order} order"


def assert_conforms(make_world: Callable[[int], object], **options) -> ConformanceReport:
    """:func:`check_communicator`, raising ``AssertionError`` with the report's text if anything failed."""
    report = check_communicator(make_world, **options)
    if not report.ok:
        raise AssertionError(report.text())
    return report
