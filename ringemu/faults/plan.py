"""A run's faults and how they fire: each :class:`~ringemu.faults.spec.Fault` once, at its collective and call.

A :class:`Fault` names *where* — the collective's ``label`` (and which ``call`` of it), the schedule ``step``
(0-based, as in :class:`~ringemu.schedule.Schedule`'s table) and the link ``src -> dst`` — and *what*. It is
applied to the schedule, so every algorithm of :mod:`ringemu.algorithms` and every kernel mode gets it: the
steps before the faulty one run with the kernels (:func:`ringemu.execute.run_schedule` on a slice of the
table), the faulty step runs in numpy message by message through a small model of a link layer, and the steps
after it run with the kernels again. Without faults nothing of this module runs.

The link layer (:func:`ringemu.faults.link.run_faulty_step`): each sender stamps its message with a header (step,
src, dst, chunk) and a CRC-32 of the payload bytes; each receiver knows from the schedule which messages it expects.
With ``checksums=True`` (the default) a receiver that finds a payload whose CRC disagrees with its header, a message
addressed to another rank, an expected message missing, or one message twice raises :class:`MessageFault` naming the
collective, the step and the link. A stopped rank raises :class:`RankStopped` — the emulated watchdog: the ranks
waiting for its messages give up (emulated time: nothing sleeps) and the error names the missing rank, who waited
for it, the collective and the step. Either way the collective returns no partial result: it worked on its own
padded copy, which is discarded.

The fault record and its grammar are :mod:`ringemu.faults.spec`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..execute import run_schedule
from ..schedule import Schedule
from .link import run_faulty_step
from .spec import Fault, RankStopped, check_fault, check_fault_ranks, describe, parse_fault, step_rows

__all__ = ["FaultPlan", "as_plan", "sub_schedule"]


@dataclass
class FaultPlan:
    """Faults for a run, each fired once at its (label, call). Passed as ``faults=`` to the collectives, the
    emulated world and the stage runs. ``fired`` lists (fault, label, schedule name) as they fire; ``messages``
    the link-layer records of the faulty steps. Mutable (call counters), owned by one run. ``retry``: callers
    that can roll a failed step back (the ZeRO stages do) run it again instead of re-raising."""

    faults: tuple[Fault, ...]
    checksums: bool = True
    retry: bool = False
    fired: list = field(default_factory=list)
    messages: list = field(default_factory=list)
    _calls: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.faults = tuple(parse_fault(f) if isinstance(f, str) else f for f in self.faults)
        bad = [f for f in self.faults if not isinstance(f, Fault)]
        if bad:
            raise TypeError(f"faults must be Fault objects or spec strings; got {type(bad[0]).__name__}")

    def check_world(self, n_ranks: int) -> None:
        """Refuse, before any rank starts, a fault naming a rank a world of ``n_ranks`` lacks, or any fault where
        N = 1 (nothing is sent); steps, links, elements and bits are checked against each collective as it runs
        (:func:`~ringemu.faults.spec.check_fault`), and a FaultSpecError there is bad input too."""
        for f in self.faults:
            check_fault_ranks(f, n_ranks)

    def take(self, label: str) -> list[Fault]:
        """The faults that fire at this call of a collective labelled ``label`` (and count the call)."""
        mine = self._calls.get(label, 0)
        anyone = self._calls.get(None, 0)
        self._calls[label], self._calls[None] = mine + 1, anyone + 1
        return [f for f in self.faults if (f.label == label and f.call == mine) or (f.label is None and
                                                                                      f.call == anyone)]

    def unfired(self) -> list[Fault]:
        done = {id(f) for f, _, _ in self.fired}
        return [f for f in self.faults if id(f) not in done]

    def labels_seen(self) -> list[str]:
        return sorted(k for k in self._calls if k is not None)

    def run(self, schedule: Schedule, world: np.ndarray, mode: str, label: str) -> None:
        """Execute ``schedule`` in place on the padded ``world`` with this call's faults (kernels elsewhere)."""
        faults = self.take(label)
        if not faults:
            run_schedule(schedule, world, mode)
            return
        for f in faults:
            check_fault(f, schedule, label)
            self.fired.append((f, label, schedule.name))
        cut = sorted({f.step for f in faults})
        stops = [f for f in faults if f.kind == "stop"]
        first_stop = min((f.step for f in stops), default=None)
        lo = 0
        for s in cut:
            if first_stop is not None and s > first_stop:
                break
            if s > lo:
                run_schedule(sub_schedule(schedule, lo, s), world, mode)
            if s == first_stop:
                _watchdog(schedule, label, s, sorted({f.rank for f in stops if f.step == s}))
            run_faulty_step(schedule, world, s, [f for f in faults if f.step == s], label, self.checksums,
                            self.messages)  # ringemu.faults.link
            lo = s + 1
        if lo < schedule.n_steps:
            run_schedule(sub_schedule(schedule, lo, schedule.n_steps), world, mode)


def as_plan(faults) -> FaultPlan | None:
    """None, a FaultPlan (used as is), or a sequence of Faults/specs (a fresh plan; a lone spec or Fault too)."""
    if faults is None or isinstance(faults, FaultPlan):
        return faults
    if isinstance(faults, (str, Fault)):
        faults = [faults]
    try:
        return FaultPlan(tuple(faults))
    except TypeError:
        raise TypeError(f"faults must be None, a FaultPlan, or a list of Fault objects or spec strings; got "
                        f"{type(faults).__name__}") from None


def sub_schedule(schedule: Schedule, lo: int, hi: int) -> Schedule:
    """Steps [lo, hi) of ``schedule`` as a schedule of their own (steps renumbered from 0)."""
    bounds = schedule.step_bounds()
    rows = np.array(schedule.table[bounds[lo]:bounds[hi]], dtype=np.int64)
    rows[:, 0] -= lo
    return schedule.with_rows(f"{schedule.name}[steps {lo}..{hi - 1}]", hi - lo, rows)


def _watchdog(schedule: Schedule, label: str, step: int, stopped: list[int]) -> None:
    waiting = sorted({r[2] for s in range(step, schedule.n_steps) for r in step_rows(schedule, s)
                      if r[1] in stopped and r[2] not in stopped})
    raise RankStopped(f"rank{'s' if len(stopped) > 1 else ''} {', '.join(map(str, stopped))} stopped: "
                      f"{describe(schedule, label, step)} cannot finish; the watchdog released ranks {waiting} that "
                      f"waited for {'their' if len(stopped) > 1 else 'its'} messages (no partial result)",
                      label, step, tuple(stopped))
