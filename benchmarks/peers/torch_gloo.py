"""torch.distributed with the gloo backend: N processes on 127.0.0.1, one fp32 buffer of S elements each.

Each run: barrier, the collective, then the slowest rank's time (an all-reduce MAX of the local times, not timed).
Reduce-scatter and all-gather use reduce_scatter_tensor / all_gather_into_tensor; all-reduce is in place.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OPS, emit, parse, sizes  # noqa: E402


def worker(rank: int, n: int, numel: int, repeats: int, port: int, queue) -> None:
    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    chunk, padded = sizes(n, numel)
    x = torch.full((padded,), 1e-3)
    shard = torch.full((chunk,), 1e-3)
    out_rs, out_ag = torch.empty(chunk), torch.empty(padded)
    calls = {"reduce-scatter": lambda: dist.reduce_scatter_tensor(out_rs, x),
             "all-gather": lambda: dist.all_gather_into_tensor(out_ag, shard),
             "all-reduce": lambda: dist.all_reduce(x)}
    results = {}
    for op in OPS:
        samples = []
        for i in range(repeats + 1):  # run 0 warms up
            dist.barrier()
            start = time.perf_counter()
            calls[op]()
            elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            if i:
                samples.append(float(elapsed))
        results[op] = samples
    if rank == 0:
        queue.put(results)
    dist.destroy_process_group()


def main() -> None:
    import torch
    import torch.multiprocessing as mp

    args = parse(__doc__.splitlines()[0])
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args.ranks, args.numel, args.repeats, args.port, queue))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    results = queue.get(timeout=1200)
    for p in procs:
        p.join()
    emit("torch-gloo", args.ranks, args.numel, results, version=torch.__version__)


if __name__ == "__main__":
    main()
