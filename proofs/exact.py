"""Closed forms of the lesson's arithmetic, in exact rational arithmetic (``fractions.Fraction`` and ints).

Nothing here calls the emulator or the stage code: these are the *exact* side of every check, written from
the ZeRO paper (Rajbhandari et al. 2019, §5.1 memory, §7 communication), the ring all-reduce analysis
(Patarasuk & Yuan 2009, §3) and the lesson's own arithmetic. Sizes are bytes unless named otherwise.

Padding: the ring cuts a buffer of Ψ elements into N chunks of ⌈Ψ/N⌉ (the project's layout, DESIGN.md), so a
rank's shard and every message hold ⌈Ψ/N⌉ elements; when N divides Ψ this is Ψ/N exactly.
"""
from __future__ import annotations

from fractions import Fraction
from types import MappingProxyType

__all__ = [
    "PSI_ANCHOR", "PSI_PAPER", "CARD_BYTES", "WEIGHT16", "GRAD16", "K_ADAM", "STAGE_NAMES", "STAGE_COEFFS",
    "shard", "model_state_bytes", "floor_bytes_per_param", "traffic_coefficient", "ring_sent_elements",
    "ring_all_reduce_sent_elements", "naive_root_received_elements", "selective_activation_bytes",
    "full_recompute_activation_bytes", "SEQ", "BATCH", "HIDDEN", "LAYERS",
]

PSI_ANCHOR = 27_781_427_952     # the anchor's parameter count (lesson; claims.md M2)
PSI_PAPER = 7_500_000_000       # ZeRO paper Figure 1's model (7.5B)
CARD_BYTES = 80 * 10 ** 9       # an 80 GB card, GB = 10^9 B (lesson's 数字口径)
WEIGHT16 = 2                    # B per 16-bit weight (ZeRO §3.1)
GRAD16 = 2                      # B per 16-bit gradient
K_ADAM = 12                     # B of optimizer state per parameter: fp32 master, m, v (4 B each; ZeRO §3.1)

STAGE_NAMES = ("dp", "zero1", "zero2", "zero3")
# bytes per parameter (replicated on every rank, sharded over N ranks) — ZeRO §5.1, Figure 1:
#   DP (2+2+K)Ψ;  P_os 4Ψ + KΨ/N;  P_os+g 2Ψ + (2+K)Ψ/N;  P_os+g+p (2+2+K)Ψ/N
STAGE_COEFFS = MappingProxyType({
    "dp": (WEIGHT16 + GRAD16 + K_ADAM, 0),
    "zero1": (WEIGHT16 + GRAD16, K_ADAM),
    "zero2": (WEIGHT16, GRAD16 + K_ADAM),
    "zero3": (0, WEIGHT16 + GRAD16 + K_ADAM),
})

# activation shape of the anchor used by M9, E3 and the TP traffic: s = 4,096 tokens, b = 1 (lesson);
# h = 5,120 and L = 64 are NOT printed by the lesson — they are the values that reproduce its 45.6 GB and 2.7 GB
SEQ, BATCH, HIDDEN, LAYERS = 4096, 1, 5120, 64


def _check_stage(stage: str) -> str:
    if stage not in STAGE_COEFFS:
        raise ValueError(f"stage must be one of {', '.join(STAGE_NAMES)}; got {stage!r}")
    return stage


def shard(psi: int, n: int, padded: bool = True) -> Fraction:
    """Elements of one rank's shard: ⌈Ψ/N⌉ (padded, the ring's chunk) or Ψ/N."""
    return Fraction(-(-psi // n)) if padded else Fraction(psi, n)


def model_state_bytes(stage: str, psi: int, n: int, padded: bool = True) -> Fraction:
    """Per-rank model-state bytes of a stage (ZeRO §5.1): replicated·Ψ + sharded·(shard of Ψ over N)."""
    replicated, sharded = STAGE_COEFFS[_check_stage(stage)]
    return replicated * Fraction(psi) + sharded * shard(psi, n, padded)


def floor_bytes_per_param(stage: str) -> Fraction:
    """lim_{N→∞} model_state_bytes(stage, Ψ, N) / Ψ: the bytes per parameter that sharding never removes."""
    return Fraction(STAGE_COEFFS[_check_stage(stage)][0])


def traffic_coefficient(stage: str) -> int:
    """c in "c·Ψ": per-rank elements sent per step are c·(N−1)·⌈Ψ/N⌉ (ZeRO §7.2: DP all-reduce 2;
    P_os and P_os+g reduce-scatter + all-gather 2; P_os+g+p forward all-gather + backward all-gather +
    reduce-scatter 3)."""
    return {"dp": 2, "zero1": 2, "zero2": 2, "zero3": 3}[_check_stage(stage)]


def ring_sent_elements(stage: str, psi: int, n: int) -> Fraction:
    """Elements each rank sends in one step of ``stage`` on a ring of N ranks, padding included."""
    return traffic_coefficient(stage) * (n - 1) * shard(psi, n)


def ring_all_reduce_sent_elements(psi: int, n: int) -> Fraction:
    """Ring all-reduce (reduce-scatter then all-gather): 2(N−1) messages of ⌈Ψ/N⌉ elements per rank."""
    return 2 * (n - 1) * shard(psi, n)


def naive_root_received_elements(psi: int, n: int) -> Fraction:
    """"Sum everything at rank 0": rank 0 receives the whole buffer from each of the other N−1 ranks."""
    return Fraction((n - 1) * psi)


def selective_activation_bytes(s: int = SEQ, b: int = BATCH, h: int = HIDDEN, layers: int = LAYERS) -> Fraction:
    """34·s·b·h bytes per layer with selective recomputation (Korthikanti et al. 2022, §4.2, 16-bit)."""
    return Fraction(34 * s * b * h * layers)


def full_recompute_activation_bytes(s: int = SEQ, b: int = BATCH, h: int = HIDDEN,
                                    layers: int = LAYERS) -> Fraction:
    """2·s·b·h bytes per layer with full recomputation: only each layer's 16-bit input is kept
    (Korthikanti et al. 2022, §4)."""
    return Fraction(2 * s * b * h * layers)
