"""The rest of the chapter's map (E1–E7, arithmetic, exact only) and lesson statements outside claims.md
(X1–X7), some checkable under a stated assumption, the others not checkable from what the lesson gives.
"""
from __future__ import annotations

from fractions import Fraction

from .claim import Claim, Part
from .exact import HIDDEN, LAYERS, SEQ, selective_activation_bytes
from .rounding import GB, About, Decimals, Exactly, Percent, Stated

__all__ = ["MAP_CLAIMS", "EXTRA_CLAIMS", "causal_block_loads", "zigzag_rank_loads"]

LESSON = "lesson C10-2 (zero-lesson.zh.txt)"
_ARITH = "arithmetic on printed numbers: there is no code of the project to run"


def _exact_only(label: str, printed: str, rule) -> Part:
    return Part(label, printed, rule, "exact-only", _ARITH)


# -- E4: causal attention load ------------------------------------------------------------------------------
def causal_block_loads(n_blocks: int) -> list[int]:
    """Work of each query row block of causal attention: row block i attends to key blocks 0..i, i+1 blocks
    (the diagonal block counted whole, as the lesson's 10 : 26 : 42 : 58 does)."""
    return [i + 1 for i in range(n_blocks)]


def contiguous_rank_loads(n_blocks: int, n_ranks: int) -> tuple[int, ...]:
    """Rank r holds row blocks [r·B/P, (r+1)·B/P)."""
    per = n_blocks // n_ranks
    loads = causal_block_loads(n_blocks)
    return tuple(sum(loads[r * per:(r + 1) * per]) for r in range(n_ranks))


def zigzag_rank_loads(n_blocks: int, n_ranks: int) -> tuple[int, ...]:
    """Zig-zag: the sequence is cut into 2P chunks; rank r holds chunk r and chunk 2P−1−r (head-tail pairing,
    as in Megatron-LM's context parallelism / zig-zag ring attention)."""
    per = n_blocks // (2 * n_ranks)
    loads = causal_block_loads(n_blocks)

    def chunk(c: int) -> int:
        return sum(loads[c * per:(c + 1) * per])
    return tuple(chunk(r) + chunk(2 * n_ranks - 1 - r) for r in range(n_ranks))


# -- E2: pipeline bubbles -----------------------------------------------------------------------------------
_P, _M, _V = 8, 32, 4


def _e2():
    return (Fraction(_P - 1, _M),                # GPipe / 1F1B bubble over ideal time (Narayanan et al. 2021 §2.2)
            Fraction(_P - 1, _M + _P - 1),       # its share of total time
            Fraction(_P - 1, _V * _M))           # interleaved with v model chunks per device


# -- E7: zero bubble ----------------------------------------------------------------------------------------
def _e7():
    f = b = w = Fraction(1)  # F = B = W (the lesson's condition)
    p = 8                    # any p > 1 gives the same ratio
    one_f_one_b = (p - 1) * (f + b + w)  # Qi et al. 2023, §2: 1F1B bubble (p−1)(T_F + T_B + T_W)
    zb_h1 = (p - 1) * (f + b - w)        # ZB-H1 bubble (p−1)(T_F + T_B − T_W)
    return (zb_h1 / one_f_one_b,)


_HOURS_PER_YEAR = 24 * 365  # a year of 365 days (365.25 gives 303.9…, also 304)
_TP = 8

MAP_CLAIMS = (
    Claim("E1", "DeepSeek-V3's 2,664K H800 GPU-hours, run on one card, take about 304 years",
          f"{LESSON}, 演进地图 1; DeepSeek-V3 report §1",
          (_exact_only("years", "≈ 304 years", Decimals(0, 1, "years")),),
          lambda: (Fraction(2_664_000, _HOURS_PER_YEAR),), assumptions=("a year is 365 days of 24 h",)),
    Claim("E2", "Pipeline p = 8, m = 32: bubble (p−1)/m, its share of total time (p−1)/(m+p−1), interleaved "
                "v = 4: (p−1)/(v·m)",
          f"{LESSON}, 演进地图 6; Narayanan et al. 2021 §2.2",
          (_exact_only("(p−1)/m", "21.9%", Percent(1)), _exact_only("of total", "17.9%", Percent(1)),
           _exact_only("interleaved", "5.5%", Percent(1))),
          _e2),
    Claim("E3", "Tensor parallel t = 8 with sequence parallelism divides M9's selective-recomputation "
                "activations by t: 45.6 → 5.7 GB",
          f"{LESSON}, 演进地图 5; Korthikanti et al. 2022 §4.2.2 (34·s·b·h/t per layer)",
          (_exact_only("activations / t", "5.7 GB", Decimals(1, GB, "GB")),),
          lambda: (selective_activation_bytes() / _TP,),
          assumptions=("M9's activation formula and h = 5,120, L = 64 (not printed by the lesson)",)),
    Claim("E4", "Causal attention cut contiguously over 4 ranks (16 row blocks) has loads 10 : 26 : 42 : 58; "
                "zig-zag head-tail pairing gives every rank the same share",
          f"{LESSON}, 演进地图 8 (岔路 · 长序列)",
          (_exact_only("contiguous", "10 : 26 : 42 : 58", Stated((10, 26, 42, 58))),
           _exact_only("zig-zag", "34 each", Stated((34, 34, 34, 34)))),
          lambda: (contiguous_rank_loads(16, 4), zigzag_rank_loads(16, 4)),
          assumptions=("a key block on the diagonal counts as a whole block of work (half of one would give "
                       "8 : 24 : 40 : 56)",)),
    Claim("E5", "Llama 3 405B: TP × CP × PP × DP = 8 × 1 × 16 × 128 GPUs",
          f"{LESSON}, 演进地图 10; Llama 3 report Table 4",
          (_exact_only("GPUs", "16,384", Exactly()),), lambda: (Fraction(8 * 1 * 16 * 128),)),
    Claim("E6", "InfiniBand 50 GB/s is about a third of NVLink 160 GB/s",
          f"{LESSON}, 演进地图 9; DeepSeek-V3 report §3.2",
          (_exact_only("IB / NVLink", "≈ 1/3", About(Fraction(1, 10))),), lambda: (Fraction(50, 160),),
          note="≈ means within 10 % relative; 5/16 is 6.25 % below 1/3"),
    Claim("E7", "ZB-H1's pipeline bubble is a third of 1F1B's when F = B = W",
          f"{LESSON}, 演进地图 7; Qi et al. 2023 (Zero Bubble) §2.1",
          (_exact_only("ZB-H1 / 1F1B", "1/3", Exactly()),), _e7),
)


# -- X: lesson statements outside claims.md ------------------------------------------------------------------
def _x3_exact():
    # per layer 2 all-reduces forward + 2 backward of the s×h 16-bit activation (Shoeybi et al. 2019 §3);
    # with sequence parallelism each becomes reduce-scatter + all-gather, the same ring volume
    per_all_reduce = Fraction(2 * (_TP - 1), _TP) * SEQ * HIDDEN * 2
    return (4 * LAYERS * per_all_reduce,)


def _x3_run(ctx):
    ledger = ctx.collective("all-reduce", _TP, SEQ * HIDDEN, "bf16")
    return (Fraction(4 * LAYERS * ledger.max_sent_bytes_per_rank()),)


EXTRA_CLAIMS = (
    Claim("X1", "A card's backward over 4,096 tokens takes about 1.05 s (400 TFLOPS effective), so DP's 1.94 s "
                "of gradient traffic cannot hide behind it",
          f"{LESSON}, 演进地图 3 (推演)",
          not_checkable="needs the anchor's FLOPs per token (non-embedding parameters, attention shape), which "
                        "the lesson does not give; the plain 4·Ψ·4,096 / 400 TFLOPS is 1.14 s, not 1.05 s "
                        "(1.05 s implies backward FLOPs of ≈ 25.6B parameters per token)",
          note="1.05 s"),
    Claim("X2", "ZeRO trained models over 100B parameters on 400 GPUs at 15 PFLOPs",
          "Rajbhandari et al. 2019, abstract (self-reported)",
          not_checkable="a measured throughput reported by the paper; nothing in the lesson derives it",
          note="15 PFLOPs"),
    Claim("X3", "Tensor parallel t = 8: each card sends 18.8 GB per 4,096 tokens (2 syncs forward, 2 backward "
                "per layer)",
          f"{LESSON}, 演进地图 5; Shoeybi et al. 2019 §3",
          (Part("per card", "18.8 GB", Decimals(1, GB, "GB")),), _x3_exact, _x3_run,
          assumptions=("h = 5,120 and L = 64 (M9's assumption, not printed); each sync is a ring all-reduce of the "
                       "s·h 16-bit activation",),
          note="run: CommLedger of one size-only ring all-reduce of s·h bf16 elements on 8 ranks, × 4 per layer "
               "× L layers"),
    Claim("X4", "Context parallelism at s = 131,072 on 8 cards passes 0.5 GB of K, V per full-attention layer",
          f"{LESSON}, 演进地图 8",
          not_checkable="depends on the head dimension, which the lesson does not print (it gives 4 KV heads): "
                        "d = 256 gives 0.47 GB ((N−1)/N of s) or 0.54 GB (all of s), d = 128 gives 0.23/0.27 GB",
          note="0.5 GB"),
    Claim("X5", "Tensor parallel across two DGX-2 nodes reaches about 5 TFLOPS per card, under 5% of peak",
          "Rajbhandari et al. 2019 §1 (measured)",
          not_checkable="a measurement reported by the paper; the lesson does not print the V100 peak it is a "
                        "fraction of", note="5 TFLOPS, < 5%"),
    Claim("X6", "Llama 3 405B trains at 41% BF16 MFU on 16,384 H100s",
          "Llama 3 report Table 4 (measured)",
          not_checkable="a measurement reported by Meta; nothing in the lesson derives it", note="41%"),
    Claim("X7", "DeepSeek-V3's 654B routed-expert parameters over 64 cards: 4 experts per card per layer",
          f"{LESSON}, 演进地图 9; DeepSeek-V3 report §3.2",
          not_checkable="needs DeepSeek-V3's config (256 routed experts per layer, expert sizes), which the "
                        "lesson does not print", note="654B; 4 per card"),
    Claim("X8", "Cross-node expert parallelism in DeepSeek-V3 has computation and communication of about 1 : 1",
          f"{LESSON}, 演进地图 9; DeepSeek-V3 report §3.2.1",
          not_checkable="a ratio the report states for its own kernels and cluster; the lesson gives neither "
                        "the per-token FLOPs nor the bytes per token behind it", note="≈ 1 : 1"),
)
