"""torch's threaded process group (``torch.testing._internal.distributed.multi_threaded_pg``): N ranks as N threads
of one process, the closest peer of ringemu's EmulatedWorld. Times ``--calls`` all-reduces of ``--numel`` fp32
elements on every rank; prints seconds per all-reduce (minimum over ``--repeats`` rounds) as JSON.

An internal torch testing module: if it is missing or fails to start, the script prints why and exits 1.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
import warnings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--numel", type=int, default=64)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed import multi_threaded_pg as mtpg

    torch.set_num_threads(1)
    n, store = args.ranks, dist.HashStore()
    mtpg._install_threaded_pg()
    torch._C._distributed_c10d._set_thread_isolation_mode(True)  # as torch's own threaded tests do
    best, errors = [float("inf")], []
    barrier = threading.Barrier(n)

    def rank(r: int) -> None:
        try:
            dist.init_process_group("threaded", rank=r, world_size=n, store=store)
            x = torch.ones(args.numel)
            for _ in range(args.repeats + 1):
                barrier.wait()
                t = time.perf_counter()
                for _ in range(args.calls):
                    dist.all_reduce(x)
                barrier.wait()
                if r == 0:
                    best[0] = min(best[0], (time.perf_counter() - t) / args.calls)
        except BaseException as exc:  # reported below
            errors.append(repr(exc))
            barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"threaded process group failed: {errors[0]}")
    print(json.dumps({"impl": "torch-threaded-pg", "ranks": n, "numel": args.numel, "seconds": best[0]}))


if __name__ == "__main__":
    main()
