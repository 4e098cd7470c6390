"""Steps that fail leave nothing half-updated: one rank's training state is saved before a step and restored if
the step fails.

A collective can fail part-way through a step (:class:`ringemu.faults.plan.CollectiveFault`: a stopped rank, a
corrupted, lost, duplicated or misrouted message). By then a rank may already have updated its optimizer shard
(ZeRO-1/2 all-gather the new weights after the update), so the step is made atomic here: before it, the rank
copies its 16-bit weights, fp32 master, Adam m and v, Adam's step counter and the loss scaler; if the step fails,
it writes them back in place, releases the step's transient buffers (gathered units, buckets, activations) and
drops what the Recorder collected for the step. Then it re-raises — or, when the run's
:class:`~ringemu.faults.plan.FaultPlan` has ``retry=True``, runs the step again (each fault fires once, so the retry
meets none, and training continues to the bits of a run that never failed).

Guarding costs one copy of the rank's model states per step, so it is active only when the rank's Communicator
carries a fault plan (``comm.faults``); without faults a step runs exactly as before. Usage in a stage::

    def one_step(step: int) -> None:
        ...  # the step

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(range(job.steps), one_step)
"""
from __future__ import annotations

import numpy as np

from ringemu.worlds.emulator import RankFailure
from ringemu.faults.spec import CollectiveFault
from ringemu.virtual import is_virtual

__all__ = ["StepGuard", "StepFailed"]


class StepFailed(RankFailure):
    """A training step failed on a fault and was rolled back on every rank. ``fault`` is the
    :class:`~ringemu.faults.plan.CollectiveFault`, ``step`` the training step (0-based), ``states`` rank -> the state
    restored (as :meth:`StepGuard.state` gives it)."""

    def __init__(self, fault: CollectiveFault):
        self.fault, self.step, self.states = fault, fault.train_step, dict(fault.states)
        super().__init__(f"{fault}; training step {self.step} rolled back on every rank (16-bit weights, master, "
                         f"m, v, step counter and loss scale as before it)")


class _Attempt:
    """Context of one try of a step: keeps a CollectiveFault instead of letting it through."""

    def __init__(self, guarded: bool):
        self.guarded, self.error = guarded, None

    def __enter__(self) -> "_Attempt":
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if self.guarded and isinstance(exc, CollectiveFault):
            self.error = exc
            return True
        return False


class StepGuard:
    """Save and restore one rank's state around each step (see the module docstring)."""

    def __init__(self, comm, job, arena, rec, opt, scaler, weights16: list):
        plan = getattr(comm, "faults", None)
        self.active = plan is not None and not job.size_only
        self.retry = bool(getattr(plan, "retry", False))
        self.rank, self.arena, self.rec, self.opt, self.scaler = comm.rank, arena, rec, opt, scaler
        self.weights16 = [w for w in weights16 if not is_virtual(w)]

    def run(self, steps, one_step) -> None:
        """Call ``one_step(step)`` for each of ``steps``, each call atomic (see :meth:`attempts`)."""
        for step in steps:
            for attempt in self.attempts(step):
                with attempt:
                    one_step(step)

    def attempts(self, step: int):
        """Yield one attempt per try of ``step``: one when unguarded; after a failure, restore the state, then
        re-raise the fault or (``retry``) yield another try."""
        if not self.active:
            yield _Attempt(False)
            return
        while True:
            saved = self._save()
            attempt = _Attempt(True)
            yield attempt
            if attempt.error is None:
                return
            self._restore(saved)
            attempt.error.states[self.rank] = self.state()
            attempt.error.train_step = step
            if not self.retry:
                raise attempt.error

    def state(self) -> dict:
        """Copies of what the step must not half-update: the rank's 16-bit weights, master, m, v (per unit, as
        held), Adam's step counter, the loss scale and the scaler's clean-step count."""
        opt = self.opt
        return {"weights16": [np.array(w, copy=True) for w in self.weights16],
                "master": [np.array(a, copy=True) for a in opt.master],
                "m": [np.array(a, copy=True) for a in opt.m], "v": [np.array(a, copy=True) for a in opt.v],
                "step_count": opt.step_count, "loss_scale": self.scaler.scale,
                "clean_steps": self.scaler._clean_steps}

    def _save(self) -> tuple:
        return self.state(), set(self.arena.live_names()), len(self.rec.history)

    def _restore(self, saved: tuple) -> None:
        state, live, n_history = saved
        opt = self.opt
        for store, key in ((self.weights16, "weights16"), (opt.master, "master"), (opt.m, "m"), (opt.v, "v")):
            for now, before in zip(store, state[key]):
                now[...] = before
        opt.step_count = state["step_count"]
        opt.forget_fresh()
        self.scaler.scale, self.scaler._clean_steps = state["loss_scale"], state["clean_steps"]
        for name in sorted(set(self.arena.live_names()) - live):  # the step's transient buffers
            self.arena.free(name)
        self.rec.rollback(n_history)
