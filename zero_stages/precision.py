"""Mixed precision as ZeRO counts it (Rajbhandari et al. 2019, §3.1): bytes per parameter and loss scaling.

Per parameter a rank of plain data parallelism holds 2 B of 16-bit weight, 2 B of 16-bit gradient and
K = 12 B of optimizer state (fp32 master weight, Adam m, Adam v, 4 B each): 16 B in all (lesson claim M1).
The 16-bit type is fp16 or bf16, chosen per run; it is also the wire type of the gradient reduction.

Loss scaling (Micikevicius et al. 2018, §3.2) keeps small fp16 gradients representable: backward produces
``grad · scale`` in 16 bits, and the reduced gradient is divided by the scale again (in
:mod:`zero_stages.averaging`, together with 1/N). A step whose reduced gradient holds an inf or NaN is skipped
on *every* rank: each rank tests the part of the reduced gradient it holds, and one all-reduce of a found-inf
flag (label ``overflow_check``) makes the decision common. Dynamic scaling follows
``torch.cuda.amp.GradScaler``'s defaults: start at 2^16, halve on overflow, double after 2000 clean steps.
bf16 has fp32's exponent range and needs no scaling; it runs unscaled unless asked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ringemu.dtypes import dtype_name, resolve_dtype
from ringemu.virtual import VirtualBuffer, is_virtual

__all__ = ["WEIGHT16_BYTES", "GRAD16_BYTES", "K_BYTES", "FP32_BYTES", "BYTES_PER_PARAMETER", "WIRE_DTYPES",
           "LOSS_SCALING_KINDS", "MAX_LOSS_SCALE", "LossScaling", "LossScaler", "check_wire_dtype",
           "default_loss_scaling"]

WEIGHT16_BYTES = 2  # fp16/bf16 weight, ZeRO §3.1
GRAD16_BYTES = 2  # fp16/bf16 gradient, ZeRO §3.1
FP32_BYTES = 4  # fp32 master weight, Adam m, Adam v: 4 B each
K_BYTES = 3 * FP32_BYTES  # K = 12 B of optimizer state per parameter, ZeRO §3.1
BYTES_PER_PARAMETER = WEIGHT16_BYTES + GRAD16_BYTES + K_BYTES  # 16 B (lesson claim M1)
WIRE_DTYPES = ("bf16", "fp16")
LOSS_SCALING_KINDS = ("none", "static", "dynamic")
MAX_LOSS_SCALE = 2.0 ** 127  # the largest power of two below fp32's maximum: a scale the fp32 average can undo


def check_wire_dtype(wire_dtype: object) -> np.dtype:
    """The numpy dtype of a 16-bit weight/gradient type name (``bf16`` or ``fp16``), else a clear ValueError."""
    try:
        dt = resolve_dtype(wire_dtype)
    except ValueError:
        dt = None
    if dt is None or dtype_name(dt) not in WIRE_DTYPES:
        raise ValueError(f"wire_dtype must be one of {', '.join(WIRE_DTYPES)}; got {wire_dtype!r}")
    return dt


@dataclass(frozen=True)
class LossScaling:
    """How the loss is scaled. ``kind``: ``none`` (scale 1, no overflow check), ``static`` (``init_scale``
    forever; overflowing steps are still skipped) or ``dynamic`` (GradScaler's rule)."""

    kind: str = "dynamic"
    init_scale: float = 2.0 ** 16  # torch GradScaler default
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000  # clean steps before the scale grows

    def __post_init__(self) -> None:
        if self.kind not in LOSS_SCALING_KINDS:
            raise ValueError(f"loss scaling kind must be one of {', '.join(LOSS_SCALING_KINDS)}; got {self.kind!r}")
        for name in ("init_scale", "growth_factor", "backoff_factor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number; got {value!r} ({type(value).__name__})")
        if not (0 < self.init_scale <= MAX_LOSS_SCALE and math.isfinite(self.init_scale)):
            raise ValueError(f"init_scale must be a finite number > 0 and <= 2^127; got {self.init_scale!r}")
        if not (1 <= self.growth_factor <= 2 ** 16 and 0 < self.backoff_factor <= 1):
            raise ValueError(f"growth_factor must be in [1, 2^16] and backoff_factor in (0, 1]; got "
                             f"{self.growth_factor!r}, {self.backoff_factor!r}")
        if isinstance(self.growth_interval, bool) or not isinstance(self.growth_interval, int) \
                or self.growth_interval < 1:
            raise ValueError(f"growth_interval must be an integer >= 1; got {self.growth_interval!r}")


def default_loss_scaling(wire_dtype: object) -> LossScaling:
    """fp16: dynamic scaling from 2^16; bf16: none."""
    return LossScaling("dynamic") if dtype_name(check_wire_dtype(wire_dtype)) == "fp16" else LossScaling("none")


class LossScaler:
    """One rank's loss-scale state. Every rank starts equal and sees the same overflow flag, so all stay equal."""

    def __init__(self, config: LossScaling, resume=None):
        self.config = config
        self.scale = 1.0 if config.kind == "none" else float(config.init_scale)
        self._clean_steps = 0
        if resume is not None:  # a resumed run continues the scale and the count of clean steps
            self.scale, self._clean_steps = float(resume.loss_scale), int(resume.clean_steps)

    @property
    def clean_steps(self) -> int:
        """Consecutive clean steps since the scale last changed (dynamic scaling grows it at growth_interval)."""
        return self._clean_steps

    def found_overflow(self, comm, reduced_parts) -> bool:
        """True if any rank's part of the reduced gradient holds an inf or NaN (one all-reduce of a flag,
        label ``overflow_check``). With ``kind == "none"`` nothing is checked or sent."""
        if self.config.kind == "none":
            return False
        parts = list(reduced_parts)
        if any(is_virtual(p) for p in parts):  # size-only: count the collective, assume no overflow
            comm.all_reduce(VirtualBuffer((1,), "int32"), label="overflow_check")
            return False
        local = any(not np.isfinite(p).all() for p in parts if p.size)  # in the 16-bit type: no fp32 copy
        flag = comm.all_reduce(np.array([int(local)], dtype=np.int32), label="overflow_check")
        return bool(flag[0])

    def update(self, overflow: bool) -> None:
        """Back off after an overflow; grow after ``growth_interval`` clean steps (dynamic only)."""
        if self.config.kind != "dynamic":
            return
        if overflow:
            self.scale *= self.config.backoff_factor
            self._clean_steps = 0
        else:
            self._clean_steps += 1
            if self._clean_steps == self.config.growth_interval:
                self.scale *= self.config.growth_factor
                self._clean_steps = 0
