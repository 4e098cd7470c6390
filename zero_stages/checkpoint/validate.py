"""The semantic checks of a loaded checkpoint: every field in its domain and the fields consistent with each other.

Checksums (:mod:`~zero_stages.checkpoint.format`) catch a damaged byte; these checks catch a file that is
well-formed and whose checksums were recomputed but whose content no run of ZeRO could have written:

- metadata: N and Ψ within the training bounds (N <= 1024, Ψ·N <= 2^26); the stage one of DP, ZeRO-1/2/3; ``1 <= steps_done <= MAX_STEPS_DONE``; ``0 <= adam_step <=
  steps_done`` (an fp16 step skipped for overflow takes no Adam step), and ``adam_step == steps_done`` without
  loss scaling (nothing can be skipped); the loss scale finite and > 0 (at most ``MAX_LOSS_SCALE``), 1 without
  scaling and the initial scale with static scaling; ``0 <= clean_steps < growth_interval``, 0 unless dynamic,
  never above ``adam_step``; the Adam and loss-scaling settings accepted by their own classes; no unknown key.
- states: master, m and v finite, v >= 0 (a sum of squares, Kingma & Ba 2015, Algorithm 1); with
  ``adam_step == 0`` m and v all zero (Adam's bias correction divides by 1 - beta^t, zero at t = 0).
- every rank file's header names its own rank, N, the stage, the step and the SHA-256 of the run's metadata
  (:func:`run_digest`), so files swapped between ranks, steps or runs are refused even with the checksum
  table rewritten to match.

What no check can see is listed in docs/checkpoint.md ("What loading cannot detect").
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from ..adam import AdamConfig
from ..api import MAX_TRAINING_RANKS, TRAINING_STATE_BUDGET
from ..memory.closed_forms import STAGES
from ..precision import MAX_LOSS_SCALE, LossScaling
from .format import CheckpointError

__all__ = ["MAX_STEPS_DONE", "METADATA_KEYS", "run_digest", "check_metadata_semantics", "check_header",
           "check_states"]

MAX_STEPS_DONE = 2 ** 31  # far beyond the training bound (100,000 steps per run, docs/robustness.md)
METADATA_KEYS = frozenset({"format", "version", "stage", "n_ranks", "unit_sizes", "layout", "wire_dtype", "seed",
                           "grads", "micro_batch", "width", "steps_done", "adam_step", "adam", "loss_scaling",
                           "loss_scale", "clean_steps", "files"})


def run_digest(meta: dict) -> str:
    """SHA-256 (hex) of the run's metadata: every field but the checksum table ``files``, as canonical JSON."""
    run = {k: v for k, v in meta.items() if k != "files"}
    return hashlib.sha256(json.dumps(run, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _fail(where, field, why):
    raise CheckpointError(f"{where}: field {field} {why}")


def check_metadata_semantics(meta: dict, where) -> tuple[AdamConfig, LossScaling]:
    """Refuse metadata (already type-checked) that no run could have written; returns its Adam and loss-scaling
    settings."""
    extra = sorted(set(meta) - METADATA_KEYS)
    if extra:
        _fail(where, extra[0], "is not a field of this format")
    n, psi = meta["n_ranks"], sum(meta["unit_sizes"])
    if n > MAX_TRAINING_RANKS or psi * n > TRAINING_STATE_BUDGET:
        _fail(where, "n_ranks/unit_sizes", f"give N = {n}, Ψ = {psi}; a training run has N <= {MAX_TRAINING_RANKS} "
                                           f"and Ψ·N <= 2^26")
    if meta["stage"] not in STAGES:
        _fail(where, "stage", f"is {meta['stage']!r}; allowed: {', '.join(STAGES)}")
    if meta["grads"] not in ("model", "blocks"):
        _fail(where, "grads", f"is {meta['grads']!r}; allowed: model, blocks")
    if meta["micro_batch"] < 1 or (meta["width"] is not None and meta["width"] < 1):
        _fail(where, "micro_batch/width", "must be >= 1")
    try:
        adam = AdamConfig(**meta["adam"])
        scaling = LossScaling(**meta["loss_scaling"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: field adam or loss_scaling: {exc}") from None
    done, taken, clean = meta["steps_done"], meta["adam_step"], meta["clean_steps"]
    if not 1 <= done <= MAX_STEPS_DONE:
        _fail(where, "steps_done", f"is {done}; a checkpoint is written after 1 to {MAX_STEPS_DONE} steps")
    if not 0 <= taken <= done:
        _fail(where, "adam_step", f"is {taken}; must lie in [0, steps_done = {done}]")
    if scaling.kind == "none" and taken != done:
        _fail(where, "adam_step", f"is {taken} but steps_done is {done}: without loss scaling no step is skipped")
    scale = meta["loss_scale"]
    if not (math.isfinite(scale) and 0 < scale <= MAX_LOSS_SCALE):
        _fail(where, "loss_scale", f"is {scale!r}; must be finite, > 0 and <= 2^127")
    expected = {"none": 1.0, "static": float(scaling.init_scale)}.get(scaling.kind)
    if expected is not None and scale != expected:
        _fail(where, "loss_scale", f"is {scale!r}; {scaling.kind} loss scaling keeps it at {expected!r}")
    limit = scaling.growth_interval if scaling.kind == "dynamic" else 1
    if not 0 <= clean <= min(taken, limit - 1):
        _fail(where, "clean_steps", f"is {clean}; must lie in [0, min(adam_step, growth_interval - 1)] "
                                    f"(0 unless dynamic)")
    return adam, scaling


def check_header(header: dict, rank: int, meta: dict, path) -> None:
    """A rank file's header must name this rank, N, stage and step, and the run's metadata digest."""
    expected = {"rank": rank, "n_ranks": meta["n_ranks"], "stage": meta["stage"], "steps_done": meta["steps_done"],
                "run_sha256": run_digest(meta)}
    for key, want in expected.items():
        if header.get(key) != want:
            _fail(path, f"header.{key}", f"is {header.get(key)!r}, expected {want!r} (a file of another rank, "
                                         f"step or run)")
    if set(header) != set(expected):
        _fail(path, "header", f"holds keys {sorted(header)}, expected {sorted(expected)}")


def check_states(full: dict, adam_step: int, where) -> None:
    """master, m, v finite; v >= 0; m = v = 0 before the first Adam step."""
    for s in ("master", "m", "v"):
        for u, a in enumerate(full[s]):
            bad = np.flatnonzero(~np.isfinite(a))
            if bad.size:
                _fail(where, f"unit{u}.{s}", f"holds {bad.size} non-finite value(s) (first at element {bad[0]})")
    for u, a in enumerate(full["v"]):
        bad = np.flatnonzero(a < 0)
        if bad.size:
            _fail(where, f"unit{u}.v", f"holds {bad.size} negative value(s) (first at element {bad[0]}); Adam's v "
                                       f"is a running mean of squares, >= 0")
    if adam_step == 0:
        for s in ("m", "v"):
            for u, a in enumerate(full[s]):
                if np.any(a != 0):
                    _fail(where, f"unit{u}.{s}", "is nonzero although adam_step is 0 (no Adam step taken)")
