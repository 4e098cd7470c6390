"""Memory claims M1–M11: model states per rank (ZeRO §5.1), the 80 GB line, activations, FSDP peak, parity.

Run checks use the stage code over size-only buffers (``zero_stages.run_size_only``) at the lesson's full
scale, and small real runs (``zero_stages.train``) for parity (M11) and activations (M8). Exact checks use the
closed forms of :mod:`proofs.exact`.
"""
from __future__ import annotations

from fractions import Fraction

from ringemu.memory import MODEL_STATE_CATEGORIES

from .claim import Claim, NotAvailable, Part
from .exact import BATCH, CARD_BYTES, GRAD16, HIDDEN, K_ADAM, LAYERS, PSI_ANCHOR, PSI_PAPER, SEQ, STAGE_NAMES, WEIGHT16, floor_bytes_per_param, full_recompute_activation_bytes, model_state_bytes, selective_activation_bytes
from .rounding import GB, GIB, AllEqual, Between, Decimals, Exactly, Stated

__all__ = ["MEMORY_CLAIMS", "LESSON", "ZERO_PAPER", "M5_NS", "M8_NS", "M10_LARGEST_UNIT",
           "model_state", "optimizer_state_bytes", "anchor_zero3_with_activations",
           "small_model_activation_bytes", "M8_UNITS", "M8_WIDTH", "M8_MICRO_BATCH"]

LESSON = "lesson C10-2 (zero-lesson.zh.txt)"
ZERO_PAPER = "Rajbhandari et al. 2019, ZeRO"
M5_NS = (8, 64, 1024)          # the Ns the lesson asks to try (试三件事 ②)
M8_NS = (1, 2, 4, 8)           # data-parallel degrees of the small real runs
M10_LARGEST_UNIT = 372_000_000  # "约 3.72 亿个参数", as printed (the anchor's config is not in the lesson)
_OPTIMIZER_CATEGORIES = ("master32", "adam_m", "adam_v")

GB1 = Decimals(1, GB, "GB")


def model_state(ctx, stage: str, n: int, psi: int = PSI_ANCHOR) -> int:
    """Measured model-state bytes per rank (busiest rank) of a size-only stage run."""
    return ctx.field(ctx.size_only(stage, n, psi=psi), "model_state_bytes_per_rank")


def _memory(report):
    memory = getattr(report, "memory", None)
    if memory is None or not hasattr(memory, "peak"):
        raise NotAvailable("StageReport.memory (a MemoryLedger) is not available")
    return memory


def _category_bytes(report, category: str) -> int:
    """Peak bytes of one ledger category on the busiest rank."""
    memory = _memory(report)
    return max(memory.peak(r, category) for r in range(memory.n_ranks))


def optimizer_state_bytes(report) -> int:
    """fp32 master + Adam m + Adam v bytes on the busiest rank, as the ledger recorded them."""
    memory = _memory(report)
    return max(sum(memory.peak(r, c) for c in _OPTIMIZER_CATEGORIES) for r in range(memory.n_ranks))


# -- M1 ----------------------------------------------------------------------------------------------------
def _m1_exact():
    return Fraction(WEIGHT16 + GRAD16 + K_ADAM), Fraction(K_ADAM)


def _m1_run(ctx):
    report = ctx.size_only("dp", 8, psi=PSI_ANCHOR)
    return (Fraction(model_state(ctx, "dp", 8), PSI_ANCHOR), Fraction(optimizer_state_bytes(report), PSI_ANCHOR))


# -- M2, M3 ------------------------------------------------------------------------------------------------
def _stage_table(psi: int, n: int):
    return (lambda: tuple(model_state_bytes(s, psi, n) for s in STAGE_NAMES),
            lambda ctx: tuple(Fraction(model_state(ctx, s, n, psi)) for s in STAGE_NAMES))


_M2_EXACT, _M2_RUN = _stage_table(PSI_ANCHOR, 8)
_M3_EXACT, _M3_RUN = _stage_table(PSI_PAPER, 64)
_STAGE_LABELS = ("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")


# -- M5 ----------------------------------------------------------------------------------------------------
def _m5_exact():
    return tuple(floor_bytes_per_param(s) for s in ("zero1", "zero2", "zero3"))


def _floor_run(ctx, stage: str) -> Fraction:
    """Bytes per parameter in the model-state categories that do not shrink as N grows; the others must
    strictly shrink (else the run contradicts the claim's shape and the check raises). ZeRO-3, the stage that
    must keep falling, runs at N = 8, 64 and 1024; ZeRO-1 and ZeRO-2 at N = 8 and 64, which already tell a
    constant category from a falling one (a 1024-rank emulated world costs seconds)."""
    ns = M5_NS if stage == "zero3" else M5_NS[:2]
    reports = [ctx.size_only(stage, n, psi=PSI_ANCHOR) for n in ns]
    unsharded = 0
    for category in MODEL_STATE_CATEGORIES:
        sizes = [_category_bytes(r, category) for r in reports]
        if len(set(sizes)) == 1:
            unsharded += sizes[0]
        elif not all(a > b for a, b in zip(sizes, sizes[1:])):
            raise ValueError(f"{stage} {category} bytes {sizes} at N = {ns} neither constant nor falling")
    totals = [model_state(ctx, stage, n) for n in ns]
    if not all(a > b for a, b in zip(totals, totals[1:])):
        raise ValueError(f"{stage} model states {totals} at N = {ns} do not fall with N")
    return Fraction(unsharded, PSI_ANCHOR)


def _m5_run(ctx):
    return tuple(_floor_run(ctx, s) for s in ("zero1", "zero2", "zero3"))


# -- M6, M7 ------------------------------------------------------------------------------------------------
def _m6_exact():
    return (frozenset(s for s in STAGE_NAMES if model_state_bytes(s, PSI_ANCHOR, 8) <= CARD_BYTES),)


def _m6_run(ctx):
    return (frozenset(s for s in STAGE_NAMES if model_state(ctx, s, 8) <= CARD_BYTES),)


# -- M8 ----------------------------------------------------------------------------------------------------
# the small real model, configured here explicitly: units of S_u parameters, layers of width w, B rows per rank
M8_UNITS, M8_WIDTH, M8_MICRO_BATCH = (272, 272, 272, 100), 16, 4


def small_model_activation_bytes(n_ranks: int, units=M8_UNITS, width: int = M8_WIDTH,
                                 micro_batch: int = M8_MICRO_BATCH) -> Fraction:
    """Closed form of the small model's activation peak per rank: after the forward every unit's input and the
    last output are saved, (U + 1) tensors of B·w fp32 values (zero_stages.model, "Activations"). ``n_ranks``
    does not appear: each rank keeps the activations of its own micro-batch."""
    del n_ranks  # the claim: nothing here depends on N
    return Fraction((len(units) + 1) * micro_batch * width * 4)


def _m8_exact():
    return (tuple(small_model_activation_bytes(n) for n in M8_NS),)


def _m8_run(ctx):
    reports = [ctx.train("zero3", n, 1, "bf16", 0, unit_sizes=M8_UNITS, width=M8_WIDTH,
                         micro_batch=M8_MICRO_BATCH) for n in M8_NS]
    return (tuple(_category_bytes(r, "activations") for r in reports),)


# -- M9 ----------------------------------------------------------------------------------------------------
_FREE_AFTER_ZERO3 = CARD_BYTES - model_state_bytes("zero3", PSI_ANCHOR, 8)


def _m9_exact():
    sel, full = selective_activation_bytes(), full_recompute_activation_bytes()
    return sel, sel, full, sel <= _FREE_AFTER_ZERO3, full <= _FREE_AFTER_ZERO3


def anchor_zero3_with_activations(ctx, recompute: str):
    """Size-only ZeRO-3 at N = 8 for the anchor, recording the activations of s = 4,096, b = 1, h = 5,120,
    L = 64 layer by layer under ``recompute`` (zero_stages.ActivationShape, Korthikanti et al. 2022 §4)."""
    return ctx.size_only("zero3", 8, psi=PSI_ANCHOR, activations=(SEQ, BATCH, HIDDEN, LAYERS, recompute))


def _activations_and_fit(ctx, recompute: str) -> tuple[Fraction, bool]:
    report = anchor_zero3_with_activations(ctx, recompute)
    activations = _category_bytes(report, "activations")  # read from the ledger
    used = ctx.field(report, "model_state_bytes_per_rank") + activations
    return Fraction(activations), used <= CARD_BYTES


def _m9_run(ctx):
    selective, selective_fits = _activations_and_fit(ctx, "selective")
    full, full_fits = _activations_and_fit(ctx, "full")
    return selective, selective, full, selective_fits, full_fits


# -- M10 ---------------------------------------------------------------------------------------------------
_M10_UNITS = (M10_LARGEST_UNIT,) * 4  # four units of the largest layer's size: prefetch keeps two in flight


def _m10_exact():
    # one unit in use plus the next one prefetched (FSDP's forward prefetch): the largest sum of two
    # neighbouring units, in units of the largest one
    in_flight = max(a + b for a, b in zip(_M10_UNITS, _M10_UNITS[1:]))
    return Fraction(WEIGHT16 * M10_LARGEST_UNIT), Fraction(in_flight, max(_M10_UNITS))


def _m10_run(ctx):
    alone = ctx.size_only("zero3", 8, unit_sizes=(M10_LARGEST_UNIT,))
    chain = ctx.size_only("zero3", 8, unit_sizes=_M10_UNITS)
    return (Fraction(_category_bytes(alone, "gathered")),
            Fraction(_category_bytes(chain, "gathered"), WEIGHT16 * M10_LARGEST_UNIT))


# -- M11 ---------------------------------------------------------------------------------------------------
_M11_CASES = (("zero1", "bf16"), ("zero2", "bf16"), ("zero3", "bf16"), ("zero3", "fp16"))
_M11_RANKS, _M11_STEPS = 4, 2


def _m11_run(ctx):
    out = []
    for stage, dtype in _M11_CASES:
        dp = ctx.train("dp", _M11_RANKS, _M11_STEPS, dtype, 0)
        out.append(ctx.parity_with_dp(ctx.train(stage, _M11_RANKS, _M11_STEPS, dtype, 0), dp))
    return tuple(out)


_M9_ASSUMPTION = ("activation bytes 34·s·b·h·L (selective recomputation) and 2·s·b·h·L (full recomputation), "
                  "16-bit, Korthikanti et al. 2022 §4, with h = 5,120 and L = 64: the lesson prints neither "
                  "the formula nor h and L; these values reproduce its 45.6 GB and 2.7 GB")

MEMORY_CLAIMS = (
    Claim("M1", "Mixed-precision Adam costs 16 B per parameter: 2 (16-bit weight) + 2 (16-bit gradient) + "
                "K = 12 (fp32 master, Adam m, v)",
          f"{LESSON}, 从已有出发; {ZERO_PAPER} §3.1",
          (Part("per param", "16 B", Exactly(" B")), Part("K", "12 B", Exactly(" B"))),
          _m1_exact, _m1_run),
    Claim("M2", "Anchor Ψ = 27,781,427,952 on N = 8: per-rank model states of DP, ZeRO-1, ZeRO-2, ZeRO-3",
          f"{LESSON}, summary and 演进地图 4; {ZERO_PAPER} §5.1",
          tuple(Part(lbl, p, GB1) for lbl, p in zip(_STAGE_LABELS, ("444.5 GB", "152.8 GB", "104.2 GB",
                                                                     "55.6 GB"))),
          _M2_EXACT, _M2_RUN),
    Claim("M3", "ZeRO paper Figure 1: Ψ = 7.5B on N = 64, per-rank model states of DP, ZeRO-1, -2, -3",
          f"{ZERO_PAPER}, Figure 1; {LESSON}",
          (Part("DP", "120 GB", Decimals(0, GB, "GB")),) +
          tuple(Part(lbl, p, GB1) for lbl, p in zip(_STAGE_LABELS[1:], ("31.4 GB", "16.6 GB", "1.9 GB"))),
          _M3_EXACT, _M3_RUN, note="120 is printed without a decimal (as in the paper's figure): whole GB"),
    Claim("M4", "DP's per-rank model states for the anchor are this many 80 GB cards",
          f"{LESSON}, 演进地图 1",
          (Part("DP / 80 GB", "5.6×", Decimals(1, 1, "×")),),
          lambda: (model_state_bytes("dp", PSI_ANCHOR, 8) / CARD_BYTES,),
          lambda ctx: (Fraction(model_state(ctx, "dp", 8), CARD_BYTES),)),
    Claim("M5", "As N grows ZeRO-1 stops falling at 4Ψ bytes and ZeRO-2 at 2Ψ; only ZeRO-3 keeps falling as "
                "1/N (N = 8, 64, 1024)",
          f"{LESSON}, 试三件事 ②; {ZERO_PAPER} §5.1",
          (Part("ZeRO-1", "4Ψ", Exactly(" B/param")), Part("ZeRO-2", "2Ψ", Exactly(" B/param")),
           Part("ZeRO-3", "0 (falls as 1/N)", Exactly(" B/param"))),
          _m5_exact, _m5_run,
          note="run: bytes per parameter in the ledger categories that do not shrink with N (anchor Ψ; ZeRO-3 "
               "at N = 8, 64, 1024, ZeRO-1/2 at N = 8, 64). The lesson lists 'ZeRO-1, ZeRO-2 … held by the "
               "unsharded 2Ψ, 4Ψ': read respectively, that pairs ZeRO-1 with 2Ψ, which is wrong (ZeRO-1 keeps "
               "4Ψ)"),
    Claim("M6", "At N = 8 only ZeRO-3's per-rank model states fit under the 80 GB line for the anchor",
          f"{LESSON}, 试三件事 ①",
          (Part("fit ≤ 80 GB", "ZeRO-3 only", Stated(frozenset({"zero3"}))),), _m6_exact, _m6_run),
    Claim("M7", "What ZeRO-3 leaves free on an 80 GB card at N = 8 for the anchor",
          f"{LESSON}, 试三件事 ③",
          (Part("80 GB − ZeRO-3", "24.4 GB", GB1),),
          lambda: (_FREE_AFTER_ZERO3,),
          lambda ctx: (Fraction(CARD_BYTES - ctx.field(anchor_zero3_with_activations(ctx, "selective"),
                                                       "model_state_bytes_per_rank")),),
          note="run: size-only ZeRO-3 at N = 8 with the anchor's activations recorded (M9's run): the model "
               "states it holds between steps, whatever the activations"),
    Claim("M8", "Activations are not sharded by ZeRO: per-rank activation memory does not depend on N",
          f"{LESSON}, 常见误解之三",
          (Part(f"N = {', '.join(map(str, M8_NS))}", "independent of N", AllEqual(M8_NS)),),
          _m8_exact, _m8_run,
          note="run: peak 'activations' bytes of a small real ZeRO-3 run, same per-rank micro-batch at every N"),
    Claim("M9", "Anchor activations at s = 4,096, b = 1: selective recomputation 45.6 GB (42.5 GiB) does not fit "
                "in ZeRO-3's free 24.4 GB; full recomputation 2.7 GB does",
          f"{LESSON}, 常见误解之三; Korthikanti et al. 2022 §4",
          (Part("selective", "45.6 GB", GB1), Part("selective", "42.5 GiB", Decimals(1, GIB, "GiB")),
           Part("full", "2.7 GB", GB1),
           Part("selective fits", "does not fit", Stated(False)),
           Part("full fits", "fits", Stated(True))),
          _m9_exact, _m9_run, assumptions=(_M9_ASSUMPTION,),
          note="run: size-only ZeRO-3 at N = 8 recording the activations layer by layer "
               "(zero_stages.ActivationShape); the activation bytes are the ledger's peak 'activations', fits = "
               "model states + activations ≤ 80 GB"),
    Claim("M10", "FSDP peak ≈ own shard + full parameters of the one or two units in use; the anchor's largest "
                 "layer (≈ 372M parameters) is 0.7 GB in 16 bits",
          f"{LESSON}, FSDP paragraph",
          (Part("largest unit", "0.7 GB", GB1),
           Part("in flight", "one or two units", Between(Fraction(1), Fraction(2)))),
          _m10_exact, _m10_run,
          assumptions=("the largest layer has 372,000,000 parameters, as printed; the lesson does not give the "
                       "anchor's config, so that count itself is not checked",),
          note="run: size-only ZeRO-3 at N = 8, peak 'gathered' bytes for that unit alone, and for four such "
               "units (in units of one unit's 16-bit bytes); exact: the unit in use + the prefetched one"),
    Claim("M11", "ZeRO changes no number's format and no result: every stage's update equals DP's bit for bit",
          f"{LESSON}, 常见误解之一; {ZERO_PAPER} §5",
          tuple(Part(f"{s} {d}", "bitwise equal", Stated(True), "run-only",
                     "bit equality is a property of executed floating-point code; no closed form predicts it")
                for s, d in _M11_CASES),
          None, _m11_run,
          note=f"run: {_M11_RANKS} ranks, {_M11_STEPS} steps, the small real model; the ring fixes the summation "
               "order"),
)
