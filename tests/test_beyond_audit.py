"""FSDP2 HSDP on the ringemu torch backend: its inter-node bytes per rank against sums written out here from the
model's parameter shapes (each parameter's dim 0 padded to K rows, the all-reduce a ring over R nodes)."""
import json
from pathlib import Path

import pytest

from torch_support import require_torch

require_torch()

from ringemu.cli import main  # noqa: E402
from ringemu.torch.audit_hsdp import audit_hsdp  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fsdp2_hsdp.py"
SHAPES = [(29, 37), (29,), (23, 29), (23,), (11, 23), (11,), (5, 11), (5,)]  # the example's Linear layers
UNITS = [[(29, 37), (29,)], [(23, 29), (23,)], [(11, 23), (11,)], [(5, 11), (5,)]]  # one unit per Linear


def ceil(a, b):
    return -(-a // b)


def shard(shape, k):  # FSDP2: dim 0 padded to a multiple of K, one K-th per rank
    rest = 1
    for d in shape[1:]:
        rest *= d
    return ceil(shape[0], k) * rest


@pytest.mark.parametrize("n,k", [(8, 4), (8, 2)])
def test_hsdp_inter_node_bytes_by_hand(n, k):
    r = n // k
    audit = audit_hsdp(EXAMPLE, n, k)
    # every unit's shard all-reduced on a ring of R ranks: 2(R−1)·ceil(shard/R) fp32 elements of 4 B
    want = sum(2 * (r - 1) * ceil(sum(shard(s, k) for s in unit), r) * 4 for unit in UNITS)
    assert set(audit.inter_bytes_per_rank) == {want}
    psi = sum(shard(s, 1) for s in SHAPES)
    assert audit.psi == psi
    departures = audit.departures()
    assert audit.formula_bytes() + sum(b for _, b, _ in departures) == want  # the departures explain all of it
    assert departures[0][1] == 4 * 2 * (r - 1) * (sum(shard(s, k) for s in SHAPES) - psi / k) / r


def test_cli_audit_hsdp_json(capsys):
    assert main(["audit", "torch", "--script", str(EXAMPLE), "--ranks", "8", "--ranks-per-node", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ranks_per_node"] == 4 and len(d["inter_node_bytes_per_rank"]) == 8
    assert all(b > 0 for b in d["intra_node_bytes_per_rank"])
