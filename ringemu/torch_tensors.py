"""Torch CPU tensors as the numpy arrays ringemu's collectives take, sharing memory (no copies).

bfloat16 has no numpy dtype of its own; ringemu uses ml_dtypes' ``bfloat16``, whose bits are torch's, so a
bf16 tensor is viewed as int16 by torch and reinterpreted by numpy. Only CPU tensors are accepted: the
emulated ranks live in one process, and CUDA tensors would need a device copy that a real engine does not make.
"""
from __future__ import annotations

import numpy as np
import torch

from .dtypes import BFLOAT16, DTYPES, resolve_dtype

__all__ = ["NUMPY_OF", "EXACT_NUMPY_OF", "TORCH_OF", "as_flat_numpy", "check_tensor", "to_torch", "to_numpy"]

NUMPY_OF = {  # torch dtype -> numpy dtype ringemu moves; 16-bit floats are rounded per hop on reductions
    torch.float32: DTYPES["fp32"], torch.float64: DTYPES["fp64"], torch.float16: DTYPES["fp16"],
    torch.bfloat16: BFLOAT16, torch.int32: DTYPES["int32"], torch.int64: DTYPES["int64"],
}
# torch dtype -> numpy dtype of the narrow integers and bool, which ringemu's kernels do not take: the torch
# backend moves them by copies and reduces them exactly (integer sums wrap modulo 2^bits in any order, as torch's
# own uint8 arithmetic does; bool SUM is logical or, as NCCL maps it). torch's *_object collectives send pickles
# as uint8 tensors.
EXACT_NUMPY_OF = {torch.uint8: np.dtype(np.uint8), torch.int8: np.dtype(np.int8), torch.int16: np.dtype(np.int16),
                  torch.bool: np.dtype(np.bool_)}


def check_tensor(tensor: object, call: str) -> torch.Tensor:
    """The tensor, or a clear error for what the backend cannot move (non-tensors, CUDA, other dtypes)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{call}: expected a torch.Tensor; got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise NotImplementedError(f"{call}: the ringemu backend moves CPU tensors only; got one on {tensor.device}")
    if tensor.dtype not in NUMPY_OF and tensor.dtype not in EXACT_NUMPY_OF:
        allowed = ", ".join(str(d).replace("torch.", "") for d in (*NUMPY_OF, *EXACT_NUMPY_OF))
        raise NotImplementedError(f"{call}: dtype {tensor.dtype} is not supported by the ringemu backend "
                                  f"(supported: {allowed})")
    if not tensor.is_contiguous():
        raise NotImplementedError(f"{call}: non-contiguous tensors are not supported; pass .contiguous()")
    return tensor


def as_flat_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A 1-D numpy view of a contiguous CPU tensor's memory, in ringemu's dtype for it (writes go through)."""
    flat = tensor.detach().reshape(-1)
    if tensor.dtype == torch.bfloat16:
        return flat.view(torch.int16).numpy().view(BFLOAT16)
    return flat.numpy()


TORCH_OF = {numpy_dtype: torch_dtype for torch_dtype, numpy_dtype in NUMPY_OF.items()}  # numpy -> torch dtype


def to_torch(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor sharing memory with a 1-D numpy array of a ringemu dtype (bf16 is reinterpreted, not cast)."""
    dt = resolve_dtype(array.dtype)
    array = np.ascontiguousarray(array)
    if dt == BFLOAT16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array with the tensor's values (copied to the CPU if needed); bfloat16 becomes ml_dtypes bf16."""
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BFLOAT16)
    return tensor.numpy()
