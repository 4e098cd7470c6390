"""The lesson page without a browser: self-contained (parsed, not grepped), its embedded JSON round-trips to
the runs it came from, every cell carries its data attributes, and the file stays small."""
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from ringemu import CommLedger, all_reduce, trace_collective
from ringemu.cli import main
from ringemu.views import embedded_json, external_urls
from ringemu.views.html import MAX_PAGE_BYTES
from zero_stages.memory.anchor import anchor_activations
from zero_stages.memory.report import memory_report

from lesson_support import LESSON_GRID, LESSON_RANKS, LESSON_SEED, lesson_page

_URL_ATTRS = {"href", "src", "action", "formaction", "poster", "data", "srcset", "xlink:href", "background"}


class _Collect(HTMLParser):
    """Every tag, attribute and text node of a page (an independent reading, not the code under test)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.attrs, self.texts, self.tags, self.cells = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        if tag == "td":
            self.cells.append(dict(attrs))

    def handle_data(self, data):
        self.texts.append(data)


def _parse(page: str) -> _Collect:
    c = _Collect()
    c.feed(page)
    c.close()
    return c


def test_no_external_url_anywhere():
    page, _ = lesson_page()
    parsed = _parse(page)
    scheme = re.compile(r"(?i)\b(?:https?|ftp|wss?):|^\s*//")
    for tag, name, value in parsed.attrs:
        assert not scheme.search(value), (tag, name, value)
        if name in _URL_ATTRS:
            assert value.startswith("#"), (tag, name, value)
    for text in parsed.texts:  # scripts, styles and prose
        assert not re.search(r"(?i)\b(?:https?|ftp|wss?):|url\(\s*['\"]?\s*(?!#)[^)\s]", text), text[:200]
        assert "@import" not in text
    assert not {"link", "img", "iframe", "object", "embed"} & set(parsed.tags)
    assert external_urls(page) == []


@pytest.mark.parametrize("snippet", ['<img src="//cdn.example.org/x.png">', '<a href="https://example.org">x</a>',
                                     '<div style="background:url(http://e.org/a.png)"></div>',
                                     '<script>fetch("http://e.org")</script>', '<link rel="stylesheet" href="a.css">'])
def test_the_url_finder_bites(snippet):
    page, _ = lesson_page()
    assert external_urls(page.replace("</main>", snippet + "</main>"))


def test_embedded_json_round_trips_to_the_runs():
    page, data = lesson_page()
    embedded = embedded_json(page)
    assert {k: embedded[k] for k in data} == json.loads(json.dumps(data))
    # the stepper's trace is ringemu's own trace of the same collective (fixed-seed blocks of single digits)
    ring = embedded["stepper"]["algorithms"]["ring"]
    numel = embedded["stepper"]["numel"]
    assert ring["trace"] == trace_collective("all-reduce", LESSON_RANKS, numel, "int32", LESSON_SEED).as_dict()
    # the totals are the CommLedger of the fast all-reduce on the same inputs
    world = np.array(ring["trace"]["initial"]["buffers"], dtype=np.int32)
    ledger = CommLedger()
    out = all_reduce(world, ledger=ledger)
    assert ring["totals"]["rank_sent"] == [t.sent.bytes for t in ledger.per_rank()]
    assert ring["numpy_sum"] == out[0].tolist() == world.sum(axis=0).tolist()
    # memory points are memory reports of the same settings
    anchor = embedded["memory"]["presets"][0]
    assert anchor["id"] == "anchor" and sum(anchor["unit_sizes"]) == anchor["psi"] == 27_781_427_952
    for n in (8, 64):
        report = memory_report(n, unit_sizes=anchor["unit_sizes"], activations=anchor_activations("selective"))
        shown = anchor["points"][f"{n}|selective"]["stages"]
        assert [s["model_states_bytes"] for s in shown] == [max(r["model_state_bytes_per_rank"])
                                                            for r in report["stages"]]
        assert [(s["peak_bytes"], s["model_states_fit"], s["peak_fits"]) for s in shown] == \
            [(r["peak_bytes"], r["model_states_fit"], r["peak_fits"]) for r in report["stages"]]
    assert embedded["memory"]["ranks"] == list(LESSON_GRID)
    # one N on the page: the memory panel opens at the stepper's N, and the strip is counted at it too
    assert embedded["memory"]["start_n"] == LESSON_RANKS == embedded["comm"]["n_ranks"] == ring["n_ranks"]


def test_every_cell_carries_its_data():
    page, data = lesson_page()
    cells = _parse(page).cells
    grid = [c for c in cells if "data-chunk" in c]
    ring = data["stepper"]["algorithms"][data["stepper"]["default"]]
    assert len(grid) == ring["n_ranks"] * ring["n_chunks"]
    initial, size = ring["trace"]["initial"]["buffers"], ring["chunk_size"]
    for c in grid:
        assert {"data-rank", "data-chunk", "data-step", "data-value"} <= set(c)
        r, k = int(c["data-rank"]), int(c["data-chunk"])
        assert c["data-step"] == "0" and c["data-value"] == " ".join(map(str, initial[r][k * size:(k + 1) * size]))


def test_size_bound():
    page, _ = lesson_page()
    assert len(page.encode("utf-8")) < MAX_PAGE_BYTES


def test_chinese_labels():
    page, _ = lesson_page("zh")
    assert '<html lang="zh-CN">' in page and embedded_json(page)["lang"] == "zh"
    from ringemu.algorithms import names
    from ringemu.views.labels import ALGORITHM_SUMMARIES_ZH, LABELS
    assert set(ALGORITHM_SUMMARIES_ZH) == set(names("all-reduce"))  # every catalog algorithm has its Chinese
    assert set(LABELS["zh"]) == set(LABELS["en"])
    cjk = re.compile(r"[\u3400-\u9fff]")
    assert all(cjk.search(text) for text in ALGORITHM_SUMMARIES_ZH.values())


def test_the_page_css_is_scoped():
    """Every rule of the stylesheet reaches only elements inside a .ringemu box (a notebook keeps its look)."""
    from importlib import resources
    css = resources.files("ringemu.views").joinpath("assets", "lesson.css").read_text(encoding="utf-8")
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"@media[^{]*\{((?:[^{}]*\{[^}]*\})*)\s*\}", r"\1", css)
    selectors = [s.strip() for block in re.findall(r"([^{}]+)\{[^}]*\}", css) for s in block.split(",")]
    assert selectors and all(re.match(r"^(main)?\.ringemu\b", s) for s in selectors), \
        [s for s in selectors if not re.match(r"^(main)?\.ringemu\b", s)]


@pytest.mark.parametrize("argv, flag", [(["--ranks", "1"], "--ranks"), (["--ranks", "17"], "--ranks"),
                                        (["--lang", "fr"], "--lang"), (["--algorithm", "nope"], "--algorithm"),
                                        (["--seed", "-1"], "--seed")])
def test_cli_lesson_bad_flags(argv, flag, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["lesson", "-o", str(tmp_path / "x.html"), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ringemu: error:") and flag in err


def test_cli_lesson_writes_the_page(tmp_path, monkeypatch, capsys):
    import zero_stages.lesson.page as lesson
    monkeypatch.setattr(lesson, "RANKS_GRID", (1, 8))  # the command's grid, kept small here
    out = tmp_path / "lesson.html"
    assert main(["lesson", "-o", str(out), "--lang", "zh", "--ranks", "3", "--seed", "2"]) == 0
    page = out.read_text(encoding="utf-8")
    data = embedded_json(page)
    assert data["lang"] == "zh" and data["memory"]["ranks"] == [1, 8] and data["stepper"]["seed"] == 2
    assert data["stepper"]["algorithms"]["ring"]["n_ranks"] == 3 and external_urls(page) == []
    assert data["comm"]["n_ranks"] == 3 and data["memory"]["start_n"] is None  # 3 is not on the grid (1, 8)
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, error, match", [(dict(n_ranks=1), ValueError, "n_ranks"),
                                                  (dict(n_ranks=4.0), TypeError, "n_ranks"),
                                                  (dict(seed=-1), ValueError, "seed"),
                                                  (dict(algorithm_name="nope"), ValueError, "algorithm")])
def test_lesson_data_bad_input(kwargs, error, match):
    from zero_stages.lesson.page import lesson_data
    with pytest.raises(error, match=match):
        lesson_data(**kwargs)
