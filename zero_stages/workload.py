"""Where a rank's 16-bit gradients come from: the model, fixed-seed integer blocks, or nothing (size-only).

A stage drives one step of any source the same way::

    ctx = workload.begin_step(arena, step, rank)
    for u in units:            ctx.forward(u, weights16_of_unit_u)
    for u in reversed(units):  ctx.backward(u, weights16_of_unit_u, out16, loss_scale)   # fills out16
    ctx.end()

* :class:`ModelWorkload` runs :class:`~zero_stages.model.MLP` (backward of the scaled loss, rounded to 16 bits).
* :class:`BlockWorkload` supplies the gradients directly as fixed-seed integer blocks
  (:func:`ringemu.blocks.integer_blocks`, the lesson's experiment): whole numbers whose every partial sum over
  the ranks is exact in the wire type, so the reduction is order-independent. They stand for the 16-bit gradient
  as backward hands it over, loss scale included, so the scale is not applied again. Rank r's gradient of unit
  u at ``step`` is row r of ``integer_blocks(N, S_u, seed_of(seed, step, u), wire)``.
* :class:`SizeOnlyWorkload` computes nothing; it records activations layer by layer (``activation_layers``,
  bytes per layer, e.g. from :class:`~zero_stages.memory.activations.ActivationShape`): layer l of L is allocated in
  the forward of unit ⌊l·U/L⌋ and freed in that unit's backward, so activation memory is shown beside the model
  states and the peak sees the activations and the buffers in flight together.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringemu.blocks import integer_blocks

from .buffers import write
from .model import MLP

__all__ = ["ModelWorkload", "BlockWorkload", "SizeOnlyWorkload", "block_seed", "GRADIENT_SOURCES"]

GRADIENT_SOURCES = ("model", "blocks")


def block_seed(seed: int, step: int, unit: int) -> int:
    """The integer_blocks seed of (seed, step, unit): the first 63 bits of SeedSequence([seed, step, unit])."""
    state = np.random.SeedSequence([seed, step, unit]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) | (int(state[1]) >> 1)


@dataclass(frozen=True)
class ModelWorkload:
    model: MLP
    wire: np.dtype

    def init_unit(self, unit: int) -> np.ndarray:
        return self.model.init_unit(unit)

    def begin_step(self, arena, step: int, rank: int) -> "_ModelStep":
        return _ModelStep(self, arena, step, rank)


class _ModelStep:
    def __init__(self, work: ModelWorkload, arena, step: int, rank: int):
        self.work, self.arena, self.model = work, arena, work.model
        self.x, self.target = self.model.micro_batch_for(step, rank)
        self.inputs: dict[int, np.ndarray] = {}
        self.dy: np.ndarray | None = None
        self.out: np.ndarray | None = None
        self._act_bytes = self.x.nbytes  # B·w·4 B per saved tensor

    def forward(self, unit: int, w16) -> None:
        self.arena.alloc(f"act_in[{unit}]", "activations", self.x.size, np.float32)
        self.inputs[unit] = self.x
        self.x = self.model.forward_unit(unit, w16, self.x)
        if unit == len(self.model.unit_sizes) - 1:
            self.arena.alloc("act_out", "activations", self.x.size, np.float32)
            self.out = self.x

    def backward(self, unit: int, w16, out16, loss_scale: float) -> None:
        last = len(self.model.unit_sizes) - 1
        if unit == last:
            self.dy = self.model.loss_grad(self.out, self.target)
        y = self.out if unit == last else self.inputs[unit + 1]
        grad, dx = self.model.backward_unit(unit, w16, self.inputs[unit], y, self.dy, need_dx=unit > 0)
        with np.errstate(over="ignore"):  # an fp16 overflow becomes inf, which the overflow check catches
            write(out16, (grad * np.float32(loss_scale)).astype(self.work.wire))  # scaled, one rounding to 16 bits
        self.dy = dx
        if unit == last:
            self.arena.free("act_out")
        if unit + 1 <= last:
            self.arena.free(f"act_in[{unit + 1}]")
        if unit == 0:
            self.arena.free("act_in[0]")

    def end(self) -> None:
        self.inputs.clear()


@dataclass(frozen=True)
class BlockWorkload:
    unit_sizes: tuple[int, ...]
    n_ranks: int
    wire: np.dtype
    seed: int = 0

    def init_unit(self, unit: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 0, unit])
        return rng.uniform(-0.5, 0.5, self.unit_sizes[unit]).astype(np.float32)

    def begin_step(self, arena, step: int, rank: int) -> "_BlockStep":
        return _BlockStep(self, step, rank)


class _BlockStep:
    def __init__(self, work: BlockWorkload, step: int, rank: int):
        self.work, self.step, self.rank = work, step, rank

    def forward(self, unit: int, w16) -> None:
        pass  # no model: nothing to compute, no activations

    def backward(self, unit: int, w16, out16, loss_scale: float) -> None:
        w = self.work
        blocks = integer_blocks(w.n_ranks, w.unit_sizes[unit], block_seed(w.seed, self.step, unit), w.wire)
        write(out16, blocks[self.rank])

    def end(self) -> None:
        pass


@dataclass(frozen=True)
class SizeOnlyWorkload:
    unit_sizes: tuple[int, ...]
    activation_layers: tuple[int, ...] = ()  # bytes per layer, each held from its unit's forward to its backward

    def init_unit(self, unit: int):
        return None

    def layers_of_unit(self, unit: int) -> range:
        """The layers whose activations unit ``unit`` holds: those l with ⌊l·U/L⌋ = unit."""
        n_units, n_layers = len(self.unit_sizes), len(self.activation_layers)
        first = -(-unit * n_layers // n_units)  # smallest l with l·U >= unit·L
        last = -(-(unit + 1) * n_layers // n_units)
        return range(first, last)

    def begin_step(self, arena, step: int, rank: int) -> "_SizeOnlyStep":
        return _SizeOnlyStep(self, arena)


class _SizeOnlyStep:
    def __init__(self, work: SizeOnlyWorkload, arena):
        self.work, self.arena = work, arena

    def forward(self, unit: int, w16) -> None:
        memory, rank = self.arena.memory, self.arena.rank
        for layer in self.work.layers_of_unit(unit):
            memory.alloc(rank, f"activations[{layer}]", "activations", self.work.activation_layers[layer])

    def backward(self, unit: int, w16, out16, loss_scale: float) -> None:
        for layer in self.work.layers_of_unit(unit):
            self.arena.memory.free(self.arena.rank, f"activations[{layer}]")

    def end(self) -> None:
        pass
