"""The benchmark's floor (benchmarks/floor.py): the least traffic of each collective, the sanity check that a
floor must pass before ratios are taken against it, and the ZeRO step sized to its training budget."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from floor import apply_floor, check_rates, least_traffic  # noqa: E402
from run import zero_log2_params  # noqa: E402


@pytest.mark.parametrize("n", [2, 8, 64])
def test_least_traffic_reads_every_element_once_and_writes_what_the_result_needs(n):
    """Worked by hand from the definitions: S = 1,024 fp32 per rank (4,096 B). RS reads N·S and writes one reduced
    chunk per rank (S in all); AG reads each chunk once (S) and writes the N-1 chunks each rank lacks; AR reads and
    writes N·S."""
    per = 1024 * 4
    assert least_traffic("reduce-scatter", n, 1024, 4) == n * per + per
    assert least_traffic("all-gather", n, 1024, 4) == per + (n - 1) * per
    assert least_traffic("all-reduce", n, 1024, 4) == 2 * n * per


def test_a_floor_like_the_one_that_mismeasured_fails_its_check():
    """The rates a run once printed (copy 15.1 GB/s, in-place add 53.5 GB/s) cannot come from a bandwidth-bound
    copy: it moves at most 3 arrays for the 2 it is counted for, so it runs at ≥ 2/3 of the in-place add."""
    assert check_rates({"copy": 15.1, "add": 40.0, "inplace_add": 53.5})
    assert check_rates({"copy": 30.0, "add": 70.0, "inplace_add": 45.7})  # add faster than in-place: not bandwidth
    assert check_rates({"copy": 36.0, "add": 40.0, "inplace_add": 45.7}) == []  # 0.79× and 0.88×: consistent


def test_no_ratio_is_taken_against_a_failed_floor():
    case = {"ranks": 8, "padded_numel": 1024, "dtype": "fp32",
            "rows": [{"op": "all-reduce", "impl": "ringemu-fused", "median_s": 1e-3}]}
    apply_floor(case, {"best_Bps": 65536 / 1e-3, "passed": False})
    assert case["rows"][0]["x_floor2"] is None and case["rows"][0]["least_B"] == 65536
    apply_floor(case, {"best_Bps": 65536 / 1e-3, "passed": True})
    assert case["rows"][0]["x_floor2"] == pytest.approx(1.0)  # 2·8·1,024·4 B = 65,536 B at 65,536 B per ms


def test_the_zero_step_is_sized_to_the_training_budget():
    """zero_stages' check (Ψ·N ≤ 2^26) stays; the benchmark picks the largest Ψ = 2^k under it."""
    assert zero_log2_params(8, 24) == 23  # 2^23 · 8 = 2^26
    assert zero_log2_params(1, 24) == 24
    assert zero_log2_params(64, 24) == 20
