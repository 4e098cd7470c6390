"""Sharded checkpoints of a ZeRO run that load at another N and another stage, bit-exactly.

Saving (:class:`CheckpointWriter`, wired into a run by :func:`run_training`): after every K-th step each rank
writes its own file — the chunk it owns under ZeRO's shard map (``ChunkLayout(S_u, N)``, Rajbhandari et al.
2019, §5) of each unit's 16-bit weights, fp32 master, Adam m and v — and the last rank to finish writes the
metadata (stage, N, unit sizes, layout, dtype, seed and settings, Adam's step count, the loss scaler's scale and
clean-step count, every file's SHA-256) and moves the step directory into place; the format and its atomic
writes are in :mod:`zero_stages.checkpoint.format`. Replicated states (DP, the 16-bit weights of ZeRO-1/2) are
saved once, each rank writing its own chunk, so the files are the same for every stage at a given N.

Loading (:func:`load_checkpoint`) checks every file and field first, then assembles each unit's full states
(:class:`TrainingState`); a run at any N and stage starts from it (``Job.resume``), re-sharding by its own map.
Because Adam is elementwise and every stage's update of an element equals DP's bit for bit, training continued
after a reshard equals DP continued from the same state (tests/test_checkpoint.py).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ringemu.dtypes import dtype_name
from ringemu.layout import ChunkLayout
from ringemu.memory import MemoryLedger

from ..adam import AdamConfig
from ..buffers import cast
from .format import (FORMAT, HEADER, LATEST, METADATA, STATES, VERSION, CheckpointError, atomic_write, header_array,
                     npz_bytes, rank_file_name, read_metadata, read_rank_file, sha256, state_key, step_dir_name,
                     verify_file)
from .root import STEP_NAME, RootLock, recover_root, resolve_step, swap_into_place
from .validate import check_header, check_metadata_semantics, check_states, run_digest
from ..precision import LossScaling, check_wire_dtype

__all__ = ["TrainingState", "Checkpoint", "CheckpointWriter", "CheckpointError", "load_checkpoint",
           "run_training", "resume_job", "state_of_report"]


@dataclass(frozen=True)
class TrainingState:
    """Every unit's full states (16-bit weights, fp32 master, m, v) and the counters a run continues from."""

    unit_sizes: tuple[int, ...]
    wire: np.dtype
    weights16: list
    master: list
    m: list
    v: list
    adam_step: int  # applied Adam steps (t of the next step is adam_step + 1)
    loss_scale: float
    clean_steps: int
    steps_done: int  # steps taken, skipped ones included: the next step's index


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: its checked metadata, its directory and the assembled state."""

    metadata: dict
    directory: Path
    state: TrainingState


def _run_settings(job) -> dict:
    work = job.workload
    model = getattr(work, "model", None)
    return {"grads": "model" if model is not None else "blocks", "seed": int(model.seed if model else work.seed),
            "micro_batch": int(model.micro_batch) if model else 4, "width": int(model.width) if model else None,
            "adam": dataclasses.asdict(job.adam), "loss_scaling": dataclasses.asdict(job.loss_scaling)}


class CheckpointWriter:
    """``Job.on_step_end`` hook: after every ``every``-th step, each rank writes its file; the last one of the
    step writes the metadata and swaps the step directory into ``root`` (and ``root/latest`` to it).

    The writer holds the root's lock (``ROOT/.lock``, :class:`~zero_stages.checkpoint.root.RootLock`) from its
    creation to :meth:`close`: a second writer on the same root is refused, naming the holder's host and pid. A
    save that fails (a full disk) removes its partial step directory and raises a CheckpointError naming the file;
    the checkpoints already in the root stay as they were."""

    def __init__(self, root, every: int, stage: str, job):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"save_every must be an integer >= 1; got {every!r}")
        self.root, self.every, self.stage, self.job = Path(root), every, stage, job
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(f"checkpoint root {str(self.root)!r}: cannot create it ({exc.strerror})") from None
        self.root_lock = RootLock(self.root)
        recover_root(self.root)  # a swap cut short by a kill: put the old step back
        for stale in self.root.glob(".step-*.partial"):  # only a writer of this root leaves these, and we hold it
            shutil.rmtree(stale, ignore_errors=True)
        self._lock = threading.Lock()
        self._files: dict[int, dict] = {}  # steps_done -> {file name: {"bytes", "sha256"}}
        self._scaler: dict[int, tuple[float, int, int]] = {}
        self.saved: list[Path] = []

    def close(self) -> None:
        """Release the root's lock (idempotent)."""
        self.root_lock.release()

    def _run_metadata(self, steps_done: int, scale: float, clean: int, adam_step: int) -> dict:
        flat, job = self.job.flat, self.job
        return {"format": FORMAT, "version": VERSION, "stage": self.stage, "n_ranks": flat.n_ranks,
                "unit_sizes": list(flat.unit_sizes),
                "layout": "ChunkLayout(S_u, N): rank r holds elements [r*ceil(S_u/N), min(S_u, (r+1)*ceil(S_u/N))) "
                          "of unit u, unpadded, of each state",
                "wire_dtype": dtype_name(job.wire), **_run_settings(job), "steps_done": steps_done,
                "adam_step": adam_step, "loss_scale": scale, "clean_steps": clean}

    def __call__(self, rank: int, step: int, opt, scaler, weights16) -> None:
        steps_done = step + 1
        if steps_done % self.every:
            return
        staging = self.root / f".{step_dir_name(steps_done)}.partial"
        try:
            self._save_rank(rank, steps_done, staging, opt, scaler, weights16)
        except (CheckpointError, OSError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{staging}: could not save step {steps_done} ({exc}); partial files "
                                  f"removed") from None

    def _save_rank(self, rank, steps_done, staging, opt, scaler, weights16) -> None:
        flat = self.job.flat
        counters = (float(scaler.scale), int(scaler.clean_steps), int(opt.step_count))
        arrays = {HEADER: header_array({"rank": rank, "n_ranks": flat.n_ranks, "stage": self.stage,
                                        "steps_done": steps_done,
                                        "run_sha256": run_digest(self._run_metadata(steps_done, *counters))})}
        held16 = {u: (start, values) for u, start, values in weights16}
        for u, size in enumerate(flat.unit_sizes):
            own = ChunkLayout(size, flat.n_ranks).payload_slice(rank)
            part = opt.parts[u]
            lo, hi = own.start - part.start, own.stop - part.start
            for name, store in (("master", opt.master), ("m", opt.m), ("v", opt.v)):
                arrays[state_key(u, name)] = np.array(opt.payload(store, u)[lo:hi], dtype=np.float32)
            start, values = held16[u]
            arrays[state_key(u, "weights16")] = np.array(values[own.start - start:own.stop - start]).view(np.uint16)
        data = npz_bytes(arrays)
        with self._lock:
            staging.mkdir(exist_ok=True)
        atomic_write(staging / rank_file_name(rank), data)
        with self._lock:
            files = self._files.setdefault(steps_done, {})
            files[rank_file_name(rank)] = {"bytes": len(data), "sha256": sha256(data)}
            self._scaler[steps_done] = counters
            if len(files) < flat.n_ranks:
                return
            self._finish(steps_done, staging, files)

    def _finish(self, steps_done: int, staging: Path, files: dict) -> None:
        meta = {**self._run_metadata(steps_done, *self._scaler.pop(steps_done)), "files": dict(sorted(files.items()))}
        del self._files[steps_done]
        atomic_write(staging / METADATA, json.dumps(meta, indent=1).encode())
        self.saved.append(swap_into_place(self.root, staging, step_dir_name(steps_done)))


def _step_directory(path: Path) -> Path:
    if not path.is_dir():
        raise CheckpointError(f"checkpoint path {str(path)!r} is not a directory")
    if (path / METADATA).is_file():
        return path
    if (path / LATEST).is_file():
        return resolve_step(path)
    raise CheckpointError(f"checkpoint path {path}: no {METADATA} and no {LATEST} pointer: not a checkpoint (or "
                          f"none completed)")


def load_checkpoint(path) -> Checkpoint:
    """Load a checkpoint directory (a step directory, or a root whose ``latest`` names one). Every file's size
    and SHA-256, every field's type, length and domain (:mod:`~zero_stages.checkpoint.validate`), every rank
    file's header (rank, N, stage, step, the run's metadata digest) and the 16-bit weights' agreement with the
    rounded master are checked before anything is returned; a CheckpointError names the file and the field."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f"path must be a non-empty directory path; got {path!r} ({type(path).__name__})")
    directory = _step_directory(Path(path))
    meta = read_metadata(directory)
    check_metadata_semantics(meta, directory / METADATA)
    n, sizes = meta["n_ranks"], tuple(meta["unit_sizes"])
    name = directory.name[1:-len(".old")] if directory.name.endswith(".old") else directory.name
    if STEP_NAME.fullmatch(name) and name != step_dir_name(meta["steps_done"]):
        raise CheckpointError(f"{directory / METADATA}: field steps_done is {meta['steps_done']}, but the directory "
                              f"is {name}")
    strays = sorted(p.name for p in directory.glob("rank-*.npz") if p.name not in meta["files"])
    if strays:
        raise CheckpointError(f"{directory / strays[0]}: a rank file the metadata does not list (N = {n})")
    try:
        wire = check_wire_dtype(meta["wire_dtype"])
    except ValueError:
        raise CheckpointError(f"{directory / METADATA}: field wire_dtype is {meta['wire_dtype']!r}") from None
    full = {s: [np.zeros(size, np.float32) for size in sizes] for s in STATES if s != "weights16"}
    full["weights16"] = [np.zeros(size, wire) for size in sizes]
    for r in range(n):
        name = rank_file_name(r)
        data = verify_file(directory / name, meta["files"][name])
        owned = [ChunkLayout(size, n).payload_slice(r) for size in sizes]
        lengths = {state_key(u, s): sl.stop - sl.start for u, sl in enumerate(owned) for s in STATES}
        header, arrays = read_rank_file(directory / name, data, lengths, wire)
        check_header(header, r, meta, directory / name)
        for u, sl in enumerate(owned):
            for s in STATES:
                full[s][u][sl] = arrays[state_key(u, s)]
    check_states(full, meta["adam_step"], directory)
    for u in range(len(sizes)):
        rounded = cast(full["master"][u], wire)
        if rounded.view(np.uint16).tobytes() != full["weights16"][u].view(np.uint16).tobytes():
            raise CheckpointError(f"{directory}: field unit{u}.weights16 is not the 16-bit rounding of "
                                  f"unit{u}.master (inconsistent shards)")
    state = TrainingState(sizes, wire, full["weights16"], full["master"], full["m"], full["v"], meta["adam_step"],
                          float(meta["loss_scale"]), meta["clean_steps"], meta["steps_done"])
    return Checkpoint(meta, directory, state)


def resume_job(checkpoint: Checkpoint, n_ranks: int, steps: int, record_history: bool = True):
    """The Job that continues ``checkpoint`` for ``steps`` steps on ``n_ranks`` ranks (any N: the states are
    re-sharded by the new N's shard map)."""
    from ..api import training_job
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"checkpoint must be a Checkpoint (from load_checkpoint); got {type(checkpoint).__name__}")
    meta = checkpoint.metadata
    settings = dict(meta["loss_scaling"])
    job = training_job(n_ranks, steps, meta["wire_dtype"], meta["seed"], meta["grads"], tuple(meta["unit_sizes"]),
                       micro_batch=meta["micro_batch"], width=meta["width"], adam=AdamConfig(**meta["adam"]),
                       loss_scaling=LossScaling(**settings), record_history=record_history)
    return dataclasses.replace(job, resume=checkpoint.state, first_step=checkpoint.state.steps_done)


def run_training(stage: str, job, checkpoint_dir=None, save_every: int | None = None, mode: str = "fused",
                 algorithm: str | None = None, faults=None):
    """Run ``stage`` for ``job`` (see :func:`zero_stages.api.run_job`), saving a checkpoint into
    ``checkpoint_dir`` after every ``save_every``-th step when both are given. Returns (report, writer or None)."""
    from ..api import run_job
    from ..job import Job
    if not isinstance(job, Job):
        raise TypeError(f"job must be a zero_stages.job.Job (e.g. from training_job); got {type(job).__name__}")
    if (checkpoint_dir is None) != (save_every is None):
        raise ValueError("give both checkpoint_dir and save_every, or neither")
    if checkpoint_dir is not None and (isinstance(checkpoint_dir, bool) or not isinstance(checkpoint_dir, (
            str, os.PathLike)) or not str(checkpoint_dir)):
        raise TypeError(f"checkpoint_dir must be a non-empty directory path; got {checkpoint_dir!r}")
    job = dataclasses.replace(job, memory=MemoryLedger(job.flat.n_ranks))  # every run records its own memory
    writer = None
    if checkpoint_dir is not None:
        writer = CheckpointWriter(checkpoint_dir, save_every, stage, job)
        job = dataclasses.replace(job, on_step_end=writer)
        writer.job = job
    extra = {} if algorithm is None else {"algorithm": algorithm}
    try:
        return run_job(stage, job, mode, faults=faults, **extra), writer
    finally:
        if writer is not None:
            writer.close()


def state_of_report(report, loss_scaling: LossScaling) -> TrainingState:
    """The TrainingState a finished report (from step 0) ends in: its gathered final states, Adam's step count
    (the steps not skipped) and the loss scaler after its updates; for continuing a run in memory."""
    from ..precision import LossScaler
    sizes = report.unit_sizes
    offsets = np.cumsum((0, *sizes))
    scaler = LossScaler(loss_scaling)
    for skipped in report.skipped_steps:
        scaler.update(skipped)

    def split(values):
        return [np.array(values[offsets[u]:offsets[u + 1]]) for u in range(len(sizes))]

    return TrainingState(tuple(sizes), report.weights16.dtype, split(report.weights16), split(report.master),
                         split(report.m), split(report.v), sum(not s for s in report.skipped_steps), scaler.scale,
                         scaler.clean_steps, report.steps)
