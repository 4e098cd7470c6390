"""The self-contained offline page: inline CSS, inline SVG, plain JavaScript, and the run's data embedded as
``<script type="application/json">``. No file, font or script is loaded from anywhere: the page works from
``file://`` with no server and no network, and :func:`external_urls` finds no URL in it.

The page is generic: it shows the panels its data holds (``memory`` — bars and formula terms; ``stepper`` — traced
collectives; ``comm`` — a communication strip). Whoever builds the data (the lesson command of the stages package) runs
ringemu for every value shown; the script only looks values up. :func:`stepper_fragment` is the stepper alone,
for notebooks, with a static SVG of the final state for front-ends that do not run scripts.
"""
from __future__ import annotations

import hashlib
import html
import json
import re
from html.parser import HTMLParser
from importlib import resources

from .labels import ALGORITHM_SUMMARIES_ZH, LABELS, check_lang

__all__ = ["page_html", "stepper_fragment", "external_urls", "embedded_json", "provenance_palette",
           "contrast_ratio", "MAX_PAGE_BYTES"]

MAX_PAGE_BYTES = 4_000_000  # the default lesson page stays well below this (tests check it)
_SCHEME = re.compile(r"(?i)\b(?:https?|ftp|wss?|file):")
_URL_ATTRS = {"href", "src", "action", "formaction", "poster", "data", "xlink:href", "srcset", "background"}
_CSS_URL = re.compile(r"(?i)url\(\s*['\"]?\s*([^)'\"\s]*)")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _json_script(data: dict, element_id: str) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")  # inert inside <script>
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def provenance_palette(n_ranks: int) -> list[dict]:
    """Background and text colour for a chunk holding k of N ranks' contributions, k = 0 … N: a light-to-dark
    single-hue blue ramp (ColorBrewer "Blues", safe for colour-blind readers); the text says the same."""
    light, dark = (0xF7, 0xFB, 0xFF), (0x08, 0x30, 0x6B)
    out = []
    for k in range(n_ranks + 1):
        t = k / n_ranks if n_ranks else 1.0
        rgb = tuple(round(a + (b - a) * t) for a, b in zip(light, dark))
        fg = max(((0xFF, 0xFF, 0xFF), (0x11, 0x11, 0x11)), key=lambda c: contrast_ratio(c, rgb))  # the more legible
        out.append({"bg": "#%02x%02x%02x" % rgb, "fg": "#%02x%02x%02x" % fg})
    return out


def _luminance(rgb) -> float:
    """WCAG 2.1 relative luminance of an sRGB colour (0–255 per channel)."""
    lin = [(c / 255) / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(a, b) -> float:
    """WCAG 2.1 contrast ratio of two sRGB colours, 1 … 21 (4.5 is the AA level for body text)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


# Every block of a panel is a ``data-box``: boxes sit side by side or wrap, never on top of each other; what may
# be wider than a phone (the charts, the ranks × chunks grid) scrolls inside its own box (``scroll``).
_MEMORY = """
<section class="panel" aria-labelledby="mem-h">
 <h2 id="mem-h" data-i18n="mem_title"></h2>
 <div class="row" data-box="presets" data-role="presets" role="group"></div>
 <p class="small" data-box="note" data-role="preset-note"></p>
 <div class="row" data-box="controls">
  <button type="button" data-role="next-stage" data-i18n="next_stage"></button>
  <span><span data-i18n="stage_now"></span>: <strong data-role="stage-now"></strong></span>
  <label><span data-i18n="ranks_n"></span> <select data-role="n-select" id="n-select"></select></label>
  <label><span data-i18n="recompute"></span> <select data-role="rc-select" id="rc-select"></select></label>
  <label><span data-i18n="view"></span> <select data-role="view-select" id="view-select"></select></label>
 </div>
 <div class="legend" data-box="legend" data-role="legend"></div>
 <div class="flex">
  <div class="scroll" data-box="mem-chart"><svg data-role="mem-svg" id="mem-svg" role="img" aria-labelledby="mem-h"></svg></div>
  <div class="scroll" data-box="mem-table"><table class="counters" data-role="mem-table"></table></div>
  <div data-box="first-fits"><h3 data-i18n="first_fits_title"></h3><ul data-role="first-fits"></ul></div>
  <div data-box="headroom" data-role="headroom"></div>
 </div>
</section>
<section class="panel" aria-labelledby="formula-h">
 <h2 id="formula-h" data-i18n="formula_title"></h2>
 <div class="terms row" data-box="terms" data-role="terms" role="group"></div>
 <div class="detail" data-box="term-detail" data-role="term-detail" aria-live="polite"></div>
</section>
"""

_STEPPER = """
<section class="panel" aria-labelledby="ring-h">
 <h2 id="ring-h" data-i18n="ring_title"></h2>
 <div class="row" data-box="stepper-controls">
  <label><span data-i18n="algorithm"></span> <select data-role="alg-select"></select></label>
  <button type="button" data-role="prev" data-i18n="prev"></button>
  <input type="range" min="0" max="1" step="1" value="0" data-role="slider" aria-label="step">
  <button type="button" data-role="next" data-i18n="next"></button>
  <button type="button" data-role="play" aria-pressed="false" data-i18n="play"></button>
  <label><span data-i18n="speed"></span> <select data-role="speed"><option value="0.5">0.5×</option>
   <option value="1" selected>1×</option><option value="2">2×</option></select></label>
  <span data-role="step-text" aria-live="polite"></span> <span data-role="phase" class="phase"></span>
 </div>
 <div data-box="stepper-notes"><p class="small" data-role="alg-summary"></p><p class="small" data-role="input-note"></p>
  <p class="small" data-i18n="keys"></p><p class="small" data-role="motion-note"></p></div>
 <div class="flex">
  <div data-box="ring"><svg data-role="ring-svg" width="240" height="240" viewBox="0 0 220 220" role="img"
       aria-label="ring"></svg></div>
  <div class="scroll grow" data-box="grid"><table class="grid" data-role="grid">{grid}</table></div>
 </div>
 <p class="small" data-box="legend-prov" data-i18n="legend_prov"></p>
 <div class="flex">
  <div class="scroll" data-box="rank-counters"><h3 data-i18n="per_rank_counters"></h3>
   <table class="counters" data-role="rank-counters"></table></div>
  <div class="scroll" data-box="link-counters"><h3 data-i18n="per_link_counters"></h3>
   <table class="counters" data-role="link-counters"></table><p data-role="ledger-total"></p></div>
 </div>
 <p data-box="final" data-role="final" aria-live="polite"></p>
 <div class="row" data-box="predict"><label><span data-i18n="predict"></span>
  <input data-role="predict-input" size="12"></label>
  <button type="button" data-role="predict-check" data-i18n="check"></button> <span data-role="predict-out" aria-live="polite"></span></div>
</section>
"""

_STRIP = """
<section class="panel" aria-labelledby="strip-h">
 <h2 id="strip-h" data-i18n="strip_title"></h2>
 <p class="small" data-box="strip-note" data-role="strip-note"></p>
 <div data-box="strip" data-role="strip"></div>
</section>
"""

_TRADEOFF = """
<section class="panel" aria-labelledby="trade-h">
 <h2 id="trade-h" data-i18n="tradeoff_title"></h2>
 <p class="small" data-box="trade-note" data-role="trade-note"></p>
 <div class="flex">
  <div class="scroll" data-box="trade-chart"><svg data-role="trade-svg" role="img" aria-labelledby="trade-h"></svg></div>
  <div data-box="trade-side"><ul data-role="crossovers"></ul><p class="detail" data-role="trade-detail" aria-live="polite"></p></div>
 </div>
</section>
"""

_EXERCISES = """
<section class="panel" aria-labelledby="ex-h">
 <h2 id="ex-h" data-i18n="ex_title"></h2>
 <ol data-box="exercises" data-role="exercises"></ol>
</section>
"""


def _grid_rows(stepper: dict, palette: list[dict], lang: str, step: int = 0) -> str:
    """The ranks × chunks table of one step, as the script draws it (so the file carries it without scripts)."""
    words = LABELS[lang]
    state = stepper["steps"][step]
    head = "<tr><th></th>" + "".join(f"<th>{words['chunk']} {c}</th>" for c in range(stepper["n_chunks"])) + "</tr>"
    rows = []
    for r, row in enumerate(state["cells"]):
        cells = []
        for c, cell in enumerate(row):
            colour = palette[cell["count"]]
            cells.append(f'<td data-rank="{r}" data-chunk="{c}" data-step="{step}" '
                         f'data-value="{html.escape(cell["value_text"])}" data-prov="{html.escape(cell["prov_text"])}" '
                         f'class="{"recv" if cell["received"] else ""}" '
                         f'style="background:{colour["bg"]};color:{colour["fg"]}">'
                         f'<span class="v">{html.escape(cell["value_text"] or "·")}</span>'
                         f'<span class="p">{html.escape(cell["prov_text"])}</span></td>')
        rows.append(f"<tr><th>{words['rank']} {r}</th>{''.join(cells)}</tr>")
    return head + "".join(rows)


def _stepper_section(stepper_panel: dict, lang: str) -> str:
    first = stepper_panel["algorithms"][stepper_panel["default"]]
    return _STEPPER.replace("{grid}", _grid_rows(first, stepper_panel["palette"], lang))


def _labels() -> dict:
    return dict(LABELS, alg_zh=ALGORITHM_SUMMARIES_ZH)


# the page's own frame; lesson.css styles only what sits inside ``.ringemu`` (a notebook keeps its own look)
_PAGE_CSS = "body { margin: 0; background: #fff; }\n"


def page_html(data: dict, lang: str = "en") -> str:
    """The whole page for ``data`` (JSON-ready; panels for its ``memory``, ``stepper`` and ``comm`` keys)."""
    lang = check_lang(lang)
    data = dict(data, lang=lang, labels=_labels())
    data_id = "ringemu-data"
    body = "".join(part() for key, part in (("memory", lambda: _MEMORY),
                                            ("stepper", lambda: _stepper_section(data["stepper"], lang)),
                                            ("comm", lambda: _STRIP), ("tradeoff", lambda: _TRADEOFF),
                                            ("exercises", lambda: _EXERCISES)) if data.get(key))
    title = html.escape(LABELS[lang]["title"])
    return (f'<!DOCTYPE html>\n<html lang="{"zh-CN" if lang == "zh" else "en"}">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{title}</title>\n'
            f"<style>\n{_PAGE_CSS}{_asset('lesson.css')}</style>\n</head>\n<body>\n"
            f'<main class="ringemu" data-ringemu-page="{data_id}">\n'
            f'<div class="row"><h1 data-i18n="title"></h1>'
            f'<button type="button" data-role="lang" lang="zh-CN" style="margin-left:auto"></button></div>\n'
            f'<p class="sub" data-i18n="subtitle"></p>\n{body}</main>\n'
            f"{_json_script(data, data_id)}\n<script>\n{_asset('lesson.js')}</script>\n</body>\n</html>\n")


def _static_final_svg(stepper: dict, lang: str) -> str:
    """The final state of a traced collective as a static SVG grid (values and provenance as text). Colours are
    inline ``style`` (a stylesheet of the host cannot override them) and each cell's text colour is the palette's
    own for that background (contrast ≥ 4.5:1, checked by the tests); text is 12–13 px."""
    words = LABELS[lang]
    last = stepper["steps"][-1]
    n, chunks = stepper["n_ranks"], stepper["n_chunks"]
    w, h, left = 96, 38, 64
    palette = provenance_palette(n)
    parts = [f'<svg class="static" width="{left + w * chunks}" height="{24 + h * n}" '
             f'viewBox="0 0 {left + w * chunks} {24 + h * n}" role="img" aria-label="{html.escape(words["final_static"])}">']
    for c in range(chunks):
        parts.append(f'<text x="{left + w * c + 4}" y="16" style="font-size:13px;fill:#111">'
                     f'{html.escape(words["chunk"])} {c}</text>')
    for r, row in enumerate(last["cells"]):
        parts.append(f'<text x="4" y="{24 + h * r + 22}" style="font-size:13px;fill:#111">'
                     f'{html.escape(words["rank"])} {r}</text>')
        for c, cell in enumerate(row):
            colour = palette[cell["count"]]
            x, y = left + w * c, 24 + h * r
            parts.append(f'<rect x="{x}" y="{y}" width="{w - 2}" height="{h - 2}" style="fill:{colour["bg"]};stroke:#555"/>'
                         f'<text x="{x + 4}" y="{y + 15}" style="font-size:13px;fill:{colour["fg"]}">'
                         f'{html.escape(cell["value_text"] or "·")}</text>'
                         f'<text x="{x + 4}" y="{y + 31}" style="font-size:12px;fill:{colour["fg"]}">'
                         f'{html.escape(cell["prov_text"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def stepper_fragment(stepper: dict, lang: str = "en") -> str:
    """A notebook cell's HTML: the interactive stepper (when scripts run) and a static SVG of the final state.
    Its stylesheet reaches only elements inside its own ``.ringemu`` box, so the notebook around it keeps its look."""
    lang = check_lang(lang)
    key = stepper.get("key") or "trace"
    panel = {"default": key, "algorithms": {key: stepper}, "palette": provenance_palette(stepper["n_ranks"])}
    data = {"lang": lang, "labels": _labels(), "stepper": panel}
    digest = hashlib.sha256(json.dumps(panel, sort_keys=True).encode()).hexdigest()[:12]
    data_id = f"ringemu-data-{digest}"  # the same trace gives the same id, so the same data
    return (f'<div class="ringemu"><style>{_asset("lesson.css")}</style>'
            f'<div data-ringemu-page="{data_id}">{_stepper_section(panel, lang)}</div>'
            f'<details open><summary>{html.escape(LABELS[lang]["final_static"])}</summary>'
            f'<div class="scroll">{_static_final_svg(stepper, lang)}</div></details>'
            f"{_json_script(data, data_id)}<script>{_asset('lesson.js')}</script></div>")


class _Scanner(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.json: dict[str, str] = {}
        self._script_id: str | None = None

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            value = value or ""
            if name == "style":
                self._css(value)
            if name in _URL_ATTRS and value.strip() and not value.strip().startswith(("#", "data:")):
                self.found.append(f"<{tag} {name}={value!r}>")
            if _SCHEME.search(value):
                self.found.append(f"<{tag} {name}={value!r}>")
        if tag == "script" and dict(attrs).get("type") == "application/json":
            self._script_id = dict(attrs).get("id", "")
        if tag in ("link", "iframe", "embed", "object", "img", "audio", "video", "source"):
            self.found.append(f"<{tag}> element")

    def handle_endtag(self, tag):
        if tag == "script":
            self._script_id = None

    def _css(self, text: str) -> None:
        for target in _CSS_URL.findall(text):
            if not target.startswith(("#", "data:")):
                self.found.append(f"url({target})")

    def handle_data(self, data):
        if self._script_id is not None:
            self.json[self._script_id] = self.json.get(self._script_id, "") + data
        if _SCHEME.search(data):
            self.found.append(_SCHEME.search(data).group(0) + " in text")
        if "@import" in data:
            self.found.append("@import")
        self._css(data)


def external_urls(page: str) -> list[str]:
    """Everything in ``page`` that could make a browser leave the file: URL attributes that are not fragments,
    any scheme (http:, https:, ftp:, ws:, file:), CSS ``url()`` and ``@import``, and elements that load
    resources. An empty list means the page is self-contained."""
    scanner = _Scanner()
    scanner.feed(page)
    scanner.close()
    return scanner.found


def embedded_json(page: str, element_id: str = "ringemu-data") -> dict:
    """The JSON embedded in ``page`` as ``<script type="application/json" id=element_id>``."""
    scanner = _Scanner()
    scanner.feed(page)
    scanner.close()
    if element_id not in scanner.json:
        raise ValueError(f"no <script type=\"application/json\" id=\"{element_id}\"> in the page")
    return json.loads(scanner.json[element_id])
