"""The paper's closed forms in exact rational arithmetic, for tests and for the claims catalog.

Memory of model states per rank (Rajbhandari et al. 2019, §5, Figure 1), with Ψ parameters, N ranks, K = 12:

    DP      (2 + 2 + K)·Ψ               ZeRO-2   2Ψ + (2 + K)·Ψ/N
    ZeRO-1  (2 + 2)·Ψ + K·Ψ/N           ZeRO-3   (2 + 2 + K)·Ψ/N

Traffic per rank and step, in elements (§7): DP, ZeRO-1, ZeRO-2 2(N−1)/N·Ψ; ZeRO-3 3(N−1)/N·Ψ.

With ``padded=True`` (the default) Ψ/N is what the stages really hold and send: each unit u is padded to
N·ceil(S_u/N), so Ψ/N becomes Σ_u ceil(S_u/N); this equals the unpadded form when N divides every unit.
``unit_sizes`` (instead of a single unit of Ψ) gives the per-unit padding.
"""
from __future__ import annotations

from fractions import Fraction

from ..flat import FlatParams, check_psi, check_unit_sizes
from ..precision import GRAD16_BYTES, K_BYTES, WEIGHT16_BYTES

__all__ = ["STAGES", "BEYOND_STAGES", "ALL_STAGES", "check_stage", "model_state_bytes_closed_form",
           "traffic_elements_closed_form",
           "shard_elements"]

STAGES = ("dp", "zero1", "zero2", "zero3")  # the lesson's four (its memory panel, `--stage all`)
# what came after them, each needing K ranks per node (offload: none); closed forms in memory.closed_forms_beyond
BEYOND_STAGES = ("hsdp", "zeropp", "offload")
ALL_STAGES = STAGES + BEYOND_STAGES


def check_stage(stage: object, allowed: tuple[str, ...] = ALL_STAGES) -> str:
    if not isinstance(stage, str) or stage not in allowed:
        raise ValueError(f"stage must be one of {', '.join(allowed)}; got {stage!r}")
    return stage


def _units(psi, unit_sizes) -> tuple[int, ...]:
    if (psi is None) == (unit_sizes is None):
        raise ValueError("give exactly one of psi (one unit of Ψ parameters) and unit_sizes")
    return (check_psi(psi),) if unit_sizes is None else check_unit_sizes(unit_sizes)


def shard_elements(n_ranks: int, psi=None, unit_sizes=None, padded: bool = True) -> Fraction:
    """Ψ/N, or Σ_u ceil(S_u/N) with padding: the elements of one rank's shard of the whole model."""
    units = _units(psi, unit_sizes)
    flat = FlatParams(units, n_ranks)
    return Fraction(flat.padded_shard_total) if padded else Fraction(flat.psi, flat.n_ranks)


def model_state_bytes_closed_form(stage: str, psi=None, n_ranks: int = 1, *, unit_sizes=None,
                                  padded: bool = True) -> Fraction:
    """Bytes of model states one rank holds in ``stage`` (exact; one of the four)."""
    stage = check_stage(stage, STAGES)
    units = _units(psi, unit_sizes)
    whole = Fraction(sum(units))
    shard = shard_elements(n_ranks, unit_sizes=units, padded=padded)
    w, g, k = WEIGHT16_BYTES, GRAD16_BYTES, K_BYTES
    return {"dp": (w + g + k) * whole,
            "zero1": (w + g) * whole + k * shard,
            "zero2": w * whole + (g + k) * shard,
            "zero3": (w + g + k) * shard}[stage]


def traffic_elements_closed_form(stage: str, psi=None, n_ranks: int = 1, *, unit_sizes=None,
                                 padded: bool = True) -> Fraction:
    """Elements one rank sends per step in ``stage`` (exact): 2(N−1)/N·Ψ, or 3(N−1)/N·Ψ for ZeRO-3."""
    stage = check_stage(stage, STAGES)
    units = _units(psi, unit_sizes)
    shard = shard_elements(n_ranks, unit_sizes=units, padded=padded)
    passes = 3 if stage == "zero3" else 2  # ZeRO-3: all-gather forward, all-gather backward, reduce-scatter
    return passes * (n_ranks - 1) * shard
