"""Notebook views: Trace, StageReport and the memory report render as HTML; charts as SVG."""
import os

import pytest

from ringemu import trace_collective
from ringemu.views import external_urls
from zero_stages import run_size_only
from zero_stages.memory.report import memory_report


def test_trace_repr_html_is_a_stepper_with_a_static_final_state():
    trace = trace_collective("all-reduce", 3, 3, "int32", 1)
    page = trace._repr_html_()
    assert 'data-role="grid"' in page and "<svg" in page and external_urls(page) == []
    total = trace.final[0, :3].tolist()  # every rank ends with the sum (all-reduce)
    assert all(f">{v}</text>" in page for v in total)


def test_stage_report_and_memory_report_repr_html():
    report = run_size_only("zero3", 4, psi=1000)
    text = report._repr_html_()
    # ZeRO-3 on 4 ranks: 16 B × 1000 / 4 = 4,000 B of model states per rank (weights 500 + grads 500 + 3 × 1,000)
    assert "<table>" in text and "param_all_gather_fwd" in text and "weights16" in text
    mem = memory_report(8, psi=27_781_427_952)._repr_html_()
    assert "55.6" in mem and "444.5" in mem  # the lesson's ZeRO-3 and DP figures at N = 8 (claim M2)


def test_chart_repr_svg():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("matplotlib is not installed")
        pytest.skip("matplotlib is not installed (pip install 'ringemu[plot]')")
    from zero_stages.lesson.plots import traffic_chart
    chart = traffic_chart({n: memory_report(n, psi=1000) for n in (1, 2, 4)})
    assert chart._repr_svg_().lstrip().startswith("<?xml")
