"""The element types ringemu moves, by name: ``int32 int64 fp16 bf16 fp32 fp64``.

16-bit floats are "wire" types: on a ring each hop adds in fp32 and rounds back to 16 bits, as NCCL does
(its reduction kernels up-convert half and bfloat16 operands to float). bfloat16 comes from ml_dtypes.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["DTYPES", "ALIASES", "resolve_dtype", "dtype_name", "is_wire16", "BFLOAT16"]

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

DTYPES = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "fp16": np.dtype(np.float16),
    "bf16": BFLOAT16,
    "fp32": np.dtype(np.float32),
    "fp64": np.dtype(np.float64),
}
ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "single": "fp32",
           "float64": "fp64", "double": "fp64"}


_NAMES = {dt: name for name, dt in DTYPES.items()}  # supported dtype -> short name (dtypes hash by value)


def resolve_dtype(dtype: object, name: str = "dtype") -> np.dtype:
    """A supported ``np.dtype`` from a name (``fp16``, ``float16``, ...) or a dtype; else a clear ValueError
    (``name`` says whose dtype it is: ``world dtype``)."""
    if isinstance(dtype, np.dtype) and dtype in _NAMES:  # the common case, one dict lookup
        return dtype
    if dtype is None:
        pass  # np.dtype(None) would silently mean float64
    elif isinstance(dtype, str):
        key = ALIASES.get(dtype.lower(), dtype.lower())
        if key in DTYPES:
            return DTYPES[key]
    else:
        try:
            resolved = np.dtype(dtype)
        except (TypeError, ValueError):
            resolved = None
        if resolved is not None and resolved in DTYPES.values():
            return resolved
    allowed = " ".join(DTYPES)
    raise ValueError(f"{name} must be one of {allowed} (numpy spellings accepted too); got {dtype!r}")


def dtype_name(dtype: object) -> str:
    """The short name (``bf16``) of a supported dtype."""
    return _NAMES[resolve_dtype(dtype)]


def is_wire16(dtype: object) -> bool:
    """True for fp16 and bf16, whose ring additions are done in fp32 and rounded per hop."""
    return resolve_dtype(dtype) in (DTYPES["fp16"], BFLOAT16)
