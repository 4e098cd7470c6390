"""Real-data runs that cannot fit are refused before they allocate; the estimates bound what runs really hold."""
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringemu import memory_guard
from ringemu.algorithms import op_names, resolve_op
from ringemu.cli import main
from ringemu.cli.collective_commands import run_collective
from ringemu.dtypes import DTYPES
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
