"""The lesson page in a real browser (Playwright for Python driving Debian's /usr/bin/chromium, never a
downloaded build): opened over file://, stepped with the keyboard, formula terms chosen, N set to 1,024. What
the DOM shows is compared with ledgers, traces and memory reports computed here, independently of the page.

Without Playwright or Chromium these tests skip with the reason; under CI=true they fail instead.
"""
import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from ringemu import CommLedger, all_reduce, trace_collective
from ringemu.algorithms import algorithm, build
from ringemu.partition import layout_for
from ringemu.cli import main
from ringemu.layout import ChunkLayout
from ringemu.schedule import Schedule

from lesson_support import LESSON_GRID, LESSON_RANKS, LESSON_SEED, lesson_page

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _need_browser():
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "Playwright for Python is not installed (pip install 'ringemu[browser]')"
    if reason is None and not os.path.exists(CHROMIUM):
        reason = f"{CHROMIUM} is not installed (apt-get install chromium)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    _need_browser()
    from playwright.sync_api import sync_playwright
    html, data = lesson_page()
    path = tmp_path_factory.mktemp("lesson") / "lesson.html"
    path.write_text(html, encoding="utf-8")
    errors, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(path.as_uri())
        page.wait_for_selector('td[data-counter="sent"]')
        yield page, data, errors, requests, path
        browser.close()


def _ints(page, selector: str, attr: str) -> list[int]:
    return [int(v) for v in page.eval_on_selector_all(selector, f"els => els.map(e => e.getAttribute('{attr}'))")]


def _first_steps_ledger(schedule, k: int, numel: int) -> CommLedger:
    """A CommLedger of the first k steps of ``schedule`` (recorded here, not by the page's builder)."""
    rows = schedule.table[:schedule.step_bounds()[k]].copy()
    ledger = CommLedger()
    if k:
        first = schedule.with_rows("first steps", k, rows)  # keeps an engine order's own partition
        ledger.record(first, layout_for(first, numel), "int32", "first")
    return ledger


def _check_counters(page, ledger: CommLedger, n: int) -> None:
    per_rank = ledger.per_rank() if ledger.records else []
    sent = [t.sent.bytes for t in per_rank] or [0] * n
    recv = [t.received.bytes for t in per_rank] or [0] * n
    assert _ints(page, 'td[data-counter="sent"]', "data-bytes") == sent
    assert _ints(page, 'td[data-counter="recv"]', "data-bytes") == recv
    links = ledger.per_link() if ledger.records else {}
    shown = page.eval_on_selector_all("td[data-link]", "els => els.map(e => [e.dataset.link, e.dataset.bytes])")
    for key, value in shown:
        a, b = map(int, key.split(">"))
        assert int(value) == (links[(a, b)].bytes if (a, b) in links else 0), key


def _cells(page) -> list[tuple[int, int, int, str]]:
    return page.eval_on_selector_all('table[data-role="grid"] td', "els => els.map(e => [+e.dataset.rank, "
                                     "+e.dataset.chunk, +e.dataset.step, e.dataset.value])")


def test_keyboard_steps_match_ledger_and_trace(browser_page):
    page, data, errors, _, path = browser_page
    n, numel = LESSON_RANKS, data["stepper"]["numel"]  # one input for every algorithm of the page
    trace = trace_collective("all-reduce", n, numel, "int32", LESSON_SEED)  # the same fixed-seed blocks
    schedule = build("all-reduce", n, "ring")
    c = numel // n  # elements per chunk (S is a multiple of N here)
    page.locator("h1").click()  # focus the page, not a control
    for k in range(0, 2 * (n - 1) + 1):
        if k:
            page.keyboard.press("ArrowRight")
        state = trace.initial if k == 0 else trace.steps[k - 1]
        for r, chunk, step, value in _cells(page):
            assert step == k and value == " ".join(str(int(v)) for v in state.buffers[r, chunk * c:(chunk + 1) * c])
        _check_counters(page, _first_steps_ledger(schedule, k, numel), n)
    assert page.get_attribute('[data-role="step-text"]', "data-step") == str(2 * (n - 1))
    # the whole run's ledger, from the fast collective on the same inputs
    ledger = CommLedger()
    total = all_reduce(np.array(trace.initial.buffers[:, :numel]), ledger=ledger)
    _check_counters(page, ledger, n)
    assert str(total[0].tolist()[0]) in page.text_content('[data-role="final"]')
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute('[data-role="step-text"]', "data-step") == str(2 * (n - 1) - 1)
    page.screenshot(path=str(path.with_name("stepper.png")), full_page=True)


def test_every_algorithm_in_the_selector(browser_page):
    page, data, _, _, _ = browser_page
    n = LESSON_RANKS
    options = page.eval_on_selector_all('[data-role="alg-select"] option', "els => els.map(e => e.value)")
    assert options == list(data["stepper"]["algorithms"])
    for name in options:
        page.select_option('[data-role="alg-select"]', name)
        schedule = build("all-reduce", n, name, numel=data["stepper"]["numel"], itemsize=4)  # int32 blocks
        for _ in range(schedule.n_steps):
            page.click('[data-role="next"]')
        numel = data["stepper"]["numel"]  # the same input for every algorithm: S = the most chunks of any
        textbook = [a for a in options if not algorithm("all-reduce", a).sized]  # engine orders cut this input
        assert numel == max(max(n, build("all-reduce", n, a).n_chunks) for a in textbook)
        _check_counters(page, _first_steps_ledger(schedule, schedule.n_steps, numel), n)
    page.select_option('[data-role="alg-select"]', options[0])


def _anchor_size(data) -> list[str]:
    """The ``ringemu memory`` size flags of the page's anchor preset (Ψ as one unit, or its unit sizes)."""
    units = data["memory"]["presets"][0]["unit_sizes"]
    return ["--params", str(units[0])] if len(units) == 1 else ["--units", ",".join(map(str, units))]


def _memory_json(*argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["memory", "--json", *argv]) == 0
    return json.loads(out.getvalue())


def test_formula_terms_highlight_their_segments(browser_page):
    page, data, _, _, _ = browser_page
    page.select_option("#n-select", "8")
    page.select_option("#rc-select", "selective")
    page.select_option("#view-select", "peak")  # every category on the bars
    for _ in range(3):
        page.click('[data-role="next-stage"]')  # DP -> ZeRO-1 -> ZeRO-2 -> ZeRO-3
    report = _memory_json(*_anchor_size(data), "--ranks", "8", "--seq", "4096", "--batch", "1", "--hidden",
                          "5120", "--layers", "64", "--recompute", "selective")
    z3 = report["stages"][3]
    at_peak = dict(z3["at_peak_by_category"], buffers=z3["buffer_bytes_at_peak"])
    terms = page.eval_on_selector_all("[data-term]", "els => els.filter(e => e.tagName === 'BUTTON')"
                                                      ".map(e => e.dataset.term)")
    assert terms == ["w16", "g16", "opt", "act", "buf"]
    cats = {"w16": ["weights16"], "g16": ["grads16"], "opt": ["master32", "adam_m", "adam_v"],
            "act": ["activations"], "buf": ["buffers"]}
    for term in terms:
        page.click(f'button[data-term="{term}"]')
        lit = page.eval_on_selector_all('rect[data-stage="zero3"][data-highlighted="true"]',
                                        "els => els.map(e => e.dataset.cat)")
        assert sorted(set(lit)) == sorted(cats[term]) and len(lit) == 2 * len(cats[term])  # measured and formula
        measured = sum(at_peak[c] for c in cats[term])
        assert f"({measured:,} B)" in page.text_content('[data-field="measured"]'), term
        page.click(f'button[data-term="{term}"]')  # choose it again: off
    assert page.eval_on_selector_all('rect[data-highlighted="true"]', "els => els.length") == 0
    assert page.get_attribute('[data-role="card-line"]', "data-bytes") == str(80 * 10 ** 9)


def test_first_fits_at_n_1024_match_ringemu_memory(browser_page):
    page, data, _, _, path = browser_page
    page.click('button[data-preset="anchor"]')
    page.select_option("#n-select", "1024")
    for rc in ("off", "full"):
        page.select_option("#rc-select", rc)
        flags = [] if rc == "off" else ["--seq", "4096", "--batch", "1", "--hidden", "5120", "--layers", "64",
                                        "--recompute", rc]
        reports = {n: _memory_json(*_anchor_size(data), "--ranks", str(n), *flags) for n in LESSON_GRID}
        for verdict, attr in (("model_states_fit", "data-states-first-fit"), ("peak_fits", "data-peak-first-fit")):
            expected = {}
            for n in LESSON_GRID:
                for row in reports[n]["stages"]:
                    if row[verdict] and row["name"] not in expected:
                        expected[row["name"]] = n
            shown = dict(page.eval_on_selector_all(f"ul[data-role='first-fits'] li",
                                                   f"els => els.map(e => [e.dataset.stage, e.getAttribute('{attr}')])"))
            assert shown == {s: str(expected.get(s, "")) for s in shown}, (rc, verdict)
    assert page.text_content('[data-role="n-select"] option:checked').strip() == "1,024"
    for _ in range(3):
        page.click('[data-role="next-stage"]')
    page.select_option("#n-select", "8")
    page.screenshot(path=str(path.with_name("memory.png")), full_page=True)
    shots = os.environ.get("RINGEMU_SCREENSHOT_DIR")
    if shots:  # the README's picture: `RINGEMU_SCREENSHOT_DIR=docs/img pytest tests/test_lesson_browser.py`
        _readme_screenshot(page, Path(shots))


def _readme_screenshot(page, folder: Path) -> None:
    """The default page (``ringemu lesson`` with no options) at N = 8, ZeRO-3 shown, the ring mid-way."""
    from ringemu.views import page_html
    from zero_stages.lesson.page import lesson_data
    path = folder / "lesson.html"
    path.write_text(page_html(lesson_data()), encoding="utf-8")
    try:
        page.goto(path.as_uri())
        page.wait_for_selector('td[data-counter="sent"]')
        page.select_option("#rc-select", "selective")
        for _ in range(3):
            page.click('[data-role="next-stage"]')
        page.click('button[data-term="act"]')
        page.locator("h1").click()
        for _ in range(4):
            page.keyboard.press("ArrowRight")
        page.wait_for_timeout(1500)  # the transfers have arrived
        page.screenshot(path=str(folder / "lesson.png"), full_page=True)
        page.click('[data-role="lang"]')
        page.screenshot(path=str(folder / "lesson-zh.png"), full_page=True)
        page.click('[data-role="lang"]')
        page.set_viewport_size({"width": 390, "height": 900})
        page.screenshot(path=str(folder / "lesson-390.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 1000})
    finally:
        path.unlink()


def test_language_switch(browser_page):
    page, data, _, _, _ = browser_page
    page.click('[data-role="lang"]')
    assert page.text_content("h1") == data_labels(page)["zh"]["title"]
    page.click('[data-role="lang"]')
    assert page.text_content("h1") == data_labels(page)["en"]["title"]


def data_labels(page) -> dict:
    return json.loads(page.text_content("#ringemu-data"))["labels"]


def test_notebook_fragments_run_once_each(browser_page, tmp_path):
    """Two Trace._repr_html_ outputs on one page: each stepper steps on its own, once per click."""
    page, _, _, _, _ = browser_page
    trace = trace_collective("all-reduce", 3, 3, "int32", 1)
    doc = tmp_path / "cells.html"
    doc.write_text("<!DOCTYPE html><html><body>" + trace._repr_html_() + trace._repr_html_() + "</body></html>",
                   encoding="utf-8")
    other = page.context.browser.new_page()
    errors = []
    other.on("pageerror", lambda e: errors.append(str(e)))
    other.goto(doc.as_uri())
    other.locator('[data-role="next"]').first.click()
    steps = other.eval_on_selector_all('[data-role="step-text"]', "els => els.map(e => e.dataset.step)")
    assert steps == ["1", "0"] and errors == []
    other.close()


def test_no_console_errors_and_nothing_leaves_file(browser_page):
    page, _, errors, requests, _ = browser_page
    assert errors == []
    assert requests and all(url.startswith("file://") for url in requests), requests
