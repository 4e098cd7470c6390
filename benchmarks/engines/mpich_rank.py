"""One MPI rank of the MPICH harness (run by ``benchmarks/engines/mpich.py`` under the engine's own ``mpiexec``
and Python; it imports only mpi4py and numpy, never ringemu).

usage: mpiexec -n N python mpich_rank.py OUTDIR COLLECTIVE SEED DTYPE:NUMEL[,DTYPE:NUMEL...]

COLLECTIVE is ``all-reduce`` (MPI_Allreduce of NUMEL elements), ``reduce-scatter`` (MPI_Reduce_scatter_block of
NUMEL = N·k elements, k per rank) or ``all-gather`` (MPI_Allgather of NUMEL / N elements per rank), MPI_SUM on
float32/float64. Rank r's input: ``default_rng(SEED·1000 + r).standard_normal(NUMEL)`` cast to DTYPE (for
all-gather its own block of that row). Each case runs once, on a fresh ``Comm_dup`` of COMM_WORLD (MPICH's
shared-memory path counts calls per communicator, findings of the MPICH study). The algorithm is forced by the
caller's environment (``MPIR_CVAR_*``). Rank r writes ``OUTDIR/rank{r}.npz`` with ``in_KEY`` and ``out_KEY``,
KEY = ``DTYPE_NUMEL``.
"""
import os
import sys

import numpy as np
from mpi4py import MPI


def main() -> None:
    outdir, collective, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cases = [(d, int(s)) for d, s in (c.split(":") for c in sys.argv[4].split(",") if c)]
    world = MPI.COMM_WORLD
    rank, n = world.Get_rank(), world.Get_size()
    saved = {}
    for dtype, numel in cases:
        row = np.random.default_rng(seed * 1000 + rank).standard_normal(numel).astype(dtype)
        block = numel // n
        comm = world.Dup()
        if collective == "all-reduce":
            x, out = row, np.empty(numel, dtype)
            comm.Allreduce(x, out, op=MPI.SUM)
        elif collective == "reduce-scatter":
            x, out = row, np.empty(block, dtype)
            comm.Reduce_scatter_block(x, out, op=MPI.SUM)
        elif collective == "all-gather":
            x, out = np.ascontiguousarray(row[rank * block:(rank + 1) * block]), np.empty(numel, dtype)
            comm.Allgather(x, out)
        else:
            raise SystemExit(f"collective must be all-reduce, reduce-scatter or all-gather; got {collective!r}")
        comm.Free()
        saved[f"in_{dtype}_{numel}"] = x
        saved[f"out_{dtype}_{numel}"] = out
    np.savez(os.path.join(outdir, f"rank{rank}.npz"), **saved)


if __name__ == "__main__":
    main()
