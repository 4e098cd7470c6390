"""16-bit wire arithmetic: how fp16 and bf16 buffers reach the kernels, and one hop's addition on bits.

numba cannot add float16 on the CPU, so 16-bit buffers are viewed as uint16 and the kernels work on the bits
(:mod:`ringemu.kernels`): each hop of a ring reduction widens both operands to fp32, adds once in fp32 and rounds
to nearest even back to 16 bits, as NCCL's reduction kernels do for half and bfloat16. The result is bit for bit
``(a.astype(float32) + b.astype(float32)).astype(dtype)`` with numpy (fp16) and ml_dtypes (bf16), NaN and
infinity handling included; the tests check every 16-bit pattern and large samples of fp32 patterns.

The numpy-level functions here import the kernels (and so numba) on first use only.
"""
from __future__ import annotations

import numpy as np

from .dtypes import BFLOAT16, resolve_dtype

__all__ = ["WIRE_NATIVE", "WIRE_FP16", "WIRE_BF16", "wire_kind", "kernel_view", "to_fp32", "from_fp32",
           "hop_add"]

WIRE_NATIVE = 0  # int32, int64, fp32, fp64: the dtype's own addition
WIRE_FP16 = 1  # IEEE binary16 bits in uint16; adds in fp32, one rounding per hop
WIRE_BF16 = 2  # bfloat16 bits in uint16; adds in fp32, one rounding per hop


def wire_kind(dtype: object) -> int:
    """The wire kind of a supported dtype (ValueError for unsupported ones)."""
    dt = resolve_dtype(dtype)
    if dt == np.float16:
        return WIRE_FP16
    if dt == BFLOAT16:
        return WIRE_BF16
    return WIRE_NATIVE


def kernel_view(array: np.ndarray) -> tuple[np.ndarray, int]:
    """``array`` as the kernels see it (16-bit floats viewed as uint16, no copy) and its wire kind."""
    kind = wire_kind(array.dtype)
    return (array.view(np.uint16) if kind != WIRE_NATIVE else array), kind


def _check16(array: np.ndarray, name: str) -> tuple[np.ndarray, int]:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of fp16 or bf16; got {type(array).__name__}")
    kind = wire_kind(array.dtype)
    if kind == WIRE_NATIVE:
        raise ValueError(f"{name} must have dtype fp16 or bf16; got {array.dtype}")
    return np.ascontiguousarray(array).reshape(-1).view(np.uint16), kind


def to_fp32(values: np.ndarray) -> np.ndarray:
    """Widen an fp16 or bf16 array to float32 exactly, with the kernels' conversion."""
    from . import kernels

    bits, kind = _check16(values, "values")
    out = np.empty(bits.shape, dtype=np.float32)
    kernels.widen_tile(out, bits, kind)
    return out.reshape(np.shape(values))


def from_fp32(values: np.ndarray, dtype: object) -> np.ndarray:
    """Round a float32 array to ``dtype`` (fp16 or bf16), nearest even, with the kernels' conversion."""
    from . import kernels

    kind = wire_kind(dtype)
    if kind == WIRE_NATIVE:
        raise ValueError(f"dtype must be fp16 or bf16; got {dtype!r}")
    if not isinstance(values, np.ndarray) or values.dtype != np.float32:
        raise TypeError(f"values must be a float32 numpy array; got {getattr(values, 'dtype', type(values))}")
    flat = np.ascontiguousarray(values).reshape(-1)
    out = np.empty(flat.shape, dtype=np.uint16)
    kernels.narrow_tile(out, flat, kind)
    return out.view(resolve_dtype(dtype)).reshape(values.shape)


def hop_add(accumulated: np.ndarray, incoming: np.ndarray) -> np.ndarray:
    """One ring hop with the kernels: ``accumulated + incoming`` in the wire arithmetic of their dtype.

    Returns a new array; ``accumulated`` is the receiver's value (the left operand, which decides the payload
    of a NaN + NaN sum).
    """
    if not isinstance(accumulated, np.ndarray) or not isinstance(incoming, np.ndarray):
        raise TypeError("accumulated and incoming must be numpy arrays")
    if accumulated.shape != incoming.shape or accumulated.dtype != incoming.dtype:
        raise ValueError(f"accumulated and incoming must share shape and dtype; got {accumulated.shape} "
                         f"{accumulated.dtype} and {incoming.shape} {incoming.dtype}")
    from . import kernels

    out = np.ascontiguousarray(accumulated).reshape(-1).copy()
    inc = np.ascontiguousarray(incoming).reshape(-1)
    out_view, kind = kernel_view(out)
    kernels.add_tile(out_view, kernel_view(inc)[0], kind)
    return out.reshape(accumulated.shape)
