"""Refuse a real-data run that cannot fit in this machine's memory, before allocating anything.

A run with real numbers holds its arrays in this process: ``ringemu run --ranks 100000 --numel 1`` would pad
every rank's one element to a chunk per rank (a 100,000 × 100,000 world) and walk a schedule of 2·10^10
transfers: hundreds of GiB. :func:`check_fits` compares a run's estimated bytes with the memory available now
(``MemAvailable`` of ``/proc/meminfo``, the cgroup's limit less its usage when one is set, and the address-space
limit ``ulimit -v`` (``RLIMIT_AS``, setrlimit(2)) less the process's ``VmSize`` when one is set) and raises
:class:`NotEnoughMemory` (a ValueError: the command line prints one line and exits 2) that names the size-only
command counting the same run without data.

Estimates are upper-bound sums of the arrays a run allocates (its inputs, their exact wide copies, the padded
world, the schedule table and its kernel indexes, the link counters); they are not exact, and need not be: the
guard is for runs that are off by orders of magnitude, not for the last few percent.
"""
from __future__ import annotations

import resource
from pathlib import Path

from . import algorithms
from .layout import ChunkLayout
from .partition import layout_for

__all__ = ["NotEnoughMemory", "address_space_left", "available_bytes", "check_fits", "collective_run_bytes", "schedule_table_bytes"]

TABLE_ROW_BYTES = 5 * 8 + 8 + 8  # one int64 row of (step, src, dst, chunk, op), plus the kernel's sort indexes
# the direct path's program (ringemu.direct.run.program) per transfer of the table: at most 83 B over every order of
# the registry at N = 5, 16, 64 and 136 (S = 135, in place or not; most orders 35-60 B), so 96 B is allowed
PROGRAM_BYTES_PER_TRANSFER = 96
FIXED_BYTES = 4 << 20  # Python objects of any run (ledger, records, result lists), whatever its size
RANK_BYTES = 16384  # Python objects per rank (its result array view, its Traffic records in the ledger summary)
_SAMPLE_RANKS = 128  # schedules larger than this are estimated from this many ranks (see schedule_table_bytes)


class NotEnoughMemory(ValueError):
    """A run would need more memory than this machine has available."""


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def address_space_left() -> int | None:
    """``RLIMIT_AS``'s soft limit (``ulimit -v``, in bytes) less this process's virtual size (``VmSize`` of
    ``/proc/self/status``, kB = 1024 B); None without a limit. Beyond it every allocation fails (ENOMEM)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - used)


def available_bytes() -> int | None:
    """Bytes this process may still allocate: ``MemAvailable``, capped by a cgroup limit less its usage (v2 or
    v1) and by the address-space limit (:func:`address_space_left`); None where none can be read (the guard then
    lets the run go)."""
    found = [] if address_space_left() is None else [address_space_left()]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)  # kB = 1024 B in /proc/meminfo
    except (OSError, ValueError, IndexError):
        pass
    for limit_path, usage_path in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None and limit < 1 << 60:  # "max" or a huge number: no limit
            found.append(max(0, limit - usage))
    return min(found) if found else None


def _sample(collective: str, n_ranks: int, algorithm: str, numel: int = 1, itemsize: int = 4):
    """The schedule at min(N, _SAMPLE_RANKS) ranks (an engine order: cut for ``numel`` elements of ``itemsize``)."""
    return algorithms.build(collective, min(n_ranks, _SAMPLE_RANKS), algorithm, numel=numel, itemsize=itemsize)


def schedule_table_bytes(collective: str, n_ranks: int, algorithm: str = algorithms.DEFAULT_ALGORITHM,
                         numel: int = 1, itemsize: int = 4) -> int:
    """Bytes of the schedule's transfer table and the kernels' indexes over it. Built for real up to
    ``_SAMPLE_RANKS`` ranks; above, the transfers counted at that size are scaled by (N / sample)², which bounds
    every algorithm of at most N² transfers up to the (N−1)/N-type factors, here covered by a factor 1.25.
    ``numel`` and ``itemsize`` reach the engine orders, which are cut for one buffer."""
    sample = _sample(collective, n_ranks, algorithm, numel, itemsize)
    if n_ranks <= _SAMPLE_RANKS:
        return sample.n_transfers * TABLE_ROW_BYTES
    return sample.n_transfers * n_ranks * n_ranks * 5 // (_SAMPLE_RANKS * _SAMPLE_RANKS * 4) * TABLE_ROW_BYTES


def collective_run_bytes(collective: str, n_ranks: int, numel: int, itemsize: int,
                         algorithm: str = algorithms.DEFAULT_ALGORITHM) -> int:
    """Estimated peak bytes of ``ringemu run``: inputs and their 8-byte exact copies, the padded world, the
    schedule table and indexes, the direct path's program, and the (N, N) link counters."""
    sample = _sample(collective, n_ranks, algorithm, numel, itemsize)
    chunks = n_ranks if sample.n_chunks == sample.n_ranks else sample.n_chunks  # a chunk per rank, or fixed
    padded = ChunkLayout(numel, chunks).padded_numel
    if sample.partition is not None:  # an engine's own cut: slots of its largest chunk (at the sample's N)
        padded = max(padded, layout_for(sample, numel).padded_numel)
    inputs = n_ranks * numel * itemsize
    wide = n_ranks * numel * 8 + numel * 8  # int64/float64 copy for the independent sum, and the sum itself
    world = n_ranks * padded * itemsize
    links = 2 * n_ranks * n_ranks * 8
    objects = FIXED_BYTES + RANK_BYTES * n_ranks
    table = schedule_table_bytes(collective, n_ranks, algorithm, numel, itemsize)
    program = table // TABLE_ROW_BYTES * PROGRAM_BYTES_PER_TRANSFER
    return inputs + wide + world + table + program + links + objects


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 30:,.1f} GiB"


def check_fits(nbytes: int, what: str, size_only_command: str, available: int | None = None) -> None:
    """Raise :class:`NotEnoughMemory` if ``nbytes`` (an estimate) exceeds the memory available now
    (``available`` overrides the measurement, for tests). The message names ``size_only_command``."""
    free = available_bytes() if available is None else available
    if free is not None and nbytes > free:
        raise NotEnoughMemory(f"{what} needs about {_gib(nbytes)} of memory with real data, but {_gib(free)} are "
                              f"available on this machine; count it without data: {size_only_command}")
