"""Charts with matplotlib (the optional ``[plot]`` extra), drawn from series a run produced, never from a formula.

:func:`line_chart` draws named series against N on a log axis, horizontal reference lines (e.g. the 80 GB card)
and annotations (e.g. where a stage first fits); every artist that a test or a reader may look for carries a
``gid`` (``line-<name>``, ``hline-<label>``, ``note-<name>``). :func:`save` writes PNG or SVG; SVG output is
byte-identical across runs and processes (a fixed ``svg.hashsalt`` and no date in the metadata). A
:class:`Chart` shows itself in notebooks through ``_repr_svg_``.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Chart", "line_chart", "save", "svg_text", "FORMATS", "require_matplotlib"]

FORMATS = ("png", "svg")
_SALT = "ringemu"  # svg.hashsalt: fixed ids inside the SVG, so the bytes repeat
# Okabe & Ito's colour-blind-safe palette, plus a marker per series so colour is never the only cue
_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def require_matplotlib():
    """matplotlib.pyplot with the Agg backend, or an ImportError that says how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plots need matplotlib: pip install 'ringemu[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


@dataclass
class Chart:
    """What to draw: series ``{name: (xs, ys)}``, reference lines ``[(y, label)]``, notes ``[(name, x, y, text)]``."""

    title: str
    xlabel: str
    ylabel: str
    series: dict[str, tuple[list, list]]
    hlines: list[tuple[float, str]] = field(default_factory=list)
    notes: list[tuple[str, float, float, str]] = field(default_factory=list)
    logx: bool = True
    logy: bool = False
    yscale: float = 1.0  # tick labels show y / yscale (e.g. 1e9 for GB); the data stay in their own units
    yunit: str = ""

    def figure(self):
        return line_chart(self)

    def _repr_svg_(self) -> str:
        return svg_text(self)


def line_chart(chart: Chart):
    """The matplotlib Figure of ``chart`` (data in their own units; ticks divided by ``chart.yscale``)."""
    plt = require_matplotlib()
    from matplotlib.ticker import FuncFormatter
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=100)
    for i, (name, (xs, ys)) in enumerate(chart.series.items()):
        ax.plot(xs, ys, marker=_MARKERS[i % len(_MARKERS)], color=_COLOURS[i % len(_COLOURS)], label=name,
                gid=f"line-{name}")
    for y, label in chart.hlines:
        ax.axhline(y, color="black", linestyle="--", linewidth=1.2, label=label, gid=f"hline-{label}")
    for i, (name, x, y, text) in enumerate(chart.notes):
        ax.annotate(text, xy=(x, y), xytext=(14, -30 - 16 * (i % 3)), textcoords="offset points", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#999"},
                    arrowprops={"arrowstyle": "->", "color": "#333"}, gid=f"note-{name}")
    if chart.logx:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(v):,}" if v >= 1 else f"{v:g}"))
    if chart.logy:
        ax.set_yscale("log")
    scale = chart.yscale
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:,.0f}{chart.yunit}" if v >= scale or v == 0
                                               else f"{v / scale:.2g}{chart.yunit}"))
    ax.set_title(chart.title, fontsize=11)
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(chart.ylabel)
    ax.grid(True, which="major", color="#ddd")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def svg_text(chart: Chart) -> str:
    buf = io.BytesIO()
    _write(chart, buf, "svg")
    return buf.getvalue().decode("utf-8")


def _write(chart: Chart, target, fmt: str) -> None:
    plt = require_matplotlib()
    import matplotlib
    with matplotlib.rc_context({"svg.hashsalt": _SALT, "svg.fonttype": "path"}):
        fig = line_chart(chart)
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(target, format=fmt, metadata=metadata)
        plt.close(fig)


def save(chart: Chart, path) -> Path:
    """Write ``chart`` to ``path`` (``.png`` or ``.svg``, from the suffix); SVG bytes repeat across runs."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"output must end in .png or .svg; got {str(path)!r}")
    _write(chart, path, fmt)
    return path
