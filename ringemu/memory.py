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
    _at_peak: list[dict[str, int]] = field(init=False, repr=False)
    _total: list[int] = field(init=False, repr=False)
    _shared_live: set[int] = field(init=False, repr=False)  # ranks whose live-buffer table another rank shares

    def __post_init__(self) -> None:
        self.n_ranks = check_n_ranks(self.n_ranks)
        self._live = [{} for _ in range(self.n_ranks)]
        self._current = [dict.fromkeys(CATEGORIES, 0) for _ in range(self.n_ranks)]
        self._peak = [dict.fromkeys(CATEGORIES, 0) for _ in range(self.n_ranks)]
        self._peak_total = [0] * self.n_ranks
        self._at_peak = [dict.fromkeys(CATEGORIES, 0) for _ in range(self.n_ranks)]
        self._total = [0] * self.n_ranks  # bytes held now, all categories
        self._shared_live = set()

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
        if type(nbytes) is not int or not 0 <= nbytes < 1 << 63:  # the common case needs no conversion
            nbytes = check_numel(nbytes, "nbytes")
        self._own_live(rank)
        self._live[rank][name] = (category, nbytes)
        cur = self._current[rank]
        cur[category] += nbytes
        self._peak[rank][category] = max(self._peak[rank][category], cur[category])
        total = self._total[rank] = self._total[rank] + nbytes
        if total > self._peak_total[rank]:  # the first moment the total reached its peak
            self._peak_total[rank] = total
            self._at_peak[rank] = dict(cur)

    def free(self, rank: int, name: str) -> None:
        """Record that ``rank`` released buffer ``name``."""
        self._own_live(rank)
        try:
            category, nbytes = self._live[rank].pop(name)
        except KeyError:
            raise ValueError(f"rank {rank} holds no buffer named {name!r}") from None
        self._current[rank][category] -= nbytes
        self._total[rank] -= nbytes

    def _own_live(self, rank: int) -> None:
        if rank in self._shared_live:  # copy on write: the table is shared with a rank copied by copy_rank
            self._live[rank] = dict(self._live[rank])
            self._shared_live.discard(rank)

    def copy_rank(self, src: int, dst: int) -> None:
        """Make ``dst``'s row equal to ``src``'s: the same live buffers, current and peak bytes per category.

        For ranks known to allocate exactly as ``src`` did (a size-only stage run computes one rank per class of
        ranks whose shards have the same sizes). The live-buffer table is shared until either rank allocates or
        frees again, so copying a row costs O(categories), not O(buffers)."""
        for r in (src, dst):
            if not 0 <= r < self.n_ranks:
                raise ValueError(f"rank must be in [0, {self.n_ranks}); got {r}")
        if src == dst:
            return
        self._live[dst] = self._live[src]
        self._shared_live.update((src, dst))
        self._current[dst] = dict(self._current[src])
        self._peak[dst] = dict(self._peak[src])
        self._peak_total[dst] = self._peak_total[src]
        self._at_peak[dst] = dict(self._at_peak[src])
        self._total[dst] = self._total[src]

    def current(self, rank: int, category: str | None = None) -> int:
        """Bytes ``rank`` holds now, in one category or in all."""
        cur = self._current[rank]
        return cur[category] if category else sum(cur.values())

    def peak(self, rank: int, category: str | None = None) -> int:
        """Highest bytes ``rank`` ever held at once, in one category or in all together."""
        return self._peak[rank][category] if category else self._peak_total[rank]

    def at_peak(self, rank: int, category: str | None = None) -> int:
        """Bytes ``rank`` held in ``category`` at the first moment its total reached :meth:`peak` (the
        categories at that moment sum to the peak total)."""
        return self._at_peak[rank][category] if category else self._peak_total[rank]

    def model_states(self, rank: int) -> int:
        """Bytes of model states (16-bit weights and grads, fp32 master, m, v) ``rank`` holds now."""
        return sum(self._current[rank][c] for c in MODEL_STATE_CATEGORIES)

    def by_category(self, rank: int) -> dict[str, dict[str, int]]:
        """``{category: {"current": bytes, "peak": bytes, "at_peak": bytes}}`` for ``rank``: held now, the
        category's own highest, and what it held when the rank's total peaked."""
        return {c: {"current": self._current[rank][c], "peak": self._peak[rank][c],
                    "at_peak": self._at_peak[rank][c]} for c in CATEGORIES}
