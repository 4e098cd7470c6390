"""What every rank of one run reads (:class:`Job`), and what each rank hands back (:class:`RankResult`).

A stage is a per-rank function ``run_rank(comm, job) -> RankResult`` written against the
:class:`~ringemu.worlds.Communicator` protocol; the job is shared and read-only except for the MemoryLedger,
in which each rank writes only its own row. :class:`Recorder` keeps, per step, copies of what the rank holds
(its pieces of the 16-bit weights, master, m, v and the averaged gradient, and its own 16-bit gradients before
the reduction) so that parity with DP can be checked after every step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ringemu.memory import MemoryLedger

from .adam import AdamConfig
from .buffers import snapshot
from .flat import FlatParams
from .precision import LossScaling

__all__ = ["Job", "StepRecord", "RankResult", "Recorder", "Pieces"]

Pieces = list  # of (unit, start in unit, values): the parts of a per-unit quantity a rank holds


@dataclass(frozen=True)
class Job:
    """One run: the flat parameters (units, N), 16-bit type, steps, gradient source, Adam and loss scaling."""

    flat: FlatParams
    wire: np.dtype
    steps: int
    workload: Any  # ModelWorkload | BlockWorkload | SizeOnlyWorkload
    adam: AdamConfig
    loss_scaling: LossScaling
    memory: MemoryLedger
    size_only: bool = False
    record_history: bool = True
    resume: Any = None  # a zero_stages.checkpoint.save_load.TrainingState to start from (full per-unit states), or None
    first_step: int = 0  # index of the first step (the workload's data for step t is the same in every run)
    on_step_end: Any = None  # callable(rank, step, opt, scaler, weights16 pieces) after every step, or None
    ranks_per_node: int | None = None  # K of a 2-D mesh (N = R nodes × K): the hsdp and zeropp stages need it
    options: Any = None  # a stage's own settings: zeropp's ZeroPPConfig, offload's host ledgers (OffloadHost)
    _initial: dict = field(default_factory=dict, repr=False, compare=False)  # unit -> initial fp32 values, read-only

    def init_unit(self, unit: int):
        """Unit ``unit``'s initial fp32 values (None when size-only): the resumed state's master weights, or the
        workload's, computed once per job and shared by the ranks read-only (each copies what it keeps)."""
        if unit not in self._initial:
            values = self.workload.init_unit(unit) if self.resume is None else self.resume.master[unit].copy()
            if values is not None:
                values.flags.writeable = False
            self._initial[unit] = values
        return self._initial[unit]

    def step_range(self) -> range:
        """The step indices this run takes: ``first_step`` to ``first_step + steps``."""
        return range(self.first_step, self.first_step + self.steps)

    def end_step(self, rank: int, step: int, opt, scaler, weights16: "Pieces") -> None:
        """Called by every rank after each step (its loss scaler updated): hands the rank's state to
        ``on_step_end`` (a checkpoint writer), if any."""
        if self.on_step_end is not None:
            self.on_step_end(rank, step, opt, scaler, weights16)


@dataclass
class StepRecord:
    """One rank after one step (or before the first: step -1)."""

    step: int
    skipped: bool
    loss_scale: float
    weights16: Pieces
    master: Pieces
    m: Pieces
    v: Pieces
    grad32: Pieces = field(default_factory=list)  # averaged fp32 gradient of the rank's parts (empty if skipped)
    local_grads16: dict = field(default_factory=dict)  # unit -> this rank's own 16-bit gradient, before reduction


@dataclass
class RankResult:
    """What one rank hands back: its states, and its own row of the MemoryLedger (so that ranks run as separate
    processes, e.g. on torch.distributed, report their memory too)."""

    rank: int
    final: StepRecord | None  # None in size-only runs
    history: list[StepRecord]
    model_state_padding_bytes: int
    model_state_bytes: int = 0  # held at the end (between steps)
    peak_bytes: int = 0
    memory_by_category: dict = field(default_factory=dict)  # {category: {"current": B, "peak": B}}


class Recorder:
    """Collects one rank's StepRecords (copies; nothing in size-only runs)."""

    def __init__(self, job: Job, rank: int):
        self.job, self.rank = job, rank
        self.history: list[StepRecord] = []
        self._grad32: Pieces = []
        self._local: dict = {}

    @property
    def active(self) -> bool:
        return self.job.record_history and not self.job.size_only

    def local_grad(self, unit: int, grad16) -> None:
        if self.active:
            self._local[unit] = snapshot(grad16)

    def grad32(self, unit: int, start: int, values) -> None:
        if self.active:
            self._grad32.append((unit, start, snapshot(values)))

    def _record(self, step, skipped, scale, weights16: Pieces, opt) -> StepRecord | None:
        if self.job.size_only:
            return None

        def copy(pieces):
            return [(u, s, snapshot(a)) for u, s, a in pieces]

        return StepRecord(step, skipped, scale, copy(weights16), copy(opt.pieces(opt.master)),
                          copy(opt.pieces(opt.m)), copy(opt.pieces(opt.v)),
                          sorted(self._grad32, key=lambda p: p[0]), dict(self._local))

    def rollback(self, n_history: int) -> None:
        """Forget what a failed step collected (and any record after the first ``n_history``)."""
        del self.history[n_history:]
        self._grad32, self._local = [], {}

    def end_step(self, step: int, skipped: bool, scale: float, weights16: Pieces, opt) -> None:
        if self.active:
            self.history.append(self._record(step, skipped, scale, weights16, opt))
        self._grad32, self._local = [], {}

    def result(self, arena, scale: float, weights16: Pieces, opt) -> RankResult:
        final = self._record(self.job.steps - 1, False, scale, weights16, opt)
        memory = self.job.memory
        return RankResult(self.rank, final, self.history, arena.padding_bytes, memory.model_states(self.rank),
                          memory.peak(self.rank), memory.by_category(self.rank))
