"""Each semantic check of a checkpoint's metadata, rank-file header and states, on its own: the value at each bound
is accepted, one past it is refused, and the refusal names the place and the field in the words the format's
documentation uses (docs/checkpoint.md; the bounds from the training limits: N <= 1024, Ψ·N <= 2^26, loss scale
<= 2^127, 1 <= steps_done <= 2^31)."""
import copy
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from zero_stages.checkpoint.format import (CheckpointError, atomic_write, header_array, npz_bytes, read_metadata,
                                           read_rank_file, verify_file)
from zero_stages.checkpoint.validate import check_header, check_metadata_semantics, check_states, run_digest

NONE = {"kind": "none", "init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}
DYNAMIC = dict(NONE, kind="dynamic", init_scale=8.0, growth_interval=4)
STATIC = dict(NONE, kind="static", init_scale=8.0)
# what a ZeRO-2 run on 2 ranks writes after one step (bf16, no loss scaling)
META = {"format": "ringemu-zero-checkpoint", "version": 2, "stage": "zero2", "n_ranks": 2, "unit_sizes": [3, 2],
        "layout": "ChunkLayout(S_u, N)", "wire_dtype": "bf16", "grads": "model", "seed": 1, "micro_batch": 4,
        "width": 2, "adam": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-08, "weight_decay": 0.0,
                             "decoupled": False, "sqrt": "numpy"},
        "loss_scaling": NONE, "steps_done": 1, "adam_step": 1, "loss_scale": 1.0, "clean_steps": 0, "files": {}}


def meta(**changes):
    out = copy.deepcopy(META)
    out.update(changes)
    return out


def refused(m, message):
    with pytest.raises(CheckpointError) as err:
        check_metadata_semantics(m, "W")
    assert str(err.value) == message


@pytest.mark.parametrize("changes", [
    dict(n_ranks=1024, unit_sizes=[1]), dict(n_ranks=2, unit_sizes=[2 ** 25]), dict(micro_batch=1, width=1),
    dict(width=None), dict(steps_done=2 ** 31, adam_step=2 ** 31),
    dict(loss_scaling=DYNAMIC, loss_scale=2.0 ** 127, steps_done=3, adam_step=2, clean_steps=2),
    dict(loss_scaling=DYNAMIC, loss_scale=8.0, steps_done=9, adam_step=9, clean_steps=3),
    dict(loss_scaling=STATIC, loss_scale=8.0, steps_done=2, adam_step=1), dict(loss_scaling=DYNAMIC, adam_step=0),
])
def test_values_at_the_bounds_are_accepted(changes):
    """Every bound is inclusive where the documentation says "<=": N = 1024, Ψ·N = 2^26, micro-batch and width 1,
    steps_done = 2^31, a loss scale of 2^127, clean_steps = min(adam_step, growth_interval − 1)."""
    adam, scaling = check_metadata_semantics(meta(**changes), "W")
    assert scaling.kind == meta(**changes)["loss_scaling"]["kind"] and adam.lr == 0.001


@pytest.mark.parametrize("changes, why", [
    (dict(n_ranks=1025, unit_sizes=[1]), "n_ranks/unit_sizes give N = 1025, Ψ = 1; a training run has N <= 1024 "
                                         "and Ψ·N <= 2^26"),
    (dict(n_ranks=2, unit_sizes=[2 ** 25, 1]), "n_ranks/unit_sizes give N = 2, Ψ = 33554433; a training run has "
                                               "N <= 1024 and Ψ·N <= 2^26"),
    (dict(stage="zero4"), "stage is 'zero4'; allowed: dp, zero1, zero2, zero3"),
    (dict(grads="all"), "grads is 'all'; allowed: model, blocks"),
    (dict(micro_batch=0), "micro_batch/width must be >= 1"),
    (dict(width=0), "micro_batch/width must be >= 1"),
    (dict(steps_done=0, adam_step=0), "steps_done is 0; a checkpoint is written after 1 to 2147483648 steps"),
    (dict(steps_done=2 ** 31 + 1, adam_step=2 ** 31 + 1),
     "steps_done is 2147483649; a checkpoint is written after 1 to 2147483648 steps"),
    (dict(adam_step=2), "adam_step is 2; must lie in [0, steps_done = 1]"),
    (dict(adam_step=0), "adam_step is 0 but steps_done is 1: without loss scaling no step is skipped"),
    (dict(loss_scale=float("inf")), "loss_scale is inf; must be finite, > 0 and <= 2^127"),
    (dict(loss_scaling=DYNAMIC, loss_scale=2.0 ** 128), "loss_scale is 3.402823669209385e+38; must be finite, > 0 "
                                                        "and <= 2^127"),
    (dict(loss_scaling=DYNAMIC, loss_scale=0.0), "loss_scale is 0.0; must be finite, > 0 and <= 2^127"),
    (dict(loss_scale=2.0), "loss_scale is 2.0; none loss scaling keeps it at 1.0"),
    (dict(loss_scaling=STATIC, loss_scale=4.0), "loss_scale is 4.0; static loss scaling keeps it at 8.0"),
    (dict(loss_scaling=DYNAMIC, loss_scale=8.0, steps_done=3, adam_step=2, clean_steps=3),
     "clean_steps is 3; must lie in [0, min(adam_step, growth_interval - 1)] (0 unless dynamic)"),
    (dict(loss_scaling=DYNAMIC, loss_scale=8.0, steps_done=9, adam_step=9, clean_steps=4),
     "clean_steps is 4; must lie in [0, min(adam_step, growth_interval - 1)] (0 unless dynamic)"),
    (dict(clean_steps=1), "clean_steps is 1; must lie in [0, min(adam_step, growth_interval - 1)] (0 unless "
                          "dynamic)"),
    (dict(zzz=1, aaa_extra=2), "aaa_extra is not a field of this format"),
])
def test_each_field_out_of_its_domain_is_refused_by_name(changes, why):
    """One field out of its domain: a CheckpointError "WHERE: field NAME ..." that states the bound."""
    refused(meta(**changes), f"W: field {why}")


def test_settings_their_own_classes_refuse_are_refused_as_a_field():
    """Adam and loss-scaling settings are checked by AdamConfig and LossScaling; their refusal names the fields."""
    with pytest.raises(CheckpointError, match=r"^W: field adam or loss_scaling: loss scaling kind must be one of "):
        check_metadata_semantics(meta(loss_scaling=dict(NONE, kind="sometimes")), "W")
    with pytest.raises(CheckpointError, match=r"^W: field adam or loss_scaling: "):
        check_metadata_semantics(meta(adam={"learning_rate": 1}), "W")


def test_a_header_of_another_rank_step_or_run_is_refused():
    """A rank file's header names its rank, N, stage, step and the run's digest; any other value (or an extra
    key) is a file of another rank, step or run."""
    m = meta()
    good = {"rank": 1, "n_ranks": 2, "stage": "zero2", "steps_done": 1, "run_sha256": run_digest(m)}
    check_header(good, 1, m, "F")
    with pytest.raises(CheckpointError) as err:
        check_header(dict(good, rank=0), 1, m, "F")
    assert str(err.value) == "F: field header.rank is 0, expected 1 (a file of another rank, step or run)"
    with pytest.raises(CheckpointError) as err:
        check_header(dict(good, extra=1), 1, m, "F")
    assert str(err.value) == ("F: field header holds keys ['extra', 'n_ranks', 'rank', 'run_sha256', 'stage', "
                              "'steps_done'], expected ['n_ranks', 'rank', 'run_sha256', 'stage', 'steps_done']")


def _states(m=(0.0,), v=(0.0,), master=(1.0,)):
    return {"master": [np.array(master, np.float32)], "m": [np.array(m, np.float32)],
            "v": [np.array(v, np.float32)]}


def test_states_no_adam_step_could_have_written_are_refused():
    """Adam's moments start at zero (bias correction divides by 1 − β^t, zero at t = 0): nonzero m or v with
    adam_step = 0 is refused; v is a mean of squares (>= 0); every state finite."""
    check_states(_states(), 0, "W")
    check_states(_states(m=(0.5,), v=(0.25,)), 1, "W")
    for states, step, message in (
            (_states(m=(0.0, 0.5)), 0, "W: field unit0.m is nonzero although adam_step is 0 (no Adam step taken)"),
            (_states(v=(0.5,)), 0, "W: field unit0.v is nonzero although adam_step is 0 (no Adam step taken)"),
            (_states(v=(1.0, -1.0, -2.0)), 1, "W: field unit0.v holds 2 negative value(s) (first at element 1); "
                                              "Adam's v is a running mean of squares, >= 0"),
            (_states(master=(1.0, np.nan)), 1, "W: field unit0.master holds 1 non-finite value(s) (first at "
                                               "element 1)")):
        with pytest.raises(CheckpointError) as err:
            check_states(states, step, "W")
        assert str(err.value) == message


def test_the_messages_keep_the_place_first():
    """Every refusal starts with the place it was given (a path, a rank file), so the message names the file."""
    with pytest.raises(CheckpointError, match=re.escape("/x/metadata.json: field grads")):
        check_metadata_semantics(meta(grads="none"), "/x/metadata.json")


# -- the rank file's format ----------------------------------------------------------------------------------
def _rank_file(**arrays):
    base = {"header": header_array({"rank": 0}), "unit0.master": np.zeros(3, np.float32)}
    base.update(arrays)
    return npz_bytes({k: v for k, v in base.items() if v is not None})


def _read(data):
    return read_rank_file(Path("F"), data, {"unit0.master": 3}, np.dtype(np.uint16))


def test_a_header_is_canonical_json_bytes():
    """The same header in any key order is the same bytes (sorted keys), so its digest names the content."""
    assert header_array({"b": 1, "a": 2}).tobytes() == b'{"a": 2, "b": 1}' == header_array({"a": 2, "b": 1}).tobytes()


@pytest.mark.parametrize("arrays, message", [
    (dict(header=None), "F: field header missing or not a uint8 array"),
    (dict(header=np.frombuffer(b'{"rank": 0}', np.uint8).reshape(1, -1)), "F: field header missing or not a uint8 "
                                                                          "array"),
    (dict(header=np.frombuffer(b'{"rank": 0}', np.uint8).astype(np.int32)), "F: field header missing or not a "
                                                                             "uint8 array"),
    (dict(header=np.frombuffer(b"\xff{", np.uint8)), "F: field header is not UTF-8 JSON"),
    (dict(header=np.frombuffer(b"[1]", np.uint8)), "F: field header is not a JSON object"),
    (dict(**{"unit0.master": None}), "F: field unit0.master missing"),
    (dict(**{"unit0.master": np.zeros((1, 3), np.float32)}), "F: field unit0.master is float32[3], expected "
                                                             "float32[3]"),
    (dict(**{"unit0.master": np.zeros(3, np.float64)}), "F: field unit0.master is float64[3], expected float32[3]"),
    (dict(extra=np.zeros(1, np.uint8)), "F: unexpected field extra"),
])
def test_a_rank_file_holds_exactly_its_header_and_arrays(arrays, message):
    """A uint8 1-D UTF-8 JSON object header, every expected array 1-D of its type and length, nothing else."""
    with pytest.raises(CheckpointError) as err:
        _read(_rank_file(**arrays))
    assert str(err.value) == message


def test_a_checksum_mismatch_shows_sixteen_hex_digits_of_each(tmp_path):
    """The refusal quotes the first 16 hex digits of the file's SHA-256 and of the metadata's, then an ellipsis."""
    path = tmp_path / "f"
    path.write_bytes(b"abc")  # SHA-256 of "abc": ba7816bf8f01cfea 414140de5dae2223 ... (FIPS 180-2, B.1)
    with pytest.raises(CheckpointError) as err:
        verify_file(path, {"bytes": 3, "sha256": "0123456789abcdef" * 4})
    assert str(err.value) == (f"{path}: field sha256: checksum ba7816bf8f01cfea… differs from the metadata's "
                              "0123456789abcdef… (corrupted)")


def test_a_write_that_cannot_start_names_the_file(tmp_path):
    """A write into a directory that does not exist fails before any temporary file exists: still the one
    CheckpointError naming the path and the reason, no other error."""
    path = tmp_path / "missing" / "latest"
    with pytest.raises(CheckpointError) as err:
        atomic_write(path, b"step-000001\n")
    assert str(err.value) == (f"{path}: could not write 12 B: No such file or directory; its temporary file was "
                              "removed")


def test_the_run_digest_is_sha256_of_canonical_json():
    """The digest covers every field but ``files``, as JSON with sorted keys and no spaces, so any key order and
    any checksum table give the same digest (the bytes written out by hand here)."""
    m = {"b": 1, "a": [1, 2], "files": {"rank-00000.npz": {}}}
    assert run_digest(m) == hashlib.sha256(b'{"a":[1,2],"b":1}').hexdigest()
    assert run_digest({"a": [1, 2], "b": 1}) == run_digest(m)


FILES = {"rank-00000.npz": {"bytes": 1, "sha256": "a"}, "rank-00001.npz": {"bytes": 1, "sha256": "b"}}


def _read_meta(tmp_path, text):
    (tmp_path / "metadata.json").write_text(text)
    with pytest.raises(CheckpointError) as err:
        read_metadata(tmp_path)
    return str(err.value).replace(str(tmp_path / "metadata.json"), "M")


@pytest.mark.parametrize("changes, why", [
    (dict(n_ranks=True), "field n_ranks has the wrong type (bool)"),
    (dict(n_ranks="2"), "field n_ranks has the wrong type (str)"),
    (dict(version=1), "field format/version is 'ringemu-zero-checkpoint' 1, expected 'ringemu-zero-checkpoint' 2"),
    (dict(unit_sizes=[]), "field n_ranks or unit_sizes out of range"),
    (dict(unit_sizes=[3, 0]), "field n_ranks or unit_sizes out of range"),
    (dict(unit_sizes=[3, True]), "field n_ranks or unit_sizes out of range"),
    (dict(n_ranks=6), "field files does not list exactly the 6 rank files (e.g. missing ['rank-00002.npz', "
                      "'rank-00003.npz', 'rank-00004.npz'])"),  # three of the four missing are named
    (dict(files=dict(FILES, **{"rank-00001.npz": {"bytes": 1}})), "field files.rank-00001.npz must hold bytes and "
                                                                   "sha256"),
    (dict(files=dict(FILES, **{"rank-00001.npz": {"sha256": "b"}})), "field files.rank-00001.npz must hold bytes and "
                                                                     "sha256"),
])
def test_metadata_of_the_wrong_shape_is_refused_by_field(tmp_path, changes, why):
    """Types first (a bool is no count), then the format's version, then N and the unit sizes (>= 1 each), then
    the checksum table: exactly one entry per rank file, each with its size and SHA-256."""
    assert _read_meta(tmp_path, json.dumps(meta(**dict(dict(files=FILES), **changes)))) == f"M: {why}"


def test_metadata_that_is_no_object_or_absent_is_refused(tmp_path):
    """A metadata file holding a JSON array is no checkpoint; a directory without one is none either."""
    assert _read_meta(tmp_path, "[1]") == "M: not a JSON object"
    (tmp_path / "metadata.json").unlink()
    with pytest.raises(CheckpointError) as err:
        read_metadata(tmp_path)
    assert str(err.value) == f"{tmp_path / 'metadata.json'}: missing (not a checkpoint, or one that was not completed)"
