"""Plots: the first-fit annotations and the card line come from the reports; SVG bytes repeat across processes
and match a golden hash (matplotlib pinned in the [plot] extra)."""
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ringemu.cli import main
from zero_stages.memory.anchor import ANCHOR_PSI
from zero_stages.memory.report import memory_report

NS = (1, 2, 4, 8, 16, 32)
ROOT = Path(__file__).resolve().parents[1]
# sha256 of the SVG of _golden_chart() under matplotlib 3.11.2 (the [plot] extra's pin), recorded from a run
GOLDEN_SVG_SHA256 = {"3.11.2": "c1452b0585a89f466b249922bf77f4bf7ce5cd9dcc2bd8973981e517b2406985"}


def _need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("matplotlib is not installed (pip install 'ringemu[plot]')")
        pytest.skip("matplotlib is not installed (pip install 'ringemu[plot]')")


def _reports(psi=ANCHOR_PSI, ns=NS):
    return {n: memory_report(n, psi=psi) for n in ns}


def test_first_fit_notes_and_card_line_come_from_the_reports():
    _need_matplotlib()
    import matplotlib.pyplot as plt
    from zero_stages.lesson.plots import memory_chart
    reports = _reports()
    fig = memory_chart(reports).figure()
    ax = fig.axes[0]
    card = [line for line in ax.lines if line.get_gid() == "hline-80 GB card"]
    assert len(card) == 1 and list(card[0].get_ydata()) == [80e9, 80e9]
    notes = {a.get_gid(): a.xy for a in ax.texts if (a.get_gid() or "").startswith("note-")}
    expected = {}
    for n in NS:  # the first N at which the busiest rank's model states are at most 80 × 10^9 B
        for row in reports[n]["stages"]:
            if max(row["model_state_bytes_per_rank"]) <= 80 * 10 ** 9:
                expected.setdefault(row["name"], n)
    # lesson claim M6: at N = 8 only ZeRO-3 fits; ZeRO-2 follows at 16; DP and ZeRO-1 never
    assert expected == {"zero3": 8, "zero2": 16}
    assert {gid.removeprefix("note-"): xy[0] for gid, xy in notes.items()} == expected
    plt.close(fig)


def _golden_chart():
    from zero_stages.lesson.plots import memory_chart
    return memory_chart(_reports(psi=7_500_000_000, ns=(1, 2, 4, 8, 16, 64)))


def test_svg_matches_the_golden_hash():
    _need_matplotlib()
    import matplotlib
    from ringemu.views.plot import svg_text
    digest = hashlib.sha256(svg_text(_golden_chart()).encode()).hexdigest()
    golden = GOLDEN_SVG_SHA256.get(matplotlib.__version__)
    if golden is None:
        message = f"no golden SVG hash recorded for matplotlib {matplotlib.__version__} (got {digest})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    assert digest == golden


def test_svg_bytes_repeat_across_processes(tmp_path):
    _need_matplotlib()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    outs = []
    for i in range(2):
        out = tmp_path / f"traffic{i}.svg"
        subprocess.run([sys.executable, "-m", "ringemu", "plot", "traffic", "--params", "1000000", "-o", str(out)],
                       check=True, env=env, capture_output=True, timeout=300)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and b"<svg" in outs[0] and b"Date" not in outs[0]


def test_cli_plot(tmp_path, monkeypatch, capsys):
    _need_matplotlib()
    import zero_stages.lesson.plots as plots
    monkeypatch.setattr(plots, "RANKS_GRID", (1, 8, 64))
    out = tmp_path / "mem.png"
    assert main(["plot", "memory", "--params", str(ANCHOR_PSI), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ZeRO-3 fits from N = 8" in capsys.readouterr().out


def test_algorithm_traffic_chart_reads_the_ledgers():
    _need_matplotlib()
    from ringemu.algorithms import names
    from zero_stages.lesson.plots import algorithm_traffic_chart
    chart = algorithm_traffic_chart(1000, ranks=(2, 4, 8))
    assert list(chart.series) == list(names("all-reduce"))
    # ring all-reduce: each rank sends 2(N-1)·ceil(S/N) elements of 2 B (Patarasuk & Yuan 2009): N = 8 → 3,500 B
    xs, ys = chart.series["ring"]
    assert dict(zip(xs, ys))[8] == 2 * 7 * 125 * 2


@pytest.mark.parametrize("argv, flag", [(["-o", "x.pdf"], "-o"), (["-o", "x.svg", "--algorithms"], "--algorithms"), (["-o", "x.svg", "--measure", "max"], "--measure")])
def test_cli_plot_bad_flags(argv, flag, capsys):
    code = None
    try:
        code = main(["plot", "memory", "--params", "100", *argv])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("ringemu: error:") and flag in err
