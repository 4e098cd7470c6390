"""Faults as data: one message dropped, corrupted, duplicated or misrouted, or a rank stopped, at a chosen step.

A :class:`Fault` names *where* — the collective's ``label`` (and which ``call`` of it), the schedule ``step``
(0-based, as in :class:`~ringemu.schedule.Schedule`'s table) and the link ``src -> dst`` — and *what*. It is
applied to the schedule, so every algorithm of :mod:`ringemu.algorithms` and every kernel mode gets it: the
steps before the faulty one run with the kernels (:func:`ringemu.execute.run_schedule` on a slice of the
table), the faulty step runs in numpy message by message through a small model of a link layer, and the steps
after it run with the kernels again. Without faults nothing of this module runs.

The link layer (:func:`ringemu.fault_link.run_faulty_step`): each sender stamps its message with a header (step,
src, dst, chunk) and a CRC-32 of the payload bytes; each receiver knows from the schedule which messages it expects.
With ``checksums=True`` (the default) a receiver that finds a payload whose CRC disagrees with its header, a message
addressed to another rank, an expected message missing, or one message twice raises :class:`MessageFault` naming the
collective, the step and the link. A stopped rank raises :class:`RankStopped` — the emulated watchdog: the ranks
waiting for its messages give up (emulated time: nothing sleeps) and the error names the missing rank, who waited
for it, the collective and the step. Either way the collective returns no partial result: it worked on its own
padded copy, which is discarded.

Spec grammar (``--fault SPEC`` on the command line; :func:`parse_fault`)::

    SPEC  := KIND ":" FIELD ("," FIELD)*
    KIND  := drop | corrupt | duplicate | misroute | stop
    FIELD := label=NAME | call=K | step=S | src=R | dst=R | chunk=C | bit=B("+"B)* | elem=E | to=R | rank=R

``drop``, ``corrupt``, ``duplicate``, ``misroute`` need ``step``, ``src``, ``dst``; ``corrupt`` needs ``bit``
(bits of the element's storage, 0 = least significant) and flips them in element ``elem`` of the chunk
(default 0); ``misroute`` needs ``to`` (the rank that receives the message instead of ``dst``); ``stop`` needs
``rank`` and ``step``. ``label`` (default: any collective) and ``call`` (default 0: the first matching call)
choose the collective; ``chunk`` chooses among several messages on one link in one step.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .schedule import Schedule

__all__ = ["KINDS", "MESSAGE_KINDS", "Fault", "FaultPlan", "CollectiveFault", "MessageFault", "RankStopped",
           "parse_fault", "as_plan", "check_fault", "sub_schedule", "with_step", "describe", "step_rows"]

MESSAGE_KINDS = ("drop", "corrupt", "duplicate", "misroute")
KINDS = MESSAGE_KINDS + ("stop",)
_INT_FIELDS = ("call", "step", "src", "dst", "chunk", "elem", "to", "rank")
_NEEDS = {"drop": ("step", "src", "dst"), "corrupt": ("step", "src", "dst", "bit"),
          "duplicate": ("step", "src", "dst"), "misroute": ("step", "src", "dst", "to"), "stop": ("rank", "step")}


class CollectiveFault(RuntimeError):
    """A collective failed because of an injected fault. ``label``, ``step`` (0-based) and ``ranks`` say where;
    ``states`` is free for callers that roll back (rank -> the state they restored)."""

    def __init__(self, message: str, label: str, step: int, ranks: tuple[int, ...], link=None):
        super().__init__(message)
        self.label, self.step, self.ranks, self.link = label, step, tuple(ranks), link
        self.states: dict = {}


class MessageFault(CollectiveFault):
    """A receiver found a corrupted, missing, duplicated or misaddressed message (link = (src, dst))."""


class RankStopped(CollectiveFault):
    """A rank stopped; the ranks waiting for its messages gave up (the watchdog). ``ranks``: the stopped ones."""


@dataclass(frozen=True)
class Fault:
    """One fault (see the module docstring for the fields). Checked against the schedule when it fires."""

    kind: str
    step: int
    label: str | None = None
    call: int = 0
    src: int | None = None
    dst: int | None = None
    chunk: int | None = None
    bits: tuple[int, ...] = ()
    elem: int = 0
    to: int | None = None
    rank: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value < 0):
                raise ValueError(f"fault field {name} must be an integer >= 0; got {value!r}")
        if not isinstance(self.bits, tuple) or any(isinstance(b, bool) or not isinstance(b, int) or b < 0
                                                  for b in self.bits):
            raise ValueError(f"fault field bit must be integers >= 0; got {self.bits!r}")
        if self.label is not None and (not isinstance(self.label, str) or not self.label):
            raise ValueError(f"fault field label must be a non-empty str; got {self.label!r}")
        given = {"step": self.step, "src": self.src, "dst": self.dst, "to": self.to, "rank": self.rank,
                 "bit": self.bits or None}
        missing = [f for f in _NEEDS[self.kind] if given[f] is None]
        if missing:
            raise ValueError(f"fault {self.kind} needs {', '.join(missing)} (grammar: {self.kind}:"
                             + ",".join(f"{f}=..." for f in _NEEDS[self.kind]) + ")")
        extra = [f for f in ("src", "dst", "to", "rank") if given[f] is not None and f not in _NEEDS[self.kind]
                 and not (f in ("src", "dst") and self.kind in MESSAGE_KINDS)]
        if self.kind == "stop" and self.chunk is not None:
            extra.append("chunk")
        if extra or (self.bits and self.kind != "corrupt"):
            raise ValueError(f"fault {self.kind} does not take {', '.join(extra or ['bit'])}")
        if self.kind == "misroute" and self.to == self.dst:
            raise ValueError(f"fault misroute: to={self.to} is the message's own destination")

    @property
    def link(self) -> tuple[int, int] | None:
        return None if self.src is None else (self.src, self.dst)

    def spec(self) -> str:
        """The fault in the grammar of :func:`parse_fault` (round-trips)."""
        parts = [f"label={self.label}"] if self.label is not None else []
        parts += [f"call={self.call}"] if self.call else []
        for name in ("step", "src", "dst", "chunk", "to", "rank"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)}")
        if self.bits:
            parts += ["bit=" + "+".join(map(str, self.bits))] + ([f"elem={self.elem}"] if self.elem else [])
        return f"{self.kind}:" + ",".join(parts)

    def __str__(self) -> str:
        return self.spec()


def parse_fault(spec: str) -> Fault:
    """A :class:`Fault` from its spec, e.g. ``corrupt:label=grad_reduce_scatter,step=3,src=2,dst=3,bit=30``;
    a ValueError naming the part that is wrong otherwise."""
    if not isinstance(spec, str):
        raise TypeError(f"fault spec must be a str; got {type(spec).__name__}")
    kind, sep, rest = spec.strip().partition(":")
    if not sep or kind not in KINDS:
        raise ValueError(f"fault spec {spec!r} must start with one of {', '.join(f'{k}:' for k in KINDS)}")
    fields: dict = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise ValueError(f"fault spec {spec!r}: {item!r} must be KEY=VALUE")
        if key in fields or (key == "bit" and "bits" in fields):
            raise ValueError(f"fault spec {spec!r}: {key} given twice")
        if key == "label":
            fields["label"] = value
        elif key == "bit":
            fields["bits"] = tuple(_int(spec, key, b) for b in value.split("+"))
        elif key in _INT_FIELDS:
            fields[key] = _int(spec, key, value)
        else:
            raise ValueError(f"fault spec {spec!r}: unknown field {key!r} (allowed: label, bit, "
                             f"{', '.join(_INT_FIELDS)})")
    if "step" not in fields:
        raise ValueError(f"fault spec {spec!r} needs step=S (0-based schedule step)")
    return Fault(kind, **fields)


def _int(spec: str, key: str, text: str) -> int:
    if not text.isdigit() or len(text) > 18:
        raise ValueError(f"fault spec {spec!r}: {key} must be an integer >= 0; got {text!r}")
    return int(text)


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
        from .execute import run_schedule
        from .fault_link import run_faulty_step  # the link layer imports this module
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
                            self.messages)  # ringemu.fault_link
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
    return Schedule(f"{schedule.name}[steps {lo}..{hi - 1}]", schedule.n_ranks, schedule.n_chunks, hi - lo, rows,
                    schedule.initial, schedule.final, schedule.exchange)


def describe(schedule: Schedule, label: str, step: int) -> str:
    """``collective 'label' (schedule, N ranks), step s of 0..T-1``: how every fault error names its place."""
    return f"collective {label!r} ({schedule.name}, {schedule.n_ranks} ranks), step {step} of 0..{schedule.n_steps - 1}"


def step_rows(schedule: Schedule, step: int) -> list[list[int]]:
    """The transfers of one step as lists [step, src, dst, chunk, op]."""
    bounds = schedule.step_bounds()
    return schedule.table[bounds[step]:bounds[step + 1]].tolist()


def check_fault(f: Fault, schedule: Schedule, label: str) -> None:
    """A ValueError if the fault names a step, rank, link, chunk, element or bit this collective does not have."""
    n = schedule.n_ranks
    if f.step >= schedule.n_steps:
        raise ValueError(f"fault {f}: {label!r} ({schedule.name}) has steps 0..{schedule.n_steps - 1}")
    for name in ("src", "dst", "to", "rank"):
        value = getattr(f, name)
        if value is not None and value >= n:
            raise ValueError(f"fault {f}: {name}={value} is not a rank of {label!r} (ranks 0..{n - 1})")
    if f.kind == "stop":
        return
    links = [r for r in step_rows(schedule, f.step) if (r[1], r[2]) == f.link and f.chunk in (None, r[3])]
    if not links:
        there = ", ".join(f"{r[1]}->{r[2]} c{r[3]}" for r in step_rows(schedule, f.step))
        raise ValueError(f"fault {f}: no message {f.src}->{f.dst}" + (f" of chunk {f.chunk}" if f.chunk is not None
                         else "") + f" at step {f.step} of {label!r} ({schedule.name}); that step sends: {there}")


def _watchdog(schedule: Schedule, label: str, step: int, stopped: list[int]) -> None:
    waiting = sorted({r[2] for s in range(step, schedule.n_steps) for r in step_rows(schedule, s)
                      if r[1] in stopped and r[2] not in stopped})
    raise RankStopped(f"rank{'s' if len(stopped) > 1 else ''} {', '.join(map(str, stopped))} stopped: "
                      f"{describe(schedule, label, step)} cannot finish; the watchdog released ranks {waiting} that "
                      f"waited for {'their' if len(stopped) > 1 else 'its'} messages (no partial result)",
                      label, step, tuple(stopped))


def with_step(fault: Fault, step: int) -> Fault:
    """The same fault at another step (used to run a faulty step as a one-step schedule)."""
    return replace(fault, step=step)
