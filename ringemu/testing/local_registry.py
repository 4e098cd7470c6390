"""Orders of addition and traffic models the oracle and the conformance suite judge against, in a local object.

An :class:`Orders` object holds, per collective, the orders a communicator's results may follow and the traffic
each sends. By default it holds ringemu's own: every algorithm :func:`ringemu.algorithms.names` lists for the
collective (read from the registry when asked, never copied), engine orders included (:data:`GLOO_NATIVE` is
the registry's ``gloo:ring``, the order and traffic torch's gloo really has). :meth:`Orders.declare` adds your own
without touching the global registry, in either of two forms:

* ``schedule=`` — a function ``n_ranks -> Schedule`` (:class:`ringemu.schedule.Schedule`) of the collective; its
  results and its traffic (a :class:`~ringemu.ledger.CommLedger` of it) are ringemu's, exactly as for a
  registry entry;
* ``results=`` — a function ``world -> list of N arrays``: what every rank holds after the collective on the
  (N, S) ``world`` (for all-gather, rank r contributed chunk r of ``ChunkLayout(S, N)`` of its row), and
  optionally ``traffic=``, a function ``(n_ranks, numel, itemsize) -> bytes sent per rank`` (a list of ints,
  payload only: what an engine that never pads sends).

Pass the object as ``orders=`` to :func:`~ringemu.testing.conformance.check_communicator` and
:func:`~ringemu.testing.oracle.assert_matches_ringemu`. Two objects never share declarations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import algorithms, collectives
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..schedule import ADD, Schedule
from ..virtual import VirtualBuffer

__all__ = ["GLOO_NATIVE", "COUNTS", "Declared", "Orders", "sums"]

GLOO_NATIVE = "gloo:ring"  # torch 2.13 gloo's own order and traffic: a registry entry (ringemu.algorithms.gloo)
COUNTS = ("payload", "padded")  # bytes as an engine that never pads sends them, or with the ring's padding


def sums(collective: str) -> bool:
    """Whether ``collective`` adds (its default schedule has an add step): only then does an order show in bits."""
    return bool((algorithms.build(collective, 2).table[:, 4] == ADD).any())


@dataclass(frozen=True)
class Declared:
    """One order declared in an :class:`Orders` object (module doc)."""

    collective: str
    name: str
    schedule: Callable[[int], Schedule] | None = None
    results: Callable[[np.ndarray], list] | None = None
    traffic: Callable[[int, int, int], list] | None = None


class Orders:
    """Orders of addition and traffic models per collective: ringemu's (``builtin=True``) and yours."""

    def __init__(self, builtin: bool = True):
        self.builtin = bool(builtin)
        self._declared: dict[tuple[str, str], Declared] = {}

    def __repr__(self) -> str:
        mine = ", ".join(f"{c}:{n}" for c, n in self._declared) or "none"
        return f"Orders(builtin={self.builtin}, declared: {mine})"

    # -- declaring ---------------------------------------------------------------------------------------------
    def declare(self, name: str, collective: str, *, schedule: Callable[[int], Schedule] | None = None,
                results: Callable[[np.ndarray], list] | None = None,
                traffic: Callable[[int, int, int], list] | None = None) -> "Orders":
        """Add an order named ``name`` for ``collective`` (module doc); returns self, so declarations chain."""
        algorithms.names(collective)  # a ValueError naming the collectives
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string; got {name!r}")
        if name in self.names(collective):
            raise ValueError(f"{collective} already has an order named {name!r}; pick another name")
        if (schedule is None) == (results is None):
            raise ValueError("declare needs exactly one of schedule= (n_ranks -> Schedule) or results= "
                             "(world -> list of N arrays)")
        if schedule is not None and traffic is not None:
            raise ValueError("a declared schedule carries its own traffic; traffic= goes with results=")
        for what, fn in (("schedule", schedule), ("results", results), ("traffic", traffic)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{what} must be a function; got {type(fn).__name__}")
        self._declared[(collective, name)] = Declared(collective, name, schedule, results, traffic)
        return self

    # -- reading -----------------------------------------------------------------------------------------------
    def names(self, collective: str) -> tuple[str, ...]:
        """The orders of ``collective``: the registry's (read now; engine orders included), then yours."""
        own = tuple(n for (c, n) in self._declared if c == collective)
        if not self.builtin:
            return own
        return algorithms.names(collective) + own

    def all_names(self, collectives_: tuple[str, ...]) -> list[str]:
        return sorted({o for c in collectives_ for o in self.names(c)})

    def has_traffic(self, collective: str, name: str) -> bool:
        entry = self._declared.get((collective, name))
        if entry is not None:
            return entry.schedule is not None or entry.traffic is not None
        return True

    def runs_on(self, collective: str, name: str, n_ranks: int) -> bool:
        """Whether ``name`` is defined on ``n_ranks`` ranks (a registry algorithm may need a power of two)."""
        if (collective, name) in self._declared:
            return True
        return algorithms.algorithm(collective, name).unsupported(n_ranks) is None

    def results(self, collective: str, name: str, world: np.ndarray) -> list[np.ndarray] | None:
        """Every rank's result of ``collective`` on ``world`` (N, S) in order ``name``; None where it does not run
        on N. Reduce-scatter's shard r is elements ``ChunkLayout(S, N).payload_slice(r)`` of the sum."""
        n, numel = world.shape
        if not self.runs_on(collective, name, n):
            return None
        entry = self._declared.get((collective, name))
        with np.errstate(over="ignore", invalid="ignore"):
            if entry is not None and entry.results is not None:
                return [np.asarray(r) for r in entry.results(world.copy())]
            if entry is not None:
                return _run_schedule(collective, world, entry.schedule(n))
            if collective == "all-gather":
                rows = collectives.all_gather(_shards(world), algorithm=name)
            elif collective == "reduce-scatter":  # the reduce-scatter order itself (an engine's may not be its AR's)
                return [np.array(s) for s in collectives.reduce_scatter(world, algorithm=name)]
            else:
                rows = collectives.all_reduce(world, algorithm=name)
        return [np.array(rows[r]) for r in range(n)]

    def sent_bytes(self, collective: str, name: str, n_ranks: int, numel: int, dtype, count: str) -> list[int] | None:
        """Bytes each rank sends for one call of ``collective`` in order ``name`` (``count`` = payload or padded);
        None where the order has no traffic model or does not run on ``n_ranks``."""
        if not self.has_traffic(collective, name) or not self.runs_on(collective, name, n_ranks):
            return None
        entry = self._declared.get((collective, name))
        if entry is not None and entry.traffic is not None:
            itemsize = np.dtype(dtype).itemsize if not hasattr(dtype, "itemsize") else dtype.itemsize
            got = [int(b) for b in entry.traffic(n_ranks, numel, itemsize)]
            if len(got) != n_ranks:
                raise ValueError(f"the traffic model of {name!r} returned {len(got)} counts for {n_ranks} ranks")
            return got
        ledger = self.ledger(collective, name, n_ranks, numel, dtype)
        return [t.sent.bytes - (t.sent.padding_bytes if count == "payload" else 0) for t in ledger.per_rank()]

    def ledger(self, collective: str, name: str, n_ranks: int, numel: int, dtype) -> CommLedger:
        """The CommLedger of one call on size-only buffers (a registry algorithm or a declared schedule)."""
        ledger = CommLedger()
        entry = self._declared.get((collective, name))
        run = getattr(collectives, collective.replace("-", "_"))
        kwargs = {"schedule": entry.schedule(n_ranks)} if entry is not None else {"algorithm": name}
        run(VirtualBuffer((n_ranks, numel), dtype), ledger=ledger, label=collective, **kwargs)
        return ledger


def _shards(world: np.ndarray) -> list[np.ndarray]:
    n, numel = world.shape
    layout = ChunkLayout(numel, n)
    return [world[r, layout.payload_slice(r)].copy() for r in range(n)]


def _run_schedule(collective: str, world: np.ndarray, schedule: Schedule) -> list[np.ndarray]:
    n, numel = world.shape
    if collective == "all-gather":
        rows = collectives.all_gather(_shards(world), schedule=schedule)
    elif collective == "reduce-scatter":
        return [np.array(s) for s in collectives.reduce_scatter(world, schedule=schedule)]
    else:
        rows = collectives.all_reduce(world, schedule=schedule)
    return [np.array(rows[r]) for r in range(n)]
