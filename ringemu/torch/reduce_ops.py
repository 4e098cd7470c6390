"""The reduce ops of the torch backend: which dtypes each takes, and how each is computed and counted.

torch.distributed's ``ReduceOp`` (torch 2.13 ``ReduceOp.RedOpType``): SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR,
BXOR and PREMUL_SUM (``dist._make_nccl_premul_sum(factor)``, FSDP2's ``set_gradient_divide_factor``).

* SUM on ringemu's dtypes adds in the algorithm's order with ringemu's kernels (16-bit floats in fp32, rounded
  per hop); on uint8, int8 and int16 it wraps modulo 2^bits, which no order of addition changes; on bool it is
  logical or, as NCCL maps it (``ProcessGroupNCCL``'s ``getNcclReduceOp``: bool SUM -> ncclMax).
* AVG (floats only) is that sum divided by N in the tensor's dtype.
* PREMUL_SUM (floats only) multiplies each rank's input by ``factor`` before the sum, as NCCL's
  ``ncclRedOpCreatePreMulSum`` does: the factor is rounded to the tensor's dtype and each product rounded once
  (for 16-bit types the fp32 product of two 16-bit values is exact, so one rounding to 16 bits is the correctly
  rounded product).
* MIN and MAX are exact in any order; PRODUCT multiplies in rank order (16-bit floats in fp32, rounded per
  rank); BAND, BOR and BXOR (integers and bool only) are exact in any order. On bool, PRODUCT and MIN are
  logical and, MAX logical or.

Every op is counted as the algorithm's traffic for the collective (reduce-scatter or all-reduce) on the
tensor's element size: an engine moves the same bytes whatever it does with them on arrival.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import algorithms, per_rank
from ..layout import ChunkLayout
from ..torch_tensors import EXACT_NUMPY_OF
from .counting import record_collective

__all__ = ["OPS", "op_of", "reduce_one"]

_FLOAT, _INT, _BOOL = "floating", "integer", "bool"
OPS = {  # op name -> the kinds of tensors it accepts (the table docs/torch.md prints)
    "SUM": (_FLOAT, _INT, _BOOL), "AVG": (_FLOAT,), "PREMUL_SUM": (_FLOAT,), "PRODUCT": (_FLOAT, _INT, _BOOL),
    "MIN": (_FLOAT, _INT, _BOOL), "MAX": (_FLOAT, _INT, _BOOL), "BAND": (_INT, _BOOL), "BOR": (_INT, _BOOL),
    "BXOR": (_INT, _BOOL),
}
_EXACT = frozenset(EXACT_NUMPY_OF.values())


def _kind(dtype: np.dtype) -> str:
    if dtype == np.bool_:
        return _BOOL
    return _INT if dtype.kind in "iu" else _FLOAT


def op_of(op, call: str, dtype: np.dtype) -> tuple[str, float | None]:
    """(name, PREMUL_SUM's factor or None) of a c10d ``ReduceOp`` for a ``dtype`` tensor, or a clear error."""
    red = getattr(op, "op", op)  # a ReduceOp object carries its RedOpType in .op
    name = getattr(red, "name", None)
    if name not in OPS:
        raise NotImplementedError(f"{call}: reduce op {name or op!r} is not supported by the ringemu backend "
                                  f"(supported: {', '.join(OPS)})")
    kind = _kind(np.dtype(dtype))
    if kind not in OPS[name]:
        raise TypeError(f"{call}: ReduceOp.{name} is not defined on {kind} tensors ({np.dtype(dtype).name}); it "
                        f"takes {' and '.join(OPS[name])} tensors")
    factor = None
    if name == "PREMUL_SUM":
        factor = float(getattr(op, "factor"))
    return name, factor


def _exact_total(name: str, world: np.ndarray) -> np.ndarray:
    """The reduction over ranks (axis 0) of an op whose result does not depend on the order (or, for PRODUCT of
    floats, in rank order)."""
    if world.dtype == np.bool_:
        if name in ("SUM", "MAX", "BOR"):
            return np.logical_or.reduce(world, axis=0)
        if name in ("PRODUCT", "MIN", "BAND"):
            return np.logical_and.reduce(world, axis=0)
        return np.logical_xor.reduce(world, axis=0)
    if name == "MIN":
        return np.min(world, axis=0)
    if name == "MAX":
        return np.max(world, axis=0)
    if name in ("BAND", "BOR", "BXOR"):
        return {"BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[name].reduce(world, axis=0)
    if name == "SUM":  # narrow integers only: wraps modulo 2^bits, the same in every order
        return np.add.reduce(world, axis=0, dtype=world.dtype)
    if world.dtype.kind in "iu":  # PRODUCT of integers wraps too, in any order
        return np.multiply.reduce(world, axis=0, dtype=world.dtype)
    wide = np.float32 if world.dtype.itemsize == 2 else world.dtype  # 16-bit floats: fp32, rounded per rank
    total = world[0]
    for row in world[1:]:
        total = (total.astype(wide) * row.astype(wide)).astype(world.dtype)
    return total


def _premultiplied(rows: list[np.ndarray], factor: float) -> list[np.ndarray]:
    dtype = rows[0].dtype
    wide = np.float32 if dtype.itemsize == 2 else dtype
    scale = np.asarray(factor, dtype=dtype).astype(wide)  # the factor in the tensor's dtype, as NCCL takes it
    return [(row.astype(wide) * scale).astype(dtype) for row in rows]


def reduce_one(collective: str, name: str, factor, rows: list[np.ndarray], outs: list[np.ndarray], ledger,
               label: str, algorithm: str, mode: str, schedule_of: Callable | None = None) -> None:
    """One reduce-scatter or all-reduce of op ``name`` over the ranks' flat inputs ``rows``; rank r's result into
    ``outs[r]``. Sums run where the tensors live (:func:`ringemu.per_rank.reduce_into`: one pass over the ranks'
    memory, no world buffer, in place when ``outs[r]`` is ``rows[r]``). ``schedule_of(collective, n)`` returns a
    prebuilt schedule (the spawn keeps one per collective: building the ring's table is not paid per call)."""
    n = len(rows)
    dtype = rows[0].dtype
    average = algorithms.algorithm(collective, algorithm).average if name == "AVG" else None
    if name == "AVG" and average is None:
        raise NotImplementedError(f"AVG with algorithm {algorithm!r}: its engine has no AVG (use SUM and divide)")
    if name in ("SUM", "AVG", "PREMUL_SUM") and dtype not in _EXACT:
        if name == "PREMUL_SUM":
            rows = _premultiplied(rows, factor)
        elif average == "premultiply":  # NCCL's AVG: each input × T(float(1/N)) before the sum (enqueue.cc)
            rows = _premultiplied(rows, float(np.float32(1.0 / n)) if dtype.itemsize < 8 else 1.0 / n)
        schedule = schedule_of(collective, n) if schedule_of is not None else None
        per_rank.reduce_into(collective, rows, outs, ledger=ledger, label=label, mode=mode, algorithm=algorithm,
                                schedule=schedule)
        if average == "divide":  # sum, then ÷ N in the tensor's dtype
            for out in outs:
                np.copyto(out, (out.astype(np.float64) / n).astype(out.dtype) if out.dtype.itemsize == 8
                          else (out.astype(np.float32) / np.float32(n)).astype(out.dtype))
        return
    total = _exact_total(name, np.stack(rows))
    record_collective(ledger, collective, n, rows[0].size, dtype, label, algorithm)
    if collective == "all-reduce":
        for out in outs:
            np.copyto(out, total)
    else:
        layout = ChunkLayout(rows[0].size, n)
        for r, out in enumerate(outs):
            np.copyto(out, total[layout.start(r):layout.start(r) + layout.payload(r)])
