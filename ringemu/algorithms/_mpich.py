"""What MPICH 5.0's collective families share: its chunk cuts, its fold of N ranks onto a power of two, its fixed
decision rules, and a schedule built from rows with the engine's own partition.

Source: pmodels/mpich, branch 5.0.x (the wheel installed by ``pip install mpich`` reports MPICH 5.0.2), files under
``src/mpi/coll/`` and the compiled-in selection tree ``maint/tuning/coll/mpir/generic.json``. Every MPICH algorithm
here keeps one accumulator per rank and adds what it receives into it, ``MPIR_Reduce_local(in, inout)``:
``inout[i] = in[i] + inout[i]``; one IEEE addition gives the same bits either way round, so a schedule that
reproduces the association reproduces the engine's bits.
"""
from __future__ import annotations

import numpy as np

from ..schedule import Schedule
from ._steps import Steps, pow2_below

__all__ = ["SOURCE", "ENGINES", "block_bounds", "spread_bounds", "partitioned", "allreduce_rule",
           "reduce_scatter_rule", "all_gather_rule", "SHORT_BYTES", "RS_LONG_BYTES", "AG_LONG_BYTES",
           "AG_SHORT_BYTES"]

SOURCE = "MPICH 5.0.2 (pmodels/mpich 5.0.x), src/mpi/coll/"  # + the file and function of each entry
ENGINES = "MPICH 5.0.2 (one node, MPI_THREAD_MULTIPLE as mpi4py starts it)"

# maint/tuning/coll/mpir/generic.json (MPICH 5.0.x), the MPIR-level decision tree compiled into the library:
SHORT_BYTES = 8  # all-reduce: avg_msg_size <= 8 B -> recursive_doubling
RS_LONG_BYTES = 524288  # reduce_scatter_block (commutative): total_msg_size < 512 KiB -> recursive_halving
AG_LONG_BYTES = 524288  # allgather, N a power of two: total_msg_size < 512 KiB -> recursive_doubling
AG_SHORT_BYTES = 81920  # allgather, other N: total_msg_size < 80 KiB -> brucks


def block_bounds(numel: int, n_blocks: int) -> tuple[int, ...]:
    """Blocks of ceil(S/n) elements while they fit, then the remainder, then empty blocks:
    ``allreduce_intra_ring.c`` lines 37-52 (``cnts[i] = ceil(count/N)`` while the running total stays <= count);
    for S a multiple of n these are the n equal blocks of ``MPI_Reduce_scatter_block`` and ``MPI_Allgather``, and in
    general the shards of ``ChunkLayout(S, n)``."""
    size = -(-numel // n_blocks)
    return tuple(int(b) for b in np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * size, numel))


def spread_bounds(numel: int, n_blocks: int) -> tuple[int, ...]:
    """``cnts[i] = count/pof2 + (i < count % pof2)``: the first S mod n blocks one element longer
    (``allreduce_intra_reduce_scatter_allgather.c`` lines 129-139)."""
    i = np.arange(n_blocks, dtype=np.int64)
    counts = numel // n_blocks + (i < numel % n_blocks)
    return (0,) + tuple(int(b) for b in np.cumsum(counts))


def _is_exchange(table: np.ndarray, n: int, n_chunks: int) -> bool:
    """True when some rank sends, in a step, a chunk it also receives in that step (the kernels then stage)."""
    step, src, dst, chunk = (table[:, k] for k in range(4))
    base = step * (n * max(n_chunks, 1))
    return bool(np.isin(base + src * n_chunks + chunk, base + dst * n_chunks + chunk).any())


def partitioned(steps: Steps, name: str, n: int, bounds, initial: str, final: str) -> Schedule:
    """The schedule of ``steps`` over the chunks ``bounds`` (the engine's partition, for one buffer length)."""
    n_chunks = len(bounds) - 1
    plain = steps.schedule(name, n, n_chunks, initial, final)
    return Schedule(name, n, n_chunks, plain.n_steps, plain.table, initial, final,
                    _is_exchange(plain.table, n, n_chunks), tuple(int(b) for b in bounds))


def allreduce_rule(n: int, numel: int, itemsize: int) -> str:
    """MPIR_Allreduce's automatic choice (generic.json): a message of at most 8 B, or fewer elements than
    pof2(N), goes to recursive doubling; every other to reduce_scatter_allgather."""
    if numel * itemsize <= SHORT_BYTES or numel < pow2_below(n):
        return "recursive-doubling"
    return "reduce-scatter-allgather"


def reduce_scatter_rule(n: int, numel: int, itemsize: int) -> str:
    """MPIR_Reduce_scatter_block's automatic choice for a commutative op (generic.json): total message < 512 KiB
    -> recursive halving, else pairwise."""
    return "recursive-halving" if numel * itemsize < RS_LONG_BYTES else "pairwise"


def all_gather_rule(n: int, numel: int, itemsize: int) -> str:
    """MPIR_Allgather's automatic choice (generic.json): N a power of two: total < 512 KiB -> recursive doubling,
    else ring; other N: total < 80 KiB -> Bruck's, else ring."""
    total = numel * itemsize
    if n == pow2_below(n):
        return "recursive-doubling" if total < AG_LONG_BYTES else "ring"
    return "brucks" if total < AG_SHORT_BYTES else "ring"
