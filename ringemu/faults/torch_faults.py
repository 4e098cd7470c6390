"""The fault specs of :mod:`ringemu.faults.plan` on the torch backend: one faulty step of a schedule over send/recv.

Each rank process holds its own :class:`~ringemu.faults.plan.FaultPlan` (every rank makes the same calls, so the
counters agree) and runs the faulty step of a registry schedule (:class:`TorchCommunicator` with a registry
algorithm, e.g. ``"ring"``) through a small link layer on real messages: each message is a header
``(CRC-32, step, src, dst, chunk)`` followed by its payload, on tags of their own; each receiver waits at most
``fault_wait`` seconds for each message it expects (the watchdog) and checks the CRC.

* ``stop``: the stopped rank raises :class:`~ringemu.faults.plan.RankStopped` in its own process and leaves; the
  launcher (:class:`~ringemu.worlds.torch_launch.TorchWorld`) reports it first, stops the ranks that wait
  for it, and reaps every process.
* ``corrupt``: the sender flips the bits after stamping the CRC; the receiver raises
  :class:`~ringemu.faults.plan.MessageFault` naming the link.
* ``drop`` and ``misroute``: the message never reaches its receiver (a misrouted one waits, unread, at the rank
  it was sent to); the receiver's watchdog raises ``MessageFault`` ("lost") naming the link after
  ``fault_wait`` seconds.
* ``duplicate`` runs on the emulator only: a second copy on a real link is read by nobody, so the receiver
  cannot tell; the spec is refused with a ValueError.
"""
from __future__ import annotations

import datetime

import numpy as np
import torch
import torch.distributed as dist

from .link import crc, first_match, flip_bits
from ..torch_tensors import to_numpy, to_torch
from .spec import Fault, MessageFault, RankStopped, check_fault
from ..reference import hop_add
from ..schedule import ADD, COPY, Schedule

__all__ = ["faults_for", "faulty_step", "TAG_BASE"]

TAG_BASE = 1 << 20  # tags of the faulty step's messages: apart from the schedule's own tags (0 .. transfers-1)


def faults_for(plan, schedule: Schedule, label: str) -> list[Fault]:
    """This call's faults (none without a plan), each checked against the schedule."""
    if plan is None:
        return []
    faults = plan.take(label)
    for f in faults:
        check_fault(f, schedule, label)
        if f.kind == "duplicate":
            raise ValueError(f"fault {f}: duplicate faults run on the emulator only (on a real link the second "
                             f"copy is read by nobody)")
        plan.fired.append((f, label, schedule.name))
    return faults


def _where(schedule: Schedule, label: str, step: int, src: int, dst: int, chunk: int) -> str:
    return (f"collective {label!r} ({schedule.name}, {schedule.n_ranks} ranks), step {step} of "
            f"0..{schedule.n_steps - 1}, link {src}->{dst}, chunk {chunk}")


def faulty_step(comm, schedule: Schedule, row: np.ndarray, chunk: int, step: int, rows: list, faults: list[Fault],
                label: str) -> None:
    """Step ``step`` of ``schedule`` on this rank's padded ``row``, with ``faults``, over the link layer."""
    stopped = sorted({f.rank for f in faults if f.kind == "stop"})
    if comm.rank in stopped:
        raise RankStopped(f"rank {comm.rank} stopped (injected): collective {label!r} ({schedule.name}, "
                          f"{schedule.n_ranks} ranks), step {step} of 0..{schedule.n_steps - 1}; its process "
                          f"leaves without sending", label, step, (comm.rank,))
    message_faults = [f for f in faults if f.kind != "stop"]
    sends, receives = [], []
    for t, (_, src, dst, c, op) in enumerate(rows):
        if src == comm.rank:
            payload = row[c * chunk:(c + 1) * chunk].copy()
            header = np.array([crc(payload), step, src, dst, c], dtype=np.int64)
            f = next((f for f in message_faults if first_match(rows, t, f)), None)
            if f is not None and f.kind == "drop":
                continue
            if f is not None and f.kind == "corrupt":
                payload = flip_bits(payload, f)
            to = f.to if f is not None and f.kind == "misroute" else dst
            works = [dist.isend(torch.from_numpy(header), comm._peer(to), comm.group, TAG_BASE + 2 * t),
                     dist.isend(comm._dev(payload), comm._peer(to), comm.group, TAG_BASE + 2 * t + 1)]
            sends += [] if to != dst else works  # a misrouted message is never read: do not wait for it
        if dst == comm.rank:
            header = torch.empty(5, dtype=torch.int64)
            box = torch.empty(chunk, dtype=to_torch(row[:0]).dtype, device=comm.device)
            receives.append((src, c, op, header, box,
                             dist.irecv(header, comm._peer(src), comm.group, TAG_BASE + 2 * t),
                             dist.irecv(box, comm._peer(src), comm.group, TAG_BASE + 2 * t + 1)))
    wait = datetime.timedelta(seconds=comm.fault_wait)
    arrived = []
    for src, c, op, header, box, w_header, w_box in receives:
        where = _where(schedule, label, step, src, comm.rank, c)
        try:
            w_header.wait(wait)
            w_box.wait(wait)
        except RuntimeError:  # gloo: "Timed out waiting ..."
            raise MessageFault(f"message lost: {where}: rank {comm.rank} waited {comm.fault_wait:g} s for it "
                               f"(watchdog)", label, step, (src, comm.rank), (src, comm.rank)) from None
        data = to_numpy(box).copy()
        sent_crc, h_step, h_src, h_dst, h_chunk = header.tolist()
        if (h_step, h_src, h_dst, h_chunk) != (step, src, comm.rank, c):
            raise MessageFault(f"message misaddressed: {where}: header says step {h_step}, {h_src}->{h_dst}, "
                               f"chunk {h_chunk}", label, step, (src, comm.rank), (src, comm.rank))
        if crc(data) != sent_crc:
            raise MessageFault(f"message corrupted: {where}: CRC-32 {crc(data):#010x} received, {sent_crc:#010x} "
                               f"sent", label, step, (src, comm.rank), (src, comm.rank))
        arrived.append((c, op, data))
    for w in sends:
        w.wait(wait)
    for c, op, data in arrived:
        target = row[c * chunk:(c + 1) * chunk]
        if op == COPY:
            target[...] = data
        elif op == ADD:
            with np.errstate(over="ignore", invalid="ignore"):
                target[...] = hop_add(target, data)
