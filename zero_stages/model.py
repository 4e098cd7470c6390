"""A small real model: an MLP of units, forward and backward in numpy, deterministic per-rank micro-batches.

Unit u is one layer ``y = tanh(x·Wᵀ + b)`` (the last unit is linear) of width w → w; its flat 16-bit parameter
vector p has S_u elements. W (w×w) and b (w) take their w² + w entries from p cyclically — entry j is
p[j mod S_u] (weight tying as in HashedNets, Chen et al. 2015) — so a unit can have any size S_u >= 1, including
sizes not divisible by N and smaller than N; with S_u = w² + w it is an ordinary dense layer. The width defaults
to the smallest w with w² + w >= max S_u, so every parameter is used.

Precision: the forward and backward run in fp32 computed from the 16-bit weights (``w16.astype(float32)``);
the loss is L = ½·Σ(y − t)² / B for a micro-batch of B rows; the gradient of each unit is folded back onto its
S_u parameters in fp32, multiplied by the loss scale and rounded once to the 16-bit type. Micro-batches are drawn
from ``numpy.random.default_rng([seed, 1 + step, rank])``; initial weights from ``default_rng([seed, 0, u])``.

Activations: a unit's saved input (B·w fp32) is recorded in the MemoryLedger as ``activations`` from its forward
to its backward, plus the output; they depend on B and w, never on N (lesson claim M8).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ringemu.checks import check_int

from .flat import check_unit_sizes

__all__ = ["MLP", "default_width"]


def default_width(unit_sizes) -> int:
    """Smallest w with w² + w >= max(unit_sizes): every parameter of every unit is used."""
    largest = max(check_unit_sizes(unit_sizes))
    w = max(1, math.isqrt(largest))
    while w * w + w < largest:
        w += 1
    while w > 1 and (w - 1) * (w - 1) + (w - 1) >= largest:
        w -= 1
    return w


@dataclass(frozen=True)
class MLP:
    """The model: ``unit_sizes`` (S_u per unit), layer ``width`` w, micro-batch rows ``micro_batch`` (B)."""

    unit_sizes: tuple[int, ...]
    width: int
    micro_batch: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "unit_sizes", check_unit_sizes(self.unit_sizes))
        for name in ("width", "micro_batch"):
            check_int(getattr(self, name), name, minimum=1)
        if self.width * self.width + self.width < max(self.unit_sizes):
            raise ValueError(f"width {self.width} gives {self.width ** 2 + self.width} entries per layer, fewer than "
                             f"the largest unit ({max(self.unit_sizes)}); use width >= "
                             f"{default_width(self.unit_sizes)}")

    @property
    def entries(self) -> int:
        """w² + w: entries of one layer's W and b."""
        return self.width * self.width + self.width

    def init_unit(self, unit: int) -> np.ndarray:
        """Initial fp32 parameters of ``unit``: uniform in ±1/√w (PyTorch's nn.Linear default bound)."""
        bound = 1.0 / math.sqrt(self.width)
        rng = np.random.default_rng([self.seed, 0, unit])
        return rng.uniform(-bound, bound, self.unit_sizes[unit]).astype(np.float32)

    def micro_batch_for(self, step: int, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, targets), each (B, w) fp32, for ``rank`` at ``step``."""
        rng = np.random.default_rng([self.seed, 1 + step, rank])
        x = rng.standard_normal((self.micro_batch, self.width), dtype=np.float32)
        t = rng.standard_normal((self.micro_batch, self.width), dtype=np.float32)
        return x, t

    def _entries(self, w16: np.ndarray) -> np.ndarray:
        """The w² + w fp32 layer entries, entry j = p[j mod S_u] (one compiled pass for a 16-bit w16)."""
        from ringemu._jit import JIT_ENABLED

        from .averaging import kernel_kind16
        kind = kernel_kind16(w16.dtype)
        if not JIT_ENABLED or kind is None or w16.ndim != 1:
            return np.resize(w16.astype(np.float32), self.entries)
        from ._adam_kernel import expand16_kernel
        entries = np.empty(self.entries, np.float32)
        expand16_kernel(w16.view(np.uint16), kind, entries)
        return entries

    def _layer(self, w16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = self.width
        entries = self._entries(w16)
        return entries[:w * w].reshape(w, w), entries[w * w:]

    def forward_unit(self, unit: int, w16: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Output of ``unit`` for input ``x`` (B, w)."""
        W, b = self._layer(w16)
        h = x @ W.T + b
        return np.tanh(h) if unit < len(self.unit_sizes) - 1 else h

    def backward_unit(self, unit: int, w16: np.ndarray, x: np.ndarray, y: np.ndarray, dy: np.ndarray,
                      need_dx: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """(fp32 gradient of the unit's S_u parameters, gradient of the input or None) given the saved input
        ``x``, the saved output ``y`` and the output gradient ``dy``."""
        dh = dy * (np.float32(1) - y * y) if unit < len(self.unit_sizes) - 1 else dy
        dx = None
        if need_dx:
            W, _ = self._layer(w16)
            dx = dh @ W
        return self._entry_gradient_folded(dh, x, self.unit_sizes[unit]), dx

    def _entry_gradient_folded(self, dh: np.ndarray, x: np.ndarray, size: int) -> np.ndarray:
        """The entries' gradient [dhᵀ·x, Σ_rows dh] folded onto ``size`` parameters, as :meth:`_fold` of it, with
        no concatenated or padded copy: dhᵀ·x is written in place (the same sgemm call, so the same bits)."""
        w, n_entries = self.width, self.entries
        rows = -(-n_entries // size)
        buf = np.empty(rows * size, dtype=np.float32)
        np.matmul(dh.T, x, out=buf[:w * w].reshape(w, w))
        buf[w * w:n_entries] = dh.sum(axis=0)
        out = buf[:size]
        for k in range(1, rows):  # fixed order: the same bits on every rank and in every stage
            lo = k * size
            real = min(size, n_entries - lo)  # entries of row k; the rest of the row is padding (+0.0)
            out[:real] += buf[lo:lo + real]
            out[real:] += np.float32(0)  # x + (+0) is x, except that -0 becomes +0, as in _fold
        return out

    @staticmethod
    def _fold(entries: np.ndarray, size: int) -> np.ndarray:
        """Sum the gradients of tied entries onto the parameters: g[i] = Σ_k entries[i + k·size], k ascending.
        (The reference of :meth:`_entry_gradient_folded`.)"""
        rows = -(-entries.size // size)
        padded = np.zeros(rows * size, dtype=np.float32)
        padded[:entries.size] = entries
        out = padded[:size].copy()
        for k in range(1, rows):  # fixed order: the same bits on every rank and in every stage
            out += padded[k * size:(k + 1) * size]
        return out

    def loss_grad(self, y: np.ndarray, t: np.ndarray) -> np.ndarray:
        """dL/dy for L = ½·Σ(y − t)² / B."""
        return (y - t) / np.float32(self.micro_batch)

    def loss(self, y: np.ndarray, t: np.ndarray) -> float:
        return float(0.5 * np.sum((y - t) ** 2) / self.micro_batch)
