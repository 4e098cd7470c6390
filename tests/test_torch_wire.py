"""Bytes gloo puts on the wire (socket writes and loopback counters in a private network namespace)."""
import shutil
import subprocess
from fractions import Fraction

import pytest

from torch_support import require_torch

require_torch()

from ringemu.backends.wire_bytes import measure_wire, read_lo, read_wchar  # noqa: E402


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


needs_netns = pytest.mark.skipif(not _namespaces_work(), reason="unshare -n (a private network namespace) is not "
                                                                  "permitted here: needs root or user namespaces")


def test_counters_are_readable():
    tx_bytes, tx_packets = read_lo()
    assert tx_bytes >= 0 and tx_packets >= 0 and read_wchar() > 0


@needs_netns
@pytest.mark.parametrize("algorithm, zero3_over_dp", [("native", Fraction(2)), ("ring", Fraction(3, 2))])
def test_zero3_over_dp_on_the_wire(algorithm, zero3_over_dp):
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
