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

from ringemu.dtypes import DTYPES
from ringemu.virtual import VirtualBuffer, is_virtual
from ringemu.wire import WIRE_BF16, WIRE_FP16, wire_kind

__all__ = ["average_gradient", "average_gradient_reference", "kernel_kind16"]


_KIND16 = {DTYPES["bf16"]: WIRE_BF16, DTYPES["fp16"]: WIRE_FP16}  # ringemu.wire's codes of the 16-bit types


def kernel_kind16(dtype) -> int | None:
    """The compiled kernels' code of a 16-bit type, :func:`ringemu.wire.wire_kind` (``WIRE_BF16`` or
    ``WIRE_FP16``, the one table of wire kinds), or None for a dtype they do not take (the numpy reference is
    used then). Imports no numba."""
    if isinstance(dtype, np.dtype):  # the common case: one dict lookup
        return _KIND16.get(dtype)
    try:
        kind = wire_kind(np.dtype(dtype))
    except (TypeError, ValueError):
        return None
    return kind if kind in (WIRE_BF16, WIRE_FP16) else None


def average_gradient(reduced16, n_ranks: int, loss_scale: float = 1.0):
    """fp32 mean gradient from a reduced (summed) 16-bit gradient: ``fp32(sum16) / fp32(n_ranks · loss_scale)``.

    Size-only input gives a size-only fp32 result of the same length. Bit for bit
    :func:`average_gradient_reference`; a 1-D bf16/fp16 array goes through the compiled kernel when the JIT is on.
    """
    if is_virtual(reduced16):
        return VirtualBuffer(reduced16.shape, np.float32)
    from ringemu._jit import JIT_ENABLED
    kind = kernel_kind16(reduced16.dtype)
    if not JIT_ENABLED or kind is None or reduced16.ndim != 1:
        return average_gradient_reference(reduced16, n_ranks, loss_scale)
    from ._adam_kernel import average_kernel
    out = np.empty(reduced16.shape, np.float32)
    average_kernel(reduced16.view(np.uint16), kind, np.float32(n_ranks * loss_scale), out)
    return out


def average_gradient_reference(reduced16, n_ranks: int, loss_scale: float = 1.0):
    """The numpy reference of :func:`average_gradient` (real arrays only)."""
    return reduced16.astype(np.float32) / np.float32(n_ranks * loss_scale)
