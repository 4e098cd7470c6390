"""Slow, obviously correct oracles that every fast path is tested against.

:func:`run_schedule_reference` walks a schedule transfer by transfer with plain numpy, exactly as the
:class:`~ringemu.schedule.Schedule` semantics state: within a step every source sends what it held at the start
of the step, and additions into one destination happen in listed order. For the 16-bit wire types each hop adds
in fp32 and rounds the sum to the 16-bit type (round to nearest even), as NCCL does on the ring.
"""
from __future__ import annotations

import numpy as np

from .dtypes import is_wire16
from .layout import ChunkLayout
from .schedule import ADD, COPY, Schedule

__all__ = ["run_schedule_reference", "ring_sum_reference", "hop_add", "add_nan_left"]


def add_nan_left(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left + right`` for float arrays with the NaN rule of x86's scalar add (Intel SDM, "SSE and SSE2 NaN
    handling"): if ``left`` is a NaN the result is ``left`` made quiet, else if ``right`` is a NaN it is
    ``right`` made quiet; payload and sign kept. The compiled kernels add ``receiver + incoming`` and follow this
    rule; numpy's vectorised loops may pick either operand when two NaNs meet, so the rule is applied here."""
    with np.errstate(invalid="ignore", over="ignore"):
        total = left + right
    left_nan, right_nan = np.isnan(left), np.isnan(right)
    if not (left_nan.any() or right_nan.any()):
        return total
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[left.dtype.itemsize]
    quiet = uint(1) << uint(np.finfo(left.dtype).nmant - 1)  # the top mantissa bit marks a quiet NaN
    bits = np.where(left_nan, left.view(uint) | quiet, np.where(right_nan, right.view(uint) | quiet,
                                                                 total.view(uint)))
    return bits.astype(uint).view(left.dtype)


def hop_add(accumulated: np.ndarray, incoming: np.ndarray) -> np.ndarray:
    """One hop's addition in the wire arithmetic of ``accumulated.dtype`` (the receiver's value on the left).

    16-bit floats: fp32 add, then one rounding to 16 bits. Other floats: native add. Both with the NaN rule of
    :func:`add_nan_left`, so that every mode keeps the same NaN payload when two NaNs meet. Integers: native add.
    """
    if is_wire16(accumulated.dtype):
        return add_nan_left(accumulated.astype(np.float32), incoming.astype(np.float32)).astype(accumulated.dtype)
    if accumulated.dtype.kind == "f":
        return add_nan_left(accumulated, incoming)
    return accumulated + incoming


def run_schedule_reference(schedule: Schedule, world: np.ndarray) -> None:
    """Execute ``schedule`` in place on ``world`` (shape (n_ranks, n_chunks·chunk_size)), transfer by transfer."""
    n, width = world.shape
    if n != schedule.n_ranks or width % schedule.n_chunks:
        raise ValueError(f"world of shape {world.shape} does not fit {schedule}")
    chunk = width // schedule.n_chunks
    bounds = schedule.step_bounds()
    for step in range(schedule.n_steps):
        rows = schedule.table[bounds[step]:bounds[step + 1]].tolist()
        outgoing = [world[src, c * chunk:(c + 1) * chunk].copy() for _, src, _, c, _ in rows]
        for (_, _, dst, c, op), data in zip(rows, outgoing):
            target = world[dst, c * chunk:(c + 1) * chunk]
            if op == COPY:
                target[...] = data
            elif op == ADD:
                target[...] = hop_add(target, data)
            else:
                raise ValueError(f"unknown op {op}")


def ring_sum_reference(world: np.ndarray) -> np.ndarray:
    """The fully reduced buffer in ring order, computed without any schedule.

    Chunk c of the padded buffer is summed as (((x[c+1] + x[c+2]) + ...) + x[c]), ranks taken mod N: the order
    in which ring reduce-scatter visits them. Returns an array of world's row length.
    """
    n, numel = world.shape
    layout = ChunkLayout(numel, n)
    out = np.empty(numel, dtype=world.dtype)
    for c in range(n):
        part = layout.payload_slice(c)
        acc = world[(c + 1) % n, part].copy()
        for k in range(2, n + 1):
            acc = hop_add(acc, world[(c + k) % n, part])
        out[part] = acc
    return out
