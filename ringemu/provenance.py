"""Symbolic execution of a schedule: each chunk remembers which ranks' contributions it holds.

In the manner of MSCCLang's chunk checker (Cowan et al. 2023, "MSCCLang: Microsoft Collective Communication
Language", §4), a schedule is run on symbols instead of numbers. A chunk's provenance is the set of ranks whose
input it contains, kept as a Python int bitmask. :func:`check_provenance` proves a schedule's postcondition
for the given N, and rejects a schedule that adds a contribution twice, moves a chunk nobody has defined yet,
or sends a chunk in the same step in which it receives it (unless the schedule is an ``exchange`` schedule, whose
sources send the value held at the start of the step). Chunks of a shard (``n_chunks = k·N``) belong to the
shard's rank; the one chunk of a whole-buffer schedule holds every shard.
"""
from __future__ import annotations

from .schedule import ADD, COPY, Schedule

__all__ = ["ProvenanceError", "initial_provenance", "run_provenance", "check_provenance", "expected_provenance"]

UNDEFINED = 0  # empty bitmask: this rank holds nothing meaningful in this chunk


class ProvenanceError(AssertionError):
    """A schedule broke its own contract; the message names the step, transfer and chunk."""


def initial_provenance(schedule: Schedule) -> list[list[int]]:
    """``state[rank][chunk]`` bitmasks before step 0, from ``schedule.initial``."""
    n, c = schedule.n_ranks, schedule.n_chunks
    if schedule.initial == "all":  # every rank contributes its own input to every chunk
        return [[1 << r] * c for r in range(n)]
    if schedule.initial == "own":  # rank r holds only its shard's chunks, as rank r's data
        if not schedule.split:
            raise ValueError(f"{schedule.name}: initial 'own' needs at least one chunk per shard")
        return [[(1 << r) if schedule.shard_of(k) == r else UNDEFINED for k in range(c)] for r in range(n)]
    raise ValueError(f"unknown initial condition {schedule.initial!r}")


def expected_provenance(schedule: Schedule) -> list[list[int | None]]:
    """The postcondition: ``want[rank][chunk]`` is the required bitmask, or None where anything goes."""
    n, c = schedule.n_ranks, schedule.n_chunks
    everyone = (1 << n) - 1
    if schedule.final == "reduced-own":
        if not schedule.split:  # the one chunk holds every shard, rank r's included
            return [[everyone] * c for _ in range(n)]
        return [[everyone if schedule.shard_of(k) == r else None for k in range(c)] for r in range(n)]
    if schedule.final == "reduced-all":
        return [[everyone] * c for _ in range(n)]
    if schedule.final == "gathered":
        if not schedule.split:
            raise ValueError(f"{schedule.name}: final 'gathered' needs at least one chunk per shard")
        return [[1 << schedule.shard_of(k) for k in range(c)] for _ in range(n)]
    raise ValueError(f"unknown final condition {schedule.final!r}")


def run_provenance(schedule: Schedule, record_steps: bool = False):
    """Execute ``schedule`` symbolically; return the final state (and, if asked, the state after each step).

    Raises :class:`ProvenanceError` on a double-counted contribution, a read of an undefined chunk,
    or a rank that sends a chunk it receives in the same step (allowed in an ``exchange`` schedule: every source
    sends what it held at the start of the step).
    """
    state = initial_provenance(schedule)
    history = []
    bounds = schedule.step_bounds()
    table = schedule.table.tolist()
    for step in range(schedule.n_steps):
        rows = table[bounds[step]:bounds[step + 1]]
        received = {(dst, chunk) for _, _, dst, chunk, _ in rows}
        sent = [(src, chunk, state[src][chunk]) for _, src, _, chunk, _ in rows]
        for (_, src, dst, chunk, op), (_, _, value) in zip(rows, sent):
            where = f"step {step}: {src} -> {dst}, chunk {chunk}"
            if (src, chunk) in received and not schedule.exchange:
                raise ProvenanceError(f"{where}: rank {src} sends chunk {chunk} while receiving it")
            if value == UNDEFINED:
                raise ProvenanceError(f"{where}: rank {src} sends an undefined chunk")
            if op == COPY:
                state[dst][chunk] = value
            elif op == ADD:
                if state[dst][chunk] == UNDEFINED:
                    raise ProvenanceError(f"{where}: adds into an undefined chunk")
                if state[dst][chunk] & value:
                    raise ProvenanceError(f"{where}: contributions {_ranks(state[dst][chunk] & value)} added twice")
                state[dst][chunk] |= value
            else:
                raise ProvenanceError(f"{where}: unknown op {op}")
        if record_steps:
            history.append([row[:] for row in state])
    return (state, history) if record_steps else state


def check_provenance(schedule: Schedule) -> None:
    """Prove the schedule's postcondition for its N, or raise :class:`ProvenanceError` saying where it fails."""
    final = run_provenance(schedule)
    want = expected_provenance(schedule)
    bounds = schedule.partition
    for rank in range(schedule.n_ranks):
        for chunk in range(schedule.n_chunks):
            need = want[rank][chunk]
            if bounds is not None and bounds[chunk + 1] == bounds[chunk]:
                continue  # an empty chunk of an engine's partition holds nothing (engines send none)
            if need is not None and final[rank][chunk] != need:
                raise ProvenanceError(
                    f"{schedule.name} with N={schedule.n_ranks}: rank {rank} chunk {chunk} holds contributions "
                    f"{_ranks(final[rank][chunk])}, expected {_ranks(need)}")


def _ranks(mask: int) -> list[int]:
    return [r for r in range(mask.bit_length()) if mask >> r & 1]
