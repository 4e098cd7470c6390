"""The core CLI commands: demo, run, trace, count; JSON keys; the lesson's numbers; exit status 2 on bad input."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ringemu.blocks import integer_blocks
from ringemu.cli import main

PSI = 27_781_427_952  # the lesson's anchor model, parameters


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0 and err == ""
    return json.loads(out)


def test_count_lesson_anchor_n8(capsys):
    d = run_json(capsys, "count", "--op", "all-reduce", "--ranks", "8", "--numel", str(PSI), "--dtype", "bf16")
    assert {"steps", "total_bytes", "padding_bytes", "per_rank"} <= set(d)
    assert d["steps"] == 14 and d["padding_bytes"] == 0
    for i, r in enumerate(d["per_rank"]):
        assert {"rank", "sent_elements", "sent_bytes", "received_elements", "received_bytes"} <= set(r)
        assert r["rank"] == i and r["sent_bytes"] == 97_234_997_832  # the lesson's 97.2 GB (claim C4)
    assert d["total_bytes"] == 8 * 97_234_997_832


def test_count_lesson_anchor_n64_and_naive(capsys):
    d = run_json(capsys, "count", "--op", "all-reduce", "--ranks", "64", "--numel", str(PSI), "--dtype", "bf16")
    assert {r["sent_bytes"] for r in d["per_rank"]} == {109_389_372_624}  # 109.4 GB
    d = run_json(capsys, "count", "--op", "naive-all-reduce", "--ranks", "8", "--numel", str(PSI), "--dtype", "bf16")
    assert d["per_rank"][0]["received_bytes"] == 388_939_991_328  # 388.9 GB (claim C5)


def test_count_bandwidth_gives_alpha_beta_time(capsys):
    d = run_json(capsys, "count", "--op", "all-reduce", "--ranks", "8", "--numel", str(PSI), "--dtype", "bf16",
                 "--bandwidth", "50")
    assert d["alpha_beta_seconds_exact"] == "12154374729/6250000000"  # 97,234,997,832 B / (50·10^9 B/s)
    assert round(d["alpha_beta_seconds"], 2) == 1.94  # claim C6
    code, out, _ = run_cli(capsys, "count", "--op", "all-reduce", "--ranks", "8", "--numel", str(PSI),
                           "--dtype", "bf16", "--bandwidth", "50")
    assert code == 0 and "97,234,997,832 B (97.2 GB)" in out and "1.945 s" in out


def test_count_text_groups_ranks(capsys):
    code, out, _ = run_cli(capsys, "count", "--op", "naive-all-reduce", "--ranks", "8", "--numel", "100",
                           "--dtype", "fp32")
    assert code == 0
    assert "rank 0 sends 700 elements = 2,800 B and receives 700 elements = 2,800 B" in out
    assert "ranks 1-7 each send 100 elements = 400 B and receive 100 elements = 400 B" in out


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather", "all-reduce", "naive-all-reduce"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "fp16", "bf16", "fp32", "float64"])
def test_run_verifies(capsys, tmp_path, op, dtype):
    """The CLI says verified, and the saved outputs agree with numpy's exact sum (int64 / float64) of the saved
    inputs, computed here: chunk r of ceil(13/5) = 3 elements is rank r's (payloads 3, 3, 3, 3, 1)."""
    path = tmp_path / "run.npz"
    d = run_json(capsys, "run", "--op", op, "--ranks", "5", "--numel", "13", "--dtype", dtype, "--seed", "4",
                 "--save", str(path))
    assert d["verified"] is True and d["op"] == op and d["saved"] == str(path)
    assert {"steps", "total_bytes", "padding_bytes", "per_rank"} <= set(d)
    with np.load(path) as z:
        inputs, outputs = z["inputs"], z["outputs"]
    blocks = integer_blocks(5, 13, 4, dtype)
    np.testing.assert_array_equal(inputs, blocks.astype(np.float32) if blocks.dtype.itemsize == 2
                                  and blocks.dtype.kind != "i" else blocks)
    wide = np.int64 if inputs.dtype.kind == "i" else np.float64
    total = inputs.astype(wide).sum(axis=0)
    bounds = [(0, 3), (3, 6), (6, 9), (9, 12), (12, 13)]
    if op == "reduce-scatter":
        assert outputs.shape == (5, 3)
        for r, (lo, hi) in enumerate(bounds):
            np.testing.assert_array_equal(outputs[r, :hi - lo].astype(wide), total[lo:hi])
            assert not outputs[r, hi - lo:].any()
    elif op == "all-gather":
        gathered = np.concatenate([inputs[r, lo:hi] for r, (lo, hi) in enumerate(bounds)]).astype(wide)
        np.testing.assert_array_equal(outputs.astype(wide), np.broadcast_to(gathered, (5, 13)))
    else:
        np.testing.assert_array_equal(outputs.astype(wide), np.broadcast_to(total, (5, 13)))


def test_run_text(capsys):
    code, out, _ = run_cli(capsys, "run", "--op", "all-reduce", "--ranks", "3", "--numel", "7", "--dtype", "fp16")
    assert code == 0 and "verified: yes" in out


@pytest.mark.parametrize("op, out_shape", [("reduce-scatter", (5, 3)), ("all-gather", (5, 13)),
                                           ("all-reduce", (5, 13)), ("naive-all-reduce", (5, 13))])
def test_run_save_shapes(capsys, tmp_path, op, out_shape):
    path = tmp_path / "run.npz"
    d = run_json(capsys, "run", "--op", op, "--ranks", "5", "--numel", "13", "--dtype", "bf16", "--seed", "2",
                 "--save", str(path))
    assert d["saved"] == str(path)
    with np.load(path) as z:
        inputs = integer_blocks(5, 13, 2, "bf16")
        np.testing.assert_array_equal(z["inputs"], inputs.astype(np.float32))  # bf16 stored as fp32, exactly
        assert z["inputs"].dtype == np.float32 and z["outputs"].shape == out_shape
        assert str(z["dtype"]) == "bf16" and str(z["op"]) == op and int(z["seed"]) == 2
        if op == "reduce-scatter":
            assert z["output_numel"].tolist() == [3, 3, 3, 3, 1]
            np.testing.assert_array_equal(z["outputs"][4, 1:], [0, 0])  # zero after rank 4's payload
            np.testing.assert_array_equal(z["outputs"].ravel()[:13], z["expected"])
        elif op == "all-gather":
            np.testing.assert_array_equal(z["outputs"], np.broadcast_to(z["expected"], (5, 13)))
        else:
            np.testing.assert_array_equal(z["expected"], inputs.astype(np.float64).sum(axis=0))
            np.testing.assert_array_equal(z["outputs"], np.broadcast_to(z["expected"], (5, 13)))


def test_trace_text_and_json(capsys):
    code, out, _ = run_cli(capsys, "trace", "--op", "all-reduce", "--ranks", "4", "--numel", "8")
    assert code == 0 and out.startswith("ring_all_reduce: 4 ranks") and "step 6/6, all-gather" in out
    d = run_json(capsys, "trace", "--op", "reduce-scatter", "--ranks", "3", "--numel", "5", "--dtype", "fp32")
    assert d["n_steps"] == len(d["steps"]) == 2 and d["dtype"] == "fp32"


def test_demo(capsys):
    code, out, _ = run_cli(capsys, "demo")
    assert code == 0
    assert "step 7/14, reduce-scatter" in out and "step 14/14, all-gather" in out
    assert "ranks 0-7 each send 14 elements = 56 B and receive 14 elements = 56 B" in out
    assert "equal on every rank: yes" in out
    d = run_json(capsys, "demo")
    assert d["verified"] is True and d["result"] == d["direct_sum"]
    assert d["direct_sum"] == integer_blocks(8, 8, 0, "int32", max_abs=9).astype(np.int64).sum(axis=0).tolist()


@pytest.mark.parametrize("argv, message", [
    (["count", "--op", "all-reduce", "--ranks", "0", "--numel", "3", "--dtype", "fp32"],
     "ranks must be an integer >= 1, got 0"),
    (["count", "--op", "all-reduce", "--ranks", "4", "--numel", "-3", "--dtype", "fp32"],
     "numel must be an integer >= 0, got -3"),
    (["count", "--op", "all-reduce", "--ranks", "4", "--numel", "2.5", "--dtype", "fp32"],
     "argument --numel: invalid int value: '2.5'"),
    (["count", "--op", "all-reduce", "--ranks", "4", "--numel", "3", "--dtype", "fp8"],
     "dtype must be one of int32 int64 fp16 bf16 fp32 fp64"),
    (["count", "--op", "allreduce", "--ranks", "4", "--numel", "3", "--dtype", "fp32"],
     "argument --op: invalid choice: 'allreduce'"),
    (["count", "--op", "all-reduce", "--ranks", "4", "--numel", "3", "--dtype", "fp32", "--bandwidth", "0"],
     "--bandwidth must be > 0 and <= 1000000000 GB/s; got 0"),
    (["count", "--op", "all-reduce", "--ranks", "4", "--numel", "3", "--dtype", "fp32", "--bandwidth", "fast"],
     "--bandwidth must be a number > 0 and <= 1000000000 GB/s; got 'fast'"),
    (["run", "--op", "all-reduce", "--ranks", "300", "--numel", "3", "--dtype", "bf16"],
     "no integer blocks for n_ranks=300 in bf16"),
    (["run", "--op", "all-reduce", "--ranks", "3", "--numel", "3", "--dtype", "fp32", "--seed", "-1"],
     "seed must be an integer >= 0, got -1"),
    (["trace", "--op", "all-reduce", "--ranks", "64", "--numel", "3"], "a trace is for small runs"),
    (["demo", "--ranks", "0"], "--ranks must be an integer >= 1, got 0"),
    (["demo", "--ranks", "40"], "demo shows every step, so it is for small rings: --ranks must be at most 16"),
    (["demo", "--numel", "1000"], "--numel at most 256; got --ranks 8 --numel 1000"),
    (["count", "--op", "all-reduce", "--ranks", "100000", "--numel", "3", "--dtype", "fp32"],
     "ranks must be <= 4096 for count"),
    (["run", "--op", "all-reduce", "--ranks", "8", "--numel", "27781427952", "--dtype", "bf16"],
     "ranks·numel must be <= 268,435,456 for a run with real data"),
    (["count", "--op", "all-reduce", "--ranks", "4"], "the following arguments are required: --numel, --dtype"),
])
def test_bad_input_prints_one_line_and_exits_2(capsys, argv, message):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors exit from inside parse_args
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ringemu: error: ") and message in err


def test_version_bare_command_and_python_dash_m(capsys):
    import ringemu
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"ringemu {ringemu.__version__}\n"
    assert main([]) == 0  # bare `ringemu`: the help, listing every command
    out = capsys.readouterr().out
    assert out.startswith("usage: ringemu") and all(c in out for c in ("demo", "count", "zero", "memory", "prove"))
    ran = subprocess.run([sys.executable, "-m", "ringemu", "--version"], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert ran.returncode == 0 and ran.stdout == f"ringemu {ringemu.__version__}\n"


@pytest.mark.parametrize("command, options", [
    ("zero", ("--stage", "--steps", "--seed", "--json", "--init-scale", "--timeout", "--grads")),
    ("memory", ("--dtype", "--json")),
])
def test_every_option_has_help_text(capsys, command, options):
    from ringemu.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    helps = {o: a.help for a in sub._actions for o in a.option_strings}
    for option in options:
        assert helps[option] and len(helps[option]) > 10, (command, option)
    for action in sub._actions:  # every option with a default names it in its help
        if action.default not in (None, False, [], "==SUPPRESS==") and action.option_strings != ["-h", "--help"]:
            assert "default" in (action.help or ""), (command, action.option_strings)


def test_console_script_in_a_subprocess(tmp_path):
    script = Path(sys.executable).with_name("ringemu")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ringemu"]
    ok = subprocess.run(cmd + ["count", "--op", "all-reduce", "--ranks", "8", "--numel", str(PSI), "--dtype",
                               "bf16", "--json"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["per_rank"][3]["sent_bytes"] == 97_234_997_832
    bad = subprocess.run(cmd + ["count", "--op", "all-reduce", "--ranks", "-1", "--numel", "3", "--dtype", "bf16"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == "ringemu: error: ranks must be an integer >= 1, got -1\n"  # one line, no traceback
