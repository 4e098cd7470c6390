"""Traffic read from the CommLedger equals the exact closed forms: 2(N−1)/N·Ψ for DP, ZeRO-1 and ZeRO-2 and
3(N−1)/N·Ψ for ZeRO-3 per rank and step, padding included; ZeRO-3 / DP = 3/2 for every N >= 2 (claims C2, C3)."""
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from zero_stages import STAGES, run_size_only, traffic_elements_closed_form, train

from strategies_zero import big_psi, examples, n_ranks, unit_sizes


@given(stage=st.sampled_from(STAGES), n=st.integers(1, 70), psi=big_psi)
def test_size_only_traffic_equals_closed_form(stage, n, psi):
    report = run_size_only(stage, n, psi=psi)
    assert report.traffic_sent_elements_per_rank == [traffic_elements_closed_form(stage, psi, n)] * n
    assert report.traffic_sent_bytes_per_rank == [2 * e for e in report.traffic_sent_elements_per_rank]  # bf16


@given(n=st.integers(2, 70), units=unit_sizes)
def test_zero3_over_dp_is_exactly_three_halves(n, units):
    dp = run_size_only("dp", n, unit_sizes=units).traffic_sent_elements_per_rank
    z3 = run_size_only("zero3", n, unit_sizes=units).traffic_sent_elements_per_rank
    assert all(Fraction(a, b) == Fraction(3, 2) for a, b in zip(z3, dp))
    for stage in ("zero1", "zero2"):
        assert run_size_only(stage, n, unit_sizes=units).traffic_sent_elements_per_rank == dp


@settings(max_examples=examples(0.4))
@given(stage=st.sampled_from(STAGES), n=n_ranks, units=unit_sizes, k=st.integers(1, 3))
def test_real_runs_send_the_closed_form_every_step(stage, n, units, k):
    report = train(stage, n, k, "bf16", 0, "blocks", units)
    per_step = traffic_elements_closed_form(stage, n_ranks=n, unit_sizes=units)
    assert report.traffic_sent_elements_per_rank == [k * per_step] * n
    if all(s % n == 0 for s in units):
        assert per_step == traffic_elements_closed_form(stage, n_ranks=n, unit_sizes=units, padded=False)


def test_one_rank_sends_nothing():
    assert all(run_size_only(s, 1, psi=1000).traffic_sent_elements_per_rank == [0] for s in STAGES)


def test_anchor_dp_traffic():
    """Claim C4: DP's ring traffic per card at Ψ = 27,781,427,952, 16-bit gradients: 97.2 GB (N = 8),
    109.4 GB (N = 64); exactly 2·2(N−1)·Ψ/N bytes."""
    for n, shown in ((8, "97.2"), (64, "109.4")):
        sent = run_size_only("dp", n, psi=27_781_427_952).traffic_sent_bytes_per_rank[0]
        assert sent == 4 * (n - 1) * -(-27_781_427_952 // n)
        assert f"{sent / 1e9:.1f}" == shown


def test_overflow_check_has_its_own_label():
    """fp16 loss scaling adds one all-reduced flag per step under ``overflow_check``, kept out of the total."""
    fp16 = train("zero2", 4, 2, "fp16", 0, "blocks", (9, 4))
    bf16 = train("zero2", 4, 2, "bf16", 0, "blocks", (9, 4))
    assert "overflow_check" in fp16.comm.labels() and "overflow_check" not in bf16.comm.labels()
    assert len(fp16.comm.select("overflow_check")) == 2
    assert fp16.traffic_sent_elements_per_rank == bf16.traffic_sent_elements_per_rank
