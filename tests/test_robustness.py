"""Inputs that once hung, raised a traceback, allocated absurd memory, were silently ignored or gave a wrong
answer: each is answered now with one ``ringemu: error: ...`` line and exit status 2 (or a loud failure)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ringemu.cli import main
from zero_stages.api import train

ROOT = Path(__file__).resolve().parent.parent
COUNT = ["count", "--op", "all-reduce", "--ranks", "4", "--numel", "8", "--dtype", "fp32"]
HUGE = "1" + "0" * 30  # 10^30


def cli(capsys, *argv):
    """(exit status, stdout, stderr) of ``ringemu argv`` in this process (argparse errors included)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, out, err, *fragments):
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("ringemu: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


# -- hangs: each runs in its own process with a time limit, all at once ------------------------------------------
HANGS = {
    "bandwidth 1e999999999": [*COUNT, "--bandwidth", "1e999999999"],
    "latency 1e999999999": [*COUNT, "--bandwidth", "1", "--latency-us", "1e999999999"],
    "latency 1e-999999999": [*COUNT, "--bandwidth", "1", "--latency-us", "1e-999999999"],
    "gpu-gb 1e999999999": ["memory", "--params", "100", "--ranks", "4", "--gpu-gb", "1e999999999"],
    "gpu-gb 1e-999999999": ["memory", "--params", "100", "--ranks", "4", "--gpu-gb", "1e-999999999"],
    "20000 units": ["memory", "--units", ",".join(["7"] * 20_000), "--ranks", "2"],
    "zero steps 10^30": ["zero", "--ranks", "2", "--steps", HUGE],
    "bench repeats 10^30": ["bench", "--repeats", HUGE],
}


def test_inputs_that_hung_are_refused_at_once():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = {name: subprocess.Popen([sys.executable, "-m", "ringemu", *argv], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for name, argv in HANGS.items()}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=120)  # each answers in about a second (the import), when idle
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{name}: still running after 120 s")
        if name == "20000 units" and proc.returncode == 0:  # within the work bound: answered, promptly
            assert "Traceback" not in err
            continue
        assert_one_line_error(proc.returncode, out, err)


# -- tracebacks --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, fragment", [
    ([*COUNT, "--bandwidth", "1e-400"], "--bandwidth must be > 0"),
    ([*COUNT, "--bandwidth", "1", "--latency-us", "1e400"], "--latency-us must be >= 0 and <= 1000000000000"),
    ([*COUNT, "--bandwidth", "nan"], "--bandwidth must be a finite number"),
    ([*COUNT, "--bandwidth", "inf"], "--bandwidth must be a finite number"),
])
def test_overflowing_numbers_are_one_line_errors(capsys, argv, fragment):
    assert_one_line_error(*cli(capsys, *argv), fragment)


# -- absurd allocations: refused before anything is allocated ------------------------------------------------------
@pytest.mark.parametrize("argv, fragment", [
    (["run", "--op", "all-reduce", "--ranks", "100000", "--numel", "1", "--dtype", "fp32"], ""),  # memory or N bound
    (["run", "--op", "all-reduce", "--ranks", "5000", "--numel", "1", "--dtype", "fp32"], "ranks must be <= 1024"),
    (["bench", "--ranks", "100000"], "--ranks must be >= 1 and <= 1024"),
    (["bench", "--log2-numel", "40"], "--log2-numel must be >= 1 and <= 30"),
    (["bench", "--ranks", "1024", "--log2-numel", "30"], "the world buffer"),
    (["zero", "--ranks", "8", "--units", str(2 ** 40)], "needs about"),  # the machine's memory check fires first
    (["zero", "--ranks", "1024", "--steps", "100", "--stage", "dp", "--units", "3"],
     "steps·units·n_ranks² of a training run must be <="),
    (["memory", "--units", ",".join(["7"] * 40_000), "--ranks", "1024"], "the number of units of a size-only run"),
])
def test_absurd_sizes_are_refused(capsys, argv, fragment):
    assert_one_line_error(*cli(capsys, *argv), fragment)


# -- flags that were silently ignored ----------------------------------------------------------------------------
@pytest.mark.parametrize("argv, fragment", [
    ([*COUNT, "--latency-us", "3"], "--latency-us needs --bandwidth"),
    ([*COUNT, "--bandwidth", "1", "--latency-us", "-3"], "--latency-us must be >= 0"),
    (["bench", "--quick", "--ranks", "3"], "cannot be combined with --ranks"),
    (["bench", "--quick", "--repeats", "9"], "cannot be combined with --repeats"),
    (["zero", "--ranks", "2", "--torch-algorithm", "native"], "--torch-algorithm applies to --backend torch only"),
    (["zero", "--ranks", "2", "--timeout", "5"], "--timeout applies to --backend torch only"),
    (["zero", "--ranks", "2", "--init-scale", "8"], "--init-scale needs loss scaling"),
    (["run", "--op", "all-reduce", "--ranks", "2", "--numel", "4", "--dtype", "int32", "--save", "/tmp"],
     "--save must be a file name ending in .npz"),
])
def test_ignored_flags_are_refused(capsys, argv, fragment):
    assert_one_line_error(*cli(capsys, *argv), fragment)


def test_run_save_writes_exactly_the_path_given(capsys, tmp_path):
    target = tmp_path / "out.npz"
    code, _, _ = cli(capsys, "run", "--op", "all-reduce", "--ranks", "2", "--numel", "4", "--dtype", "int32",
                     "--save", str(target))
    assert code == 0 and [p.name for p in tmp_path.iterdir()] == ["out.npz"]
    assert np.load(target)["inputs"].shape == (2, 4)


# -- broken pipe ----------------------------------------------------------------------------------------------------
def test_output_into_a_closed_pipe_stops_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # `true` exits without reading, long before ringemu (a second of imports) writes: the write meets EPIPE
    shell = f"{sys.executable} -m ringemu memory --params 27781427952 --ranks 8 | true"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.stderr == "" and done.returncode == 0, done


# -- library arguments ------------------------------------------------------------------------------------------
def test_training_work_bounds_are_checked_in_the_library():
    with pytest.raises(ValueError, match="psi·n_ranks of a training run must be <="):
        train("dp", 8, 1, "bf16", 0, "blocks", (2 ** 40,))
    with pytest.raises(ValueError, match="steps·units·n_ranks² of a training run must be <="):
        train("dp", 1024, 100, "bf16", 0, "blocks", (3,))


def test_train_accepts_a_loss_scaling_kind_by_name():
    by_name = train("dp", 2, 1, "fp16", 0, "blocks", (6,), loss_scaling="static")
    assert by_name.loss_scales == [2.0 ** 16]  # LossScaling("static") starts at GradScaler's 2^16


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"loss_scaling": "dynamc"}, ValueError, "loss_scaling must be one of none, static, dynamic"),
    ({"loss_scaling": 3}, TypeError, "loss_scaling must be None, one of"),
    ({"width": 0}, ValueError, "width must be an integer >="),
    ({"width": 2.5}, TypeError, "width must be an integer"),
    ({"micro_batch": 0}, ValueError, "micro_batch must be an integer >= 1"),
    ({"adam": "adam"}, TypeError, "adam must be an AdamConfig"),
])
def test_train_names_the_bad_argument(kwargs, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(")):
        train("dp", 2, 1, "bf16", 0, "model", (20, 9), **kwargs)


# -- a run in which no step was taken ----------------------------------------------------------------------------
def test_zero_run_without_a_step_says_so_and_checks_nothing(capsys):
    # fp16 at N = 5 with GradScaler's initial scale 2^16: every step overflows and is skipped (measured)
    code, out, err = cli(capsys, "zero", "--dtype", "fp16", "--ranks", "5", "--stage", "zero1", "--json")
    result = json.loads(out)
    assert code == 1 and result["steps_taken"] == 0 and result["parity_checked"] is False
    assert result["stages"][0]["parity_with_dp"] is None and result["stages"][0]["traffic_ratio_to_dp"] is None
    assert err.startswith("ringemu: failed: no step was taken") and err.count("\n") == 1


def test_init_scale_reaches_the_default_fp16_scaling(capsys):
    code, out, _ = cli(capsys, "zero", "--dtype", "fp16", "--ranks", "2", "--stage", "dp", "--steps", "1",
                       "--init-scale", "8", "--json")
    assert json.loads(out)["stages"][0]["loss_scales"] == [8.0]  # the scale given, under dynamic scaling


def test_zero_run_with_steps_counts_as_a_parity_check(capsys):
    code, out, _ = cli(capsys, "zero", "--dtype", "fp16", "--ranks", "2", "--stage", "zero1", "--steps", "2",
                       "--init-scale", "8", "--json")
    result = json.loads(out)
    assert code == 0 and result["steps_taken"] == 2 and result["parity_checked"] is True
    assert result["stages"][0]["parity_with_dp"] is True


# -- NaN payloads: every mode keeps the same bits when two NaNs meet ----------------------------------------------
from hypothesis import given, strategies as st  # noqa: E402

from ringemu import collectives  # noqa: E402

_NAN_BITS = {"fp16": (np.uint16, 0x7C00, 10), "bf16": (np.uint16, 0x7F80, 7), "fp32": (np.uint32, 0x7F800000, 23),
             "fp64": (np.uint64, 0x7FF0000000000000, 52)}


@given(dtype=st.sampled_from(sorted(_NAN_BITS)), n=st.integers(2, 6), numel=st.integers(1, 200),
       seed=st.integers(0, 2 ** 32 - 1), op=st.sampled_from(["all_reduce", "reduce_scatter"]))
def test_modes_agree_on_nan_payloads(dtype, n, numel, seed, op):
    """Property: NaNs with random payloads and signs (quiet and signalling), infinities and numbers, reduced in
    every mode, give the same bits (numpy's vectorised add alone picks either NaN operand; the reference applies
    the receiver-first rule that the compiled kernels follow)."""
    from ringemu.dtypes import resolve_dtype
    uint, nan, mant = _NAN_BITS[dtype]
    rng = np.random.default_rng(seed)
    bits = rng.integers(1, 2 ** min(mant, 20), size=(n, numel)).astype(uint) | uint(nan)
    bits |= rng.integers(0, 2, size=(n, numel)).astype(uint) << uint(8 * np.dtype(uint).itemsize - 1)
    world = bits.view(resolve_dtype(dtype))
    numbers = rng.random((n, numel)) < 0.3
    world[numbers] = rng.standard_normal(int(numbers.sum())).astype(world.dtype)
    world[rng.random((n, numel)) < 0.05] = np.inf
    results = [np.concatenate([np.asarray(x).view(uint).ravel() for x in getattr(collectives, op)(world.copy(),
                                                                                               mode=mode)])
               for mode in ("fused", "step", "reference")]
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


# -- schedule= is checked against the collective's postcondition, not only N -------------------------------------
_COLLECTIVES = ("reduce-scatter", "all-gather", "all-reduce")


@pytest.mark.parametrize("collective", _COLLECTIVES)
@pytest.mark.parametrize("other", _COLLECTIVES)
def test_a_schedule_of_another_collective_is_refused(collective, other):
    """Property: every algorithm's schedule of ``other`` is accepted by ``collective`` exactly when it declares
    the collective's pre- and postcondition (the table in ringemu/schedule.py's Schedule doc): all-reduce needs
    all -> reduced-all; reduce-scatter all -> reduced-own, or reduced-all (an all-reduce's schedule leaves every
    chunk reduced, rank r's own included); all-gather own -> gathered. Refused ones raise before any work."""
    import ringemu
    from ringemu import algorithms
    world = np.arange(4 * 8, dtype=np.int64).reshape(4, 8)
    call = {"reduce-scatter": ringemu.reduce_scatter, "all-gather": ringemu.all_gather,
            "all-reduce": ringemu.all_reduce}[collective]
    # what each collective promises, from Schedule's doc (ringemu/schedule.py): pre- and postconditions it accepts
    needs = {"reduce-scatter": ("all", {"reduced-own", "reduced-all"}), "all-gather": ("own", {"gathered"}),
             "all-reduce": ("all", {"reduced-all"})}[collective]
    refused = 0
    for name in algorithms.names(other):
        schedule = algorithms.build(other, 4, name, numel=8, itemsize=8)  # engine orders: cut for this buffer
        arg = world if collective != "all-gather" else list(world[:, :2])
        if schedule.initial == needs[0] and schedule.final in needs[1]:
            call(arg, schedule=schedule)
        else:
            refused += 1
            with pytest.raises(ValueError, match=f"{collective} needs"):
                call(arg, schedule=schedule)
    # a collective's own schedules, and all-reduce's for reduce-scatter, always pass; every other pairing has
    # algorithms that would return a wrong result (an all-gather's for a reduction; a ring reduce-scatter's for
    # all-reduce, which leaves rank r only its chunk r reduced)
    assert (refused == 0) == (collective == other or (collective, other) == ("reduce-scatter", "all-reduce"))


def test_all_reduce_with_an_all_gather_schedule_was_silently_wrong_and_is_refused():
    import ringemu
    from ringemu import algorithms
    world = ringemu.integer_blocks(n_ranks=4, numel=8, seed=0, dtype="int64")
    with pytest.raises(ValueError, match="'own' to 'gathered'; all-reduce needs 'all' to 'reduced-all'"):
        ringemu.all_reduce(world, schedule=algorithms.build("all-gather", 4))
    with pytest.raises(ValueError, match="reduce-scatter needs 'all'"):
        ringemu.reduce_scatter(world, schedule=algorithms.build("all-gather", 4))
