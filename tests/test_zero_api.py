"""Public API and CLI: exports, bad input gives clear errors (CLI: exit 2, one line), loss scaling is consistent
across ranks, and the two documented CLI examples (the anchor table and `zero --stage all`)."""
import json

import numpy as np
import pytest

import zero_stages
from ringemu.worlds.emulator import EmulatedWorld
from ringemu.cli import main
from zero_stages import STAGES, LossScaling, parity_with_dp, run_size_only, train
from zero_stages.flat import MAX_PSI
from zero_stages.precision import LossScaler


def test_public_api():
    for name in ("STAGES", "run_size_only", "train", "StageReport", "parity_with_dp",
                 "model_state_bytes_closed_form", "traffic_elements_closed_form"):
        assert name in zero_stages.__all__
    assert STAGES == ("dp", "zero1", "zero2", "zero3")


@pytest.mark.parametrize("call, exc, words", [
    (lambda: run_size_only("zero4", 8, psi=10), ValueError, "stage"),
    (lambda: run_size_only("dp", 0, psi=10), ValueError, "n_ranks"),
    (lambda: run_size_only("dp", 2.5, psi=10), TypeError, "n_ranks"),
    (lambda: run_size_only("dp", 8, psi=0), ValueError, "psi"),
    (lambda: run_size_only("dp", 8, psi="10"), TypeError, "psi"),
    (lambda: run_size_only("dp", 8), ValueError, "exactly one"),
    (lambda: run_size_only("dp", 8, psi=10, unit_sizes=[10]), ValueError, "exactly one"),
    (lambda: run_size_only("dp", 8, unit_sizes=[]), ValueError, "unit_sizes"),
    (lambda: run_size_only("dp", 8, unit_sizes=[3, 0]), ValueError, "unit_sizes"),
    (lambda: run_size_only("dp", 8, unit_sizes=[3, 1.5]), ValueError, "unit_sizes"),
    (lambda: run_size_only("dp", 8, psi=10, wire_dtype="fp32"), ValueError, "wire_dtype"),
    (lambda: run_size_only("dp", 8, psi=10, activation_bytes=-1), ValueError, "activation_bytes"),
    (lambda: train("dp", 2, -1), ValueError, "steps"),
    (lambda: train("dp", 2, 1, grads="random"), ValueError, "grads"),
    (lambda: train("dp", 2, 1, wire_dtype="int8"), ValueError, "wire_dtype"),
    (lambda: train("dp", 2, 1, seed=-3), ValueError, "seed"),
    (lambda: train("dp", 2, 1, unit_sizes=[100], width=3), ValueError, "width"),
    (lambda: LossScaling("sometimes"), ValueError, "loss scaling"),
    (lambda: run_size_only("dp", 1025, psi=10), ValueError, "n_ranks"),
    (lambda: train("dp", 300, 1, "bf16", grads="blocks"), ValueError, "n_ranks=300"),
    (lambda: train("dp", 99_999_999, 1), ValueError, "n_ranks must be at most 1024"),
    (lambda: train("dp", 2, -5), ValueError, "steps"),
    (lambda: run_size_only("dp", 8, psi=2 ** 61), ValueError, "psi must be .* <= 2_305_843_009_213_693_951"),
    (lambda: run_size_only("dp", 8, psi=2 ** 64 + 1), ValueError, "psi"),
    (lambda: run_size_only("dp", 8, unit_sizes=[2 ** 60, 2 ** 60]), ValueError, "unit_sizes must sum to at most"),
    (lambda: run_size_only("dp", 8, psi=10, activation_bytes=2 ** 63), ValueError, "activation_bytes"),
])
def test_bad_input_is_named(call, exc, words):
    with pytest.raises(exc, match=words):
        call()


@pytest.mark.parametrize("argv", [
    ["zero", "--ranks", "0"], ["zero", "--ranks", "2", "--stage", "zero9"], ["zero", "--ranks", "2", "--units", "4,x"],
    ["zero", "--ranks", "2", "--units", "4,0"], ["zero", "--ranks", "2", "--backend", "torch", "--timeout", "-1"],
    ["zero", "--ranks", "2", "--backend", "torch", "--timeout", "inf"], ["zero", "--ranks", "2", "--units="],
    ["zero", "--ranks", "99999999"], ["zero", "--ranks", "2", "--steps", "-1"],
    ["zero", "--ranks", "300", "--grads", "blocks"], ["zero", "--ranks", "2", "--init-scale", "nan"],
    ["zero", "--ranks", "2", "--dtype", "fp32"], ["memory", "--params", "0", "--ranks", "8"],
    ["memory", "--params", str(2 ** 61), "--ranks", "8"], ["memory", "--params", "100", "--ranks", "1025"],
    ["zero", "--ranks", "2", "--units", f"{2 ** 60},{2 ** 60}"],
    ["memory", "--params", "100", "--ranks", "-1"], ["memory", "--params", "100", "--ranks", "8", "--gpu-gb", "0"],
    ["memory", "--params", "100", "--ranks", "8", "--gpu-gb", "inf"],
    ["memory", "--params", "100", "--ranks", "8", "--gpu-gb", "nan"],
])
def test_cli_bad_input_exits_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        raise SystemExit(main(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ringemu: error:")
    flags = {a for a in argv if a.startswith("--")} - {"--backend", "--grads"}
    named = [f for f in flags if f.split("=")[0] in err[0]]
    assert named, err[0]  # the message names the offending flag, not a Python parameter
    assert not any(word in err[0] for word in ("n_ranks", "psi ", "timeout must"))


@pytest.mark.parametrize("ranks", [1, 2, 1024])
def test_largest_psi_is_counted(ranks):
    """Ψ = MAX_PSI = 2^61 - 1 runs size-only at any N (the largest buffer, 4 B per element, stays below 2^63 B);
    DP holds 16 B per parameter on every rank."""
    report = run_size_only("dp", ranks, psi=MAX_PSI)
    assert MAX_PSI == 2 ** 61 - 1 and report.model_state_bytes_per_rank == [16 * MAX_PSI] * ranks


def test_cli_gb_is_rounded_half_up(capsys):
    """DP at N = 2 sends 2(N-1)/N·Ψ elements of 2 B = 2Ψ B per rank: Ψ = 175,000,000 gives 350,000,000 B,
    exactly 0.35 GB, which the lesson's rule (one decimal, ties away from zero) prints as 0.4."""
    assert main(["memory", "--params", "175000000", "--ranks", "2", "--gpu-gb", "40.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    dp = out["stages"][0]
    assert dp["traffic_sent_bytes_per_rank"] == [350_000_000, 350_000_000] and dp["traffic_gb"] == "0.4"
    assert out["gpu_gb"] == "40.5"


@pytest.mark.parametrize("argv", [["--ranks", "1", "--steps", "1"], ["--ranks", "2", "--steps", "0"]])
def test_cli_ratio_when_dp_sends_nothing(argv, capsys):
    assert main(["zero", "--stage", "zero3", "--grads", "blocks", *argv]) == 0
    text = capsys.readouterr().out
    assert "ratio to DP n/a (DP sends nothing)" in text and "None" not in text


def test_cli_memory_anchor(capsys):
    assert main(["memory", "--params", "27781427952", "--ranks", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    got = {s["name"]: (s["model_state_bytes_per_rank"][0], s["model_states_fit"]) for s in out["stages"]}
    assert got == {"dp": (444_502_847_232, False), "zero1": (152_797_853_736, False),
                   "zero2": (104_180_354_820, False), "zero3": (55_562_855_904, True)}
    assert all(set(s) >= {"name", "model_state_bytes_per_rank", "traffic_sent_bytes_per_rank", "model_states_fit",
                                 "peak_fits"}
               for s in out["stages"])


def test_cli_zero_all_stages(capsys):
    assert main(["zero", "--stage", "all", "--ranks", "8", "--steps", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in out["stages"]] == list(STAGES)
    assert all(s["parity_with_dp"] for s in out["stages"])
    dp, z3 = out["stages"][0], out["stages"][3]
    assert z3["traffic_ratio_to_dp"] == "3/2"
    assert all(2 * a == 3 * b for a, b in zip(z3["traffic_sent_bytes_per_rank"], dp["traffic_sent_bytes_per_rank"]))
    for s in out["stages"]:
        assert set(s) >= {"traffic_sent_bytes_per_rank", "model_state_bytes_per_rank", "peak_bytes_per_rank"}


def test_cli_zero_text_output(capsys):
    assert main(["zero", "--stage", "zero3", "--ranks", "3", "--steps", "1", "--grads", "blocks"]) == 0
    text = capsys.readouterr().out
    assert "zero3: parity with DP yes" in text and "param_all_gather_bwd" in text


def test_overflow_on_one_rank_skips_everywhere():
    """Only rank 2's shard holds an inf; the all-reduced flag makes every rank skip (and back off)."""
    def rank_fn(comm):
        scaler = LossScaler(LossScaling("dynamic", init_scale=1024.0))
        shard = np.ones(3, dtype=np.float16)
        if comm.rank == 2:
            shard[1] = np.inf
        overflow = scaler.found_overflow(comm, [shard])
        scaler.update(overflow)
        return overflow, scaler.scale
    assert EmulatedWorld(4).run(rank_fn) == [(True, 512.0)] * 4


def test_dynamic_scale_grows_after_clean_steps():
    scaler = LossScaler(LossScaling("dynamic", init_scale=8.0, growth_interval=2))
    expected = (8.0, 16.0, 8.0, 8.0, 16.0)  # grows after two clean steps, halves on an overflow, counts afresh
    for overflow, scale in zip((False, False, True, False, False), expected):
        scaler.update(overflow)
        assert scaler.scale == scale, (overflow, scaler.scale)


@pytest.mark.parametrize("stage", STAGES)
def test_static_overflow_skips_every_step(stage):
    """A static scale of 2^40 overflows fp16 on every step: no rank ever updates, and all agree with DP."""
    scaling = LossScaling("static", init_scale=2.0 ** 40)
    dp = train("dp", 3, 2, "fp16", 0, "model", (20, 9), loss_scaling=scaling)
    report = train(stage, 3, 2, "fp16", 0, "model", (20, 9), loss_scaling=scaling)
    assert report.skipped_steps == [True, True] and parity_with_dp(report, dp)
    assert not report.m.any() and not report.v.any()


def test_run_job_accepts_another_world():
    """Stage code only sees a Communicator: a world built by ``world_factory`` runs it unchanged."""
    made = []

    def factory(n, ledger):
        made.append(n)
        return EmulatedWorld(n, ledger, mode="reference")

    job = zero_stages.training_job(3, 2, "bf16", 0, "blocks", (7, 2))
    report = zero_stages.run_job("zero3", job, world_factory=factory)
    assert made == [3] and parity_with_dp(report, train("dp", 3, 2, "bf16", 0, "blocks", (7, 2)))


def test_memory_command_takes_unit_sizes(capsys):
    # Expected values: ZeRO §5.1's per-rank model states with each unit sharded on its own,
    # 16·Σ ceil(S_u/N) for ZeRO-3 (here ceil(10/4) + ceil(7/4) + ceil(3/4) = 3 + 2 + 1 = 6 elements: 96 B),
    # (2 + 2)·Ψ + 12·6 for ZeRO-1, 2·Ψ + 14·6 for ZeRO-2, 16·Ψ for DP, with Ψ = 20.
    from ringemu.cli import main
    assert main(["memory", "--units", "10,7,3", "--ranks", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == 20 and out["unit_sizes"] == [10, 7, 3]
    got = {row["name"]: set(row["model_state_bytes_per_rank"]) for row in out["stages"]}
    assert got == {"dp": {320}, "zero1": {152}, "zero2": {124}, "zero3": {96}}
