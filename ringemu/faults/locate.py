"""Finding and locating a fault from what a faulty run left behind, without being told the fault.

:func:`observe` runs a schedule step by step with faults (the link layer's checks off, so that wrong values go
through) and keeps every rank's buffer before and after each step and the link layer's message records. Four
detectors then read that observation; each returns a :class:`Finding` — the first step at which it sees
something wrong and the links it blames — or None:

* ``checksum``: the per-message CRC-32 records (:class:`ringemu.faults.plan.Message`, what a ledger of messages would
  carry): a payload whose CRC differs from its header, a message that arrived elsewhere, one that never arrived,
  one that arrived twice. Finds every fault kind; names the link it was sent on.
* ``provenance``: MSCCLang's chunk invariant (Cowan et al. 2023, §4) run on the messages as delivered: each
  (rank, chunk) must hold the ranks' contributions the fault-free schedule gives it after every step, none
  twice. Sees drops, duplicated additions and misroutes; cannot see a corrupted payload (the symbols are right)
  or a duplicated copy (copying twice is copying once).
* ``values``: the numbers themselves. Integer blocks: conservation of the column sums — after every step,
  cell (r, c) holds exactly Σ_{i ∈ provenance(r, c)} x_i[c] (integer addition wraps but is associative, so the
  order does not matter). Floats: the fault-free step replayed from the observed state before it must give the
  observed state after it, bit for bit. Misses only what leaves every buffer's bits unchanged: a duplicated
  copy, a drop or duplicate of an all-zero payload, or (floats) a corrupted bit that the receiver's rounding
  erases in its sum.
* ``output``: only the collective's result against a fault-free run's (what a user comparing results sees).

A finding *locates* a fault when its step is the fault's and its links are exactly the fault's link.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..execute import run_schedule
from .link import Message, crc, run_faulty_step
from .plan import sub_schedule
from .spec import Fault, with_step
from ..provenance import initial_provenance, run_provenance
from ..reference import run_schedule_reference
from ..schedule import COPY, Schedule

__all__ = ["DETECTORS", "Finding", "Observation", "observe", "detect", "located", "output_cells", "explain"]

DETECTORS = ("checksum", "provenance", "values", "output")


@dataclass(frozen=True)
class Finding:
    """Where a detector saw the fault: ``step`` (0-based), the suspected ``links`` (src, dst), the wrong
    ``cells`` (rank, chunk) at that step, and a one-line ``note``."""

    detector: str
    step: int | None
    links: tuple[tuple[int, int], ...]
    cells: tuple[tuple[int, int], ...]
    note: str


@dataclass(frozen=True, eq=False)
class Observation:
    """A faulty run, step by step: ``states[s]`` is every rank's padded buffer before step s (``states[-1]``
    after the last); ``messages`` every message of every step as the link layer saw it; ``clean`` the fault-free
    run's final buffers."""

    schedule: Schedule
    states: tuple[np.ndarray, ...]
    messages: tuple[Message, ...]
    clean: np.ndarray


def observe(schedule: Schedule, world: np.ndarray, faults: list[Fault], mode: str = "fused",
            label: str = "collective") -> Observation:
    """Run ``schedule`` on a copy of the padded ``world`` with message ``faults`` (stop faults are the watchdog's
    business, not observed here); fault-free steps run with the kernels in ``mode``."""
    work, chunk = world.copy(), world.shape[1] // schedule.n_chunks
    states, messages = [work.copy()], []
    bounds = schedule.step_bounds()
    for s in range(schedule.n_steps):
        one = sub_schedule(schedule, s, s + 1)
        here = [with_step(f, 0) for f in faults if f.step == s and f.kind != "stop"]
        if here:
            log: list[Message] = []
            run_faulty_step(one, work, 0, here, label, checksums=False, log=log)
            messages += [Message(m.label, s, m.src, m.dst, m.chunk, m.op, m.sent_crc, m.received_crc,
                                 m.delivered_to) for m in log]
        else:
            for _, src, dst, c, op in schedule.table[bounds[s]:bounds[s + 1]].tolist():
                sent = crc(work[src, c * chunk:(c + 1) * chunk])
                messages.append(Message(label, s, src, dst, c, op, sent, sent, dst))  # a kernel's perfect link
            run_schedule(one, work, mode)
        states.append(work.copy())
    clean = world.copy()
    run_schedule_reference(schedule, clean)
    return Observation(schedule, tuple(states), tuple(messages), clean)


def output_cells(schedule: Schedule) -> list[tuple[int, int]]:
    """The (rank, chunk) cells that are the collective's result (its postcondition names them)."""
    n, c, k = schedule.n_ranks, schedule.n_chunks, schedule.split
    if schedule.final == "reduced-own" and k:  # rank r's result is its shard: chunks r·k .. r·k + k - 1
        return [(r, r * k + j) for r in range(n) for j in range(k)]
    return [(r, j) for r in range(n) for j in range(c)]


def detect(obs: Observation, detector: str) -> Finding | None:
    """Run one of :data:`DETECTORS` on an observation."""
    if detector not in DETECTORS:
        raise ValueError(f"detector must be one of {', '.join(DETECTORS)}; got {detector!r}")
    return {"checksum": _checksum, "provenance": _provenance, "values": _values, "output": _output}[detector](obs)


def located(finding: Finding | None, fault: Fault) -> bool:
    """True if ``finding`` names the fault's step and exactly its link."""
    return finding is not None and finding.step == fault.step and finding.links == (fault.link,)


# -- detectors ---------------------------------------------------------------------------------------------------
def _checksum(obs: Observation) -> Finding | None:
    expected: dict = {}
    bounds = obs.schedule.step_bounds()
    for s in range(obs.schedule.n_steps):
        for _, src, dst, c, _ in obs.schedule.table[bounds[s]:bounds[s + 1]].tolist():
            expected[(s, src, dst, c)] = expected.get((s, src, dst, c), 0) + 1
    seen: dict = {}
    for m in obs.messages:
        key = (m.step, m.src, m.dst, m.chunk)
        seen[key] = seen.get(key, 0) + 1
        why = ("never arrived" if m.delivered_to is None else
               f"arrived at rank {m.delivered_to}" if m.delivered_to != m.dst else
               "CRC-32 mismatch" if m.received_crc != m.sent_crc else
               "arrived twice" if seen[key] > expected.get(key, 0) else None)
        if why:
            return Finding("checksum", m.step, ((m.src, m.dst),), ((m.dst, m.chunk),),
                           f"message {m.src}->{m.dst} chunk {m.chunk} at step {m.step}: {why}")
    return None


def _provenance(obs: Observation) -> Finding | None:
    sched = obs.schedule
    _, want = run_provenance(sched, record_steps=True)
    state = initial_provenance(sched)
    delivered: dict = {}
    for m in obs.messages:
        if m.delivered_to is not None:
            delivered.setdefault(m.step, []).append(m)
    for s in range(sched.n_steps):
        msgs = delivered.get(s, [])
        before = [row[:] for row in state]
        twice: dict = {}  # cell -> the link that added a contribution it already held
        for m in msgs:
            r, c, value = m.delivered_to, m.chunk, before[m.src][m.chunk]
            if m.op == COPY:
                state[r][c] = value
            else:
                if state[r][c] & value:
                    twice.setdefault((r, c), (m.src, m.dst))
                state[r][c] |= value
        wrong = sorted(set(twice) | {(r, c) for r in range(sched.n_ranks) for c in range(sched.n_chunks)
                                     if state[r][c] != want[s][r][c]})
        if wrong:
            links = []
            for cell in wrong:
                found = [twice[cell]] if cell in twice else _blame_masks(sched, s, cell, before,
                                                                          want[s][cell[0]][cell[1]], state)
                links += [x for x in found if x not in links]
            return Finding("provenance", s, tuple(links), tuple(wrong),
                           f"step {s}: contributions wrong at (rank, chunk) {wrong}")
    return None


def _blame_masks(sched: Schedule, step: int, cell, before, want_mask: int, state) -> list[tuple[int, int]]:
    """The scheduled transfers into ``cell`` at ``step``; where several add into it, the one whose contributions
    are the ones missing."""
    r, c = cell
    bounds = sched.step_bounds()
    into = [(src, dst) for _, src, dst, cc, _ in sched.table[bounds[step]:bounds[step + 1]].tolist()
            if (dst, cc) == (r, c)]
    if len(into) > 1:
        missing = want_mask & ~state[r][c]
        into = [(src, dst) for src, dst in into if before[src][c] == missing] or into
    return into


def _values(obs: Observation) -> Finding | None:
    sched, states = obs.schedule, obs.states
    integer = states[0].dtype.kind in "iu"
    chunk = states[0].shape[1] // sched.n_chunks
    if integer:
        _, masks = run_provenance(sched, record_steps=True)
    for s in range(sched.n_steps):
        if integer:
            want = _mask_sums(states[0], masks[s], chunk)
        else:
            want = states[s].copy()
            with np.errstate(over="ignore", invalid="ignore"):  # replaying a corrupted value: inf/NaN allowed
                run_schedule_reference(sub_schedule(sched, s, s + 1), want)
        bits = f"u{want.dtype.itemsize}"  # compare bits: NaN payloads and signed zeros count
        diff = (want.view(bits) != states[s + 1].view(bits)).reshape(sched.n_ranks, sched.n_chunks, chunk).any(axis=2)
        if diff.any():
            wrong = [tuple(x) for x in np.argwhere(diff).tolist()]
            links = _blame(sched, s, wrong, states, want, chunk) if integer else _blame(sched, s, wrong)
            return Finding("values", s, links, tuple(wrong), f"step {s}: values wrong at (rank, chunk) {wrong}")
    return None


def _output(obs: Observation) -> Finding | None:
    chunk = obs.clean.shape[1] // obs.schedule.n_chunks
    final = obs.states[-1]
    wrong = [(r, c) for r, c in output_cells(obs.schedule)
             if final[r, c * chunk:(c + 1) * chunk].tobytes() != obs.clean[r, c * chunk:(c + 1) * chunk].tobytes()]
    if not wrong:
        return None
    return Finding("output", None, (), tuple(wrong), f"result wrong at (rank, chunk) {wrong}")


# -- helpers -----------------------------------------------------------------------------------------------------
def _mask_sums(initial: np.ndarray, masks: list[list[int]], chunk: int) -> np.ndarray:
    """Cell (r, c) = Σ_{i in masks[r][c]} initial[i, chunk c], in the dtype (wrapping); undefined cells keep
    their initial value."""
    want = initial.copy()
    n, n_chunks = len(masks), len(masks[0])
    for r in range(n):
        for c in range(n_chunks):
            mask = masks[r][c]
            if mask:
                who = [i for i in range(n) if mask >> i & 1]
                want[r, c * chunk:(c + 1) * chunk] = initial[who, c * chunk:(c + 1) * chunk].sum(
                    axis=0, dtype=initial.dtype)
    return want


def _blame(sched: Schedule, step: int, wrong, states=None, want=None, chunk=None) -> tuple[tuple[int, int], ...]:
    """The links of the step's transfers into the wrong cells. Where several transfers add into one cell
    (integer blocks), keep the one whose payload explains the difference (dropped or added once more)."""
    bounds = sched.step_bounds()
    rows = sched.table[bounds[step]:bounds[step + 1]].tolist()
    links = []
    for r, c in wrong:
        into = [(src, dst) for _, src, dst, cc, _ in rows if (dst, cc) == (r, c)]
        if len(into) > 1 and states is not None:
            sl = slice(c * chunk, (c + 1) * chunk)
            delta = states[step + 1][r, sl] - want[r, sl]  # wraps like the sums it compares
            into = [(src, dst) for src, dst in into if delta.any() and (
                np.array_equal(delta, states[step][src, sl]) or np.array_equal(-delta, states[step][src, sl]))] or into
        links += [x for x in into if x not in links]
    return tuple(links)


def explain(schedule: Schedule, world: np.ndarray, faults: list[Fault], mode: str = "step") \
        -> tuple[list[str], dict[int, set[tuple[int, int]]]]:
    """What ``ringemu trace --fault`` prints: each detector's finding, where the wrong value entered and which
    (rank, chunk) cells it reached after each step; and ``wrong[step]``, the cells to mark in the trace."""
    obs = observe(schedule, world, faults, mode)
    clean, chunk = world.copy(), world.shape[1] // schedule.n_chunks
    bits = f"u{world.dtype.itemsize}"
    wrong: dict[int, set[tuple[int, int]]] = {}
    for s in range(schedule.n_steps):
        run_schedule_reference(sub_schedule(schedule, s, s + 1), clean)
        diff = (clean.view(bits) != obs.states[s + 1].view(bits)).reshape(schedule.n_ranks, schedule.n_chunks, chunk)
        cells = {tuple(x) for x in np.argwhere(diff.any(axis=2)).tolist()}
        if cells:
            wrong[s] = cells
    lines = ["faults: " + "; ".join(f.spec() for f in faults),
             f"(steps here are 0-based, as in --fault; the walk above counts them from 1)"]
    for d in DETECTORS[:3]:
        f = detect(obs, d)
        where = "nothing found" if f is None else \
            f"step {f.step}, link{'s' if len(f.links) != 1 else ''} " \
            f"{', '.join(f'{a}->{b}' for a, b in f.links) or 'none'}: {f.note}"
        lines.append(f"  {d:<10} {where}")
    if not wrong:
        lines.append("the values never differed from the fault-free run (e.g. a duplicated copy, or a bit the "
                     "rounding erased): only the checksums see this fault")
        return lines, wrong
    first = min(wrong)
    lines.append(f"entered at step {first}: " + ", ".join(f"rank {r} chunk {c}" for r, c in sorted(wrong[first])))
    for s in sorted(wrong):
        lines.append(f"  after step {s}: wrong at " + " ".join(f"r{r}c{c}" for r, c in sorted(wrong[s])))
    reached = set().union(*wrong.values())
    result = sorted(set(output_cells(schedule)) & wrong.get(schedule.n_steps - 1, set()))
    lines.append(f"reached ranks {sorted({r for r, _ in reached})}, chunks {sorted({c for _, c in reached})}; "
                 + (f"the result is wrong at (rank, chunk) {result}" if result else "the result is right"))
    return lines, wrong
