"""The lesson page's memory panels as data: for every preset, every N in 1, 2, 4, …, 1,024 and every
activation setting, the four stages' size-only runs (:func:`~zero_stages.memory.report.memory_report`), laid out
as stacked bars (measured beside formula) and formula terms.

Measured values are read from the ledgers of those runs: what the busiest rank held, category by category, when
its total peaked. Formula values are the lesson's closed forms (ZeRO §5.1, unpadded: 2Ψ or 2Ψ/N, 12Ψ or 12Ψ/N;
activations L·34·s·b·h or L·2·s·b·h, Korthikanti et al. 2022 §4), each term checked here against
:func:`~zero_stages.memory.closed_forms.model_state_bytes_closed_form`. The difference is padding and buffers in
flight. Bar geometry is fixed here too, so the page's script only places what it finds.
"""
from __future__ import annotations

from fractions import Fraction

from ringemu.units import GB, format_gb

from ..memory.activations import ActivationShape
from ..memory.anchor import ANCHOR_PSI, ANCHOR_RANKS, ANCHOR_UNIT_SIZES, ZERO_PAPER_PSI, ZERO_PAPER_RANKS, anchor_activations
from ..memory.closed_forms import STAGES, model_state_bytes_closed_form
from ..memory.report import BUFFER_CATEGORIES, CARD_80GB, first_fits, memory_report
from ..precision import FP32_BYTES, GRAD16_BYTES, WEIGHT16_BYTES

__all__ = ["RANKS_GRID", "BAR_CATEGORIES", "STAGE_LABELS", "VIEWS", "Preset", "PRESETS", "memory_panel",
           "formula_terms", "headroom"]

RANKS_GRID = tuple(2 ** k for k in range(11))  # N = 1, 2, 4, …, 1,024 (the lesson drags N from 8 to 1,024)
# bar segments, bottom to top; Okabe & Ito's colour-blind-safe palette; "buffers" = gathered + comm_buffer
BAR_CATEGORIES = (
    ("weights16", "#0072B2", {"en": "16-bit weights", "zh": "16 位权重"}),
    ("grads16", "#56B4E9", {"en": "16-bit gradients", "zh": "16 位梯度"}),
    ("master32", "#009E73", {"en": "fp32 master", "zh": "fp32 主权重"}),
    ("adam_m", "#F0E442", {"en": "Adam m", "zh": "Adam m"}),
    ("adam_v", "#E69F00", {"en": "Adam v", "zh": "Adam v"}),
    ("activations", "#CC79A7", {"en": "activations", "zh": "激活"}),
    ("buffers", "#D55E00", {"en": "buffers in flight", "zh": "在途缓冲"}),
)
STAGE_LABELS = {"dp": {"en": "DP", "zh": "数据并行"}, "zero1": {"en": "ZeRO-1", "zh": "ZeRO-1"},
                "zero2": {"en": "ZeRO-2", "zh": "ZeRO-2"}, "zero3": {"en": "ZeRO-3", "zh": "ZeRO-3"}}
_SHARDED = {"dp": (), "zero1": ("opt",), "zero2": ("opt", "g16"), "zero3": ("opt", "g16", "w16")}  # ZeRO §5.1
# SVG user units = CSS px (the chart is drawn at its own size and scrolls in its box on a narrow screen, so its
# 13 px text stays 13 px); 22 px above the tallest bar for its label
_CHART = {"width": 640, "height": 340, "top": 26, "bottom": 292, "x0": 78, "group": 136, "bar": 50, "gap": 4}
# what the number on a bar is: the lesson's model states (claim M2) or the peak (states + activations + buffers)
VIEWS = ("states", "peak")


class Preset:
    """A model and its default N; ``activations`` maps a recomputation choice to a shape (None: not counted)."""

    def __init__(self, id: str, label: dict, psi: int, default_n: int, activations: dict, default_recompute: str,
                 note: dict, unit_sizes: tuple[int, ...] | None = None):
        if unit_sizes is not None and sum(unit_sizes) != psi:
            raise ValueError(f"unit_sizes of preset {id!r} must sum to psi = {psi:,}")
        self.id, self.label, self.psi, self.default_n = id, label, psi, default_n
        self.activations, self.default_recompute, self.note = activations, default_recompute, note
        self.unit_sizes = unit_sizes

    def size(self) -> dict:
        """The size keyword of the size-only runs: the units if given, else Ψ as one unit."""
        return {"unit_sizes": self.unit_sizes} if self.unit_sizes else {"psi": self.psi}


PRESETS = (
    Preset("anchor", {"en": f"lesson anchor Ψ = {ANCHOR_PSI:,} in {len(ANCHOR_UNIT_SIZES)} layers, N = {ANCHOR_RANKS}",
                      "zh": f"本课锚点 Ψ = {ANCHOR_PSI:,}，{len(ANCHOR_UNIT_SIZES)} 层，N = {ANCHOR_RANKS}"},
           ANCHOR_PSI, ANCHOR_RANKS,
           {"off": None, "selective": anchor_activations("selective"), "full": anchor_activations("full")}, "off",
           {"en": f"Layers (assumed split, the lesson does not print its configuration): embedding "
                  f"{ANCHOR_UNIT_SIZES[0]:,}, 64 layers of {ANCHOR_UNIT_SIZES[1]:,} (its largest layer, as printed), "
                  f"output head {ANCHOR_UNIT_SIZES[-1]:,}; ZeRO-3 gathers one or two layers at a time. Activations: "
                  "s = 4,096, b = 1 (lesson), h = 5,120, L = 64 (assumed: they reproduce the lesson's 45.6 GB and "
                  "2.7 GB).",
            "zh": f"分层（假设的切分，本课没有给出配置）：嵌入 {ANCHOR_UNIT_SIZES[0]:,}，64 层各 {ANCHOR_UNIT_SIZES[1]:,}"
                  f"（本课所说最大的一层），输出头 {ANCHOR_UNIT_SIZES[-1]:,};ZeRO-3 每次只拼一两层。激活：s = 4,096、"
                  "b = 1（本课），h = 5,120、L = 64（假设：它们复现本课的 45.6 GB 与 2.7 GB）。"},
           unit_sizes=ANCHOR_UNIT_SIZES),
    Preset("zero-paper", {"en": "ZeRO paper Ψ = 7.5B, N = 64", "zh": "ZeRO 论文 Ψ = 7.5B，N = 64"},
           ZERO_PAPER_PSI, ZERO_PAPER_RANKS, {"off": None}, "off",
           {"en": "Rajbhandari et al. 2019, Figure 1: model states only.",
            "zh": "Rajbhandari 等 2019 年论文图 1：只计模型状态。"}),
)


def _exact_text(value: Fraction) -> str:
    return f"{int(value):,}" if value.denominator == 1 else f"{value.numerator:,}/{value.denominator:,}"


def formula_terms(stage: str, psi: int, n: int, activations: ActivationShape | None) -> list[dict]:
    """The lesson's per-rank formula for ``stage`` as terms (exact, unpadded), each with the ledger categories
    it stands for."""
    sharded = _SHARDED[stage]
    n_text = "" if n == 1 else "/N"

    def part(key: str, coeff: int) -> tuple[str, Fraction]:
        on = key in sharded
        return f"{coeff}Ψ{n_text if on else ''}", Fraction(coeff * psi, n if on else 1)

    w_sym, w = part("w16", WEIGHT16_BYTES)
    g_sym, g = part("g16", GRAD16_BYTES)
    o_sym, o = part("opt", 3 * FP32_BYTES)
    if w + g + o != model_state_bytes_closed_form(stage, psi, n, padded=False):
        raise AssertionError(f"formula terms of {stage} disagree with the closed form")
    act = Fraction(activations.total_bytes()) if activations else Fraction(0)
    act_sym = f"L·{activations.formula()}" if activations else "0"
    return [
        {"id": "w16", "symbol": w_sym, "cats": ["weights16"], "value": w,
         "label": {"en": "16-bit weights", "zh": "16 位权重"}},
        {"id": "g16", "symbol": g_sym, "cats": ["grads16"], "value": g,
         "label": {"en": "16-bit gradients", "zh": "16 位梯度"}},
        {"id": "opt", "symbol": o_sym, "cats": ["master32", "adam_m", "adam_v"], "value": o,
         "label": {"en": "optimizer states (fp32 master, m, v: K = 12)", "zh": "优化器状态（fp32 主权重、m、v:K = 12)"}},
        {"id": "act", "symbol": act_sym, "cats": ["activations"], "value": act,
         "label": {"en": "activations", "zh": "激活"}},
        {"id": "buf", "symbol": "—", "cats": ["buffers"], "value": Fraction(0),
         "label": {"en": "buffers in flight (not in the formula)", "zh": "在途缓冲（公式里没有）"}},
    ]


def _formula_split(terms: list[dict]) -> dict[str, Fraction]:
    """Formula bytes per bar category (the optimizer term is 4 B + 4 B + 4 B per parameter)."""
    by = {t["id"]: t["value"] for t in terms}
    third = by["opt"] / 3
    return {"weights16": by["w16"], "grads16": by["g16"], "master32": third, "adam_m": third, "adam_v": third,
            "activations": by["act"], "buffers": Fraction(0)}


def _measured_split(row: dict) -> dict[str, int]:
    at = row["at_peak_by_category"]
    out = {c: at[c] for c, _, _ in BAR_CATEGORIES if c != "buffers"}
    out["buffers"] = sum(at[c] for c in BUFFER_CATEGORIES)
    return out


def _nice_ceiling(value: Fraction) -> tuple[int, int]:
    """(top, tick step) of the chart: the smallest multiple of 10^k GB at or above ``value`` bytes, with 10^k GB
    the smallest power of ten (from 1 GB) that leaves at most ten ticks."""
    step = GB
    while value > 10 * step:
        step *= 10
    top = -(-value // step) * step
    return int(top), step


def _segments(split: dict, x: float, scale: int) -> list[dict]:
    plot = _CHART["bottom"] - _CHART["top"]
    y, out = float(_CHART["bottom"]), []
    for cat, colour, label in BAR_CATEGORIES:
        value = split[cat]
        h = float(Fraction(value) * plot / scale)
        y -= h
        out.append({"cat": cat, "x": x, "y": round(y, 3), "w": _CHART["bar"],
                    "h": round(h, 3), "bytes": int(value) if Fraction(value).denominator == 1 else str(value),
                    "bytes_text": _exact_text(Fraction(value)), "gb": format_gb(value)})
    return out


def _point(preset: Preset, report: dict, n: int, shape, scale: int) -> dict:
    stages = []
    for i, row in enumerate(report["stages"]):
        stage = row["name"]
        terms = formula_terms(stage, preset.psi, n, shape)
        measured = _measured_split(row)
        x = _CHART["x0"] + i * _CHART["group"]
        bars = {"measured": _segments(measured, x, scale),
                "formula": _segments(_formula_split(terms), x + _CHART["bar"] + _CHART["gap"], scale)}
        shown_terms = []
        for t in terms:
            got = sum(measured[c] for c in t["cats"])
            diff = Fraction(got) - t["value"]
            shown_terms.append({"id": t["id"], "symbol": t["symbol"], "cats": t["cats"],
                                "formula_text": _exact_text(t["value"]), "formula_gb": format_gb(t["value"]),
                                "measured": got, "measured_text": f"{got:,}", "measured_gb": format_gb(got),
                                "diff_text": _exact_text(diff), "diff_gb": format_gb(diff)})
        states = max(row["model_state_bytes_per_rank"])
        activation = max(row["activation_peak_bytes_per_rank"])
        stages.append({
            "id": stage, "label": STAGE_LABELS[stage], "label_x": x, "bars": bars, "terms": shown_terms,
            "top_y": min(bars["measured"][-1]["y"], bars["formula"][-1]["y"]),
            "model_states_bytes": states, "model_states_gb": format_gb(states),
            "model_states_fit": row["model_states_fit"], "peak_bytes": row["peak_bytes"],
            "peak_gb": format_gb(row["peak_bytes"]), "peak_fits": row["peak_fits"],
            "activation_bytes": activation, "activation_gb": format_gb(activation),
            "buffer_bytes": row["buffer_bytes_at_peak"], "buffer_gb": format_gb(row["buffer_bytes_at_peak"])})
    return {"stages": stages}


def headroom(by_recompute: dict[str, dict], card_bytes: int) -> dict | None:
    """The lesson's third experiment at one N: the card less ZeRO-3's model states (80 GB − 55.6 GB = 24.4 GB at
    the anchor's N = 8), against the activations of every recomputation setting that counts them (selective
    45.6 GB, full 2.7 GB; claims M7, M9). ``by_recompute`` maps a setting to the memory report at that N; every
    value is read from those reports. None where no setting counts activations."""
    counted = [rc for rc in by_recompute if rc != "off"]
    if not counted:
        return None
    zero3 = [r for r in next(iter(by_recompute.values()))["stages"] if r["name"] == "zero3"][0]
    states = max(zero3["model_state_bytes_per_rank"])
    left = int(card_bytes) - states
    out = {"card_bytes": int(card_bytes), "zero3_states_bytes": states, "zero3_states_gb": format_gb(states),
           "bytes": left, "gb": format_gb(left), "activations": []}
    for rc in counted:
        row = [r for r in by_recompute[rc]["stages"] if r["name"] == "zero3"][0]
        act = max(row["activation_peak_bytes_per_rank"])
        out["activations"].append({"recompute": rc, "bytes": act, "gb": format_gb(act), "fits": act <= left})
    return out


def _preset_data(preset: Preset, ranks, card_bytes: int) -> dict:
    reports = {rc: {n: memory_report(n, activations=shape, card_bytes=card_bytes, **preset.size()) for n in ranks}
               for rc, shape in preset.activations.items()}
    tallest = max(max(row["peak_bytes"], sum(t["value"] for t in formula_terms(row["name"], preset.psi, n,
                                                                                 preset.activations[rc])))
                  for rc, by_n in reports.items() for n, rep in by_n.items() for row in rep["stages"])
    scale, step = _nice_ceiling(max(Fraction(tallest), Fraction(card_bytes)))
    plot = _CHART["bottom"] - _CHART["top"]
    ticks = [{"y": round(_CHART["bottom"] - float(Fraction(k * step * plot, scale)), 3),
              "gb": format_gb(k * step, 0)} for k in range(scale // step + 1)]
    chart = dict(_CHART, ticks=ticks, scale_bytes=scale,
                 card_y=round(_CHART["bottom"] - float(Fraction(card_bytes * plot, scale)), 3))
    points = {f"{n}|{rc}": _point(preset, rep, n, preset.activations[rc], scale)
              for rc, by_n in reports.items() for n, rep in by_n.items()}
    fits = {rc: {"model_states": first_fits(by_n, "model_states_fit"), "peak": first_fits(by_n, "peak_fits")}
            for rc, by_n in reports.items()}
    return {"id": preset.id, "label": preset.label, "psi": preset.psi, "psi_text": f"{preset.psi:,}",
            "unit_sizes": list(preset.unit_sizes) if preset.unit_sizes else [preset.psi],
            "default_n": preset.default_n, "default_recompute": preset.default_recompute,
            "recompute": list(preset.activations), "note": preset.note, "chart": chart, "points": points,
            "first_fits": fits, "headroom": {str(n): headroom({rc: reports[rc][n] for rc in reports}, card_bytes)
                                             for n in ranks},
            "activations": {rc: (s.as_dict() if s else None) for rc, s in preset.activations.items()}}


def memory_panel(ranks=RANKS_GRID, presets=PRESETS, card_bytes: int = CARD_80GB) -> dict:
    """The ``memory`` data of the lesson page: every value from size-only runs over ``ranks``."""
    terms = formula_terms("dp", 1, 1, None)
    return {"card_bytes": card_bytes, "card_gb": format_gb(card_bytes, 0), "ranks": list(ranks),
            "term_labels": {t["id"]: t["label"] for t in terms},
            "term_note": {"en": "measured: the busiest rank at the moment its total peaked (MemoryLedger); "
                                "difference: padding to N·⌈S/N⌉ and buffers in flight",
                          "zh": "实测：最忙那张卡在总量达到峰值的时刻（MemoryLedger）；差：补齐到 N·⌈S/N⌉ 的填充与在途缓冲"},
            "stages": list(STAGES),
            "categories": [{"id": c, "color": colour, "label": label} for c, colour, label in BAR_CATEGORIES],
            "presets": [_preset_data(p, ranks, card_bytes) for p in presets]}
