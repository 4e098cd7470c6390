"""Entry point for ``torchrun``: the project's ZeRO stages on a real cluster, one process per GPU (or CPU rank).

``torchrun`` starts the processes and sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and
``LOCAL_RANK``; every process runs this module, which joins the process group (NCCL when CUDA is available,
else gloo), runs the stage's own per-rank function through a TorchCommunicator, gathers every rank's result and
memory row on rank 0, and rank 0 prints the same fields as ``ringemu zero --json`` (modelled traffic)::

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m zero_stages.torch.torch_run --stage zero3 --steps 3 --dtype bf16 --grads model --json

No comparison with the emulator is made here (a cluster need not run it); the digests let one compare with
``ringemu zero`` elsewhere.
"""
from __future__ import annotations

import argparse
import json
import sys

from ringemu.worlds.base import NATIVE, communicator_algorithms

__all__ = ["main"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zero_stages.torch.torch_run", description=__doc__.split("\n")[0])
    parser.add_argument("--stage", choices=("dp", "zero1", "zero2", "zero3"), required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grads", choices=("model", "blocks"), default="blocks")
    parser.add_argument("--units", default=None, help="unit sizes, comma-separated")
    parser.add_argument("--algorithm", choices=(NATIVE, *communicator_algorithms()), default=NATIVE,
                        help="native (the engine's collectives) or a ringemu algorithm run over send/recv")
    parser.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="default: nccl if CUDA, else gloo")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import torch.distributed as dist

    from ringemu.worlds.torch_launch import communicator_from_env
    from ringemu.dtypes import dtype_name
    from ringemu.ledger import CommLedger
    from ..api import RANK_FUNCTIONS, training_job
    from ..report import build_report

    from .torch_zero import TRAFFIC_SOURCE, RankRows, digest

    ledger = CommLedger()
    comm = communicator_from_env(args.backend, args.algorithm, ledger, args.timeout)
    units = [int(x) for x in args.units.split(",")] if args.units else None
    job = training_job(comm.n_ranks, args.steps, args.dtype, args.seed, args.grads, units)
    result = RANK_FUNCTIONS[args.stage](comm, job)
    gathered = [None] * comm.n_ranks if comm.rank == 0 else None
    dist.gather_object((result, job.memory), gathered, dst=0)
    if comm.rank == 0:
        results = [r for r, _ in gathered]
        rep = build_report(args.stage, job.flat, job.wire, dtype_name(job.wire), job.steps, False, results,
                           RankRows([m for _, m in gathered]), ledger)
        out = {"name": rep.name, "ranks": rep.n_ranks, "backend": comm.backend, "algorithm": args.algorithm,
               "model_state_bytes_per_rank": rep.model_state_bytes_per_rank,
               "peak_bytes_per_rank": rep.peak_bytes_per_rank,
               "traffic_sent_bytes_per_rank": rep.traffic_sent_bytes_per_rank,
               "traffic_source": TRAFFIC_SOURCE,
               "digests": {k: digest(getattr(rep, k)) for k in ("weights16", "master", "m", "v")}}
        print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
