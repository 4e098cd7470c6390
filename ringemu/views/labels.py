"""Interface words of the views in English and Chinese (the lesson's language). Words only: no numbers."""
from __future__ import annotations

__all__ = ["LABELS", "LANGS", "check_lang"]

LANGS = ("en", "zh")

LABELS = {
    "en": {
        "title": "ZeRO, measured: memory per card and the ring, from real ringemu runs",
        "subtitle": "Every number on this page comes from a run of ringemu (size-only stage runs, traced collectives "
                    "and their ledgers); the page only looks them up.",
        "mem_title": "1. Memory per card: DP → ZeRO-1 → ZeRO-2 → ZeRO-3",
        "formula_title": "2. The formula, term by term",
        "ring_title": "3. Ring reduce-scatter and all-gather, step by step",
        "strip_title": "ZeRO's communication per step, from the ledger",
        "next_stage": "Next stage", "stage_now": "showing up to", "ranks_n": "N (ranks)", "recompute": "activations",
        "rc_off": "not counted (model states only)", "rc_selective": "selective recomputation",
        "rc_full": "full recomputation", "rc_none": "no recomputation",
        "card": "card", "measured_formula": "measured | formula", "stage": "stage", "model_states": "model states",
        "states_fit": "states fit", "activations": "activations", "buffers": "buffers in flight",
        "peak": "peak per rank", "peak_fits": "peak fits", "yes": "yes", "no": "no",
        "first_fits_title": "Where each stage first fits on the card (N = 1 … 1,024)",
        "states_first_fit": "model states fit from", "peak_first_fit": "peak fits from",
        "states_never": "model states never fit on this grid", "peak_never": "the peak never fits on this grid",
        "choose_term": "Choose a term of the formula to highlight its part of the bars.",
        "symbol": "symbol", "formula_value": "formula", "measured": "measured (ledger)",
        "difference": "difference", "step": "step", "chunk": "chunk", "rank": "rank", "sent": "sent",
        "received": "received", "link": "link", "bytes": "bytes", "prev": "◀ previous", "next": "next ▶",
        "algorithm": "algorithm", "phase_initial": "before the first step", "phase_reduce-scatter": "reduce-scatter",
        "phase_all-gather": "all-gather", "ledger_total": "CommLedger total:",
        "numpy_sum": "numpy's sum of the inputs:", "final_equal": "every rank's final row equals it",
        "final_differs": "some final row differs", "final_wait": "step to the end to compare the final row with numpy's sum",
        "predict": "Predict first: how many bytes will rank 0 send in the whole collective?", "check": "check",
        "predict_right": "Right:", "predict_wrong": "Not quite; the ledger says",
        "update_shard": "update own shard", "ratio_to_dp": "ratio to DP", "lang": "中文",
        "keys": "Keys: ← / → step the ring; Tab reaches every control.",
        "legend_prov": "A cell shows its values and whose contributions it holds (r0+r1…); darker = more ranks; "
                       "a thick border marks a chunk received in this step.",
        "per_rank_counters": "bytes per rank so far", "per_link_counters": "bytes per link so far",
    },
    "zh": {
        "title": "量出来的 ZeRO:每卡显存与环,全部来自 ringemu 的真实运行",
        "subtitle": "本页每个数字都来自 ringemu 的一次运行(只计尺寸的分级运行、逐步追踪的集合通信及其账本);页面只查表,不计算。",
        "mem_title": "1. 每卡显存:数据并行 → ZeRO-1 → ZeRO-2 → ZeRO-3",
        "formula_title": "2. 公式,逐项点开",
        "ring_title": "3. 环形 reduce-scatter 与 all-gather,一步一步",
        "strip_title": "ZeRO 每步的通信,读自账本",
        "next_stage": "下一级", "stage_now": "显示到", "ranks_n": "卡数 N", "recompute": "激活",
        "rc_off": "不计(只看模型状态)", "rc_selective": "选择性重计算", "rc_full": "全量重计算", "rc_none": "不重计算",
        "card": "卡", "measured_formula": "实测 | 公式", "stage": "级别", "model_states": "模型状态",
        "states_fit": "状态放得下", "activations": "激活", "buffers": "在途缓冲", "peak": "每卡峰值",
        "peak_fits": "峰值放得下", "yes": "是", "no": "否",
        "first_fits_title": "每一级从多少张卡起放得下(N = 1 … 1,024)",
        "states_first_fit": "模型状态放得下,从", "peak_first_fit": "峰值放得下,从",
        "states_never": "模型状态在这些 N 下都放不下", "peak_never": "峰值在这些 N 下都放不下",
        "choose_term": "点公式里的一项,高亮它在柱子里的那一段。",
        "symbol": "符号", "formula_value": "公式值", "measured": "实测(账本)", "difference": "差",
        "step": "第", "chunk": "块", "rank": "卡", "sent": "发送", "received": "接收", "link": "链路",
        "bytes": "字节", "prev": "◀ 上一步", "next": "下一步 ▶", "algorithm": "算法",
        "phase_initial": "第一步之前", "phase_reduce-scatter": "reduce-scatter(归约分散)",
        "phase_all-gather": "all-gather(全收集)", "ledger_total": "CommLedger 合计:",
        "numpy_sum": "numpy 对输入求和:", "final_equal": "每张卡最后一行都等于它", "final_differs": "有一行不相等",
        "final_wait": "走到最后一步,再和 numpy 的和对照",
        "predict": "先猜:整个集合通信里 0 号卡要发多少字节?", "check": "对答案",
        "predict_right": "对了:", "predict_wrong": "不对,账本上是",
        "update_shard": "更新自己的分片", "ratio_to_dp": "与数据并行之比", "lang": "English",
        "keys": "键盘:← / → 逐步走环;Tab 可到达每个控件。",
        "legend_prov": "每格显示数值和它已含哪些卡的贡献(r0+r1…);颜色越深,含的卡越多;粗框表示本步刚收到的块。",
        "per_rank_counters": "每卡累计字节", "per_link_counters": "每条链路累计字节",
    },
}


def check_lang(lang: object) -> str:
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {', '.join(LANGS)}; got {lang!r}")
    return lang  # type: ignore[return-value]
