"""Bytes gloo puts on the wire (socket writes and loopback counters in a private network namespace)."""
import os
import shutil
import subprocess
import sys
from fractions import Fraction

import pytest

from torch_support import require_torch

require_torch()

from zero_stages.torch import wire_bytes  # noqa: E402
from zero_stages.torch.wire_bytes import measure_wire, read_lo, read_wchar  # noqa: E402


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


def require_netns() -> None:
    """Skip unless ``unshare -n`` works here; under ``CI=true`` fail instead, so the wire measurement can
    never pass by being skipped."""
    if _namespaces_work():
        return
    reason = "unshare -n (a private network namespace) is not permitted here: needs root or user namespaces"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def netns():
    require_netns()


def test_counters_are_readable():
    tx_bytes, tx_packets = read_lo()
    assert tx_bytes >= 0 and tx_packets >= 0 and read_wchar() > 0


@pytest.mark.parametrize("algorithm, zero3_over_dp", [("native", Fraction(2)), ("ring", Fraction(3, 2))])
def test_zero3_over_dp_on_the_wire(netns, algorithm, zero3_over_dp):
    """Measured on the real engine: DP's all-reduce puts the ring's 2(N-1)/N·Ψ on the wire (plus < 1 % headers).
    ZeRO-3 = 3/2 of DP with the ring schedule; with gloo's own collectives it is 2, because gloo's reduce-scatter
    sends as much as its all-reduce (docs/real_engine.md). Both for the bare collectives of one step and for one
    training step of the project's DP and ZeRO-3 modules."""
    out = measure_wire(4, 1 << 16, "bf16", ("dp", "zero3", "stage:dp", "stage:zero3"), rounds=1,
                       algorithm=algorithm, timeout=120)
    w = out["workloads"]
    dp_overhead = Fraction(w["dp"]["socket_over_modelled"])
    assert 1 <= dp_overhead < Fraction(101, 100)
    assert Fraction(w["dp"]["lo_bytes_total"]) > Fraction(w["dp"]["socket_bytes_total"])  # TCP/IP headers
    for kind in ("collectives", "stage_modules"):  # one flat buffer; the project's stage modules themselves
        ratios = out["zero3_over_dp"][kind]
        assert ratios["modelled_bytes_total"] == "3/2", kind
        assert abs(Fraction(ratios["socket_bytes_total"]) - zero3_over_dp) < Fraction(1, 100), (kind, ratios)


def test_measure_wire_passes_arguments_without_shell_parsing(tmp_path, monkeypatch):
    """Arguments with shell metacharacters reach the measuring process verbatim and run nothing. The run is
    replayed without the namespace: the same ``sh -c`` script minus ``ip link set lo up``, and the measuring
    process replaced by one that prints the arguments it received."""
    monkeypatch.chdir(tmp_path)
    real_run = subprocess.run

    def replay(argv, **kwargs):
        assert argv[:3] == ["unshare", "-n", "sh"]
        script = argv[4].replace("ip link set lo up && ", "")
        assert sys.executable in argv
        command = argv[argv.index(sys.executable) + 3:]  # after python -m zero_stages.torch.wire_bytes
        echo = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *command]
        return real_run(["sh", "-c", script, "sh", *echo], **kwargs)

    monkeypatch.setattr(wire_bytes.subprocess, "run", replay)
    hostile = ("dp; touch pwned", "$(touch pwned2)", "'zero3'")
    received = measure_wire(2, 8, "bf16", hostile, rounds=1, timeout=10)
    assert received[received.index("--workloads") + 1:] == list(hostile)
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), 0, -1])
def test_measure_wire_rejects_bad_timeouts(timeout):
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
        measure_wire(2, 8, timeout=timeout)


def test_missing_namespaces_fail_under_ci_and_skip_elsewhere(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_namespaces_work", lambda: False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_netns()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        require_netns()
