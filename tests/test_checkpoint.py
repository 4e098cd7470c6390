"""Sharded checkpoints: resharded continuation equals DP bit for bit; damaged checkpoints are refused, naming the
file and the field; writes are atomic."""
import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from ringemu.cli import main
from zero_stages.api import STAGES, run_job, training_job
from zero_stages.checkpoint.save_load import CheckpointError, CheckpointWriter, load_checkpoint, resume_job, run_training, state_of_report

_STATES = ("weights16", "master", "m", "v")


def _bits_equal(a, b) -> bool:
    return all(getattr(a, k).tobytes() == getattr(b, k).tobytes() for k in _STATES) and \
        a.skipped_steps == b.skipped_steps and a.loss_scales == b.loss_scales


@settings(max_examples=12)
@example(stage_a="zero3", stage_b="zero1", n=3, m=3, units=[7, 5], saved_at=2, more=2, dtype="bf16", grads="model")
@given(stage_a=st.sampled_from(STAGES), stage_b=st.sampled_from(STAGES), n=st.integers(1, 8), m=st.integers(1, 8),
       units=st.lists(st.integers(1, 24), min_size=1, max_size=3), saved_at=st.integers(1, 3),
       more=st.integers(1, 2), dtype=st.sampled_from(["bf16", "fp16"]), grads=st.sampled_from(["model", "blocks"]))
def test_resharded_continuation_equals_dp(stage_a, stage_b, n, m, units, saved_at, more, dtype, grads):
    """Property: train ``stage_a`` on N ranks, checkpoint after ``saved_at`` steps, load at M ranks into
    ``stage_b`` and train ``more`` steps: the result equals, bit for bit, DP trained ``saved_at`` steps on N
    ranks and continued in memory (no files) on M ranks; for M = N, DP trained without interruption."""
    settings_ = dict(wire_dtype=dtype, seed=3, grads=grads, unit_sizes=tuple(units))
    with tempfile.TemporaryDirectory() as root:
        run_training(stage_a, training_job(n, saved_at, **settings_), root, saved_at)
        resumed = run_job(stage_b, resume_job(load_checkpoint(root), m, more))
    dp_first = run_job("dp", training_job(n, saved_at, **settings_))
    continued = dataclasses.replace(training_job(m, more, **settings_),
                                    resume=state_of_report(dp_first, dp_first_scaling(dtype)), first_step=saved_at)
    assert _bits_equal(resumed, run_job("dp", continued))
    if m == n:
        assert _bits_equal(resumed, _tail(run_job("dp", training_job(n, saved_at + more, **settings_)), more))


def test_loss_scaler_state_survives_a_checkpoint(tmp_path):
    """Dynamic scaling that grows every 2 clean steps (from 8): saved after step 3, resumed for 3 more, the
    scales and states equal an uninterrupted DP run's (the clean-step count is part of the state)."""
    from zero_stages.precision import LossScaling
    scaling = LossScaling("dynamic", init_scale=8.0, growth_interval=2)
    setting = dict(wire_dtype="fp16", seed=2, grads="model", unit_sizes=(9, 4), loss_scaling=scaling)
    run_training("zero2", training_job(2, 3, **setting), tmp_path, 3)
    resumed = run_job("dp", resume_job(load_checkpoint(tmp_path), 2, 3))
    whole = run_job("dp", training_job(2, 6, **setting))
    assert whole.loss_scales == [8.0, 8.0, 16.0, 16.0, 32.0, 32.0]  # GradScaler's rule, no overflow at these scales
    assert _bits_equal(resumed, _tail(whole, 3))


def dp_first_scaling(dtype):
    return training_job(1, 0, wire_dtype=dtype).loss_scaling


def _tail(report, steps):
    """The uninterrupted report's final states, and its last ``steps`` skip decisions and scales."""
    return dataclasses.replace(report, skipped_steps=report.skipped_steps[-steps:],
                               loss_scales=report.loss_scales[-steps:])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """ZeRO-3 on 4 ranks, 2 steps of units (7, 5), fp16: a checkpoint after each step."""
    root = tmp_path_factory.mktemp("ckpt")
    run_training("zero3", training_job(4, 2, "fp16", 1, "model", (7, 5)), root, 1)
    return root


def _copy(saved, tmp_path) -> Path:
    import shutil
    target = tmp_path / "copy"
    shutil.copytree(saved / "step-000002", target)
    return target


def test_latest_points_at_the_last_complete_step(saved):
    assert (saved / "latest").read_text().strip() == "step-000002"
    ck = load_checkpoint(saved)
    meta = ck.metadata
    assert (meta["stage"], meta["n_ranks"], meta["unit_sizes"], meta["wire_dtype"], meta["seed"]) == \
        ("zero3", 4, [7, 5], "fp16", 1)
    assert ck.state.steps_done == 2 and sorted(meta["files"]) == [f"rank-0000{r}.npz" for r in range(4)]


@pytest.mark.parametrize("damage, fragment", [
    ("truncate", "rank-00002.npz: field bytes"),
    ("flip", "rank-00002.npz: field sha256"),
    ("remove", "rank-00002.npz: missing"),
    ("metadata-json", "metadata.json: not valid JSON"),
    ("metadata-field", "metadata.json: field adam_step missing"),
    ("metadata-ranks", "metadata.json: field files does not list exactly the 5 rank files"),
    ("wrong-shape", "rank-00002.npz: field unit0.master is float32[1], expected float32[2]"),
    ("inconsistent", "field unit1.weights16 is not the 16-bit rounding of unit1.master"),
    ("no-metadata", "no metadata.json and no latest pointer: not a checkpoint"),
])
def test_damaged_checkpoints_are_refused_naming_file_and_field(saved, tmp_path, damage, fragment):
    from zero_stages.checkpoint.format import npz_bytes, sha256
    d = _copy(saved, tmp_path)
    rank2, meta_path = d / "rank-00002.npz", d / "metadata.json"
    meta = json.loads(meta_path.read_text())

    def rewrite_rank2(arrays):
        data = npz_bytes(arrays)
        rank2.write_bytes(data)
        meta["files"]["rank-00002.npz"] = {"bytes": len(data), "sha256": sha256(data)}
        meta_path.write_text(json.dumps(meta))

    if damage == "truncate":
        rank2.write_bytes(rank2.read_bytes()[:-10])
    elif damage == "flip":
        data = bytearray(rank2.read_bytes())
        data[len(data) // 2] ^= 0x10
        rank2.write_bytes(bytes(data))
    elif damage == "remove":
        rank2.unlink()
    elif damage == "metadata-json":
        meta_path.write_text(meta_path.read_text()[:40])
    elif damage == "metadata-field":
        del meta["adam_step"]
        meta_path.write_text(json.dumps(meta))
    elif damage == "metadata-ranks":
        meta["n_ranks"] = 5
        meta_path.write_text(json.dumps(meta))
    elif damage == "wrong-shape":
        arrays = dict(np.load(rank2))
        arrays["unit0.master"] = arrays["unit0.master"][:1]
        rewrite_rank2(arrays)
    elif damage == "inconsistent":  # a well-formed file whose master moved away from its 16-bit weights
        arrays = dict(np.load(rank2))
        arrays["unit1.master"] = arrays["unit1.master"] + np.float32(0.5)
        rewrite_rank2(arrays)
    elif damage == "no-metadata":
        meta_path.unlink()
    with pytest.raises(CheckpointError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        load_checkpoint(d)


def test_an_interrupted_save_leaves_the_last_checkpoint_in_place(saved, tmp_path):
    """Only some ranks write step 3 (the others stopped): no step-000003 appears, latest still names step 2,
    and the partial directory is not a checkpoint."""
    import shutil
    root = tmp_path / "root"
    shutil.copytree(saved, root)
    job = training_job(4, 1, "fp16", 1, "model", (7, 5))
    writer = CheckpointWriter(root, 1, "zero3", job)

    def rank_state(comm, job):
        from zero_stages.stages import zero3
        arena, mine, weights16, _, opt = zero3.init_state(comm, job)
        held = [(u, mine[u].start, weights16[u][:mine[u].stop - mine[u].start]) for u in job.flat.units()]
        return opt, held

    from ringemu.worlds.emulator import EmulatedWorld
    from ringemu.ledger import CommLedger
    from zero_stages.precision import LossScaler
    states = EmulatedWorld(4, CommLedger()).run(rank_state, job)
    for rank in (0, 1):  # ranks 2 and 3 never report
        writer(rank, 2, states[rank][0], LossScaler(job.loss_scaling), states[rank][1])
    assert not (root / "step-000003").exists() and (root / ".step-000003.partial").is_dir()
    assert load_checkpoint(root).state.steps_done == 2
    with pytest.raises(CheckpointError, match="no metadata.json"):
        load_checkpoint(root / ".step-000003.partial")


def test_cli_saves_and_resumes_at_another_n_and_stage(tmp_path, capsys):
    root = tmp_path / "ck"
    assert main(["zero", "--stage", "zero3", "--ranks", "8", "--steps", "4", "--save-every", "2", "--checkpoint",
                 str(root), "--units", "40,17", "--json"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step-000002", "step-000004"]
    assert main(["zero", "--resume", str(root / "step-000002"), "--ranks", "3", "--stage", "zero1", "--steps", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_step"] == 2 and out["ranks"] == 3 and out["stages"][0]["parity_with_dp"] is True


@pytest.mark.parametrize("argv, fragment", [
    (["--ranks", "2", "--checkpoint", "X"], "--checkpoint and --save-every go together"),
    (["--ranks", "2", "--save-every", "2", "--checkpoint", "X"], "--checkpoint saves one stage"),
    (["--resume", "/nonexistent-ringemu-dir"], "is not a directory"),
    (["--resume", "X", "--dtype", "fp16"], "--dtype come(s) from the checkpoint"),
    (["--stage", "dp"], "--ranks is required"),
])
def test_cli_checkpoint_flags_are_checked(capsys, argv, fragment):
    assert main(["zero", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ringemu: error: ") and err.count("\n") == 1 and fragment in err
