"""``spawn``: run a function on N thread-ranks under the ``"ringemu"`` torch.distributed backend.

``spawn(fn, world_size)`` starts one thread per rank, initialises the default process group on each with
backend ``"ringemu"`` (ranks meet in this process; no store traffic, no sockets), calls ``fn(rank)``, and returns
a :class:`SpawnResult` with every rank's return value and the default group's :class:`~ringemu.ledger.CommLedger`.
A rank that raises fails the whole run with a :class:`RankError` naming it (other ranks waiting at a collective
are woken, never left hanging), and every wait is bounded by ``timeout_s``.

Thread-ranks share torch's process-wide state: the default random generator (``torch.manual_seed`` on one rank
reseeds every rank) and the number of intra-op threads. Give each rank its own ``torch.Generator``.
"""
from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist

from ..algorithms import DEFAULT_ALGORITHM, algorithm as _catalog_entry, build
from ..execute import MODES
from ..ledger import CommLedger
from ..checks import check_n_ranks, check_timeout
from .c10d_world import thread_local_c10d
from .mailbox import Mailbox
from .meeting import Meeting, PeerFailure
from .process_group import RingemuProcessGroup

__all__ = ["BACKEND", "spawn", "SpawnResult", "RankError", "register_backend"]

BACKEND = "ringemu"
_rank_context = threading.local()  # the spawn's world, seen only by the rank threads it starts


class RankError(RuntimeError):
    """A rank's function raised; the message names the rank and carries its traceback."""


@dataclass
class _World:
    """What the thread-ranks of one spawn share: one meeting and one ledger per process group."""

    n_ranks: int
    algorithm: str
    mode: str
    timeout_s: float
    ledger: CommLedger
    _groups: dict = field(default_factory=dict)
    _mailboxes: dict = field(default_factory=dict)
    _failed: dict = field(default_factory=dict)  # rank -> why, for meetings created after the failure too
    _schedules: dict = field(default_factory=dict)  # (collective, n) -> the algorithm's schedule, built once
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def group(self, name: str, size: int, ranks: list[int] | None = None) -> tuple[Meeting, CommLedger]:
        """The meeting and ledger of group ``name`` of ``size`` members (``ranks``: their global ranks)."""
        with self._lock:
            if name not in self._groups:
                ledger = self.ledger if size == self.n_ranks and not self._groups else CommLedger()
                meeting = Meeting(size, self.timeout_s, f"group {name!r} (global ranks {ranks or list(range(size))})",
                                  ranks)
                for rank, why in self._failed.items():
                    meeting.fail(rank, why)
                self._groups[name] = (meeting, ledger)
            return self._groups[name]

    def schedule(self, collective: str, n: int):
        """The spawn's algorithm's schedule of ``collective`` on ``n`` ranks, built on first use and kept; None for
        an engine order that cuts each buffer its own way (the collectives build it for the buffer)."""
        if _catalog_entry(collective, self.algorithm).sized:
            return None
        key = (collective, n)
        with self._lock:
            if key not in self._schedules:
                self._schedules[key] = build(collective, n, self.algorithm)
            return self._schedules[key]

    def mailbox(self, name: str, size: int) -> Mailbox:
        _, ledger = self.group(name, size)
        with self._lock:
            if name not in self._mailboxes:
                mailbox = self._mailboxes[name] = Mailbox(size, self.timeout_s, ledger)
                for rank, why in self._failed.items():
                    mailbox.fail(rank, why)
            return self._mailboxes[name]

    def fail(self, rank: int, why: str) -> None:
        with self._lock:
            self._failed.setdefault(rank, why)
            waiters = [m for m, _ in self._groups.values()] + list(self._mailboxes.values())
        for waiter in waiters:
            waiter.fail(rank, why)

    @property
    def group_ledgers(self) -> dict[str, CommLedger]:
        return {name: ledger for name, (_, ledger) in self._groups.items()}


@dataclass(frozen=True)
class SpawnResult:
    """Every rank's return value, the default group's ledger, and any subgroup's ledger by group name."""

    results: list[Any]
    ledger: CommLedger
    group_ledgers: dict[str, CommLedger]
    seconds: float


def _create(store, rank: int, world_size: int, timeout) -> RingemuProcessGroup:
    world = getattr(_rank_context, "world", None)
    if world is None:
        raise RuntimeError("the 'ringemu' backend runs inside ringemu.torch.spawn(...), which starts the ranks")
    return RingemuProcessGroup(rank, world_size, world)


def register_backend() -> None:
    """Register ``"ringemu"`` with torch.distributed (idempotent)."""
    if BACKEND.upper() not in dist.Backend.backend_list and BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])


def spawn(fn: Callable[[int], Any], world_size: int, *, algorithm: str = DEFAULT_ALGORITHM, mode: str = "fused",
          ledger: CommLedger | None = None, timeout_s: float = 60.0) -> SpawnResult:
    """Run ``fn(rank)`` on ``world_size`` thread-ranks of one ``"ringemu"`` process group; see the module doc."""
    n = check_n_ranks(world_size, "world_size")
    timeout_s = check_timeout(timeout_s, "timeout_s")
    _catalog_entry("all-reduce", algorithm)  # a clear error for an unknown algorithm, before any thread starts
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    if ledger is not None and not isinstance(ledger, CommLedger):
        raise TypeError(f"ledger must be a CommLedger or None; got {type(ledger).__name__}")
    register_backend()
    world = _World(n, algorithm, mode, float(timeout_s), ledger if ledger is not None else CommLedger())
    results: list[Any] = [None] * n
    errors: dict[int, str] = {}
    store = dist.HashStore()

    def run_rank(rank: int) -> None:
        _rank_context.world = world
        try:
            dist.init_process_group(BACKEND, rank=rank, world_size=n, store=store)
            try:
                results[rank] = fn(rank)
            finally:
                dist.destroy_process_group()
        except BaseException as exc:  # noqa: BLE001 - reported by name below
            errors[rank] = (isinstance(exc, PeerFailure), "".join(traceback.format_exception(exc)))
            world.fail(rank, f"{type(exc).__name__}: {exc}")
        finally:
            _rank_context.world = None

    start = time.perf_counter()
    with thread_local_c10d():
        threads = [threading.Thread(target=run_rank, args=(r,), name=f"ringemu-rank-{r}", daemon=True)
                   for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout_s * 4)
        stuck = [r for r, t in enumerate(threads) if t.is_alive()]
    if stuck:
        raise RankError(f"rank(s) {stuck} still running {timeout_s * 4:g} s after the run started waiting for them")
    if errors:  # name the first rank that failed of its own accord, not one woken by another's failure
        first = min(errors, key=lambda rank: (errors[rank][0], rank))
        raise RankError(f"rank {first} failed (ranks that failed: {sorted(errors)}):\n{errors[first][1]}")
    return SpawnResult(results, world.ledger, world.group_ledgers, time.perf_counter() - start)
