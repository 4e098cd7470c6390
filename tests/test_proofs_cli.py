"""``ringemu prove``: the real catalog passes, JSON carries exact values, exit codes reflect failure."""
import importlib.util
import json
import os
from dataclasses import replace

import pytest

import proofs.commands
from proofs import CLAIM_IDS, CLAIMS, RunContext, evaluate
from proofs.exact import PSI_ANCHOR
from ringemu.cli import main


@pytest.fixture(scope="module")
def full_report():
    """One full ``ringemu prove --json`` run (in process), shared by the tests below."""
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["prove", "--json"])
    return code, json.loads(out.getvalue())


def test_prove_json_every_checkable_claim_passes(full_report):
    code, report = full_report
    assert code == 0 and report["ok"] is True
    by_id = {c["id"]: c for c in report["claims"]}
    assert set(CLAIM_IDS) <= set(by_id)
    for claim in report["claims"]:
        assert claim["status"] in ("pass", "not-checkable"), (claim["id"], claim["reason"])
        assert {"id", "status", "printed", "exact", "run"} <= set(claim)
    torch_here = importlib.util.find_spec("torch") is not None or os.environ.get("CI", "").lower() == "true"
    for cid in CLAIM_IDS:  # every claim of claims.md is checkable here (X* are the lesson's other statements)
        if cid == "C7" and not torch_here:  # C7 reads DDP's default bucket from the installed torch (optional)
            assert by_id[cid]["status"] == "not-checkable" and "PyTorch is not installed" in by_id[cid]["reason"]
        else:
            assert by_id[cid]["status"] == "pass", cid
        assert by_id[cid]["listed_in_claims_md"] is True
    assert report["summary"]["fail"] == 0


def test_prove_json_carries_exact_fractions(full_report):
    _, report = full_report
    m2 = next(c for c in report["claims"] if c["id"] == "M2")
    # ZeRO §5.1 with Ψ = 27,781,427,952, N = 8: 16Ψ, 4Ψ + 12Ψ/8, 2Ψ + 14Ψ/8, 16Ψ/8 bytes (the lesson's figures)
    expected = [16 * PSI_ANCHOR, 4 * PSI_ANCHOR + 12 * PSI_ANCHOR // 8, 2 * PSI_ANCHOR + 14 * PSI_ANCHOR // 8,
                16 * PSI_ANCHOR // 8]
    assert [int(v["fraction"]) for v in m2["exact"]] == expected == [444_502_847_232, 152_797_853_736,
                                                                     104_180_354_820, 55_562_855_904]
    assert m2["run"] == m2["exact"]
    c6 = next(c for c in report["claims"] if c["id"] == "C6")
    assert c6["exact"][0]["fraction"] == "12154374729/6250000000"  # 97,234,997,832 B / 50e9 B/s
    assert c6["exact"][0]["decimal"] == "1.94469995664"
    m9 = next(c for c in report["claims"] if c["id"] == "M9")
    assert any("h = 5,120" in a for a in m9["assumptions"])


def test_prove_selected_ids_and_text_table(capsys):
    assert main(["prove", "--id", "c4", "--id", "E2"]) == 0
    first = capsys.readouterr().out
    assert main(["prove", "--id", "C4", "e2"]) == 0
    out = capsys.readouterr().out
    assert "C4" in out and "E2" in out and "M2" not in out
    assert "97.2 GB" in out and "109.4 GB" in out
    assert out.strip().splitlines()[-1].startswith("2 claims of claims.md: 2 pass, 0 fail")
    assert out == first


def test_prove_json_is_one_line_unless_indented_and_counts_are_singular(capsys):
    assert main(["prove", "--id", "M2", "--json"]) == 0
    one_line = capsys.readouterr().out
    assert one_line.count("\n") == 1
    assert main(["prove", "--id", "M2", "--json", "--indent", "2"]) == 0
    indented = capsys.readouterr().out
    assert indented.count("\n") > 1 and json.loads(indented) == json.loads(one_line)
    assert main(["prove", "--id", "M2"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("1 claim of claims.md: 1 pass")
    assert main(["prove", "--id", "M2", "--indent", "2"]) == 2
    assert "--indent applies to --json output only" in capsys.readouterr().err


def test_unknown_id_exits_2(capsys):
    assert main(["prove", "--id", "Z9"]) == 2
    assert "ringemu: error: --id must be claim IDs" in capsys.readouterr().err


def test_a_failing_claim_makes_the_exit_status_1(monkeypatch, capsys):
    m4 = next(c for c in CLAIMS if c.id == "M4")
    broken = replace(m4, parts=(replace(m4.parts[0], printed="5.5×"),))
    monkeypatch.setattr(proofs.commands, "prove", lambda ids, bar=None: [evaluate(broken, RunContext())])
    assert main(["prove"]) == 1
    out = capsys.readouterr().out
    assert "fail" in out and "FAILED" in out.splitlines()[-1]
