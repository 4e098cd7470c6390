"""Faults as data: one message dropped, corrupted, duplicated or misrouted, or a rank stopped, at a chosen step.

A :class:`Fault` names *where* — the collective's ``label`` (and which ``call`` of it), the schedule ``step``
(0-based, as in :class:`~ringemu.schedule.Schedule`'s table) and the link ``src -> dst`` — and *what*. This module
is the vocabulary every part of :mod:`ringemu.faults` shares: the fault record, its spec grammar, the errors a
faulty collective raises, and the check of a fault against a schedule. :mod:`ringemu.faults.plan` fires faults
during a run; :mod:`ringemu.faults.link` is the link layer that applies them.

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

from dataclasses import dataclass, replace

import numpy as np

from ..schedule import Schedule

__all__ = ["KINDS", "MESSAGE_KINDS", "MAX_BIT", "Fault", "FaultSpecError", "CollectiveFault", "MessageFault",
           "RankStopped", "parse_fault", "check_fault", "check_fault_ranks", "with_step", "describe", "step_rows"]

MESSAGE_KINDS = ("drop", "corrupt", "duplicate", "misroute")
KINDS = MESSAGE_KINDS + ("stop",)
MAX_BIT = 63  # bits of an element's storage: 8 B at most (int64, fp64)
_INT_FIELDS = ("call", "step", "src", "dst", "chunk", "elem", "to", "rank")
_NEEDS = {"drop": ("step", "src", "dst"), "corrupt": ("step", "src", "dst", "bit"),
          "duplicate": ("step", "src", "dst"), "misroute": ("step", "src", "dst", "to"), "stop": ("rank", "step")}


class FaultSpecError(ValueError):
    """A fault that names a step, rank, link, element or bit the run does not have: bad input, not a failed run.
    The in-process worlds raise it as it is (not wrapped in RankFailure), so the command line exits 2."""


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
            raise FaultSpecError(f"fault field bit must be integers >= 0; got {self.bits!r}")
        if any(b > MAX_BIT for b in self.bits) or len(set(self.bits)) != len(self.bits):
            raise FaultSpecError(f"fault field bit must be distinct bit positions 0..{MAX_BIT} (a bit flipped twice "
                                 f"is no fault); got {'+'.join(map(str, self.bits))}")
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


def describe(schedule: Schedule, label: str, step: int) -> str:
    """``collective 'label' (schedule, N ranks), step s of 0..T-1``: how every fault error names its place."""
    return f"collective {label!r} ({schedule.name}, {schedule.n_ranks} ranks), step {step} of 0..{schedule.n_steps - 1}"


def step_rows(schedule: Schedule, step: int) -> list[list[int]]:
    """The transfers of one step as lists [step, src, dst, chunk, op]."""
    bounds = schedule.step_bounds()
    return schedule.table[bounds[step]:bounds[step + 1]].tolist()


def check_fault_ranks(f: Fault, n_ranks: int) -> None:
    """A FaultSpecError if the fault names a rank a world of ``n_ranks`` does not have, or the world sends nothing
    (N = 1): checked when the world is set up, before any rank starts."""
    if n_ranks == 1:
        raise FaultSpecError(f"fault {f}: with N = 1 no collective sends a message, so no fault can fire")
    for name in ("src", "dst", "to", "rank"):
        value = getattr(f, name)
        if value is not None and value >= n_ranks:
            raise FaultSpecError(f"fault {f}: {name}={value} is not a rank (ranks 0..{n_ranks - 1})")


def check_fault(f: Fault, schedule: Schedule, label: str) -> None:
    """A FaultSpecError if the fault names a step, rank, link or chunk this collective does not have."""
    n = schedule.n_ranks
    check_fault_ranks(f, n)
    if f.step >= schedule.n_steps:
        raise FaultSpecError(f"fault {f}: {label!r} ({schedule.name}) has steps 0..{schedule.n_steps - 1}")
    if f.kind == "stop":
        return
    links = [r for r in step_rows(schedule, f.step) if (r[1], r[2]) == f.link and f.chunk in (None, r[3])]
    if not links:
        there = ", ".join(f"{r[1]}->{r[2]} c{r[3]}" for r in step_rows(schedule, f.step))
        raise FaultSpecError(f"fault {f}: no message {f.src}->{f.dst}" + (f" of chunk {f.chunk}" if f.chunk is not None
                         else "") + f" at step {f.step} of {label!r} ({schedule.name}); that step sends: {there}")


def with_step(fault: Fault, step: int) -> Fault:
    """The same fault at another step (used to run a faulty step as a one-step schedule)."""
    return replace(fault, step=step)
