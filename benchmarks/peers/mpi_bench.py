"""mpi4py (Open MPI, shared memory on one host): launched by mpirun with N processes, fp32 buffers of S elements.

Each run: Barrier, the collective, then the slowest rank's time (a MAX reduction of the local times, not timed).
Reduce_scatter_block, Allgather and in-place Allreduce; rank 0 prints the JSON.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OPS, emit, parse, sizes  # noqa: E402


def main() -> None:
    from mpi4py import MPI

    args = parse(__doc__.splitlines()[0])
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    chunk, padded = sizes(n, args.numel)
    x = np.full(padded, 1e-3, dtype=np.float32)
    shard = np.full(chunk, 1e-3, dtype=np.float32)
    out_rs, out_ag = np.empty(chunk, np.float32), np.empty(padded, np.float32)
    calls = {"reduce-scatter": lambda: comm.Reduce_scatter_block(x, out_rs, op=MPI.SUM),
             "all-gather": lambda: comm.Allgather(shard, out_ag),
             "all-reduce": lambda: comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)}
    results = {}
    for op in OPS:
        samples = []
        for i in range(args.repeats + 1):  # run 0 warms up
            comm.Barrier()
            start = time.perf_counter()
            calls[op]()
            elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
            if i:
                samples.append(elapsed)
        results[op] = samples
    if comm.Get_rank() == 0:
        emit("mpi4py-openmpi", n, args.numel, results, version=".".join(map(str, MPI.Get_version())),
             library=MPI.Get_library_version().splitlines()[0].rstrip("\x00"))


if __name__ == "__main__":
    main()
