"""Compile (or load from numba's on-disk cache) every collective kernel once, before any test is timed.

The first call of a kernel for a dtype compiles it (about 1 s per dtype on a cold cache) or loads it from the
cache (tens of ms); a hypothesis example that pays for that exceeds any deadline. :func:`warm_kernels` runs every
collective by every algorithm of the registry (:mod:`ringemu.algorithms`) in every dtype
(:data:`ringemu.dtypes.DTYPES`) on a tiny world, in fused mode (the direct path) and step mode (the world
kernels), and the world kernels' fused mode once per collective, once per process, so that later calls only run. The pytest plugin
(:mod:`ringemu.pytest_plugin`) calls it once per session.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

__all__ = ["Warmup", "warm_kernels", "numba_cache_location"]


@dataclass(frozen=True)
class Warmup:
    """What :func:`warm_kernels` did: how many collective calls, in how many seconds (wall clock)."""

    calls: int
    seconds: float
    jit_enabled: bool


def warm_kernels(n_ranks: int = 4, numel: int = 7) -> Warmup:
    """Run every collective by every algorithm of the registry, in every dtype, on an (n_ranks, numel)
    integer-block world; the kernels are then compiled (or loaded) in this process. The default 7 elements on 4
    ranks pad (7 = 4·2 - 1), like most test worlds, and 4 ranks suit every algorithm (powers of two included).
    Algorithms that do not support ``n_ranks`` are skipped."""
    from .. import _jit, algorithms
    from ..blocks import integer_blocks
    from ..dtypes import DTYPES
    from ..execute import run_schedule
    from .oracle import run_op

    start = time.perf_counter()
    calls = 0
    for dtype in DTYPES:
        world = integer_blocks(n_ranks, numel, 0, dtype)
        for collective in algorithms.COLLECTIVES:
            for name in algorithms.names(collective):
                if algorithms.algorithm(collective, name).unsupported(n_ranks) is not None:
                    continue
                for mode in ("fused", "step"):  # fused: the direct path, else the world kernels; step: those
                    run_op(collective, world, algorithm=name, mode=mode)
                    calls += 1
            schedule = algorithms.build(collective, n_ranks)  # the world kernels' fused mode (faults, traces)
            padded = np.zeros((n_ranks, schedule.n_chunks * 2), dtype=world.dtype)
            run_schedule(schedule, padded, "fused")
            calls += 1
    return Warmup(calls, time.perf_counter() - start, _jit.JIT_ENABLED)


def numba_cache_location() -> str:
    """Where numba keeps ringemu's compiled kernels: ``NUMBA_CACHE_DIR`` if set, else the directory numba's
    cache locator picks for :mod:`ringemu.kernels` (beside it, or the user's cache directory when the package is
    read-only); ``"none (JIT disabled)"`` under ``RINGEMU_DISABLE_JIT``."""
    from .. import _jit

    if not _jit.JIT_ENABLED:
        return "none (JIT disabled)"
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    from .. import kernels

    cache = getattr(kernels.run_fused, "_cache", None)
    path = getattr(cache, "_cache_path", None)
    return str(path) if path else "none (no writable location; kernels compile in memory)"
