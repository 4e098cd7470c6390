"""Run a schedule on a padded world buffer: the one entry point from collectives to kernels."""
from __future__ import annotations

import numpy as np

from .reference import run_schedule_reference
from .schedule import Schedule

__all__ = ["MODES", "run_schedule"]

MODES = ("fused", "step", "reference")


def run_schedule(schedule: Schedule, world: np.ndarray, mode: str = "fused") -> None:
    """Execute ``schedule`` in place on ``world`` of shape (n_ranks, n_chunks·chunk_size)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    run_schedule_reference(schedule, world)
