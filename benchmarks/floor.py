"""The memory-bandwidth floor of the collectives, measured so that it can be trusted, and checked before use.

Three STREAM kernels over float32 arrays as large as the world (McCalpin's STREAM, counted as STREAM counts:
bytes read plus bytes written, no write-allocate), every array written once before timing (pre-faulted: a
first touch would time the kernel's page faults, not the memory), split over the benchmark's threads (numpy
releases the GIL), taking turns run by run with each other:

* copy ``c = a`` (2 arrays moved per element),
* add ``c = a + b`` (3),
* in-place add ``a += b`` (3).

Sanity check, before any ratio is taken: a bandwidth-bound kernel moves at most its counted bytes plus one
read-for-ownership of each destination line it does not read anyway (copy: 3 real arrays for 2 counted; add: 4
for 3; in-place add: 3 for 3), and at least its counted bytes. So, against the in-place add's rate, copy must
run at 2/3 to 1× and add at 3/4 to 1×; the check allows 20 % either side for noise. A floor outside that (copy
at 0.28× in-place add, as a run once printed) is not measuring bandwidth — page faults, a single thread, or a
burst of other load — and ``passed`` is False: ratios to it are not reported.

The floor of a collective is its least traffic (``least_traffic``: every element read once, every byte of the
end state written once) at the fastest rate any of the three kernels reached: no kernel can move those bytes
faster than the machine moved any bytes, so a ratio below 1 means the floor is wrong, never that a kernel beat it.
"""
from __future__ import annotations

import threading

import numpy as np

from ringemu.cli.bench import time_interleaved
from ringemu.dtypes import resolve_dtype

__all__ = ["least_traffic", "check_rates", "measure_floor", "apply_floor", "SANITY"]

SANITY = {"copy": (2 / 3 * 0.8, 1.0 * 1.2), "add": (3 / 4 * 0.8, 1.0 * 1.2)}  # rate / in-place add rate, allowed
_COUNTED = {"copy": 2, "add": 3, "inplace_add": 3}  # arrays moved per element, as STREAM counts


def least_traffic(op: str, n: int, padded: int, itemsize: int) -> int:
    """Bytes the end state of ``op`` on N ranks of ``padded`` elements needs at least (S = padded, e = itemsize):
    reduce-scatter reads N·S·e and writes the reduced chunk of each rank, S·e: (N+1)·S·e; all-gather reads each
    rank's chunk once, S·e, and writes the chunks a rank does not hold, (N-1)·S·e: N·S·e; all-reduce reads N·S·e
    and writes N·S·e: 2N·S·e."""
    per = padded * itemsize
    return {"reduce-scatter": (n + 1) * per, "all-gather": n * per, "all-reduce": 2 * n * per}[op]


def check_rates(rates: dict) -> list[str]:
    """What is wrong with measured rates ``{"copy", "add", "inplace_add"}`` (any unit), by the module's sanity
    check; empty if they are consistent with a bandwidth-bound machine."""
    relative = {k: rates[k] / rates["inplace_add"] for k in SANITY}
    return [f"{k} at {relative[k]:.2f}× in-place add (allowed {lo:.2f}–{hi:.2f})"
            for k, (lo, hi) in SANITY.items() if not lo <= relative[k] <= hi]


def _split(fn, n: int, threads: int):
    cuts = np.linspace(0, n, threads + 1).astype(int).tolist()
    parts = list(zip(cuts[:-1], cuts[1:]))

    def run():
        workers = [threading.Thread(target=fn, args=p) for p in parts[1:]]
        for w in workers:
            w.start()
        fn(*parts[0])
        for w in workers:
            w.join()
    return run


def measure_floor(nbytes: int, repeats: int, threads: int) -> dict:
    """The three kernels' rates (bytes/s as STREAM counts them) over arrays of ``nbytes // 2`` bytes each,
    the sanity check, and the best rate (the floor's)."""
    n = max(1, nbytes // 8)
    a = np.full(n, 1e-3, dtype=np.float32)  # np.full writes every page: pre-faulted
    b = np.full(n, 2e-3, dtype=np.float32)
    c = np.full(n, 0.0, dtype=np.float32)
    calls = {"copy": _split(lambda lo, hi: np.copyto(c[lo:hi], a[lo:hi]), n, threads),
             "add": _split(lambda lo, hi: np.add(a[lo:hi], b[lo:hi], out=c[lo:hi]), n, threads),
             "inplace_add": _split(lambda lo, hi: np.add(a[lo:hi], b[lo:hi], out=a[lo:hi]), n, threads)}
    timings = time_interleaved(calls, repeats)
    rates = {k: _COUNTED[k] * a.nbytes / t.median for k, t in timings.items()}
    relative = {k: rates[k] / rates["inplace_add"] for k in ("copy", "add")}
    failed = check_rates(rates)
    return {"array_bytes": a.nbytes, "threads": threads, "GBps": {k: v / 1e9 for k, v in rates.items()},
            "relative_to_inplace_add": relative, "best_Bps": max(rates.values()),
            "passed": not failed, "why_not": "; ".join(failed),
            "timings": {k: t.as_dict() for k, t in timings.items()}}


def apply_floor(case: dict, floor: dict) -> None:
    """Add ``least_B``, ``floor2_s`` and ``x_floor2`` (None when the floor failed its check) to every row of a
    :func:`ringemu.cli.bench.bench_collectives` result."""
    for row in case["rows"]:
        least = least_traffic(row["op"], case["ranks"], case["padded_numel"], resolve_dtype(case["dtype"]).itemsize)
        row["least_B"] = least
        row["floor2_s"] = least / floor["best_Bps"]
        row["x_floor2"] = row["median_s"] / row["floor2_s"] if floor["passed"] else None

