"""MPICH 5.0.2 under its own ``mpiexec`` on 127.0.0.1, every ``mpich:*`` registry entry against it bit for bit.

The engine lives in its own venv, ``$RINGEMU_ENGINES/mpich`` (``pip install mpich mpi4py numpy``; ``.ci/run``).
Each (entry, N) is one ``mpiexec -n N`` of ``mpich_rank.py``, which runs every (dtype, size) case of that entry on
a fresh communicator. An algorithm is forced as the MPICH study found it must be: ``MPIR_CVAR_DEVICE_COLLECTIVES=
none`` (else the ch4 device path may ignore the choice) and ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``; ``mpich:default``
runs with no ``MPIR_CVAR_*`` set at all. Where a forced algorithm's restriction fails (reduce_scatter_allgather
below pof2(N) elements; noncommutative and recursive-doubling all-gather on N not a power of two) the engine
silently runs its automatic choice, and the entry models that too, so those sizes are in the matrix.

Sizes straddle every threshold of the entry: all-reduce 0, 1, 2, 3 (8 B and 12 B in fp32), N-1, N, N+1,
pof2(N)-1, pof2(N), and primes; reduce-scatter and all-gather blocks of 0, 1, 2, 3 and primes, and, for the
entries that decide by size, the two block lengths either side of 512 KiB or 80 KiB in all. fp32 and fp64,
inputs ``default_rng(7000 + r).standard_normal``; every element of every rank is compared.

MPICH exposes no per-peer byte counters (Open MPI's monitoring component has no MPICH counterpart), so
``bytes_cases`` is 0: the bytes of these entries rest on the source reading cited in each entry.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ._common import DEFAULT_ENGINE_ROOT, ROOT, engine_python, engine_tool, first_difference, same_bits, venv_version
from ._common import inputs as seeded_inputs
from .records import digest

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
import ringemu  # noqa: E402
from ringemu.algorithms import names  # noqa: E402
from ringemu.algorithms._mpich import AG_LONG_BYTES, AG_SHORT_BYTES, RS_LONG_BYTES  # noqa: E402

__all__ = ["available", "run", "plan", "replay", "version"]

WORKER = Path(__file__).with_name("mpich_rank.py")
SEED = 7
FULL_RANKS = (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)
# the quick slice: N = 2, 5, 8 and 16 among the orders whose bits differ, N = 5 and 8 (a fallback, a power of two)
# where an entry's choice depends on whether N is a power of two; about 60 s on a shared two-core machine
QUICK_RANKS = {("all-reduce", "mpich:ring"): (2, 5, 16), ("all-reduce", "mpich:tree"): (5, 8, 16),
               ("all-reduce", "mpich:recursive-doubling"): (5,), ("all-reduce", "mpich:reduce-scatter-allgather"): (8,),
               ("all-reduce", "mpich:default"): (5, 16), ("reduce-scatter", "mpich:recursive-halving"): (5,),
               ("reduce-scatter", "mpich:pairwise"): (8,), ("reduce-scatter", "mpich:noncommutative"): (5, 8),
               ("reduce-scatter", "mpich:recursive-doubling"): (5, 8), ("reduce-scatter", "mpich:default"): (5,),
               ("all-gather", "mpich:ring"): (5,), ("all-gather", "mpich:recursive-doubling"): (5, 8),
               ("all-gather", "mpich:brucks"): (5,), ("all-gather", "mpich:default"): (8,)}
_CVAR = {"all-reduce": "ALLREDUCE", "reduce-scatter": "REDUCE_SCATTER_BLOCK", "all-gather": "ALLGATHER"}
_DTYPES = (("float32", 4), ("float64", 8))
_SIZED = ("mpich:default", "mpich:noncommutative")  # entries whose choice depends on the total size in bytes


def available() -> str | None:
    if engine_python("mpich") is None or engine_tool("mpich", "mpiexec") is None:
        return (f"MPICH is not installed in {DEFAULT_ENGINE_ROOT / 'mpich'} (python3 -m venv "
                f"$RINGEMU_ENGINES/mpich && $RINGEMU_ENGINES/mpich/bin/pip install mpich mpi4py numpy)")
    return None


def version() -> str:
    return f"mpich {venv_version('mpich', 'mpich')}, mpi4py {venv_version('mpich', 'mpi4py')}"


def _pof2(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _sizes(collective: str, entry: str, n: int, itemsize: int, quick: bool) -> list[int]:
    """Elements per rank's buffer (all-reduce: the count; the others: N·block)."""
    if collective == "all-reduce":
        counts = {0, 1, 2, 3, n - 1, n, n + 1, _pof2(n) - 1, _pof2(n), 997}
        counts |= set() if quick else {512, 513, 10007}
        return sorted(c for c in counts if c >= 0)
    blocks = {0, 1, 3, 97} if quick else {0, 1, 2, 3, 97, 1009}
    sized = entry in _SIZED or (collective == "all-gather" and entry == "mpich:recursive-doubling")
    if sized:
        limit = RS_LONG_BYTES if collective == "reduce-scatter" else (
            AG_LONG_BYTES if n == _pof2(n) else AG_SHORT_BYTES)
        edge = -(-limit // (n * itemsize))  # the first block length whose total reaches the threshold
        blocks |= {edge - 1, edge}
    return sorted(n * b for b in blocks)


def plan(quick: bool) -> list[tuple[str, str, int]]:
    """(collective, entry, N) launches: every mpich entry of the registry."""
    out = []
    for collective in ("all-reduce", "reduce-scatter", "all-gather"):
        for entry in names(collective):
            if entry.startswith("mpich:"):
                for n in (QUICK_RANKS.get((collective, entry), (5,)) if quick else FULL_RANKS):
                    out.append((collective, entry, n))
    return out


def _environment(collective: str, entry: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIR_CVAR_")}
    if entry != "mpich:default":
        env["MPIR_CVAR_DEVICE_COLLECTIVES"] = "none"
        env[f"MPIR_CVAR_{_CVAR[collective]}_INTRA_ALGORITHM"] = entry.split(":", 1)[1].replace("-", "_")
    return env


def _launch(collective: str, entry: str, n: int, cases: list[tuple[str, int]]) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="ringemu-mpich-") as out:
        spec = ",".join(f"{d}:{s}" for d, s in cases)
        cmd = [str(engine_tool("mpich", "mpiexec")), "-n", str(n), str(engine_python("mpich")), str(WORKER), out,
               collective, str(SEED), spec]
        done = subprocess.run(cmd, env=_environment(collective, entry), capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"mpiexec -n {n} ({entry} {collective}) failed: {done.stderr[-2000:]}")
        return [dict(np.load(Path(out) / f"rank{r}.npz")) for r in range(n)]


def _emulated(collective: str, entry: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Every rank's result from ringemu's registry entry on the engine's own inputs."""
    if collective == "all-reduce":
        return list(ringemu.all_reduce(np.stack(inputs), algorithm=entry))
    if collective == "reduce-scatter":
        return ringemu.reduce_scatter(np.stack(inputs), algorithm=entry)
    return list(ringemu.all_gather(list(inputs), algorithm=entry))


def _case_inputs(collective: str, n: int, dtype: str, numel: int, seed: int) -> list[np.ndarray]:
    """Every rank's input to the call, as ``mpich_rank.py`` makes it (all-gather: the rank's block of its row)."""
    rows = seeded_inputs(n, numel, np.dtype(dtype), seed)
    block = numel // n
    return [rows[r][r * block:(r + 1) * block].copy() if collective == "all-gather" else rows[r] for r in range(n)]


def replay(case: dict) -> list[np.ndarray]:
    """The registry entry on a recorded case's inputs (:mod:`benchmarks.engines.records`)."""
    return [np.asarray(w) for w in _emulated(case["collective"], case["entry"], _case_inputs(
        case["collective"], case["n"], case["dtype"], case["numel"], case["seed"]))]


def _check(job) -> tuple[str, str, int, int, int, str | None, list[dict]]:
    collective, entry, n, quick = job
    records = []
    cases = [(d, s) for d, itemsize in _DTYPES for s in _sizes(collective, entry, n, itemsize, quick)]
    ranks = _launch(collective, entry, n, cases)
    equal, mismatch = 0, None
    for dtype, numel in cases:
        key = f"{dtype}_{numel}"
        got = [r["out_" + key] for r in ranks]
        engine_inputs = [r["in_" + key] for r in ranks]
        want = _emulated(collective, entry, engine_inputs)
        assert all(same_bits(a, b) for a, b in zip(engine_inputs, _case_inputs(collective, n, dtype, numel, SEED))), key
        records.append({"engine": "mpich", "collective": collective, "entry": entry, "n": n, "dtype": dtype,
                        "numel": numel, "seed": SEED, "kind": "normal", "sha256": digest(got)})
        where = first_difference(got, [np.asarray(w) for w in want])
        equal += where is None
        if where is not None and mismatch is None:
            mismatch = f"N={n} {dtype} S={numel}: {where}"
    return collective, entry, n, len(cases), equal, mismatch, records


def run(quick: bool, record: list | None = None) -> list[dict]:
    """One row per (entry, collective): cases over the planned N, dtypes and sizes, and how many are bit-equal;
    ``record``: a list to which every case's record is appended (the engine's digest)."""
    rows: dict[tuple[str, str], dict] = {}
    jobs = [(c, e, n, quick) for c, e, n in plan(quick)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # two launches at once: mpiexec mostly waits on start-up
        for collective, entry, n, cases, equal, mismatch, records in pool.map(_check, jobs):
            if record is not None:
                record.extend(records)
            row = rows.setdefault((entry, collective), {
                "engine": "mpich", "entry": entry, "collective": collective, "cases": 0, "bits_equal": 0,
                "bytes_cases": 0, "bytes_equal": 0, "first_mismatch": None})
            row["cases"] += cases
            row["bits_equal"] += equal
            row["first_mismatch"] = row["first_mismatch"] or mismatch
    return list(rows.values())
