"""The lesson page as a student sees it, in Debian's Chromium (Playwright): geometry at phone, laptop and wide
widths for N = 2, 8 and 16 (no box over another, no page-wide horizontal scroll, no text under 12 px), the
numbers on the bars and the headroom line against memory reports computed here, every exercise answered with the
value of a run made here, reduced motion honoured, and a Chinese page whose controls and summaries are Chinese.

Geometry, not pixels: fonts differ between machines. Without Playwright or Chromium these tests skip (fail
under CI=true), as in test_lesson_browser.py.
"""
import re

import numpy as np
import pytest

from ringemu import CommLedger, VirtualBuffer, all_gather, all_reduce, reduce_scatter, trace_collective
from ringemu.algorithms import names
from zero_stages.memory.anchor import ANCHOR_PSI, ANCHOR_UNIT_SIZES, ZERO_PAPER_PSI, anchor_activations
from zero_stages.memory.report import memory_report

from lesson_support import LESSON_SEED, lesson_page
from test_lesson_browser import CHROMIUM, FLAGS, _need_browser

WIDTHS = (390, 1280, 1920)
CARD = 80 * 10 ** 9  # the lesson's 80 GB card (GB = 10^9 B)

# the checks a reader would make, in the page itself: every box of a panel apart from the others and inside its
# panel; content wider than its box only where the box scrolls; no page-wide horizontal scroll; text of 12 px or
# more (SVG text scaled by the transform it is drawn with)
_GEOMETRY = r"""() => {
  const bad = [], vw = window.innerWidth;
  const sw = document.documentElement.scrollWidth;
  if (sw > vw) bad.push(`page scrolls sideways: ${sw} > ${vw}`);
  const shown = e => e.getClientRects().length > 0 && !e.closest('[hidden]');
  for (const panel of document.querySelectorAll('section.panel')) {
    const pr = panel.getBoundingClientRect();
    if (pr.left < -0.5 || pr.right > vw + 0.5) bad.push(`panel ${panel.getAttribute('aria-labelledby')} leaves the window`);
    const boxes = [...panel.querySelectorAll('[data-box]')].filter(shown);
    const rects = boxes.map(b => b.getBoundingClientRect());
    boxes.forEach((b, i) => {
      const r = rects[i], name = b.dataset.box;
      if (r.left < pr.left - 0.5 || r.right > pr.right + 0.5) bad.push(`${name} leaves its panel`);
      const scrolls = ['auto', 'scroll'].includes(getComputedStyle(b).overflowX);
      if (!scrolls && b.scrollWidth > b.clientWidth + 1) bad.push(`${name}: content wider than its box`);
      for (let j = i + 1; j < boxes.length; j++) {
        const q = rects[j];
        const w = Math.min(r.right, q.right) - Math.max(r.left, q.left), h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (w > 0.5 && h > 0.5) bad.push(`${name} overlaps ${boxes[j].dataset.box}`);
      }
    });
  }
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walk.nextNode())) {
    const e = node.parentElement;
    if (!node.textContent.trim() || e.closest('script, style, title, option') || !shown(e)) continue;
    let size = parseFloat(getComputedStyle(e).fontSize);
    if (e instanceof SVGElement && e.getScreenCTM()) { const m = e.getScreenCTM(); size *= Math.hypot(m.a, m.b); }
    if (size < 11.99) bad.push(`${size.toFixed(1)} px: ${node.textContent.trim().slice(0, 40)}`);
  }
  return bad;
}"""


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


def _open(browser, tmp_path, html: str, width: int = 1280, **context):
    path = tmp_path / f"page-{width}.html"
    path.write_text(html, encoding="utf-8")
    page = browser.new_context(viewport={"width": width, "height": 900}, **context).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector('[data-role="step-text"][data-step]')
    page.errors = errors
    return page


@pytest.mark.parametrize("n", (2, 8, 16))
def test_nothing_overlaps_at_any_width(browser, tmp_path, n):
    for lang in ("en", "zh"):
        html, _ = lesson_page(lang, n)
        for width in WIDTHS:
            page = _open(browser, tmp_path, html, width)
            page.locator("h1").click()
            for _ in range(3):  # mid-way: cells, packets and counters filled
                page.keyboard.press("ArrowRight")
            page.select_option("#rc-select", "selective")
            page.select_option("#view-select", "peak")
            assert page.evaluate(_GEOMETRY) == [], (lang, n, width)
            assert page.errors == []
            page.context.close()


@pytest.mark.parametrize("n", (8, 16))
def test_the_notebook_view_holds_too(browser, tmp_path, n):
    trace = trace_collective("all-reduce", n, 2 * n, "int32", 1)
    html = "<!DOCTYPE html><html><body><p>a notebook cell</p>" + trace._repr_html_() + "</body></html>"
    for width in WIDTHS:
        page = _open(browser, tmp_path, html, width)
        page.locator('[data-role="next"]').click()
        assert page.evaluate(_GEOMETRY) == [], (n, width)
        page.context.close()


def _bar_labels(page) -> dict:
    for _ in range(3):
        page.click('[data-role="next-stage"]')
    return {e[0]: (int(e[1]), e[2]) for e in page.eval_on_selector_all(
        '[data-role="bar-label"]', "els => els.map(e => [e.dataset.stage, e.dataset.bytes, e.textContent])")}


# the lesson's printed per-rank figures, GB (the lesson's table, claims M2; the ZeRO paper's Figure 1)
LESSON_STATES = {"anchor": ("444.5", "152.8", "104.2", "55.6"), "zero-paper": ("120.0", "31.4", "16.6", "1.9")}


def test_bar_labels_are_the_views_values(browser, tmp_path):
    html, _ = lesson_page()
    page = _open(browser, tmp_path, html)
    sizes = {"anchor": (8, dict(unit_sizes=ANCHOR_UNIT_SIZES)), "zero-paper": (64, dict(psi=ZERO_PAPER_PSI))}
    for preset, (n, size) in sizes.items():
        report = memory_report(n, **size)
        for view in ("states", "peak"):
            page.click(f'button[data-preset="{preset}"]')
            page.select_option("#view-select", view)
            shown = _bar_labels(page)
            for i, row in enumerate(report["stages"]):
                want = max(row["model_state_bytes_per_rank"]) if view == "states" else row["peak_bytes"]
                assert shown[row["name"]][0] == want, (preset, view, row["name"])
                if view == "states":
                    assert shown[row["name"]][1] == LESSON_STATES[preset][i] + " GB"
    page.context.close()


def test_headroom_after_zero3(browser, tmp_path):
    html, _ = lesson_page()
    page = _open(browser, tmp_path, html)
    page.click('button[data-preset="anchor"]')
    states = max(memory_report(8, unit_sizes=ANCHOR_UNIT_SIZES)["stages"][3]["model_state_bytes_per_rank"])
    assert int(page.get_attribute('[data-role="headroom-line"]', "data-bytes")) == CARD - states
    assert "24.4 GB" in page.text_content('[data-role="headroom-line"]')  # the lesson's "24.4 GB left"
    for rc, gb, fits in (("selective", "45.6", False), ("full", "2.7", True)):  # the lesson's 45.6 and 2.7 GB
        row = page.locator(f'[data-role="headroom-act"][data-recompute="{rc}"]')
        act = memory_report(8, unit_sizes=ANCHOR_UNIT_SIZES, activations=anchor_activations(rc))["stages"][3]
        assert int(row.get_attribute("data-bytes")) == max(act["activation_peak_bytes_per_rank"])
        assert f"{gb} GB" in row.text_content() and (row.locator(".ok").count() == 1) == fits
    page.context.close()


def _expected_answers(data) -> dict:
    """Each exercise's answer from runs made here (not read from the page's data)."""
    reports = memory_report(64, unit_sizes=ANCHOR_UNIT_SIZES)
    first = next(r["name"] for r in reports["stages"] if r["model_states_fit"])
    ring = data["stepper"]["algorithms"]["ring"]
    world = np.array(ring["trace"]["initial"]["buffers"], dtype=np.int32)
    ledger = CommLedger()
    all_reduce(world, ledger=ledger)
    states = max(memory_report(8, unit_sizes=ANCHOR_UNIT_SIZES)["stages"][3]["model_state_bytes_per_rank"])
    per = {}
    for op, fn in (("rs", reduce_scatter), ("ag", all_gather), ("ar", all_reduce)):
        lg = CommLedger()
        fn(VirtualBuffer((8, ANCHOR_PSI), "bf16"), ledger=lg, algorithm="gloo:ring")
        per[op] = lg.max_sent_bytes_per_rank()
    ring_per = {}
    for op, fn in (("rs", reduce_scatter), ("ag", all_gather), ("ar", all_reduce)):
        lg = CommLedger()
        fn(VirtualBuffer((8, ANCHOR_PSI), "bf16"), ledger=lg)
        ring_per[op] = lg.max_sent_bytes_per_rank()
    # ZeRO-3 = all-gather forward + all-gather backward + reduce-scatter; DP = one all-reduce (ZeRO §7)
    gloo = (2 * per["ag"] + per["rs"]) / per["ar"]
    ringr = (2 * ring_per["ag"] + ring_per["rs"]) / ring_per["ar"]
    return {"fits64": (first, [first.replace("zero", "ZeRO-"), first]),
            "ring_bytes": (ledger.per_rank()[0].sent.bytes, None),
            "headroom": (CARD - states, None), "zero3_ratio": (ringr, None), "gloo_ratio": (gloo, None)}


def test_every_exercise_is_checked_against_the_run(browser, tmp_path):
    html, data = lesson_page()
    page = _open(browser, tmp_path, html)
    want = _expected_answers(data)
    got = {q["id"]: q for q in data["exercises"]}
    assert set(got) == set(want)
    assert got["fits64"]["answer"] == want["fits64"][0] == "zero2"  # the lesson: ZeRO-2 fits from N = 16
    assert got["ring_bytes"]["answer"] == want["ring_bytes"][0]
    assert got["headroom"]["answer"] == want["headroom"][0]
    assert abs(float(eval(got["zero3_ratio"]["answer"])) - want["zero3_ratio"][0]) < 1e-3  # 3/2 up to padding
    assert abs(float(eval(got["gloo_ratio"]["answer"])) - want["gloo_ratio"][0]) < 1e-3  # README finding 1: 2.0
    b = want["ring_bytes"][0]
    replies = {"fits64": (["ZeRO-2", "zero2", " zero 2 "], ["ZeRO-3", "dp"]),
               "ring_bytes": ([f"{b}", f"{b} B", f"{b}.0", f"{b} bytes", f"{b / 1000} kB"], [f"{b + 4}", f"{b * 2} B"]),
               "headroom": (["24.4", "24.4 GB", "24.44", "24,437,144,096 B"], ["24.5", "55.6 GB"]),
               "zero3_ratio": (["3/2", "1.5", "1.5×", "150 %", "1.5x"], ["2", "1"]),
               "gloo_ratio": (["2", "2.0", "2×", "200%"], ["3/2", "1.5"])}
    for qid, (right, wrong) in replies.items():
        item = page.locator(f'li[data-exercise="{qid}"]')
        box, out = item.locator('[data-role="answer"]'), item.locator('[data-role="result"]')
        box.fill("")
        item.locator('[data-role="check"]').click()
        assert out.get_attribute("data-result") == "empty"
        assert got[qid]["answer_text"] not in out.text_content()  # an empty reply reveals nothing
        for reply in right:
            box.fill(reply)
            box.press("Enter")  # Enter checks, as the button does
            assert out.get_attribute("data-result") == "right", (qid, reply)
        for reply in wrong:
            box.fill(reply)
            item.locator('[data-role="check"]').click()
            assert out.get_attribute("data-result") == "wrong", (qid, reply)
    page.context.close()


def test_predict_first_reads_units_and_enter(browser, tmp_path):
    html, data = lesson_page()
    page = _open(browser, tmp_path, html)
    sent = data["stepper"]["algorithms"]["ring"]["totals"]["rank_sent"][0]
    box, out = page.locator('[data-role="predict-input"]'), page.locator('[data-role="predict-out"]')
    page.click('[data-role="predict-check"]')
    assert out.get_attribute("data-result") == "empty" and str(sent) not in out.text_content()
    for reply in (f"{sent} B", f"{sent}.0", f"{sent:,}"):
        box.fill(reply)
        box.press("Enter")
        assert out.get_attribute("data-result") == "right", reply
    page.context.close()


def test_transfers_travel_unless_reduced_motion(browser, tmp_path):
    html, _ = lesson_page()
    for motion, moving in (("no-preference", True), ("reduce", False)):
        page = _open(browser, tmp_path, html, reduced_motion=motion)
        page.locator("h1").click()
        page.keyboard.press("ArrowRight")
        assert page.get_attribute('[data-role="ring-svg"]', "data-animated") == str(moving).lower()
        assert (page.evaluate("document.getAnimations().length") > 0) == moving
        assert page.locator(".packet").count() == 8  # one value per transfer of the ring's first step, N = 8
        page.context.close()


_CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")
_NUMBER = re.compile(r"^[\s\d.,:;=+\-−×·/()%|→…◀▶❚Ψ⌈⌉]*(?:\s?(?:GB|B|N|S|kB|s|ms|µs))?[\s\d.,=·]*$")
_IDENTIFIERS = set(names("all-reduce")) | {"ZeRO-1", "ZeRO-2", "ZeRO-3", "Adam m", "Adam v", "English", "N", "S",
                                            "CommLedger", "MemoryLedger"}


def test_chinese_controls_and_summaries(browser, tmp_path):
    html, _ = lesson_page("zh")
    page = _open(browser, tmp_path, html)
    texts = page.evaluate("""() => {
      const sel = 'h1, h2, h3, .sub, [data-box="controls"], [data-box="stepper-controls"], [data-box="stepper-notes"], ' +
        '[data-box="legend"], [data-box="first-fits"], [data-box="headroom"], [data-box="trade-note"], ' +
        '[data-box="trade-side"], [data-box="exercises"], [data-box="predict"], [data-box="final"], [data-box="note"], ' +
        '[data-box="mem-table"] th, [data-box="legend-prov"], [data-box="presets"], [data-box="strip-note"]';
      const out = [];
      for (const root of document.querySelectorAll(sel)) {
        const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        let n; while ((n = walk.nextNode())) { if (n.textContent.trim()) out.push(n.textContent.trim()); }
      }
      return out;
    }""")
    assert len(texts) > 50
    odd = [t for t in texts if not (_CJK.search(t) or _NUMBER.match(t) or t in _IDENTIFIERS
                                    or re.fullmatch(r"r\d+( → r\d+)?", t))]
    assert odd == []
    # numbers stay apart from the words around them (a full-width comma, not "27,781,427,952,66")
    assert not re.search(r"\d,\d{1,2}\D", page.text_content("main").replace("，", " "))
    page.context.close()
