"""Conformance of a user's Communicator: values, order of addition and bytes, every property on every example.

:func:`check_communicator` takes ``make_world(n_ranks)``: anything whose ``run(fn, *args)`` calls
``fn(comm, *args)`` once per rank with that rank's Communicator (``rank``, ``n_ranks``, ``reduce_scatter(buffer,
label=)``, ``all_gather(shard, numel, label=)``, ``all_reduce(buffer, label=)`` on flat numpy arrays) and returns
the per-rank results in rank order: :class:`~ringemu.worlds.EmulatedWorld`, the adapters of
:mod:`ringemu.testing.adapters` (per-rank code, list-of-N code, torch process groups) or your own. Each example is
one ``world.run`` in which every rank calls each collective on integer blocks (:mod:`ringemu.blocks`, exact in any
order) and on random floats (where the order of addition shows in the bits). Per collective, on every example:

1. **values** — every rank's result on integer blocks equals the exact sum (or gather), element for element;
   reduce-scatter's shard r is elements ``ChunkLayout(S, N).payload_slice(r)`` (unpadded; trailing shards may
   be empty);
2. **order** — on floats, which orders reproduce every rank's bits (the orders of ``orders=``, an
   :class:`~ringemu.testing.local_registry.Orders`: by default every algorithm of ringemu's registry and gloo's
   native order). ``order=None`` (default) fails an example whose bits follow no known order; ``order="ring"``
   (any name) fails one that misses that order; ``order="any"`` checks nothing;
3. **bytes** — judged after the bits: if the communicator has ``bytes_sent()`` (this rank's cumulative bytes),
   every rank's bytes per call must equal the traffic of an order whose bits it matched (of any order with a
   traffic model, where it matched none), counted as ``count="payload"`` (default: what engines send, no
   padding) or ``"padded"`` (the textbook ring's padded chunks).

Hypothesis draws N, awkward S and dtypes, and the suite adds examples of 4, 5 and ``max_ranks`` ranks (below 4 a
ring and its mirror image add alike, so the orders cannot be told apart). Nothing stops at the first failure:
every property is judged on every example. Then each failing property is shrunk on its own, deterministically:
the smallest example is searched from the smallest up (N + S = 1, 2, ...; fewer ranks first; the first dtypes and
seed 0 first), so it does not depend on hypothesis's seed; the report names each with its smallest example.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from .. import algorithms
from ..dtypes import DTYPES, dtype_name, resolve_dtype
from ..layout import ChunkLayout
from .conformance_report import CollectiveReport, ConformanceReport, Example
from .local_registry import COUNTS, GLOO_NATIVE, Orders
from .oracle import compare_array

__all__ = ["GLOO_NATIVE", "CollectiveReport", "ConformanceReport", "Example", "check_communicator",
           "assert_conforms", "which_orders", "expected_results"]

ANY = "any"
_DISCRIMINATING_RANKS = (4, 5)  # with max_ranks: N where a ring, its mirror image, trees and halving differ
_SHRINK_PASSES = 3
_SHRINK_TRIALS = 300  # examples tried from the smallest up before walking down from the failure found


def expected_results(collective: str, world: np.ndarray, order: str, orders: Orders | None = None):
    """Every rank's result of ``collective`` on ``world`` (N, S) in ``order``; None where it does not run on N."""
    return (orders or Orders()).results(collective, order, world)


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


class _Judge:
    """Runs examples on the user's world and judges every property (module doc)."""

    def __init__(self, make_world, collectives, orders: Orders, order, count):
        self.make_world, self.collectives, self.orders = make_world, tuple(collectives), orders
        self.order, self.count = order, count
        self.reported = False  # whether any rank's communicator had bytes_sent()
        self.exact = Orders()  # the exact values come from ringemu's ring on integer blocks, whatever `orders` holds

    def run(self, ex: Example):
        """(problems {(collective, property): message}, matched orders {collective: [...]}) of one example; a
        world that raises gives {("world", "runs"): message}."""
        worlds = ex.worlds()
        try:
            out = self.make_world(ex.n_ranks).run(_rank_body, worlds, self.collectives)
        except Exception as exc:  # noqa: BLE001 - a rank raised or the world hung: reported, shrunk like the rest
            return {("world", "runs"): f"{ex}\nthe world failed: {type(exc).__name__}: {exc}"}, {}
        problems, matched = {}, {}
        for c in self.collectives:
            for prop, message in self._judge(c, ex, worlds, out, matched).items():
                problems[(c, prop)] = f"{ex}\n{message}"
        return problems, matched

    def _judge(self, c, ex, worlds, out, matched) -> dict:
        n, numel = ex.n_ranks, ex.numel
        found = {}
        want = self.exact.results(c, "ring", worlds["integer"])
        layout = ChunkLayout(numel, n)
        try:
            for r in range(n):
                shard = (f" (its shard: elements [{layout.payload_slice(r).start}, {layout.payload_slice(r).stop})"
                         f" of ChunkLayout({numel}, {n}))" if c == "reduce-scatter" else "")
                compare_array(f"{c} on integer blocks ({ex.int_dtype}): rank {r}{shard}", want[r],
                              out[r][("integer", c)][0], lambda j: "")
        except AssertionError as exc:
            found["values"] = str(exc)
        got = [out[r][("float", c)][0] for r in range(n)]
        matched[c] = ok = [o for o in self.orders.names(c) if self._same(self.orders.results(c, o, worlds["float"]), got)]
        if self.order is None and not ok:
            found["order"] = (f"{c} on floats ({ex.float_dtype}): the bits follow none of the known orders "
                              f"({', '.join(self.orders.names(c))}); " + self._nearest(c, worlds["float"], got))
        elif self.order not in (None, ANY) and self.order in self.orders.names(c) and self.order not in ok \
                and self.orders.runs_on(c, self.order, n):
            found["order"] = self._nearest(c, worlds["float"], got, self.order) + \
                (f"; the bits follow: {', '.join(ok)}" if ok else "; the bits follow no known order")
        sent = [out[r][("integer", c)][1] for r in range(n)]
        if sent[0] is not None:
            self.reported = True
            problem = self._bytes(c, ok, sent, resolve_dtype(ex.int_dtype), numel)
            if problem:
                found["bytes"] = problem
        return found

    @staticmethod
    def _same(want, got) -> bool:
        if want is None:
            return False
        try:
            for w, g in zip(want, got, strict=True):
                compare_array("", w, g, lambda j: "")
        except (AssertionError, ValueError):
            return False
        return True

    def _nearest(self, c, world, got, order: str = "ring") -> str:
        want = self.orders.results(c, order, world)
        if want is None:
            return f"the {order} order does not run on {world.shape[0]} ranks"
        for r, g in enumerate(got):
            try:
                compare_array(f"against the {order} order: rank {r}", want[r], g, lambda j: "")
            except AssertionError as exc:
                return str(exc)
        return f"against the {order} order: equal"

    def _bytes(self, c, matched, sent, dtype, numel) -> str | None:
        n = len(sent)
        candidates = [o for o in matched if self.orders.has_traffic(c, o)] or [
            o for o in self.orders.names(c) if self.orders.has_traffic(c, o) and self.orders.runs_on(c, o, n)]
        models = {o: self.orders.sent_bytes(c, o, n, numel, dtype, self.count) for o in candidates}
        if any(m == sent for m in models.values()):
            return None
        order, model = next(iter(models.items()))
        differ = [r for r in range(n) if sent[r] != model[r]]
        ranks = ", ".join(f"rank {r} sent {sent[r]:,} B, the {order} order sends {model[r]:,} B" for r in differ)
        others = [o for o in candidates if o != order]
        elements = "element" if numel == 1 else "elements"
        return (f"{c}: bytes_sent() of {numel} {dtype_name(dtype)} {elements} on {n} ranks ({self.count} bytes): "
                f"{ranks}" + (f"; no other order whose bits match ({', '.join(others)}) sends that either"
                              if others else ""))

    def fails(self, ex: Example, key) -> str | None:
        return self.run(ex)[0].get(key)

    def shrink(self, ex: Example, key, bounds, int_dtypes, float_dtypes) -> tuple[Example, str]:
        """The smallest example on which property ``key`` fails, found from the smallest up: N + S = 1, 2, ...
        (fewer ranks first), on the first dtypes and seed 0, then on ``ex``'s dtypes and seed; the first failing
        one does not depend on where hypothesis found the failure. Past :data:`_SHRINK_TRIALS` runs it walks down
        from ``ex`` instead: fewest ranks, then elements, then the first dtypes and seed 0."""
        min_ranks, max_ranks, min_numel, max_numel = bounds
        trials = 0
        for kinds, top in (((int_dtypes[0], float_dtypes[0], 0), max_ranks + max(max_numel, 2 * max_ranks + 1)),
                           ((ex.int_dtype, ex.float_dtype, ex.seed), ex.n_ranks + ex.numel)):
            for total in range(min_ranks + min_numel, top + 1):
                for n in range(min_ranks, min(max_ranks, total - min_numel) + 1):
                    if total - n > max(max_numel, 2 * n + 1):
                        continue
                    if trials == _SHRINK_TRIALS:
                        return self._walk_down(ex, key, min_ranks, min_numel, int_dtypes, float_dtypes)
                    trials += 1
                    trial = Example(n, total - n, *kinds)
                    message = self.fails(trial, key)
                    if message:
                        return trial, message
        return self._walk_down(ex, key, min_ranks, min_numel, int_dtypes, float_dtypes)

    def _walk_down(self, ex: Example, key, min_ranks, min_numel, int_dtypes, float_dtypes) -> tuple[Example, str]:
        message = self.fails(ex, key)
        for _ in range(_SHRINK_PASSES):
            before = ex
            for field_, values in (("n_ranks", range(min_ranks, ex.n_ranks)), ("numel", range(min_numel, ex.numel)),
                                   ("int_dtype", int_dtypes[:int_dtypes.index(ex.int_dtype)]),
                                   ("float_dtype", float_dtypes[:float_dtypes.index(ex.float_dtype)]),
                                   ("seed", [0] if ex.seed else [])):
                for value in values:
                    trial = Example(**{**ex.__dict__, field_: value})
                    got = self.fails(trial, key)
                    if got:
                        ex, message = trial, got
                        break
            if ex == before:
                break
        return ex, message


def check_communicator(make_world: Callable[[int], object], *, name: str = "communicator",
                       collectives: Sequence[str] = algorithms.COLLECTIVES, max_ranks: int = 8,
                       min_ranks: int = 1, max_numel: int = 64, min_numel: int = 0,
                       dtypes: Sequence[str] | None = None, max_examples: int = 20, order: str | None = None,
                       count: str = "payload", orders: Orders | None = None,
                       seed: int | None = None, expect_order: str | None = None) -> ConformanceReport:
    """Run the conformance examples (module doc) and return the report; never raises for a wrong result.

    N is drawn from [``min_ranks``, ``max_ranks``], S from [``min_numel``, ``max_numel``] (awkward sizes first),
    the integer blocks' dtype from ``dtypes`` and the floats' from its float types. ``seed`` fixes hypothesis's
    draws (None: hypothesis picks). ``expect_order`` is the older spelling of ``order=NAME``."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    from .strategies import buffer_sizes, ring_sizes, seeds

    collectives = tuple(collectives)
    for c in collectives:
        algorithms.names(c)  # a ValueError naming the collectives for an unknown one
    if count not in COUNTS:
        raise ValueError(f"count must be one of {', '.join(map(repr, COUNTS))}; got {count!r}")
    orders = Orders() if orders is None else orders
    if not isinstance(orders, Orders):
        raise TypeError(f"orders must be a ringemu.testing.Orders; got {type(orders).__name__}")
    if expect_order is not None:
        if order is not None:
            raise ValueError("give order= or expect_order= (its older name), not both")
        order = expect_order
    known = orders.all_names(collectives)
    if order not in (None, ANY) and order not in known:
        raise ValueError(f"order must be None (any known order), 'any' (not checked) or one of {', '.join(known)}; "
                         f"got {order!r}")
    if not 1 <= min_ranks <= max_ranks or not 0 <= min_numel <= max_numel:
        raise ValueError(f"need 1 <= min_ranks <= max_ranks and 0 <= min_numel <= max_numel; got ranks "
                         f"[{min_ranks}, {max_ranks}], numel [{min_numel}, {max_numel}]")
    int_dtypes = [dtype_name(resolve_dtype(d)) for d in (DTYPES if dtypes is None else dtypes)]
    float_dtypes = [d for d in int_dtypes if resolve_dtype(d).kind == "f"] or ["fp32"]
    judge = _Judge(make_world, collectives, orders, order, count)
    reports = {c: CollectiveReport(c, orders=list(orders.names(c)), known=orders.names(c),
                                   order="not checked" if order == ANY else "pass") for c in collectives}
    report = ConformanceReport(name, reports, count=count, order=order, ranks=(min_ranks, max_ranks))
    first: dict = {}  # (collective, property) -> the first example it failed on

    def judge_one(ex: Example) -> None:
        report.examples += 1
        problems, matched = judge.run(ex)
        for key in problems:
            first.setdefault(key, ex)
        for c, ok in matched.items():
            reports[c].orders = [o for o in reports[c].orders if o in ok or not orders.runs_on(c, o, ex.n_ranks)]

    @st.composite
    def examples(draw):
        n = draw(ring_sizes(min_ranks, max_ranks))
        s = draw(st.one_of(buffer_sizes(n, max_numel).filter(lambda v: min_numel <= v <= max(max_numel, 2 * n + 1)),
                           st.integers(min_numel, max_numel)))
        return Example(n, s, draw(st.sampled_from(int_dtypes)), draw(st.sampled_from(float_dtypes)), draw(seeds()))

    @settings(max_examples=max_examples, deadline=None, database=None, print_blob=False,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(examples())
    def search(ex):
        judge_one(ex)

    (search if seed is None else hypothesis_seed(seed)(search))()
    wide = max(float_dtypes, key=lambda d: resolve_dtype(d).itemsize)  # the most bits: orders differ most often
    for n in sorted({r for r in (*_DISCRIMINATING_RANKS, max_ranks) if min_ranks <= r <= max_ranks}):
        for s in sorted({v for v in (2 * n + 1, max_numel - 1) if min_numel <= v <= max(max_numel, 2 * n + 1)}):
            judge_one(Example(n, s, int_dtypes[0], wide, n * 1000 + s))
    for key, ex in sorted(first.items(), key=lambda item: (item[1].n_ranks, item[1].numel)):
        small, message = judge.shrink(ex, key, (min_ranks, max_ranks, min_numel, max_numel), int_dtypes,
                                      float_dtypes)
        if key == ("world", "runs"):
            report.world_failure = message
            continue
        rep = reports[key[0]]
        setattr(rep, key[1], "fail")
        rep.failures[key[1]] = message
    for c, rep in reports.items():
        if rep.bytes != "fail" and judge.reported:
            rep.bytes = "pass"
        if order is None and not rep.orders and rep.order != "fail":
            rep.order = "fail"  # each example matched some order, but no one order matched them all
            rep.failures["order"] = f"{c}: each example's bits follow some known order, but no one order all of them"
    return report


def assert_conforms(make_world: Callable[[int], object], **options) -> ConformanceReport:
    """:func:`check_communicator`, raising ``AssertionError`` with the report's text if any property failed."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    report = check_communicator(make_world, **options)
    if not report.ok:
        raise AssertionError(report.text())
    return report


def which_orders(make_world: Callable[[int], object], **options) -> dict[str, tuple[str, ...]]:
    """The orders whose bits the communicator's results followed on every example, per collective (the suite
    with ``order="any"``; ``options`` as for :func:`check_communicator`). Wrong values do not stop it."""
    options.setdefault("order", ANY)
    options.setdefault("max_ranks", 8)
    report = check_communicator(make_world, **options)
    return {c: tuple(r.orders) for c, r in report.collectives.items()}

