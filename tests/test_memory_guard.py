"""Real-data runs that cannot fit are refused before they allocate; the estimates bound what runs really hold."""
import tracemalloc
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringemu import algorithms, memory_guard
from ringemu.algorithms import op_names, resolve_op
from ringemu.cli import main
from ringemu.cli.collective_commands import run_collective
from ringemu.dtypes import DTYPES
from ringemu.partition import layout_for
from zero_stages.api import train, training_bytes
from zero_stages.memory.closed_forms import STAGES

GIB = 2 ** 30


def traced_peak(fn) -> int:
    """Peak bytes numpy (and Python) allocated while ``fn`` ran (after a warm-up call: loading the compiled
    kernels is not part of a run)."""
    fn()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@settings(max_examples=12)
@given(op=st.sampled_from(op_names()), n=st.integers(min_value=1, max_value=160),
       numel=st.integers(min_value=0, max_value=3000), dtype=st.sampled_from(["int32", "fp32", "bf16", "fp64"]))
def test_run_estimate_bounds_the_run(op, n, numel, dtype):
    collective, algorithm = resolve_op(op)
    estimate = memory_guard.collective_run_bytes(collective, n, numel, DTYPES[dtype].itemsize, algorithm)
    assert traced_peak(lambda: run_collective(op, n, numel, dtype, 0)) <= estimate


@settings(max_examples=6)
@given(stage=st.sampled_from(STAGES), n=st.integers(min_value=1, max_value=8),
       units=st.lists(st.integers(min_value=1, max_value=3000), min_size=1, max_size=3))
def test_training_estimate_bounds_the_run(stage, n, units):
    estimate = training_bytes(stage, n, 2, units, "bf16")
    assert traced_peak(lambda: train(stage, n, 2, "bf16", grads="blocks", unit_sizes=units)) <= estimate


def test_run_of_100000_ranks_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 16 * GIB)
    assert main(["run", "--op", "all-reduce", "--ranks", "100000", "--numel", "1", "--dtype", "fp32"]) == 2
    err = capsys.readouterr().err
    # 100,000 × 100,000 padded fp32 world alone is 37 GiB; the (N, N) link counters 2 × 75 GiB
    assert err.startswith("ringemu: error: all-reduce on 100,000 ranks of 1 elements needs about ")
    assert "16.0 GiB are available" in err and "ringemu count" in err


def test_zero_that_cannot_fit_points_to_memory(monkeypatch, capsys):
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 1 * GIB)
    assert main(["zero", "--ranks", "64", "--units", "100000000", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "ringemu memory --units 100000000 --ranks 64 --dtype bf16" in err


def test_runs_that_fit_go_ahead(monkeypatch):
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 1 * GIB)
    assert main(["run", "--op", "reduce-scatter", "--ranks", "4", "--numel", "10", "--dtype", "int32"]) == 0


def test_check_fits_and_available_bytes():
    memory_guard.check_fits(10, "x", "y", available=10)
    with pytest.raises(ValueError, match="x needs about 0.0 GiB .* count it without data: y"):
        memory_guard.check_fits(11, "x", "y", available=10)
    free = memory_guard.available_bytes()
    assert free is None or free > 0


class FakeFiles:
    """Stands in for ``pathlib.Path`` inside the guard: ``Path(p).read_text()`` returns ``files[p]`` or raises
    FileNotFoundError, as a missing ``/proc`` or cgroup file does."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def __call__(self, path):
        files = self.files

        class _File:
            def read_text(self):
                if path not in files:
                    raise FileNotFoundError(path)
                return files[path]
        return _File()


def fake_machine(monkeypatch, files, soft_limit=None):
    """The guard's view of a machine: these files, and ``RLIMIT_AS``'s soft limit (None: unlimited)."""
    inf = -1  # RLIM_INFINITY on Linux
    monkeypatch.setattr(memory_guard, "Path", FakeFiles(files))
    monkeypatch.setattr(memory_guard, "resource", SimpleNamespace(
        RLIMIT_AS=9, RLIM_INFINITY=inf, getrlimit=lambda which: (inf if soft_limit is None else soft_limit, inf)))


MEMINFO = "MemTotal:       16000000 kB\nMemFree:         1000 kB\nMemAvailable:    8000000 kB\nBuffers: 5 kB\n"
V2 = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current")
V1 = ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")


def test_available_bytes_is_memavailable_in_kib_without_other_limits(monkeypatch):
    """proc(5): /proc/meminfo counts kB of 1024 B; with no cgroup file and no ulimit, MemAvailable is the bound."""
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO})
    assert memory_guard.available_bytes() == 8000000 * 1024


def test_nothing_readable_lets_the_run_go(monkeypatch):
    """No /proc/meminfo, no cgroup, no ulimit: nothing is known, None (check_fits then refuses nothing)."""
    fake_machine(monkeypatch, {})
    assert memory_guard.available_bytes() is None
    memory_guard.check_fits(10 ** 30, "x", "y")  # nothing known, nothing refused


@pytest.mark.parametrize("paths", [V2, V1], ids=["cgroup-v2", "cgroup-v1"])
def test_a_cgroup_limit_less_its_usage_caps_memavailable(monkeypatch, paths):
    """cgroups(7): the group may allocate its limit less what it uses now; the smaller of that and MemAvailable."""
    limit, usage = paths
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO, limit: "3000000000\n", usage: "1000000000\n"})
    assert memory_guard.available_bytes() == 2000000000
    # a group over its limit (usage above it after a lowered limit) may allocate nothing
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO, limit: "3000000000\n", usage: "3000000001\n"})
    assert memory_guard.available_bytes() == 0


def test_both_cgroup_versions_cap_and_the_smallest_wins(monkeypatch):
    """Every bound read applies: v2 and v1 both present, MemAvailable larger, the tighter cgroup is the answer."""
    files = {"/proc/meminfo": MEMINFO, V2[0]: "5000\n", V2[1]: "1000\n", V1[0]: "9000\n", V1[1]: "2000\n"}
    fake_machine(monkeypatch, files)
    assert memory_guard.available_bytes() == 4000
    files[V1[1]] = "6000\n"
    assert memory_guard.available_bytes() == 3000


@pytest.mark.parametrize("limit_text", ["max\n", "9223372036854771712\n", str(1 << 60), str(3 << 59)],
                         ids=["v2-max", "v1-unlimited", "2^60", "1.5*2^60"])
def test_an_unlimited_cgroup_is_no_bound(monkeypatch, limit_text):
    """cgroup v2 writes "max" for no limit, v1 the page-rounded 2^63 - 4096; no machine has 2^60 B (1 EiB), so a
    limit from 2^60 up is none either: MemAvailable bounds the run, and without it nothing is known (None)."""
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO, V2[0]: limit_text, V2[1]: "1000\n"})
    assert memory_guard.available_bytes() == 8000000 * 1024
    fake_machine(monkeypatch, {V2[0]: limit_text, V2[1]: "1000\n"})
    assert memory_guard.available_bytes() is None


@pytest.mark.parametrize("missing", [0, 1], ids=["no-limit-file", "no-usage-file"])
def test_a_cgroup_limit_needs_both_files(monkeypatch, missing):
    """A limit without its usage (or a usage without a limit) says nothing about what is left: ignored."""
    files = {"/proc/meminfo": MEMINFO, V2[0]: "5000\n", V2[1]: "1000\n"}
    del files[V2[missing]]
    fake_machine(monkeypatch, files)
    assert memory_guard.available_bytes() == 8000000 * 1024


@pytest.mark.parametrize("text", ["", "\n", "12ab\n", "-5\n"], ids=["empty", "blank", "not-a-number", "negative"])
def test_an_unreadable_cgroup_number_is_no_bound(monkeypatch, text):
    """A cgroup file that is empty or holds no plain count is no bound (and does not crash the guard)."""
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO, V2[0]: text, V2[1]: "1\n"})
    assert memory_guard.available_bytes() == 8000000 * 1024
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO, V2[0]: "5000\n", V2[1]: text})
    assert memory_guard.available_bytes() == 8000000 * 1024


def test_a_malformed_meminfo_is_skipped_not_fatal(monkeypatch):
    """A MemAvailable line without a number is no bound; the cgroup bound still applies."""
    fake_machine(monkeypatch, {"/proc/meminfo": "MemAvailable: lots kB\n", V2[0]: "5000\n", V2[1]: "1000\n"})
    assert memory_guard.available_bytes() == 4000
    fake_machine(monkeypatch, {"/proc/meminfo": "MemTotal: 5 kB\nMemAvailable:\n"})
    assert memory_guard.available_bytes() is None


def test_the_address_space_limit_less_vmsize_caps_everything(monkeypatch):
    """setrlimit(2): past RLIMIT_AS's soft limit every mapping fails, so the limit less VmSize (kB of 1024 B in
    /proc/self/status) bounds the rest; a process already past its limit may allocate nothing."""
    status = "Name: python\nVmPeak:  900000 kB\nVmSize:  500000 kB\nVmRSS: 1000 kB\n"
    fake_machine(monkeypatch, {"/proc/meminfo": MEMINFO, "/proc/self/status": status}, soft_limit=10 ** 9)
    assert memory_guard.address_space_left() == 10 ** 9 - 500000 * 1024
    assert memory_guard.available_bytes() == 10 ** 9 - 500000 * 1024
    fake_machine(monkeypatch, {"/proc/self/status": status}, soft_limit=10 ** 8)
    assert memory_guard.address_space_left() == 0
    assert memory_guard.available_bytes() == 0


def test_an_unreadable_vmsize_counts_as_nothing_used(monkeypatch):
    """Without /proc/self/status (or with a VmSize that is no number) the whole soft limit is the bound."""
    fake_machine(monkeypatch, {}, soft_limit=10 ** 9)
    assert memory_guard.address_space_left() == 10 ** 9
    fake_machine(monkeypatch, {"/proc/self/status": "VmSize: many kB\n"}, soft_limit=10 ** 9)
    assert memory_guard.address_space_left() == 10 ** 9
    fake_machine(monkeypatch, {"/proc/self/status": "VmSize:\n"}, soft_limit=10 ** 9)
    assert memory_guard.address_space_left() == 10 ** 9
    fake_machine(monkeypatch, {"/proc/self/status": "VmSize: 1 kB\n"})
    assert memory_guard.address_space_left() is None


ROW = 56  # bytes per transfer: five int64 columns (step, src, dst, chunk, op) and two int64 sort indexes
PROGRAM = 96  # bytes per transfer allowed for the direct path's program (the largest measured: 83 B)


def objects(n):
    return 4 * 2 ** 20 + n * 16384  # 4 MiB of any run's objects, 16 KiB per rank


@pytest.mark.parametrize("collective, n, algorithm, numel, itemsize", [
    ("reduce-scatter", 5, "ompi:default", 1, 4), ("reduce-scatter", 5, "ompi:default", 2, 4),
    ("reduce-scatter", 5, "ompi:default", 1, 8), ("all-reduce", 5, "nccl:tree", 4096, 4),
    ("all-reduce", 5, "nccl:tree", 4096, 5), ("all-reduce", 128, "ring", 1, 4),
])
def test_the_schedule_term_is_the_order_cut_for_this_buffer(collective, n, algorithm, numel, itemsize):
    """An engine order depends on the buffer (its element count and width pick the algorithm and its
    segments): the table holds the transfers of the order built for this numel and itemsize, 56 B each, built
    for real up to 128 ranks (128 included)."""
    built = algorithms.build(collective, n, algorithm, numel=numel, itemsize=itemsize)
    assert memory_guard.schedule_table_bytes(collective, n, algorithm, numel, itemsize) == built.n_transfers * ROW


def test_the_schedule_term_defaults_to_one_four_byte_element():
    """Without numel and itemsize the table is that of a one-element 4-byte buffer (the signature's defaults)."""
    for collective, n, algorithm, numel in (("reduce-scatter", 5, "ompi:default", None), ("all-reduce", 5,
                                                                                          "nccl:tree", 4096)):
        built = algorithms.build(collective, n, algorithm, numel=numel or 1, itemsize=4)
        got = (memory_guard.schedule_table_bytes(collective, n, algorithm) if numel is None else
               memory_guard.schedule_table_bytes(collective, n, algorithm, numel=numel))
        assert got == built.n_transfers * ROW


def test_the_scaled_schedule_term_is_whole_bytes_rounded_down():
    """Above 128 ranks: the 128-rank ring's 2·127·128 transfers × (200/128)² × 5/4, rounded down to whole rows
    (6,502,400,000 / 65,536 = 99,218.75 rows: 99,218 of them), an int."""
    got = memory_guard.schedule_table_bytes("all-reduce", 200, "ring")
    assert type(got) is int and got == 99218 * ROW


@pytest.mark.parametrize("collective, n, algorithm, numel, world, rows", [
    # N = 256 > 128 with 300 elements: the padded world has a chunk per rank of the run's 256, ceil(300/256) = 2
    # slots each (512), not the 128-rank sample's 3 × 128 = 384; the table is the scaled 128-rank ring's
    ("all-reduce", 256, "ring", 300, 256 * 512, 32512 * 4 * 5 // 4),
    # a one-chunk algorithm (naive: every rank sends its whole buffer) pads nothing: 8 ranks × 10 elements
    ("all-reduce", 8, "naive", 10, 8 * 10, 14),
])
def test_the_world_term_pads_to_the_algorithms_chunks(collective, n, algorithm, numel, world, rows):
    """The padded world holds N copies of the buffer padded to the algorithm's chunks: one per rank of the run
    (not of the sample) for per-rank chunks, the algorithm's fixed count otherwise."""
    expected = n * numel * 4 + n * numel * 8 + numel * 8 + world * 4 + rows * (ROW + PROGRAM) + 2 * n * n * 8 \
        + objects(n)
    assert memory_guard.collective_run_bytes(collective, n, numel, 4, algorithm) == expected


def test_the_world_term_holds_an_engines_own_cut():
    """An engine order cuts the buffer its own way: NCCL's ring of 7 fp32 elements on 4 ranks takes 16 slots
    per rank (partition.layout_for, tested there), more than 4 chunks of 2; the world is padded to the larger,
    and the table is the 12 transfers of the order cut for 7 elements of 4 B."""
    built = algorithms.build("all-reduce", 4, "nccl:ring", numel=7, itemsize=4)
    assert layout_for(built, 7).padded_numel == 16 and built.n_transfers == 12
    expected = 4 * 7 * 4 + 4 * 7 * 8 + 7 * 8 + 4 * 16 * 4 + 12 * (ROW + PROGRAM) + 2 * 4 * 4 * 8 + objects(4)
    assert memory_guard.collective_run_bytes("all-reduce", 4, 7, 4, "nccl:ring") == expected


@pytest.mark.parametrize("algorithm, numel", [("nccl:ring", 7), ("nccl:tree", 4096)])
def test_the_world_and_table_follow_the_buffers_width(algorithm, numel):
    """The order an engine picks depends on the buffer's bytes, so an 8-byte buffer is estimated with the order
    cut for 8-byte elements (its own slots and transfers, from the order itself), not for the 4-byte default."""
    built = algorithms.build("all-reduce", 5, algorithm, numel=numel, itemsize=8)
    world = 5 * layout_for(built, numel).padded_numel  # 10 and 4096 slots: no less than its chunks' padding
    expected = 5 * numel * 8 + 5 * numel * 8 + numel * 8 + world * 8 + built.n_transfers * (ROW + PROGRAM) \
        + 2 * 25 * 8 + objects(5)
    assert memory_guard.collective_run_bytes("all-reduce", 5, numel, 8, algorithm) == expected


def test_the_direct_programs_fit_their_allowance_per_transfer():
    """The run estimate allows PROGRAM_BYTES_PER_TRANSFER for the direct path's program: every order of the
    registry, at 5, 16 and 64 ranks, in place or not, builds a program no larger than that per transfer."""
    from ringemu.algorithms import REGISTRY
    from ringemu.direct.run import program
    for (collective, name), entry in REGISTRY.items():
        for n in (5, 16, 64):
            if entry.unsupported(n) is not None:
                continue
            schedule = algorithms.build(collective, n, name, numel=135, itemsize=4)
            for in_place in (False, True):
                prog = program(schedule, layout_for(schedule, 135), collective == "reduce-scatter", in_place)
                if prog is None:
                    continue
                nbytes = sum(a.nbytes for a in (prog.ops, prog.op_bounds, prog.writes, prog.write_bounds,
                                                prog.chunk_start, prog.chunk_len))
                assert nbytes <= memory_guard.PROGRAM_BYTES_PER_TRANSFER * schedule.n_transfers, (name, n, nbytes)
