"""Claims beyond the lesson's four stages, each a paper's headline checked by run and by exact arithmetic.

* XB1, HSDP (Zhao et al. 2023, arXiv 2304.11277, §3.2.2): across nodes only the all-reduce of the gradient shard,
  2(R−1)/R·Ψ/K elements per rank; model states 16Ψ/K. The departure where K·R does not divide Ψ: padding, in bytes.
* XB2, ZeRO++ (Wang et al. 2023, arXiv 2306.10209, §4): cross-node traffic 3Ψ → 0.75Ψ in 16-bit units, "4× less";
  what the block scales add on top, and how far a finite mesh is from the limit.
* XB3, ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840, §4.2): 2Ψ of gradients down and 2Ψ of parameters up over
  PCIe per step; GPU memory 2Ψ + 2Ψ/N with gradient sharding.

Runs are the stages' own size-only runs on the lesson's anchor (Ψ = 27,781,427,952, one unit) with bytes per link
class read from their ledgers (:func:`ringemu.link_bytes.sent_per_class`); the exact values are closed forms
written here with ``fractions.Fraction`` and integer ceilings, independent of the stage code.
"""
from __future__ import annotations

from fractions import Fraction

from .claim import Claim, Part
from .exact import PSI_ANCHOR
from .rounding import Decimals, Exactly, FormulaOfN

__all__ = ["BEYOND_CLAIMS"]

W = 2  # B per 16-bit element
BLOCK, SCALE = 256, 4  # values per scale and bytes per fp32 scale (zero_stages.quantize's INT8 and INT4)
_XB1_K = 4
_XB1_RS = (2, 4)  # R nodes of K = 4: K·R divides Ψ, so no padding (Ψ = 2^4 · 1,736,339,247)
_XB1_PAD = (64, 8)  # N, K where it does not: ceil(ceil(Ψ/8)/8) pads
_XB2 = (1024, 8)  # N, K of the large mesh
_XB3_NS = (1, 8, 16)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _inter(ctx, stage: str, n: int, k: int) -> list[int]:
    rep = ctx.size_only(stage, n, psi=PSI_ANCHOR, ranks_per_node=k)
    return [d["inter_node"] for d in rep.link_bytes_per_rank]


# -- XB1 -----------------------------------------------------------------------------------------------------
def _hsdp_padded_bytes(n: int, k: int) -> int:
    r = n // k
    return W * 2 * (r - 1) * _ceil(_ceil(PSI_ANCHOR, k), r)


def _hsdp_headline_bytes(n: int, k: int) -> Fraction:
    r = n // k
    return W * Fraction(2 * (r - 1), r) * Fraction(PSI_ANCHOR, k)


def _xb1_exact():
    share = tuple(Fraction(_hsdp_padded_bytes(_XB1_K * r, _XB1_K), W) / Fraction(PSI_ANCHOR, _XB1_K) for r in _XB1_RS)
    n, k = _XB1_PAD
    return share, _hsdp_padded_bytes(n, k) - _hsdp_headline_bytes(n, k), Fraction(16)


def _xb1_run(ctx):
    share = []
    for r in _XB1_RS:
        per = _inter(ctx, "hsdp", _XB1_K * r, _XB1_K)
        share.append(Fraction(max(per), W) / Fraction(PSI_ANCHOR, _XB1_K))
    n, k = _XB1_PAD
    departure = max(_inter(ctx, "hsdp", n, k)) - _hsdp_headline_bytes(n, k)
    states = ctx.field(ctx.size_only("hsdp", _XB1_K * 2, psi=PSI_ANCHOR, ranks_per_node=_XB1_K),
                       "model_state_bytes_per_rank")
    return tuple(share), departure, Fraction(states) / Fraction(PSI_ANCHOR, _XB1_K)


# -- XB2 -----------------------------------------------------------------------------------------------------
def _zeropp_bytes(n: int, k: int) -> tuple[int, int]:
    """(codes, scales) crossing nodes per step, all ranks: the int8 forward gather on the ring (R of its links
    cross) and the int4 all-to-all across nodes (N ranks, R−1 pieces each); codes packed in 4-byte words."""
    r, c = n // k, _ceil(PSI_ANCHOR, n)
    codes = r * (n - 1) * 4 * _ceil(c, 4) + n * (r - 1) * 4 * _ceil(c, 8)
    scales = (r * (n - 1) + n * (r - 1)) * SCALE * _ceil(c, BLOCK)
    return codes, scales


def _zero3_bytes(n: int, k: int) -> int:
    return 3 * (n // k) * (n - 1) * W * _ceil(PSI_ANCHOR, n)


def _xb2_exact():
    n, k = _XB2
    codes, scales = _zeropp_bytes(n, k)
    limit = (Fraction(1, 2) + Fraction(1, 4)) / 3  # int8 gather (8 of 16 bits) + int4 gradients, over 3 passes
    return Fraction(codes, _zero3_bytes(n, k)), Fraction(codes + scales, _zero3_bytes(n, k)), limit


def _xb2_run(ctx):
    n, k = _XB2
    zpp, z3 = sum(_inter(ctx, "zeropp", n, k)), sum(_inter(ctx, "zero3", n, k))
    rep = ctx.size_only("zeropp", n, psi=PSI_ANCHOR, ranks_per_node=k)
    scale_labels = [lab for lab in rep.comm.labels() if "scales" in lab]
    from ringemu.link_bytes import sent_per_class
    from ringemu.topology import Topology
    scales = sum(d["inter_node"] for d in sent_per_class(rep.comm, Topology(n, k), scale_labels))
    return Fraction(zpp - scales, z3), Fraction(zpp, z3), None


# -- XB3 -----------------------------------------------------------------------------------------------------
def _xb3_exact():
    return tuple(Fraction(4) for _ in _XB3_NS), tuple(2 + Fraction(2, n) for n in _XB3_NS)


def _xb3_run(ctx):
    pcie, gpu = [], []
    for n in _XB3_NS:
        rep = ctx.size_only("offload", n, psi=PSI_ANCHOR)
        pcie.append(Fraction(sum(d["pcie"] for d in rep.link_bytes_per_rank), PSI_ANCHOR))
        gpu.append(Fraction(ctx.field(rep, "model_state_bytes_per_rank"), PSI_ANCHOR))
    return tuple(pcie), tuple(gpu)


BEYOND_CLAIMS = (
    Claim("XB1", "HSDP: across nodes only the all-reduce of the gradient shard, 2(R−1)/R·Ψ/K elements per rank "
                 "per step; model states 16Ψ/K per rank",
          "Zhao et al. 2023 (PyTorch FSDP, arXiv 2304.11277) §3.2.2; issue's formula",
          (Part("inter-node elements / (Ψ/K), K = 4, R = 2, 4", "2(R−1)/R",
                FormulaOfN(lambda r: Fraction(2 * (r - 1), r), _XB1_RS)),
           Part("N = 64, K = 8: padding over the headline", "7 B", Exactly("B")),
           Part("model states / (Ψ/K), N = 8, K = 4", "16", Exactly("Ψ/K"))),
          _xb1_exact, _xb1_run,
          note="run: the hsdp stage's size-only ledger, inter-node bytes of the busiest rank; where K·R does not "
               "divide Ψ each node shard is padded to R·ceil(ceil(Ψ/K)/R), a departure named in bytes"),
    Claim("XB2", "ZeRO++ (qwZ + hpZ + qgZ) cuts cross-node traffic from ZeRO-3's 3Ψ to 0.75Ψ, 4× less",
          "Wang et al. 2023 (ZeRO++, arXiv 2306.10209) §4",
          (Part("codes only, N = 1,024, K = 8", "0.25", Decimals(2)),
           Part("with the block scales, N = 1,024, K = 8", "0.25", Decimals(2)),
           Part("limit as N, R grow", "1/4", Exactly("×"), checks="exact-only",
                why_single="a limit: 1/6 + N(R−1)/(12R(N−1)) → 1/4, which no finite run reaches")),
          _xb2_exact, _xb2_run,
          note="whole world's inter-node bytes per step over ZeRO-3's on the same mesh and ring; the scales are "
               "one fp32 per 256 values (zero_stages.quantize), counted under their own labels"),
    Claim("XB3", "ZeRO-Offload: 2Ψ of 16-bit gradients down and 2Ψ of parameters up over PCIe per step (4Ψ); GPU "
                 "memory 2Ψ + 2Ψ/N with gradient sharding",
          "Ren et al. 2021 (ZeRO-Offload, arXiv 2101.06840) §4.2–4.3",
          (Part("PCIe bytes per step / Ψ, all ranks, N = 1, 8, 16", "4", FormulaOfN(lambda n: Fraction(4), _XB3_NS)),
           Part("GPU model states / Ψ per rank", "2 + 2/N", FormulaOfN(lambda n: 2 + Fraction(2, n), _XB3_NS))),
          _xb3_exact, _xb3_run,
          note="run: the offload stage's host link ledger (payload only) and its GPU MemoryLedger; Ψ = anchor, "
               "which N = 16 divides"),
)
