"""The one place where the gradient is averaged over ranks (the 1/N) and unscaled (the 1/loss-scale).

Every stage reduces 16-bit gradients as a *sum* in the ring's order (the Communicator adds in fp32 and rounds
to 16 bits per hop), then hands the reduced 16-bit values, the whole buffer (DP) or this rank's shard (ZeRO),
to :func:`average_gradient`, which returns the fp32 gradient the optimizer uses:

    g = fp32(sum16) / fp32(N · loss_scale)      # one correctly rounded fp32 division per element

The divisor is exact in fp32 when the scale is a power of two and N < 2^24. The operation is elementwise, so the
whole buffer (DP) and a shard (ZeRO-1/2/3) give the same bits for the same element; this is what makes every
stage's update equal DP's bit for bit (ZeRO §5, lesson claim M11). Averaging after the reduction in fp32,
rather than pre-dividing the 16-bit gradients, adds no 16-bit rounding and keeps the wire sums exact for
integer test blocks.
"""
from __future__ import annotations

import numpy as np

from ringemu.virtual import VirtualBuffer, is_virtual

__all__ = ["average_gradient"]


def average_gradient(reduced16, n_ranks: int, loss_scale: float = 1.0):
    """fp32 mean gradient from a reduced (summed) 16-bit gradient: ``fp32(sum16) / fp32(n_ranks · loss_scale)``.

    Size-only input gives a size-only fp32 result of the same length.
    """
    if is_virtual(reduced16):
        return VirtualBuffer(reduced16.shape, np.float32)
    return reduced16.astype(np.float32) / np.float32(n_ranks * loss_scale)
