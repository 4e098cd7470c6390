"""Activation memory per rank of a transformer, with and without recomputation (Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198, §4 and Table 2).

Bytes of activations one transformer layer keeps for its backward, with sequence length s, micro-batch b,
hidden size h and a attention heads, 16-bit activations, no tensor or sequence parallelism (t = 1):

    none       s·b·h·(34 + 5·a·s/h)   = 34·s·b·h + 5·a·s²·b   (Table 2, "no parallelism")
    selective  34·s·b·h                (§5, only the attention core a·s²·b terms are recomputed)
    full       2·s·b·h                 (§4, only the layer's 16-bit input is kept; the rest is recomputed)

Each of the L layers keeps that much, so a rank holds L times it at the end of its forward. Nothing here depends
on the data-parallel degree N: each rank keeps the activations of its own micro-batch (lesson claim M8). These
are closed forms of the paper; the ledger figures come from size-only stage runs that record one allocation
per layer (:class:`~zero_stages.workload.SizeOnlyWorkload`).
"""
from __future__ import annotations

from dataclasses import dataclass

from ringemu.checks import MAX_NUMEL, check_int

__all__ = ["RECOMPUTE", "MAX_LAYERS", "MAX_DIMENSION", "ActivationShape"]

RECOMPUTE = ("none", "selective", "full")
MAX_LAYERS = 2 ** 15  # each layer is recorded on every rank's ledger (10^7 layers took 102 s and 1.8 GB)
MAX_DIMENSION = 2 ** 40  # s, b, h, a each: far beyond any model; the byte total is bounded below as well


@dataclass(frozen=True)
class ActivationShape:
    """s, b, h, L (and a, needed only without recomputation) and the recomputation kind. Bytes are ints."""

    seq: int
    batch: int
    hidden: int
    layers: int
    recompute: str = "selective"
    heads: int | None = None

    def __post_init__(self) -> None:
        """Every size bounded before any work: s, b, h, a in [1, 2^40], L in [1, 2^15], and the bytes of all L
        layers below 2^63 (byte counts are aggregated in int64)."""
        for name in ("seq", "batch", "hidden"):
            check_int(getattr(self, name), name, minimum=1, maximum=MAX_DIMENSION)
        check_int(self.layers, "layers", minimum=1, maximum=MAX_LAYERS)
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}; got {self.recompute!r}")
        if self.heads is not None:
            check_int(self.heads, "heads", minimum=1, maximum=MAX_DIMENSION)
        elif self.recompute == "none":
            raise ValueError("heads must be given with recompute='none': s·b·h·(34 + 5·a·s/h) needs a, the number "
                             "of attention heads")
        if self.total_bytes() > MAX_NUMEL:
            raise ValueError(f"activations of {self.total_bytes():.3e} B per rank (s = {self.seq}, b = {self.batch}, "
                             f"h = {self.hidden}, L = {self.layers}) exceed 2^63 - 1 B; make s, b, h or L smaller")

    def with_recompute(self, recompute: str) -> "ActivationShape":
        """The same shape under another recomputation kind."""
        return ActivationShape(self.seq, self.batch, self.hidden, self.layers, recompute, self.heads)

    def bytes_per_layer(self) -> int:
        """Bytes one layer keeps (Korthikanti et al. 2022, Table 2 and §4), an exact int."""
        sbh = self.seq * self.batch * self.hidden
        if self.recompute == "full":
            return 2 * sbh  # the layer's 16-bit input only
        if self.recompute == "selective":
            return 34 * sbh  # 34·s·b·h: everything but the attention core's a·s²·b terms
        return 34 * sbh + 5 * self.heads * self.seq * self.seq * self.batch  # s·b·h·(34 + 5·a·s/h)

    def layer_bytes(self) -> tuple[int, ...]:
        """Bytes per layer, one entry per layer (all equal)."""
        return (self.bytes_per_layer(),) * self.layers

    def total_bytes(self) -> int:
        """L times :meth:`bytes_per_layer`: what a rank holds at the end of its forward."""
        return self.layers * self.bytes_per_layer()

    def formula(self) -> str:
        return {"none": "s·b·h·(34 + 5·a·s/h)", "selective": "34·s·b·h", "full": "2·s·b·h"}[self.recompute]

    def assumptions(self) -> list[str]:
        """What the figure assumes, in words (printed by ``ringemu memory``)."""
        heads = "" if self.heads is None else f", a = {self.heads:,}"
        return [
            f"activations per layer {self.formula()} bytes ({self.recompute} recomputation), Korthikanti et al. "
            f"2022 (arXiv 2205.05198) §4, Table 2: 16-bit activations, no tensor or sequence parallelism",
            f"s = {self.seq:,}, b = {self.batch:,}, h = {self.hidden:,}, L = {self.layers:,}{heads}: "
            f"{self.bytes_per_layer():,} B per layer, {self.total_bytes():,} B per rank",
            "each rank keeps the activations of its own micro-batch: the figure does not depend on N",
            "layer l's activations are held from the forward of unit ⌊l·U/L⌋ (U units) to that unit's backward",
        ]

    def as_dict(self) -> dict:
        return {"seq": self.seq, "batch": self.batch, "hidden": self.hidden, "layers": self.layers,
                "heads": self.heads, "recompute": self.recompute, "bytes_per_layer": self.bytes_per_layer(),
                "total_bytes": self.total_bytes(), "formula": self.formula()}
