"""Flat parameters in units, and ZeRO's shard map (Rajbhandari et al. 2019, §5.1 and §7).

The model's Ψ parameters are a list of *units* (layers or groups of layers, FSDP's "units"); each unit is one
flat buffer of ``S_u`` elements. Every stage reduces gradients unit by unit (a unit is also the gradient
bucket), and ZeRO shards every unit separately with :class:`~ringemu.layout.ChunkLayout`: unit u is padded to
N·ceil(S_u/N) and rank r owns chunk r of it. A rank allocates its shard at the padded size ceil(S_u/N) (as a
flat-parameter engine does), of which ``payload(u, r)`` elements are real; so per-rank shard bytes are equal on
every rank, and the padding is reported, never hidden. Bucketing every stage by the same units is what makes
ZeRO-3's traffic exactly 3/2 of DP's for every N (both are sums over units of (N-1)·ceil(S_u/N) per pass).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ringemu.checks import MAX_NUMEL, check_int, check_n_ranks, is_integer
from ringemu.layout import ChunkLayout

__all__ = ["FlatParams", "check_unit_sizes", "check_psi", "MAX_NUMEL", "MAX_PSI"]

# = 2^61 - 1 parameters: a rank's fp32 buffers (master, m, v) take 4 B per parameter, and every buffer's byte
# count must stay below 2^63
MAX_PSI = MAX_NUMEL // 4


def check_psi(psi: object) -> int:
    """Ψ as an int, or a clear error unless it is an integer in [1, MAX_PSI] (a parameter count;
    MAX_PSI = 2^61 - 1 keeps the byte count of a rank's fp32 buffers below 2^63)."""
    return check_int(psi, "psi", minimum=1, maximum=MAX_PSI,
                     why="a parameter count; 4 B per fp32 element stays below 2^63 B")


def check_unit_sizes(unit_sizes: object) -> tuple[int, ...]:
    """Unit sizes as a tuple of ints, or a clear error unless it is a non-empty sequence of integers >= 1 whose
    sum Ψ is at most ``MAX_PSI`` (2^61 - 1)."""
    if isinstance(unit_sizes, (str, bytes)) or not hasattr(unit_sizes, "__iter__"):
        raise TypeError(f"unit_sizes must be a non-empty list of integers >= 1; got {unit_sizes!r}")
    sizes = list(unit_sizes)
    if not sizes:
        raise ValueError("unit_sizes must be a non-empty list of integers >= 1; got an empty list")
    for i, s in enumerate(sizes):
        if not is_integer(s) or s < 1:
            raise ValueError(f"unit_sizes must be integers >= 1; unit {i} is {s!r}")
    out = tuple(operator.index(s) for s in sizes)
    if sum(out) > MAX_PSI:
        raise ValueError(f"unit_sizes must sum to at most {MAX_PSI:_} parameters (4 B per fp32 element must stay "
                         f"below 2^63 bytes); got {sum(out):_}")
    return out


@dataclass(frozen=True)
class FlatParams:
    """Ψ = sum(unit_sizes) parameters in units, sharded over ``n_ranks`` ranks unit by unit."""

    unit_sizes: tuple[int, ...]
    n_ranks: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "unit_sizes", check_unit_sizes(self.unit_sizes))
        object.__setattr__(self, "n_ranks", check_n_ranks(self.n_ranks))

    @property
    def n_units(self) -> int:
        return len(self.unit_sizes)

    @property
    def psi(self) -> int:
        """Ψ: the parameter count."""
        return sum(self.unit_sizes)

    @cached_property
    def offsets(self) -> tuple[int, ...]:
        """Start of each unit in the model's flat parameter vector (length Ψ)."""
        out, at = [], 0
        for s in self.unit_sizes:
            out.append(at)
            at += s
        return tuple(out)

    def layout(self, unit: int) -> ChunkLayout:
        """Unit ``unit``'s shard map: ``ChunkLayout(S_u, N)``; rank r owns chunk r."""
        return ChunkLayout(self.unit_sizes[unit], self.n_ranks)

    def shard_numel(self, unit: int) -> int:
        """Elements a rank allocates for its shard of ``unit``: ceil(S_u / N), padding included."""
        return self.layout(unit).chunk_size

    def shard_slice(self, unit: int, rank: int) -> slice:
        """The part of ``unit`` (unpadded coordinates) that ``rank`` owns; its length is the payload."""
        return self.layout(unit).payload_slice(rank)

    @property
    def padded_shard_total(self) -> int:
        """Σ_u ceil(S_u / N): elements of one rank's shard of the whole model, padding included."""
        return sum(self.shard_numel(u) for u in range(self.n_units))

    def units(self):
        return range(self.n_units)
