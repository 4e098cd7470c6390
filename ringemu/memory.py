"""MemoryLedger: what each rank's own buffers hold, by category, with current and peak bytes.

Stage code records every buffer it allocates and frees (``alloc`` / ``free``); nothing is inferred from a
formula. Categories follow the ZeRO paper's accounting (Rajbhandari et al. 2019, §3.1: 2Ψ 16-bit weights,
2Ψ 16-bit gradients, KΨ optimizer states with K = 12 for mixed-precision Adam) plus what ZeRO-R (§6) calls
residual state: temporary gathered parameters, communication buffers and activations. Bytes are Python ints.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .checks import check_n_ranks, check_numel

__all__ = ["CATEGORIES", "MODEL_STATE_CATEGORIES", "MemoryLedger"]

CATEGORIES = (
    "weights16",    # 16-bit parameters (2 B each, ZeRO §3.1)
    "grads16",      # 16-bit gradients (2 B each)
    "master32",     # fp32 master weights (4 B each; part of K = 12)
    "adam_m",       # fp32 Adam first moment (4 B)
    "adam_v",       # fp32 Adam second moment (4 B)
    "gathered",     # transient full parameters of units in use (ZeRO-3 / FSDP)
    "comm_buffer",  # communication buffers (buckets, reduce-scatter outputs in flight)
    "activations",  # activations (not sharded by ZeRO, lesson claim M8)
)
MODEL_STATE_CATEGORIES = ("weights16", "grads16", "master32", "adam_m", "adam_v")


@dataclass
class MemoryLedger:
    """Per-rank allocations by category. ``alloc`` returns nothing; ``free`` must name a live buffer."""

    n_ranks: int
    _live: list[dict[str, tuple[str, int]]] = field(init=False, repr=False)
    _current: list[dict[str, int]] = field(init=False, repr=False)
    _peak: list[dict[str, int]] = field(init=False, repr=False)
    _peak_total: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.n_ranks = check_n_ranks(self.n_ranks)
        self._live = [{} for _ in range(self.n_ranks)]
        self._current = [dict.fromkeys(CATEGORIES, 0) for _ in range(self.n_ranks)]
        self._peak = [dict.fromkeys(CATEGORIES, 0) for _ in range(self.n_ranks)]
        self._peak_total = [0] * self.n_ranks

    def _check(self, rank: int, category: str) -> None:
        if not 0 <= rank < self.n_ranks:
            raise ValueError(f"rank must be in [0, {self.n_ranks}); got {rank}")
        if category not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}; got {category!r}")

    def alloc(self, rank: int, name: str, category: str, nbytes: int) -> None:
        """Record that ``rank`` now holds buffer ``name`` of ``nbytes`` bytes in ``category``."""
        self._check(rank, category)
        if name in self._live[rank]:
            raise ValueError(f"rank {rank} already holds a buffer named {name!r}; free it first")
        nbytes = check_numel(nbytes, "nbytes")
        self._live[rank][name] = (category, nbytes)
        cur = self._current[rank]
        cur[category] += nbytes
        self._peak[rank][category] = max(self._peak[rank][category], cur[category])
        self._peak_total[rank] = max(self._peak_total[rank], sum(cur.values()))

    def free(self, rank: int, name: str) -> None:
        """Record that ``rank`` released buffer ``name``."""
        try:
            category, nbytes = self._live[rank].pop(name)
        except KeyError:
            raise ValueError(f"rank {rank} holds no buffer named {name!r}") from None
        self._current[rank][category] -= nbytes

    def current(self, rank: int, category: str | None = None) -> int:
        """Bytes ``rank`` holds now, in one category or in all."""
        cur = self._current[rank]
        return cur[category] if category else sum(cur.values())

    def peak(self, rank: int, category: str | None = None) -> int:
        """Highest bytes ``rank`` ever held at once, in one category or in all together."""
        return self._peak[rank][category] if category else self._peak_total[rank]

    def model_states(self, rank: int) -> int:
        """Bytes of model states (16-bit weights and grads, fp32 master, m, v) ``rank`` holds now."""
        return sum(self._current[rank][c] for c in MODEL_STATE_CATEGORIES)

    def by_category(self, rank: int) -> dict[str, dict[str, int]]:
        """``{category: {"current": bytes, "peak": bytes}}`` for ``rank``."""
        return {c: {"current": self._current[rank][c], "peak": self._peak[rank][c]} for c in CATEGORIES}
