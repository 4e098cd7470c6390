"""One rule for every entry point: bad input is refused with one ``ringemu: error: ...`` line and exit status 2,
before the work starts, with the bound in the message. Each case below once ended otherwise (exit 1 with a
wrapped ``RankFailure``, an internal name, minutes of work and an empty ``MemoryError``, a traceback, a hang)."""
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ringemu.cli import main
from ringemu.faults.spec import Fault, FaultSpecError, parse_fault
from ringemu.memory_guard import address_space_left

ROOT = Path(__file__).resolve().parent.parent
HUGE = "1" + "0" * 30  # 10^30


def one_line_error(capsys, argv, *fragments):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert err.startswith("ringemu: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


ZERO = ["zero", "--stage", "zero1", "--ranks", "4", "--steps", "1", "--fault"]


@pytest.mark.parametrize("spec, fragment", [
    ("corrupt:step=0,src=0,dst=1,bit=99", "bit positions 0..63"),
    ("corrupt:step=0,src=0,dst=1,bit=3+3", "a bit flipped twice is no fault"),
    ("corrupt:step=0,src=0,dst=1,bit=20", "bit < 16"),  # 16-bit gradients: bits 0..15 only
    ("corrupt:step=0,src=0,dst=1,bit=3,elem=100000", "elem < 25"),  # Ψ = 916 in 4 units: 25 elements per message
    ("stop:rank=99,step=0", "rank=99 is not a rank (ranks 0..3)"),
    ("drop:step=50,src=0,dst=1", "has steps 0..2"),  # a ring reduce-scatter on 4 ranks: N - 1 = 3 steps
    ("drop:step=0,src=0,dst=2", "no message 0->2 at step 0"),  # a ring sends to the next rank only
    ("misroute:step=0,src=0,dst=1,to=9", "to=9 is not a rank"),
])
def test_zero_fault_specs_the_run_lacks_exit_2(capsys, spec, fragment):
    one_line_error(capsys, [*ZERO, spec], fragment)


def test_a_fault_with_one_rank_exits_2(capsys):
    one_line_error(capsys, ["zero", "--stage", "dp", "--ranks", "1", "--steps", "1", "--fault",
                            "drop:step=0,src=0,dst=0"], "N = 1 no collective sends a message")


def test_fault_specs_refuse_repeated_and_out_of_range_fields_when_parsed():
    """Property of the grammar: a field given twice, a bit repeated or beyond 63 is refused before any run."""
    for spec, fragment in (("drop:step=0,src=0,dst=1,step=1", "step given twice"),
                           ("corrupt:step=0,src=0,dst=1,bit=1,bit=2", "bit given twice"),
                           ("corrupt:step=0,src=0,dst=1,bit=5+5", "got 5\\+5"),
                           ("corrupt:step=0,src=0,dst=1,bit=64", "got 64")):
        with pytest.raises(ValueError, match=fragment):
            parse_fault(spec)
    with pytest.raises(FaultSpecError):
        Fault("corrupt", 0, src=0, dst=1, bits=(2, 2))
    assert Fault("corrupt", 0, src=0, dst=1, bits=(0, 63)).bits == (0, 63)  # the widest element's two ends


def test_the_library_raises_a_bad_fault_as_a_value_error_not_a_rank_failure():
    from zero_stages.api import train
    with pytest.raises(FaultSpecError, match="has steps 0..2"):
        train("zero2", 4, 1, faults=["drop:step=7,src=0,dst=1"])
    with pytest.raises(FaultSpecError, match="rank=4 is not a rank"):
        train("zero2", 4, 1, faults=["stop:rank=4,step=0"])


ACT = ["memory", "--params", "1000000", "--ranks", "8", "--batch", "1", "--hidden", "512"]


@pytest.mark.parametrize("extra, fragment", [
    (["--seq", HUGE, "--layers", "2"], "seq must be an integer >= 1 and <= 1_099_511_627_776"),
    (["--seq", "128", "--layers", str(10 ** 9)], "layers must be an integer >= 1 and <= 32_768"),
    (["--seq", "1048576", "--layers", "32768", "--hidden", "1099511627776"], "exceed 2^63 - 1 B"),
])
def test_memory_activation_sizes_are_bounded_before_any_work(capsys, extra, fragment):
    one_line_error(capsys, [*ACT, *extra], fragment)


def _limited(limit_bytes: int, code: str) -> subprocess.CompletedProcess:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, resource.RLIM_INFINITY))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=limit, cwd=ROOT)


def test_the_memory_guard_honours_ulimit_v():
    """Under ``ulimit -v`` of 3 GB a 64 × 4,000,000 fp32 run (0.95 GiB of inputs, several GiB in all by the
    guard's estimate) is refused in one line, exit 2, naming the size-only command; without it the same run
    fails later with a MemoryError (exit 1)."""
    got = _limited(3 * 10 ** 9, "import sys; from ringemu.cli import main; sys.exit(main(['run', '--op', "
                               "'all-reduce', '--dtype', 'fp32', '--ranks', '64', '--numel', '4000000']))")
    assert got.returncode == 2, got.stderr[-2000:]
    assert got.stderr.startswith("ringemu: error: ") and got.stderr.count("\n") == 1
    assert "available on this machine; count it without data" in got.stderr


def test_address_space_left_reads_the_soft_limit():
    """The limit set in a child less its own VmSize: positive, below the limit (a Python process maps more than
    nothing); and no limit here reads as None (the test process runs without one)."""
    got = _limited(2 * 10 ** 9, "from ringemu.memory_guard import address_space_left; print(address_space_left())")
    left = int(got.stdout)
    assert 0 < left < 2 * 10 ** 9
    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        assert address_space_left() is None


AUDIT_SCRIPTS = {
    "syntax": ("def make_model(rank:\n    pass\n", "cannot be imported: SyntaxError", "(line 1)"),
    "import": ("import ringemu_no_such_module\n", "cannot be imported: ModuleNotFoundError", "(line 1)"),
    "raises": ("x = 1\nraise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here", "(line 2)"),
    "sleeps": ("import time\ntime.sleep(30)\n", "importing it took more than 0.5 s", ""),
}


@pytest.mark.parametrize("case", sorted(AUDIT_SCRIPTS))
def test_audit_scripts_that_do_not_import_exit_2(capsys, tmp_path, case):
    pytest.importorskip("torch")
    text, *fragments = AUDIT_SCRIPTS[case]
    script = tmp_path / f"{case}.py"
    script.write_text(text)
    # the sleeping import is left behind in a daemon thread, as the command leaves it when it exits
    one_line_error(capsys, ["audit", "torch", "--script", str(script), "--ranks", "2", "--import-timeout", "0.5"],
                   str(script), *fragments)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e9"])
def test_audit_import_timeout_is_bounded(capsys, value):
    pytest.importorskip("torch")
    one_line_error(capsys, ["audit", "torch", "--script", str(ROOT / "examples" / "fsdp2_mlp.py"), "--ranks", "2",
                            "--import-timeout", value], "--import-timeout must be a number of seconds in (0, 3600]")


def test_audit_script_raising_in_loss_exits_2_naming_the_line(capsys, tmp_path):
    pytest.importorskip("torch")
    source = (ROOT / "examples" / "fsdp2_mlp.py").read_text()
    broken = source.replace("return ((output - target) ** 2).mean()", "raise ArithmeticError('loss went wrong')")
    assert broken != source
    line = 1 + broken[:broken.index("raise ArithmeticError")].count("\n")
    script = tmp_path / "loss_raises.py"
    script.write_text(broken)
    # a generous import time: importing FSDP2 on a loaded machine can take longer than the default 10 s
    one_line_error(capsys, ["audit", "torch", "--script", str(script), "--ranks", "2", "--import-timeout", "600"],
                   "raised ArithmeticError: loss went wrong", f"(line {line}) while training")


def test_address_space_left_is_the_limit_less_vmsize():
    """Read in one child: VmSize before and after the call bracket it (nothing is allocated in between), so
    address_space_left() = soft limit - VmSize exactly, VmSize in kB of 1024 B (proc(5))."""
    code = ("from ringemu.memory_guard import address_space_left\n"
            "def vm():\n"
            "    line = [l for l in open('/proc/self/status') if l.startswith('VmSize:')][0]\n"
            "    return int(line.split()[1]) * 1024\n"
            "a = vm(); left = address_space_left(); b = vm()\n"
            "print(a, left, b)\n")
    limit = 3 * 10 ** 9
    before, left, after = map(int, _limited(limit, code).stdout.split())
    assert limit - after <= left <= limit - before


@pytest.mark.parametrize("n, numel, expected", [
    # the estimate's terms as collective_run_bytes' docstring lists them, worked by hand for a ring all-reduce of
    # fp32 (4 B): inputs N·S·4, exact copies N·S·8 + S·8, the padded world N·N·ceil(S/N)·4, the schedule's
    # 2(N-1)·N rows of 56 B and 96 B of the direct path's program per row, the (N, N) link counters twice at 8 B,
    # and 4 MiB + 16 KiB per rank of objects
    (4, 10, 160 + 400 + 192 + 24 * (56 + 96) + 256 + 4 * 2 ** 20 + 4 * 16384),
    # N = 256 > 128: the table is the 128-rank ring's 2·127·128 rows scaled by (256/128)^2 and by 5/4
    (256, 256, 262144 + 524288 + 2048 + 262144 + 32512 * 4 * 5 // 4 * (56 + 96) + 1048576 + 4 * 2 ** 20
     + 256 * 16384),
])
def test_the_run_estimate_is_the_documented_sum(n, numel, expected):
    from ringemu.memory_guard import collective_run_bytes
    assert collective_run_bytes("all-reduce", n, numel, 4) == expected
