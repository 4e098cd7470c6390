"""Memory measured from the MemoryLedger equals the exact closed forms; activations do not depend on N;
ZeRO-3's peak is its own shard plus the one or two units in flight (lesson claims M2, M3, M5, M8, M10)."""
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from zero_stages import STAGES, model_state_bytes_closed_form, run_size_only, train

from strategies_zero import big_psi, examples, n_ranks, unit_sizes, zero3_expected_peak

ANCHOR = 27_781_427_952  # the lesson's anchor Ψ


def test_anchor_model_states_at_n8():
    """Claim M2 (lesson: 444.5 / 152.8 / 104.2 / 55.6 GB); exact bytes 16Ψ, 4Ψ+12Ψ/8, 2Ψ+14Ψ/8, 16Ψ/8."""
    expected = {"dp": 444_502_847_232, "zero1": 152_797_853_736, "zero2": 104_180_354_820, "zero3": 55_562_855_904}
    for stage, value in expected.items():
        report = run_size_only(stage, 8, psi=ANCHOR)
        assert report.model_state_bytes_per_rank == [value] * 8
        assert report.model_state_padding_bytes_per_rank == [0] * 8


def test_zero_paper_figure_1():
    """ZeRO paper Figure 1 (Ψ = 7.5B, N = 64): 120 / 31.4 / 16.6 / 1.9 GB, one decimal."""
    shown = [round(Fraction(run_size_only(s, 64, psi=7_500_000_000).model_state_bytes_per_rank[0], 10 ** 9), 1)
             for s in STAGES]
    assert [float(x) for x in shown] == [120.0, 31.4, 16.6, 1.9]


@given(stage=st.sampled_from(STAGES), n=st.integers(1, 70), psi=big_psi)
def test_size_only_model_states_equal_closed_form(stage, n, psi):
    report = run_size_only(stage, n, psi=psi)
    assert report.model_state_bytes_per_rank == [model_state_bytes_closed_form(stage, psi, n)] * n
    if psi % n == 0:  # no padding: the paper's unpadded form
        assert report.model_state_bytes_per_rank[0] == model_state_bytes_closed_form(stage, psi, n, padded=False)


@given(stage=st.sampled_from(STAGES), n=n_ranks, units=unit_sizes)
def test_unit_sizes_model_states_and_padding(stage, n, units):
    report = run_size_only(stage, n, unit_sizes=units)
    exact = model_state_bytes_closed_form(stage, n_ranks=n, unit_sizes=units)
    unpadded = model_state_bytes_closed_form(stage, n_ranks=n, unit_sizes=units, padded=False)
    assert report.model_state_bytes_per_rank == [exact] * n
    # Summed over ranks, the padding the ranks report is what the padded form adds to the unpadded one.
    assert sum(report.model_state_padding_bytes_per_rank) == n * (exact - unpadded)


def test_floors_as_n_grows():
    """Claim M5: at N = 8, 64, 1024 ZeRO-1 stays above 4Ψ, ZeRO-2 above 2Ψ; ZeRO-3 is exactly 16Ψ/N."""
    for n in (8, 64, 1024):
        z1 = run_size_only("zero1", n, psi=ANCHOR).model_state_bytes_per_rank[0]
        z3 = run_size_only("zero3", n, psi=ANCHOR).model_state_bytes_per_rank[n - 1]
        assert z1 == 4 * ANCHOR + 12 * -(-ANCHOR // n) > 4 * ANCHOR
        assert z3 == 16 * -(-ANCHOR // n)


@settings(max_examples=examples(0.4))
@given(stage=st.sampled_from(STAGES), n=n_ranks, units=unit_sizes)
def test_real_run_holds_what_size_only_counts(stage, n, units):
    """The same stage code on real arrays and on size-only buffers records the same model states."""
    real = train(stage, n, 1, "bf16", 0, "blocks", units)
    assert real.model_state_bytes_per_rank == run_size_only(stage, n, unit_sizes=units).model_state_bytes_per_rank


def test_activations_do_not_shrink_with_n():
    """Claim M8: the per-rank activation peak depends on the micro-batch and width, not on N."""
    units = (30, 30, 12)
    for stage in STAGES:
        peaks = {n: train(stage, n, 1, "bf16", 0, "model", units).activation_peak_bytes_per_rank for n in (1, 2, 5, 8)}
        values = {v for per_rank in peaks.values() for v in per_rank}
        assert len(values) == 1 and values.pop() > 0, (stage, peaks)
        bigger = train(stage, 2, 1, "bf16", 0, "model", units, micro_batch=8).activation_peak_bytes_per_rank[0]
        assert bigger == 2 * peaks[2][0]  # twice the rows, twice the bytes


@given(n=n_ranks, units=unit_sizes, act=st.integers(0, 10 ** 6))
def test_zero3_peak_is_shard_plus_units_in_flight(n, units, act):
    report = run_size_only("zero3", n, unit_sizes=units, activation_bytes=act)
    assert report.peak_bytes_per_rank == [zero3_expected_peak(units, n, act)] * n
    assert report.activation_peak_bytes_per_rank == [act] * n
    largest = sorted(units, reverse=True) + [0]
    bound = (model_state_bytes_closed_form("zero3", n_ranks=n, unit_sizes=units) + act
             + 2 * (largest[0] + largest[1])  # the 16-bit parameters of the two largest units
             + 2 * largest[0])  # the 16-bit gradient bucket of the unit in backward
    assert report.peak_bytes_per_rank[0] <= bound


def test_zero3_peak_with_real_numbers():
    units = (10, 7, 33, 5)
    assert train("zero3", 3, 2, "bf16", 0, "blocks", units).peak_bytes_per_rank == [zero3_expected_peak(units, 3)] * 3
