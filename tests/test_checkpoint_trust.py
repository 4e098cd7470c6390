"""Checkpoints that cannot lie: any single tampered byte or field is refused (or, where no check can see it, is
one of the cases docs/checkpoint.md lists as undetectable); overwrites keep the old step until the new one is
complete; one writer per root; a failed write names the file and leaves no temporaries."""
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ringemu.cli import main
from zero_stages.api import run_job, training_job
from zero_stages.checkpoint import root as root_module
from zero_stages.checkpoint.format import HEADER, header_array, npz_bytes, sha256
from zero_stages.checkpoint.save_load import CheckpointError, CheckpointWriter, load_checkpoint, run_training
from zero_stages.checkpoint.validate import run_digest
from zero_stages.precision import LossScaling

# fp16 with dynamic scaling from 8 (no overflow at this scale), growing after 4 clean steps: after 2 steps
# adam_step = 2 and clean_steps = 2, so every counter of the loss scaler is nonzero in the saved state
_JOB = dict(wire_dtype="fp16", seed=1, grads="model", unit_sizes=(7, 5),
            loss_scaling=LossScaling("dynamic", init_scale=8.0, growth_interval=4))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """ZeRO-2 on 3 ranks, 2 steps, a checkpoint after each: step-000001, step-000002, latest -> step 2."""
    root = tmp_path_factory.mktemp("trust")
    run_training("zero2", training_job(3, 2, **_JOB), root, 1)
    return root


def _state_bytes(ck) -> tuple:
    s = ck.state
    arrays = tuple(a.tobytes() for name in ("weights16", "master", "m", "v") for a in getattr(s, name))
    return arrays, s.adam_step, s.loss_scale, s.clean_steps, s.steps_done


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def originals(saved):
    """What each complete step of ``saved`` loads as: the only states a tampered root may load as."""
    states = {_state_bytes(load_checkpoint(saved / d)) for d in ("step-000001", "step-000002")}
    meta = load_checkpoint(saved).metadata
    assert len(states) == 2 and (meta["adam_step"], meta["clean_steps"], meta["loss_scale"]) == (2, 2, 8.0)
    return states


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_single_flipped_bit_is_refused_or_loads_a_complete_step(saved, originals, tmp_path_factory, data):
    """Property: flip one bit of one byte of any file of a checkpoint root (rank files, metadata.json, latest);
    loading the root then raises CheckpointError, or yields exactly the state of one of the root's complete
    steps. The second outcome is undetectable by design and harmless (docs/checkpoint.md): `latest` edited to
    name the other complete step, or a JSON spelling of the same values (1e-05 as 1E-05, a trailing newline)."""
    root = tmp_path_factory.mktemp("flip") / "root"
    shutil.copytree(saved, root)
    name = data.draw(st.sampled_from(_files(root)), label="file")
    path = root / name
    raw = bytearray(path.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1), label="byte")
    raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    path.write_bytes(bytes(raw))
    try:
        loaded = load_checkpoint(root)
    except CheckpointError:
        return
    assert _state_bytes(loaded) in originals, f"{name} byte {at}: loaded a state no complete step holds"


def _forge(directory, meta_edit=None, arrays_edit=None, keep_digest=False):
    """The strongest single-field forger: edit the metadata and/or rank files, then rewrite every rank file's
    header digest (unless ``keep_digest``) and the checksum table so that only semantic checks remain."""
    meta_path = directory / "metadata.json"
    meta = json.loads(meta_path.read_text())
    if meta_edit:
        meta_edit(meta)
    ranks = sorted(directory.glob("rank-*.npz"))
    arrays = {p.name: dict(np.load(p)) for p in ranks}
    if arrays_edit:
        arrays_edit(arrays)
    for name, a in arrays.items():
        header = json.loads(a[HEADER].tobytes())
        if not keep_digest:
            header["run_sha256"] = run_digest(meta)
        a[HEADER] = header_array(header)
        data = npz_bytes(a)
        (directory / name).write_bytes(data)
        if name in meta["files"]:
            meta["files"][name] = {"bytes": len(data), "sha256": sha256(data)}
    meta_path.write_text(json.dumps(meta))


def _set(key, value):
    def edit(meta):
        meta[key] = value
    return edit


def _array(rank, key, change):
    def edit(arrays):
        a = arrays[f"rank-0000{rank}.npz"]
        a[key] = change(a[key].copy())
    return edit


def _swap01(arrays):
    arrays["rank-00000.npz"], arrays["rank-00001.npz"] = arrays["rank-00001.npz"], arrays["rank-00000.npz"]


def _neg_v(v):
    v[0] = -1.0
    return v


def _nan(x):
    x[0] = np.nan
    return x


_SEMANTIC = [  # (field, metadata edit, arrays edit, the message's fragment); checksums and digests recomputed
    ("v < 0", None, _array(1, "unit0.v", _neg_v), "unit0.v holds 1 negative value"),
    ("m NaN", None, _array(2, "unit1.m", _nan), "unit1.m holds 1 non-finite"),
    ("adam_step 0, m v nonzero", lambda meta: meta.update(adam_step=0, clean_steps=0), None, "nonzero although adam_step is 0"),
    ("adam_step > steps_done", _set("adam_step", 5), None, "adam_step is 5; must lie in [0, steps_done = 2]"),
    ("steps_done -1", _set("steps_done", -1), None, "steps_done is -1"),
    ("steps_done moved", _set("steps_done", 3), None, "steps_done is 3, but the directory is step-000002"),
    ("loss_scale NaN", _set("loss_scale", float("nan")), None, "loss_scale is nan"),
    ("loss_scale inf", _set("loss_scale", float("inf")), None, "loss_scale is inf"),
    ("loss_scale 0", _set("loss_scale", 0.0), None, "loss_scale is 0.0"),
    ("loss_scale < 0", _set("loss_scale", -2.0), None, "loss_scale is -2.0"),
    ("clean_steps < 0", _set("clean_steps", -1), None, "clean_steps is -1"),
    ("n_ranks 0", _set("n_ranks", 0), None, "n_ranks or unit_sizes out of range"),
    ("stage", _set("stage", "zero4"), None, "stage is 'zero4'"),
    ("unknown key", _set("note", "x"), None, "note is not a field"),
    ("adam settings", _set("adam", {"lr": 1e-3, "beta1": 1.5}), None, "field adam or loss_scaling"),
    ("extra array", None, lambda arrays: arrays["rank-00000.npz"].update(unit9_m=np.zeros(1, np.float32)),
     "unexpected field unit9_m"),
    ("rank files swapped", None, _swap01, "header.rank is 1, expected 0"),
]


@pytest.mark.parametrize("field, meta_edit, arrays_edit, fragment", _SEMANTIC, ids=[c[0] for c in _SEMANTIC])
def test_a_consistent_forgery_of_one_field_is_refused(saved, tmp_path, capsys, field, meta_edit, arrays_edit,
                                                      fragment):
    """Each field set outside what any run writes, with checksums and digests recomputed, is refused by name;
    the command line prints one line and exits 2 (never "parity yes")."""
    d = tmp_path / "step-000002"
    shutil.copytree(saved / "step-000002", d)
    _forge(d, meta_edit, arrays_edit)
    with pytest.raises(CheckpointError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        load_checkpoint(d)
    assert main(["zero", "--resume", str(d), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ringemu: error: ") and err.count("\n") == 1 and fragment.split(" ")[0] in err


def test_a_metadata_edit_without_new_digests_is_refused_by_every_rank_header(saved, tmp_path):
    """The forger rewrites the checksum table but not the rank files: the header digest names the mismatch even
    for a value in its domain (another seed: any integer is one)."""
    d = tmp_path / "step-000002"
    shutil.copytree(saved / "step-000002", d)
    _forge(d, _set("seed", 2), keep_digest=True)
    with pytest.raises(CheckpointError, match="rank-00000.npz: field header.run_sha256"):
        load_checkpoint(d)


@pytest.mark.parametrize("text", ["", "step-000002/../step-000001\n", "../step-000002\n", "step-2\n",
                                  "step-000002\n\n", " step-000002\n", "step-000009\n", "\xff\n"])
def test_latest_must_hold_one_plain_step_name_of_an_existing_directory(saved, tmp_path, text):
    root = tmp_path / "root"
    shutil.copytree(saved, root)
    (root / "latest").write_bytes(text.encode("latin-1"))
    with pytest.raises(CheckpointError, match="latest"):
        load_checkpoint(root)


def test_resaving_a_step_replaces_it(saved, tmp_path):
    """The same step saved twice (another seed): the second save wins, nothing else is left in the root."""
    root = tmp_path / "root"
    shutil.copytree(saved, root)
    other = dict(_JOB, seed=7)
    report, _ = run_training("zero2", training_job(3, 2, **other), root, 2)
    assert _files(root) == _files(saved)
    assert load_checkpoint(root).state.master[0].tobytes() == report.master[:7].tobytes()
    assert load_checkpoint(root).metadata["seed"] == 7


def test_an_overwrite_killed_between_its_renames_keeps_the_old_step(saved, tmp_path, monkeypatch):
    """Killed after the old step-000002 was moved aside and before the new one took its name: loading the root
    gives the old step bit for bit, and the next writer puts it back in place."""
    root = tmp_path / "root"
    shutil.copytree(saved, root)
    before = _state_bytes(load_checkpoint(root))
    real_replace = os.replace

    class Killed(Exception):
        """What a signal does between two system calls."""

    def killed(src, dst):
        if str(src).endswith(".partial"):
            raise Killed("killed")
        real_replace(src, dst)
    monkeypatch.setattr(root_module.os, "replace", killed)
    with pytest.raises(Exception, match="Killed"):
        run_training("zero2", training_job(3, 2, **dict(_JOB, seed=7)), root, 2)
    monkeypatch.setattr(root_module.os, "replace", real_replace)
    assert not (root / "step-000002").exists() and (root / ".step-000002.old").is_dir()
    assert _state_bytes(load_checkpoint(root)) == before
    CheckpointWriter(root, 1, "zero2", training_job(3, 1, **_JOB)).close()
    assert (root / "step-000002").is_dir() and not (root / ".step-000002.old").exists()
    assert _state_bytes(load_checkpoint(root / "step-000002")) == before


def test_a_second_writer_on_a_root_is_refused_by_pid(tmp_path):
    first = CheckpointWriter(tmp_path, 1, "dp", training_job(2, 1, **_JOB))
    with pytest.raises(CheckpointError, match=rf"being written by pid {os.getpid()} on host"):
        CheckpointWriter(tmp_path, 1, "dp", training_job(2, 1, **_JOB))
    first.close()
    CheckpointWriter(tmp_path, 1, "dp", training_job(2, 1, **_JOB)).close()  # released: a new writer may start
    assert not (tmp_path / ".lock").exists()


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now names no process (reaped)
    (tmp_path / ".lock").write_text(f"{socket.gethostname()} {dead.pid}\n")
    run_training("dp", training_job(2, 1, **_JOB), tmp_path, 1)
    assert load_checkpoint(tmp_path).state.steps_done == 1 and not (tmp_path / ".lock").exists()


def test_the_command_line_refuses_a_locked_root_in_one_line(tmp_path, capsys):
    (tmp_path / ".lock").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    argv = ["zero", "--stage", "dp", "--ranks", "2", "--steps", "1", "--checkpoint", str(tmp_path),
            "--save-every", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"pid {os.getpid()}" in err and ".lock" in err


def test_disk_full_names_the_file_and_leaves_no_temporaries(saved, tmp_path, monkeypatch):
    """ENOSPC on the first fsync of step 3's first rank file: the error names that file and says the disk is
    full; no temporary file or partial step directory remains; the root's complete steps are untouched."""
    root = tmp_path / "root"
    shutil.copytree(saved, root)
    before = _files(root)

    real_fsync = os.fsync

    def full(fd):  # a full disk shows at the latest when a file's data is flushed; directories still sync
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)
    from zero_stages.checkpoint import format as format_module
    monkeypatch.setattr(format_module.os, "fsync", full)
    job = training_job(3, 3, **_JOB)
    with pytest.raises(Exception, match=r"step-000003\.partial/rank-00000\.npz: could not write [0-9,]+ B "
                                        r"\(disk full\)"):
        run_training("zero2", job, root, 3)
    monkeypatch.undo()
    assert _files(root) == before
    assert run_job("dp", training_job(1, 0, **_JOB)) is not None  # the process goes on working
