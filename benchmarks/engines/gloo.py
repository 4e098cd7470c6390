"""torch 2.13's gloo (ProcessGroupGloo on CPU, N processes on 127.0.0.1) against the registry's ``gloo:ring``.

Each N runs as one subprocess (``python -m benchmarks.engines.gloo N DIR CASES``) that spawns N ranks; rank r
feeds ``_common.inputs`` to ``dist.all_reduce``, ``dist.reduce_scatter_tensor`` and ``dist.all_gather_into_tensor``
and saves its outputs; the parent compares every element of every rank, bit for bit, with ``ringemu``'s
collectives run with ``algorithm="gloo:ring"``. gloo exposes no per-peer byte counts (only loopback counters, which
count TCP/IP headers and every process on the host), so ``bytes_cases`` is 0: the bytes model rests on the source
and on the loopback measurement cited in :mod:`ringemu.algorithms.gloo`.

Sizes: 0, 1, N-1, small primes, S not divisible by N and, at N = 2 and 3, both sides of gloo's 1 MiB segment cap
(``segments = max(ceil(bytes / 1 MiB), 2N)`` rounded to N: the cap acts above 2N MiB).
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks.engines._common import ROOT, first_difference, inputs, same_bits
from benchmarks.engines.records import digest

__all__ = ["available", "run", "cases", "replay", "version"]

MiB = 1 << 20
_DTYPES = {"fp32": np.float32, "fp64": np.float64, "fp16": np.float16}
_COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")


def available() -> str | None:
    return None if importlib.util.find_spec("torch") else "torch is not installed (pip install torch==2.13.0)"


def version() -> str:
    import torch
    return f"torch {torch.__version__}"


def cases(n: int, quick: bool) -> list[tuple[str, str, int]]:
    """(collective, dtype, numel) for N ranks; numel is the whole buffer (reduce-scatter's input, all-gather's
    output: N·shard, as torch requires)."""
    out = []
    dtypes = ("fp32", "fp64") if quick else ("fp32", "fp64", "fp16")
    sizes = (0, 1, max(1, n - 1), 97, 26 * n + 1) if quick else (0, 1, max(1, n - 1), 7, 97, 1009, 26 * n + 1, 4099)
    shards = (1, 3, 37) if quick else (0, 1, 2, 3, 37, 257)
    for dt in dtypes:
        out += [("all-reduce", dt, s) for s in sizes]
        out += [(c, dt, n * k) for c in ("reduce-scatter", "all-gather") for k in shards]
        if n in (2, 3):  # both sides of the 1 MiB segment cap: 2N MiB exactly and one element more
            isz = np.dtype(_DTYPES[dt]).itemsize
            out += [("all-reduce", dt, 2 * n * MiB // isz), ("all-reduce", dt, 2 * n * MiB // isz + 1)]
            if not quick:
                out += [("all-reduce", dt, (2 * n * MiB + 5 * MiB // 2) // isz + 3),
                        ("reduce-scatter", dt, n * ((2 * n * MiB + 2 * MiB) // isz // n + 1))]
    return out


def _worker(rank: int, n: int, port: int, todo: list, outdir: str) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    results = {}
    for k, (collective, dt, numel) in enumerate(todo):
        x = inputs(n, numel, _DTYPES[dt], seed=k)
        if collective == "all-reduce":
            t = torch.from_numpy(x[rank].copy())
            dist.all_reduce(t)
        elif collective == "reduce-scatter":
            t = torch.empty(numel // n, dtype=torch.from_numpy(x[0]).dtype)
            dist.reduce_scatter_tensor(t, torch.from_numpy(x[rank].copy()))
        else:
            shard = numel // n
            t = torch.empty(numel, dtype=torch.from_numpy(x[0]).dtype)
            dist.all_gather_into_tensor(t, torch.from_numpy(x[rank, rank * shard:(rank + 1) * shard].copy()))
        results[f"c{k}"] = t.numpy().copy()
    np.savez(os.path.join(outdir, f"rank{rank}.npz"), **results)
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _expected(collective: str, world: np.ndarray) -> list[np.ndarray]:
    from ringemu import collectives
    n, numel = world.shape
    if collective == "all-reduce":
        return list(collectives.all_reduce(world, algorithm="gloo:ring"))
    if collective == "reduce-scatter":
        return collectives.reduce_scatter(world, algorithm="gloo:ring")
    shard = numel // n
    return list(collectives.all_gather([world[r, r * shard:(r + 1) * shard].copy() for r in range(n)],
                                       algorithm="gloo:ring"))


def replay(case: dict) -> list[np.ndarray]:
    """ringemu's ``gloo:ring`` on a recorded case's inputs (:mod:`benchmarks.engines.records`)."""
    return _expected(case["collective"], inputs(case["n"], case["numel"], _DTYPES[case["dtype"]], seed=case["seed"]))


def run(quick: bool, record: list | None = None) -> list[dict]:
    """One row per collective; ``record``: a list to which every case's record is appended (the engine's digest)."""
    ranks = (2, 5, 8) if quick else (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)  # quick: each N spawns N torch processes
    rows = {c: dict(engine="gloo (torch 2.13)", entry="gloo:ring", collective=c, cases=0, bits_equal=0,
                    bytes_cases=0, bytes_equal=0, first_mismatch=None) for c in _COLLECTIVES}
    for n in ranks:
        todo = cases(n, quick)
        with tempfile.TemporaryDirectory() as outdir:
            subprocess.run([sys.executable, "-m", "benchmarks.engines.gloo", str(n), outdir, json.dumps(todo)],
                           cwd=ROOT, check=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore::FutureWarning"})
            got = [np.load(os.path.join(outdir, f"rank{r}.npz")) for r in range(n)]
            for k, (collective, dt, numel) in enumerate(todo):
                want = _expected(collective, inputs(n, numel, _DTYPES[dt], seed=k))
                mine = [g[f"c{k}"] for g in got]
                if record is not None:
                    record.append({"engine": "gloo", "collective": collective, "entry": "gloo:ring", "n": n,
                                   "dtype": dt, "numel": numel, "seed": k, "kind": "normal", "sha256": digest(mine)})
                row = rows[collective]
                row["cases"] += 1
                if all(same_bits(a, b) for a, b in zip(mine, want)):
                    row["bits_equal"] += 1
                elif row["first_mismatch"] is None:
                    row["first_mismatch"] = f"N={n} {dt} numel={numel}: {first_difference(mine, want)}"
    return list(rows.values())


if __name__ == "__main__":  # one world: python -m benchmarks.engines.gloo N OUTDIR CASES_JSON
    import torch.multiprocessing as mp
    n_ranks, directory, spec = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    mp.start_processes(_worker, args=(n_ranks, _free_port(), spec, directory), nprocs=n_ranks,
                       start_method="spawn")
