"""The link layer of a faulty step: messages with a CRC-32 header, checked by their receivers.

:func:`run_faulty_step` runs one step of a schedule message by message in numpy, with the faults of
:mod:`ringemu.faults.plan` applied on the wire, and records each message as the link layer saw it
(:class:`Message`: header, CRC-32 stamped by the sender, CRC-32 of what arrived, where it arrived). With
``checksums`` the receivers check every message — the CRC in its header, the addressee, one copy of each
expected message — and raise :class:`~ringemu.faults.plan.MessageFault` at the first bad one. The torch backend
(:mod:`ringemu.faults.torch_faults`) uses :func:`crc`, :func:`first_match` and :func:`flip_bits` on real
messages.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from .spec import Fault, FaultSpecError, MessageFault, describe, step_rows
from ..reference import hop_add
from ..schedule import ADD, COPY, Schedule

__all__ = ["Message", "crc", "run_faulty_step", "first_match", "flip_bits"]


@dataclass(frozen=True)
class Message:
    """One message of a faulty step as the link layer saw it: header, CRC-32 stamped by the sender and CRC-32
    of the payload that arrived at ``delivered_to`` (None: lost on the wire)."""

    label: str
    step: int
    src: int
    dst: int
    chunk: int
    op: int
    sent_crc: int
    received_crc: int | None
    delivered_to: int | None


def crc(values: np.ndarray) -> int:
    """CRC-32 (zlib) of an array's bytes: detects every 1-, 2- and 3-bit error of a message."""
    return zlib.crc32(np.ascontiguousarray(values).view(np.uint8).tobytes())


def run_faulty_step(schedule: Schedule, world: np.ndarray, step: int, faults: list[Fault], label: str,
                    checksums: bool = True, log: list | None = None) -> None:
    """Step ``step`` of ``schedule`` on ``world``, message by message, with ``faults`` applied on the wire.

    Semantics as :mod:`ringemu.schedule` (senders send what they held at the start of the step, additions in
    listed order, 16-bit types added in fp32 and rounded per hop as :func:`ringemu.reference.hop_add`). With
    ``checksums`` the receivers check every message and raise :class:`MessageFault` at the first bad one."""
    chunk = world.shape[1] // schedule.n_chunks
    rows = step_rows(schedule, step)
    outgoing = [world[src, c * chunk:(c + 1) * chunk].copy() for _, src, _, c, _ in rows]
    deliveries = []  # (row index, receiving rank, payload)
    for i, (_, src, dst, c, op) in enumerate(rows):
        payload = outgoing[i]
        f = next((f for f in faults if f.kind != "stop" and first_match(rows, i, f)), None)
        if f is None:
            deliveries.append((i, dst, payload))
        elif f.kind == "corrupt":
            deliveries.append((i, dst, flip_bits(payload, f)))
        elif f.kind == "duplicate":
            deliveries += [(i, dst, payload), (i, dst, payload)]
        elif f.kind == "misroute":
            deliveries.append((i, f.to, payload))
        # drop: nothing arrives
    records = []
    for i, (_, src, dst, c, op) in enumerate(rows):
        got = [(to, p) for j, to, p in deliveries if j == i] or [(None, None)]
        for to, p in got:
            records.append(Message(label, step, src, dst, c, op, crc(outgoing[i]), None if p is None else crc(p), to))
    if log is not None:
        log.extend(records)
    if checksums:
        _verify(schedule, label, step, records)
    for i, to, payload in deliveries:
        _, _, _, c, op = rows[i]
        target = world[to, c * chunk:(c + 1) * chunk]
        if op == COPY:
            target[...] = payload
        elif op == ADD:
            with np.errstate(over="ignore", invalid="ignore"):  # a corrupted exponent may make inf/NaN
                target[...] = hop_add(target, payload)


def first_match(rows, i: int, f: Fault) -> bool:
    """True if row i is the first message of the step that ``f`` matches (a fault hits one message)."""
    for j, (_, src, dst, c, _) in enumerate(rows):
        if (src, dst) == f.link and f.chunk in (None, c):
            return j == i
    return False


def flip_bits(payload: np.ndarray, f: Fault) -> np.ndarray:
    """A copy of ``payload`` with the fault's bits flipped in element ``elem`` (a FaultSpecError if out of range)."""
    width = payload.dtype.itemsize * 8
    if f.elem >= payload.size or any(b >= width for b in f.bits):
        raise FaultSpecError(f"fault {f}: a message holds {payload.size} elements of {width} bits (elem < "
                         f"{payload.size}, bit < {width})")
    out = payload.copy()
    bits = out.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[payload.dtype.itemsize])
    for b in f.bits:
        bits[f.elem] ^= bits.dtype.type(1) << bits.dtype.type(b)
    return out


def _verify(schedule: Schedule, label: str, step: int, records: list[Message]) -> None:
    """What the receivers check: the CRC in each header, the addressee, and one copy of each expected message."""
    seen: dict = {}
    for m in records:
        where = f"{describe(schedule, label, step)}, link {m.src}->{m.dst}, chunk {m.chunk}"
        if m.delivered_to is None:
            raise MessageFault(f"message lost: {where}: rank {m.dst} never received it", label, step,
                               (m.src, m.dst), (m.src, m.dst))
        if m.delivered_to != m.dst:
            raise MessageFault(f"message misrouted: {where}: it arrived at rank {m.delivered_to}", label, step,
                               (m.src, m.dst), (m.src, m.dst))
        if m.received_crc != m.sent_crc:
            raise MessageFault(f"message corrupted: {where}: CRC-32 {m.received_crc:#010x} received, "
                               f"{m.sent_crc:#010x} sent", label, step, (m.src, m.dst), (m.src, m.dst))
        key = (m.src, m.dst, m.chunk)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > _expected_copies(schedule, step, key):
            raise MessageFault(f"message duplicated: {where}: rank {m.dst} received it twice", label, step,
                               (m.src, m.dst), (m.src, m.dst))


def _expected_copies(schedule: Schedule, step: int, key: tuple[int, int, int]) -> int:
    return sum(1 for r in step_rows(schedule, step) if (r[1], r[2], r[3]) == key)
