"""Communication claims C1–C7: per-rank traffic of the ring, of each ZeRO stage, of the naive contrast.

Run checks count bytes with :class:`ringemu.CommLedger` filled by the real schedules on size-only worlds
(the lesson's Ψ = 27,781,427,952 is counted by walking the schedule, never by a formula), and with the stage
code's own ledger (``zero_stages.run_size_only``). "Per card" is the busiest rank, padding included: a ring
message always carries a whole chunk of ⌈Ψ/N⌉ elements.
"""
from __future__ import annotations

from fractions import Fraction

from .claim import Claim, Part
from .exact import PSI_ANCHOR, STAGE_NAMES, naive_root_received_elements, ring_all_reduce_sent_elements, ring_sent_elements, shard
from .rounding import GB, MIB, Decimals, Exactly, FormulaOfN, Stated
from .runs import torch_ddp_default_bucket_bytes

__all__ = ["COMM_CLAIMS", "C1_NS", "IB_BYTES_PER_S"]

LESSON = "lesson C10-2 (zero-lesson.zh.txt)"
C1_NS = (2, 3, 8, 64)
IB_BYTES_PER_S = 50 * 10 ** 9  # InfiniBand 50 GB/s per link and direction (lesson; DeepSeek-V3 report §3.2)
WIRE = 2                       # B per 16-bit gradient on the wire
_STAGE_LABELS = ("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")


def _padded(psi: int, n: int) -> int:
    return n * int(shard(psi, n))


# -- C1 ----------------------------------------------------------------------------------------------------
def _c1_exact():
    ratios = tuple(ring_all_reduce_sent_elements(PSI_ANCHOR, n) / _padded(PSI_ANCHOR, n) for n in C1_NS)
    # sent = received = 2(N-1) chunks; reduce-scatter and all-gather each (N-1) chunks
    symmetric = all(ring_all_reduce_sent_elements(PSI_ANCHOR, n) == 2 * (n - 1) * shard(PSI_ANCHOR, n)
                    for n in C1_NS)
    halves = all((n - 1) * shard(PSI_ANCHOR, n) * 2 == ring_all_reduce_sent_elements(PSI_ANCHOR, n)
                 for n in C1_NS)
    return ratios, symmetric, halves


def _c1_run(ctx):
    ratios, symmetric, halves = [], True, True
    for n in C1_NS:
        ar = ctx.collective("all-reduce", n, PSI_ANCHOR).per_rank()
        rs = ctx.collective("reduce-scatter", n, PSI_ANCHOR).per_rank()
        ag = ctx.collective("all-gather", n, PSI_ANCHOR).per_rank()
        sent = [t.sent.elements for t in ar]
        ratios.append(Fraction(max(sent), _padded(PSI_ANCHOR, n)))
        symmetric &= len(set(sent)) == 1 and all(t.received.elements == t.sent.elements for t in ar)
        halves &= all(a.sent == r.sent + g.sent and a.received == r.received + g.received
                      for a, r, g in zip(ar, rs, ag))
    return tuple(ratios), symmetric, halves


# -- C2, C3 ------------------------------------------------------------------------------------------------
def _unit(n: int) -> Fraction:
    """(N-1)/N·Ψ elements: what "1Ψ" of traffic means in the lesson's convention (claims.md)."""
    return Fraction(n - 1, n) * PSI_ANCHOR


def _stage_sent(ctx, stage: str, n: int, field: str = "traffic_sent_elements_per_rank") -> int:
    return ctx.field(ctx.size_only(stage, n, psi=PSI_ANCHOR), field)


def _c2_exact():
    return tuple(ring_sent_elements(s, PSI_ANCHOR, 8) / _unit(8) for s in STAGE_NAMES)


def _c2_run(ctx):
    return tuple(Fraction(_stage_sent(ctx, s, 8), 1) / _unit(8) for s in STAGE_NAMES)


_C3_NS = (8, 64)


def _c3_exact():
    return tuple(ring_sent_elements("zero3", PSI_ANCHOR, n) / ring_sent_elements("dp", PSI_ANCHOR, n)
                 for n in _C3_NS)


def _c3_run(ctx):
    field = "traffic_sent_bytes_per_rank"
    return tuple(Fraction(_stage_sent(ctx, "zero3", n, field), _stage_sent(ctx, "dp", n, field)) for n in _C3_NS)


# -- C4, C5, C6 --------------------------------------------------------------------------------------------
_C4_NS = (8, 64)


def _c4_exact():
    return tuple(WIRE * ring_all_reduce_sent_elements(PSI_ANCHOR, n) for n in _C4_NS)


def _c4_run(ctx):
    return tuple(Fraction(ctx.collective("all-reduce", n, PSI_ANCHOR).max_sent_bytes_per_rank()) for n in _C4_NS)


def _c5_exact():
    return tuple(WIRE * naive_root_received_elements(PSI_ANCHOR, n) for n in _C4_NS)


def _c5_run(ctx):
    return tuple(Fraction(ctx.collective("naive-all-reduce", n, PSI_ANCHOR).per_rank()[0].received.bytes)
                 for n in _C4_NS)


def _c6_exact():
    return (WIRE * ring_all_reduce_sent_elements(PSI_ANCHOR, 8) / IB_BYTES_PER_S,)


def _c6_run(ctx):
    return (ctx.collective("all-reduce", 8, PSI_ANCHOR).alpha_beta_time(IB_BYTES_PER_S),)


COMM_CLAIMS = (
    Claim("C1", "Ring all-reduce = reduce-scatter then all-gather; each rank sends and receives 2(N−1)/N·Ψ "
                "elements",
          f"{LESSON}, 通信; Patarasuk & Yuan 2009 §3",
          (Part("sent / Ψ", "2(N−1)/N·Ψ", FormulaOfN(lambda n: Fraction(2 * (n - 1), n), C1_NS)),
           Part("sent = received, every rank", "each rank", Stated(True)),
           Part("= RS + AG, every rank", "RS then AG", Stated(True))),
          _c1_exact, _c1_run,
          note="Ψ = the anchor, padded to N·⌈Ψ/N⌉ where N does not divide it (N = 64)"),
    Claim("C2", "DP, ZeRO-1 and ZeRO-2 each move 2Ψ per rank per step; ZeRO-3 moves 3Ψ (forward and backward "
                "parameter all-gathers + gradient reduce-scatter)",
          f"{LESSON}, 通信 and 常见误解之二; Rajbhandari et al. 2019 §7.2",
          tuple(Part(lbl, p, Exactly("Ψ")) for lbl, p in zip(_STAGE_LABELS, ("2Ψ", "2Ψ", "2Ψ", "3Ψ"))),
          _c2_exact, _c2_run,
          note="anchor Ψ, N = 8; value = elements sent per rank per step in units of (N−1)/N·Ψ (claims.md)"),
    Claim("C3", "ZeRO-3's per-rank traffic is 1.5× DP's, not 3× (common misconception)",
          f"{LESSON}, 常见误解之二",
          tuple(Part(f"N = {n}", "1.5×", Exactly("×")) for n in _C3_NS),
          _c3_exact, _c3_run, note="ratio of bytes sent per rank per step, anchor Ψ, padding included"),
    Claim("C4", "Anchor DP ring traffic per card with 16-bit gradients",
          f"{LESSON}, 演进地图 2",
          (Part("N = 8", "97.2 GB", Decimals(1, GB, "GB")), Part("N = 64", "109.4 GB", Decimals(1, GB, "GB"))),
          _c4_exact, _c4_run,
          note="N = 64 does not divide Ψ: with padding 109,389,372,624 B; unpadded 2·(63/64)·Ψ·2 B = "
               "109,389,372,561 B; both round to 109.4"),
    Claim("C5", "Naive 'sum everything at rank 0' instead of the ring: bytes rank 0 receives",
          f"{LESSON}, 演进地图 2",
          (Part("N = 8", "388.9 GB", Decimals(1, GB, "GB")), Part("N = 64", "3,500 GB", Decimals(0, GB, "GB"))),
          _c5_exact, _c5_run, note="the lesson drops the decimal above 1,000 GB (3,500.459… GB)"),
    Claim("C6", "97.2 GB over a 50 GB/s InfiniBand link takes",
          f"{LESSON}, 演进地图 3",
          (Part("α-β, α = 0", "1.94 s", Decimals(2, 1, "s")),), _c6_exact, _c6_run,
          note="run: CommLedger.alpha_beta_time(50e9) of the N = 8 ring all-reduce (per-step busiest link)"),
    Claim("C7", "PyTorch DDP's default gradient bucket",
          f"{LESSON}, 演进地图 3; Li et al. 2020 (PyTorch DDP)",
          (Part("bucket", "25 MiB", Decimals(0, MIB, "MiB")),),
          lambda: (Fraction(25 * MIB),), lambda ctx: (Fraction(torch_ddp_default_bucket_bytes()),),
          note="run: _DEFAULT_BUCKET_CAP_MB × _MB_TO_BYTES read from the installed torch/nn/parallel/distributed.py"),
)
