"""The optimizer states one rank keeps and updates: fp32 master, Adam m and v for its part of each unit.

ZeRO's P_os (Rajbhandari et al. 2019, §5.1): with N ranks, rank r keeps the K = 12 B/parameter optimizer
states only for its shard (chunk r of every unit, padded to ceil(S_u/N) elements) and updates only that shard.
Data parallelism is the special case where the part is the whole unit. Adam is elementwise, so a shard's update
equals the same elements of the full update bit for bit (:mod:`zero_stages.adam`).

One update of one unit (:meth:`OptimizerShard.update`): the reduced 16-bit gradient of the part is averaged in
fp32 (:func:`~zero_stages.averaging.average_gradient`, the only place the 1/N happens), Adam updates master,
m and v in place, and :meth:`weights16` rounds the new master to the 16-bit type. The transient fp32 gradient
(4 B per element of the part) is recorded as ``comm_buffer``.

Speed: with the JIT on, numpy square roots (``AdamConfig.sqrt == "numpy"``) and a bf16/fp16 gradient, the
average, the Adam update and the 16-bit rounding of the new master run as one compiled pass
(:func:`zero_stages._adam_kernel.fused_update_kernel`, GIL released) and :meth:`weights16` hands out the
16-bit weights that pass produced. The bits are those of the three reference steps in sequence. The pass
writes into two buffers per unit kept from step to step (the fp32 gradient it returns and the 16-bit weights),
so that a step touches no freshly mapped memory (page faults of 8 threads at once cost more than the pass);
the returned gradient is therefore valid until the next update of the same unit.
"""
from __future__ import annotations

import numpy as np

from ringemu.virtual import is_virtual

from .adam import AdamConfig, adam_step, kernel_constants
from .averaging import average_gradient, kernel_kind16
from .buffers import cast, part, write

__all__ = ["OptimizerShard"]


class OptimizerShard:
    """fp32 master, m, v of ``parts[u]`` (a slice of unit u) for every unit, each allocated ``alloc_numel[u]``
    elements (the part's length plus padding). ``init(u)`` gives unit u's initial fp32 weights (or None)."""

    def __init__(self, arena, parts: list[slice], alloc_numel: list[int], init, config: AdamConfig, resume=None):
        self.arena, self.parts, self.config = arena, list(parts), config
        self.step_count = 0  # applied steps; skipped (overflow) steps do not count
        self._fresh16: dict[int, np.ndarray] = {}  # unit -> 16-bit rounding of its new master, from the fused pass
        self._scratch: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # unit -> (fp32 gradient, 16-bit weights)
        self.master, self.m, self.v = [], [], []
        for u, (sl, numel) in enumerate(zip(self.parts, alloc_numel)):
            pad = numel - (sl.stop - sl.start)
            for store, name, cat in ((self.master, "master32", "master32"), (self.m, "adam_m", "adam_m"),
                                     (self.v, "adam_v", "adam_v")):
                store.append(arena.alloc(f"{name}[{u}]", cat, numel, np.float32, padding=pad))
            initial = init(u)
            if initial is not None:
                write(self.payload(self.master, u), initial[sl])
            if resume is not None:  # a resumed run: Adam's moments of this part, and its step count
                write(self.payload(self.m, u), resume.m[u][sl])
                write(self.payload(self.v, u), resume.v[u][sl])
        if resume is not None:
            self.step_count = int(resume.adam_step)

    def length(self, unit: int) -> int:
        sl = self.parts[unit]
        return sl.stop - sl.start

    def payload(self, store: list, unit: int):
        """The real (unpadded) elements of ``store[unit]``."""
        return part(store[unit], 0, self.length(unit))

    def next_step(self) -> None:
        """Start an applied optimizer step (Adam's step counter t counts from 1)."""
        self.step_count += 1

    def update(self, unit: int, reduced16, n_ranks: int, loss_scale: float):
        """Average ``reduced16`` (this part of unit's summed 16-bit gradient) and apply Adam to this part.
        Returns the fp32 averaged gradient."""
        name = f"grad32[{unit}]"
        self.arena.alloc(name, "comm_buffer", self.length(unit), np.float32)
        self._fresh16.pop(unit, None)
        if self._fusable(reduced16):
            grad32 = self._fused_update(unit, reduced16, n_ranks, loss_scale)
        else:
            grad32 = average_gradient(reduced16, n_ranks, loss_scale)  # the 1/N (and 1/scale): one place
            if not is_virtual(grad32) and grad32.size:
                adam_step(self.payload(self.master, unit), grad32, self.payload(self.m, unit),
                          self.payload(self.v, unit), self.step_count, self.config)
        self.arena.free(name)
        return grad32

    def _fusable(self, reduced16) -> bool:
        if is_virtual(reduced16) or self.config.sqrt != "numpy" or reduced16.ndim != 1 or not reduced16.size:
            return False
        from ringemu._jit import JIT_ENABLED
        return JIT_ENABLED and kernel_kind16(reduced16.dtype) is not None

    def _fused_update(self, unit: int, reduced16: np.ndarray, n_ranks: int, loss_scale: float) -> np.ndarray:
        """average_gradient, adam_step and weights16 of ``unit`` in one compiled pass (same bits)."""
        from ._adam_kernel import fused_update_kernel
        grad32, fresh16 = self._scratch.get(unit, (None, None))
        if grad32 is None or grad32.shape != reduced16.shape or fresh16.dtype != reduced16.dtype:
            grad32, fresh16 = np.empty(reduced16.shape, np.float32), np.empty(reduced16.shape, reduced16.dtype)
            self._scratch[unit] = grad32, fresh16
        fused_update_kernel(reduced16.view(np.uint16), kernel_kind16(reduced16.dtype),
                            np.float32(n_ranks * loss_scale), self.payload(self.master, unit),
                            self.payload(self.m, unit), self.payload(self.v, unit),
                            grad32, fresh16.view(np.uint16), *kernel_constants(self.config, self.step_count))
        self._fresh16[unit] = fresh16
        return grad32

    def forget_fresh(self) -> None:
        """Drop the 16-bit weights of updates not yet handed out (a failed step is being rolled back)."""
        self._fresh16.clear()

    def weights16(self, unit: int, dtype):
        """This part of unit's master weights rounded to the 16-bit type."""
        fresh = self._fresh16.pop(unit, None)
        if fresh is not None and fresh.dtype == np.dtype(dtype):
            return fresh
        return cast(self.payload(self.master, unit), dtype)

    def pieces(self, store: list) -> list[tuple[int, int, object]]:
        """(unit, start in unit, values) for each unit: what this rank holds of ``store``."""
        return [(u, sl.start, self.payload(store, u)) for u, sl in enumerate(self.parts)]
