"""XLA CPU's collectives between JAX host devices: ``xla-cpu:in-process`` for all three collectives.

Source: openxla/xla ``xla/backends/cpu/collectives/in_process_communicator.cc`` @
6b91ae42a6453e1adcac7e7835a55179db1b9dd5 (``AllReduceOp``, ``ReduceScatterOp``, ``AllGatherOp``, ``ReduceHelper``);
checked bit for bit against jax/jaxlib 0.10.2 (``jax.shard_map`` over a 1-D mesh of
``--xla_force_host_platform_device_count=N`` devices; ``psum``, ``psum_scatter(tiled=True)``,
``all_gather(tiled=True)``) by ``benchmarks/engines/xla.py``.

The participants are threads of one process, so nothing crosses a wire: the bytes here are the copies between
per-rank buffers that the source performs, one "message" per chunk a rank's buffer reads from another's.

* **Order**, for every element and every collective: ``((((+0) + x0) + x1) + ...) + x_{N-1}`` in the
  collective's type (``acc = GetInitialValue(SUM) = T(0)``, then ``acc += in[j]`` in rank order). The schedules
  add ``((x0 + x1) + ...) + x_{N-1}``, and the entries carry ``sum_from_zero``: the collectives then add the +0,
  which changes a -0.0 total into +0.0 and nothing else. fp16 adds in fp32 and rounds at every add (Eigen half's
  ``+=``); **bf16 is promoted**: the compiled HLO is ``convert -> f32 all-reduce / reduce-scatter -> convert``, so
  the entries carry ``accumulate=("bf16",)``: the collectives upcast, run in fp32 (bytes counted at 4 B per element,
  as XLA moves them) and round once.
* **all-reduce** (``AllReduceOp``): chunk p = elements ``[p·ceil(S/N), (p+1)·ceil(S/N))``; participant p reduces
  chunk p of every rank's input into rank 0's output, then copies it from rank 0 to ranks 1..N-1. Here: step 1
  has every rank r > 0 send each chunk to rank 0, which adds them in rank order (rank 0's own chunk is where the
  sum starts: a local read in XLA, no message); step 2 has rank 0 send every chunk to every other rank. These are
  XLA's copies exactly: ranks > 0 send S elements, rank 0 sends (N-1)·S.
* **reduce-scatter** (``ReduceScatterOp``): rank d sums shard d of every input into its own output. The schedule's
  buffers are in place (rank d's shard d holds x_d), so shard d >= 2 is summed in two steps: rank 0 adds
  ``x1 .. x_{d-1}`` into its copy of shard d, sends that prefix to rank d, which adds it to x_d (float addition
  commutes: ``x_d + P`` is ``P + x_d``) and then ``x_{d+1} .. x_{N-1}``; shards 0 and 1 (``x1 + x0`` is
  ``x0 + x1``) are summed in place in step 1. Every rank sends each shard but its own once, (N-1)/N·S in all, as
  in XLA; where the model departs: 2 steps instead of 1, and rank 0 receives the prefixes (N-1 shards per rank
  received in XLA, here more on rank 0 and fewer on high ranks).
* **all-gather** (``AllGatherOp``): one step, every rank copies every other rank's shard.

AVG: JAX's ``pmean`` is ``psum`` then ÷N (``average="divide"``).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..layout import ChunkLayout
from ..schedule import ADD, COPY, Schedule, check_n_ranks
from . import Algorithm
from ._steps import Steps
from .ring import _naive

__all__ = ["xla_all_reduce", "xla_reduce_scatter", "xla_all_gather", "ALGORITHMS"]


def _bounds(n: int, numel: int) -> np.ndarray:
    return np.minimum(numel, np.arange(n + 1, dtype=np.int64) * ChunkLayout(numel, n).shard_size)


def _schedule(steps: Steps, name: str, n: int, bounds: np.ndarray, initial: str, final: str) -> Schedule:
    s = steps.schedule(name, n, len(bounds) - 1, initial, final)
    return Schedule(s.name, n, s.n_chunks, s.n_steps, s.table, initial, final, False, tuple(int(b) for b in bounds))


def xla_all_reduce(n_ranks: int, numel: int) -> Schedule:
    """``AllReduceOp``: every chunk summed in rank order into rank 0, then copied to every other rank (module doc)."""
    n = check_n_ranks(n_ranks)
    bounds = _bounds(n, numel)
    live = np.flatnonzero(np.diff(bounds) > 0)
    others = np.arange(1, n, dtype=np.int64)
    chunk, rank = (a.reshape(-1) for a in np.meshgrid(live, others, indexing="ij"))  # per chunk, ranks in order
    steps = Steps()
    steps.add_step((rank, 0, chunk, ADD))
    steps.add_step((0, rank, chunk, COPY))
    return _schedule(steps, "xla_cpu_all_reduce", n, bounds, "all", "reduced-all")


def xla_reduce_scatter(n_ranks: int, numel: int) -> Schedule:
    """``ReduceScatterOp``: shard d summed in rank order and left on rank d, in place (module doc)."""
    n = check_n_ranks(n_ranks)
    bounds = _bounds(n, numel)
    first, second = [], []  # (src, dst, chunk) rows of steps 1 and 2, additions in rank order per (dst, chunk)
    for d in np.flatnonzero(np.diff(bounds) > 0).tolist():
        if d < 2:
            first += [(j, d, d) for j in range(n) if j != d]
        else:
            first += [(j, 0, d) for j in range(1, d)]  # the prefix x0 + ... + x_{d-1}, on rank 0
            second += [(0, d, d)] + [(j, d, d) for j in range(d + 1, n)]
    steps = Steps()
    for rows in (first, second):
        if rows:
            src, dst, chunk = np.asarray(rows, dtype=np.int64).T
            steps.add_step((src, dst, chunk, ADD))
    return _schedule(steps, "xla_cpu_reduce_scatter", n, bounds, "all", "reduced-own")


def xla_all_gather(n_ranks: int, numel: int) -> Schedule:
    """``AllGatherOp``: one step in which every rank copies every other rank's shard (module doc)."""
    n = check_n_ranks(n_ranks)
    bounds = _bounds(n, numel)
    src, dst = (a.reshape(-1) for a in np.meshgrid(np.flatnonzero(np.diff(bounds) > 0), np.arange(n), indexing="ij"))
    keep = src != dst
    steps = Steps()
    steps.add_step((src[keep], dst[keep], src[keep], COPY))
    return _schedule(steps, "xla_cpu_all_gather", n, bounds, "own", "gathered")


def _direct(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """α + (N-1)/N·S·β: every rank reads the N-1 shards it lacks from the others at once (direct exchange)."""
    return (alpha + Fraction(n - 1, n) * nbytes * beta) if n > 1 else Fraction(0)


_SOURCE = "openxla/xla @ 6b91ae42a6453e1adcac7e7835a55179db1b9dd5 (jaxlib 0.10.2): " \
          "xla/backends/cpu/collectives/in_process_communicator.cc {}"
_ENGINE = "XLA CPU (JAX 0.10 host devices)"
_SEMANTICS = dict(options=("numel",), accumulate=("bf16",), sum_from_zero=True)
ALGORITHMS = (
    Algorithm("reduce-scatter", "xla-cpu:in-process", xla_reduce_scatter,
              "rank-order sum from +0 of each shard, kept on its own rank (2 steps here, 1 in XLA: rank 0 holds "
              "the prefix of shards >= 2); bf16 summed in fp32",
              _SOURCE.format("ReduceScatterOp"), _ENGINE, _direct, **_SEMANTICS),
    Algorithm("all-gather", "xla-cpu:in-process", xla_all_gather,
              "one step: every rank copies every other rank's shard",
              _SOURCE.format("AllGatherOp"), _ENGINE, _direct, options=("numel",)),
    Algorithm("all-reduce", "xla-cpu:in-process", xla_all_reduce,
              "rank-order sum from +0 of every chunk into rank 0, then copied to every rank; bf16 summed in fp32 "
              "(fp32, fp64, fp16: the naive all-reduce's bits, up to the sign of a zero total)",
              _SOURCE.format("AllReduceOp"), _ENGINE, _naive, **_SEMANTICS),
)
