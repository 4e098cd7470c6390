"""assert_traffic: a CommLedger against the traffic you expect, per rank, exactly.

Two ways to say what you expect (either or both):

* numbers: ``sent=`` / ``received=`` an int (every rank the same) or one int per rank, in ``unit`` (``"bytes"``
  or ``"elements"``), padding included unless ``padding=False``;
* calls: ``calls=[(op, numel, dtype[, label]), ...]`` — the ledger must hold exactly the traffic of these
  ringemu collectives on the ledger's N ranks (counted on size-only buffers, :mod:`ringemu.virtual`): messages,
  elements, bytes and padding of every rank, sent and received.

``sent=`` may also be a :class:`~ringemu.testing.recording.SendLog` (your communicator's own count, in bytes).
``label`` (a label or a list of labels) restricts the ledger to those records first. A mismatch raises
``AssertionError`` naming every rank that differs, each with what ringemu's ledger counts and what you gave
(``sent=`` / ``received=``), so it reads the same whichever side holds your numbers.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ..ledger import CommLedger, RankTraffic

__all__ = ["assert_traffic", "ledger_of_calls"]

UNITS = ("bytes", "elements")


def assert_traffic(ledger: CommLedger, *, sent=None, received=None, calls: Iterable[Sequence] | None = None,
                   label: str | Iterable[str] | None = None, unit: str = "bytes", padding: bool = True) -> None:
    """Check ``ledger`` (restricted to ``label``) against ``sent``/``received`` and/or ``calls`` (module doc)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    if not isinstance(ledger, CommLedger):
        raise TypeError(f"ledger must be a CommLedger; got {type(ledger).__name__}")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")
    if sent is None and received is None and calls is None:
        raise ValueError("assert_traffic needs sent=, received= or calls= (what to expect)")
    where = "" if label is None else f" (label {label!r})"
    if ledger.n_ranks == 0 or not ledger.select(label):
        raise AssertionError(f"the ledger holds no collective{where}; labels recorded: {ledger.labels()}")
    per_rank = ledger.per_rank(label)
    for direction, expected in (("sent", sent), ("received", received)):
        if expected is not None:
            _compare_numbers(per_rank, direction, expected, unit, padding, where)
    if calls is not None:
        n_ranks = ledger.n_ranks
        want = ledger_of_calls(n_ranks, calls).per_rank()
        rows = [f"rank {got_r.rank} {direction}: the ledger{where} counts {_fmt(getattr(got_r, direction))}; "
                f"the calls give {_fmt(getattr(want_r, direction))}"
                for got_r, want_r in zip(per_rank, want) for direction in ("sent", "received")
                if getattr(got_r, direction) != getattr(want_r, direction)]
        if rows:
            raise AssertionError(f"the ledger and calls={list(calls)} on {n_ranks} ranks differ:\n  "
                                 + "\n  ".join(rows))


def ledger_of_calls(n_ranks: int, calls: Iterable[Sequence]) -> CommLedger:
    """A ledger filled by ringemu's own collectives for ``calls`` = (op, numel, dtype[, label]) on size-only
    buffers of ``n_ranks`` ranks."""
    from ..algorithms import op_names
    from ..virtual import VirtualBuffer
    from .oracle import run_op

    ledger = CommLedger()
    for call in calls:
        if not isinstance(call, (tuple, list)) or len(call) not in (3, 4):
            raise ValueError(f"each call must be (op, numel, dtype) or (op, numel, dtype, label); got {call!r}")
        op, numel, dtype = call[:3]
        if op not in op_names():
            raise ValueError(f"call op must be one of {', '.join(op_names())}; got {op!r}")
        run_op(op, VirtualBuffer((n_ranks, numel), dtype), ledger=ledger, label=call[3] if len(call) == 4 else None)
    return ledger


def _compare_numbers(per_rank: list[RankTraffic], direction: str, expected, unit: str, padding: bool,
                     where: str) -> None:
    n = len(per_rank)
    if hasattr(expected, "sent_bytes") and hasattr(expected, "sends"):  # a SendLog: your communicator's bytes
        if direction != "sent" or unit != "bytes":
            raise ValueError("a SendLog gives bytes sent: pass it as sent= with unit='bytes'")
        expected = [expected.sent_bytes(r) for r in range(n)]
    if isinstance(expected, bool) or not (isinstance(expected, int) or _is_int_sequence(expected)):
        raise TypeError(f"{direction} must be an int or a sequence of ints, one per rank; got {expected!r}")
    values = [int(expected)] * n if isinstance(expected, int) else [int(v) for v in expected]
    if len(values) != n:
        raise AssertionError(f"{direction} lists {len(values)} ranks; the ledger{where} counts {n}")
    counted = [getattr(t, unit) - (0 if padding else getattr(t, f"padding_{unit}"))
               for t in (getattr(traffic, direction) for traffic in per_rank)]
    differ = [r for r in range(n) if counted[r] != values[r]]
    if differ:
        kind = "padding included" if padding else "payload only"
        raise AssertionError(f"{unit} {direction}{where} ({kind}) differ on {len(differ)} of {n} ranks: " + "; ".join(
            f"rank {r}: the ledger counts {counted[r]:,}, {direction}= gives {values[r]:,}" for r in differ))


def _is_int_sequence(value) -> bool:
    try:
        items = list(value)
    except TypeError:
        return False
    return all(isinstance(v, int) and not isinstance(v, bool) or hasattr(v, "__index__") for v in items)


def _fmt(t) -> str:
    return (f"{t.messages:,} messages, {t.elements:,} elements = {t.bytes:,} B "
            f"(padding {t.padding_elements:,} elements)")
