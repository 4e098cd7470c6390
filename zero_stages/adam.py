"""One Adam step on one flat fp32 shard (Kingma & Ba 2015, Algorithm 1; AdamW: Loshchilov & Hutter 2019).

Adam is elementwise, which is what makes ZeRO's sharding possible (ZeRO §5.1: rank i updates only partition i):
the update of element j needs only grad[j], m[j], v[j] and master[j].

Operation order: that of ``torch.optim.Adam(foreach=False)`` on the CPU in fp32 (``torch/optim/adam.py``,
``_single_tensor_adam``, non-capturable branch), down to the roundings of ATen's CPU kernels (torch 2.13 with
its AVX-512 kernels, as measured on the x86-64 machine of docs/real_engine.md: the vectorized loops use fused
multiply-adds, and the scalar tails round the same way, as lengths 1, 31 and 33 show; a CPU without FMA would
round differently). Each line below names the torch call and the kernel formula it runs; ``fma(a, b, c)`` is a·b + c rounded once to fp32:

    weight decay, coupled:   g = fma(master, wd, g)            # grad.add(param, alpha=wd): fmadd(other, alpha, self)
    weight decay, decoupled: master = master * f32(1 - lr·wd)   # param.mul_(1 - lr * wd)
    m = fma(w, g - m, m)       if w = f32(1 - beta1) < 0.5       # exp_avg.lerp_(grad, 1 - beta1): LerpKernel.cpp,
    m = fma(w - 1, g - m, g)   otherwise                         #   lerp_vec's two branches
    v = fma(f32(1 - beta2)·g, g, v·f32(beta2))                   # exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)
    bias_correction1 = 1 - beta1 ** step                         # Python floats (fp64); step counts from 1
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    denom = sqrt(v) / f32(bias_correction2 ** 0.5) + f32(eps)    # (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
    master = master + (f32(-step_size)·m) / denom                # param.addcdiv_(exp_avg, denom, value=-step_size)

One operation is not reproduced: ``torch.sqrt`` on fp32 CPU tensors calls Intel MKL's ``vmsSqrt`` in its
high-accuracy mode (``ATen/cpu/vml.h``, ``VML_HA``), which is not correctly rounded: measured on that machine it
is 1 ulp below the correctly rounded square root (``np.sqrt``) for about 0.7 % of inputs (error up to 0.55 ulp),
elementwise and independent of array length or position. ``AdamConfig(sqrt="torch")`` substitutes ``torch.sqrt``
for that one operation; with it this step equals ``torch.optim.Adam(foreach=False)`` bit for bit (master, m, v).
With the default ``sqrt="numpy"`` m and v still match bit for bit and master differs only where the two square
roots differ.

Two implementations of the same step: :func:`adam_step_reference` (numpy, written as the formulas above, the
oracle) and the compiled one-pass kernel of :mod:`zero_stages._adam_kernel`, which :func:`adam_step` uses for
``sqrt="numpy"`` when the JIT is on; they agree bit for bit (``tests/test_adam_kernel.py``), for every gradient
including inf and NaN. One case is left to the hardware: once master, m or v already hold a NaN and a second NaN
arises in the same operation (e.g. a NaN master plus the 0/0 of a zero denominator), IEEE 754 does not say
which NaN's sign and payload survive, and LLVM may swap the operands of an addition; both then give a NaN.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ringemu.checks import is_integer

__all__ = ["AdamConfig", "adam_step", "adam_step_reference", "kernel_constants", "fma32", "SQRT_IMPLEMENTATIONS"]

SQRT_IMPLEMENTATIONS = ("numpy", "torch")  # np.sqrt (correctly rounded) or torch.sqrt (MKL VML, 0.55 ulp)


@dataclass(frozen=True)
class AdamConfig:
    """Adam hyper-parameters. ``decoupled=True`` gives AdamW's weight decay.

    ``sqrt`` picks the square root of the denominator: ``"numpy"`` (correctly rounded, default) or
    ``"torch"`` (``torch.sqrt``, needed only for bit parity with torch's optimizer on the CPU; see module doc).
    """

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    sqrt: str = "numpy"

    def __post_init__(self) -> None:
        if self.sqrt not in SQRT_IMPLEMENTATIONS:
            raise ValueError(f"AdamConfig.sqrt must be one of {', '.join(SQRT_IMPLEMENTATIONS)}; got {self.sqrt!r}")
        for name in ("lr", "beta1", "beta2", "eps", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"AdamConfig.{name} must be a number; got {value!r}")
        if not (0.0 <= self.beta1 < 1.0 and 0.0 <= self.beta2 < 1.0):
            raise ValueError(f"AdamConfig betas must lie in [0, 1); got {self.beta1}, {self.beta2}")


_F32_MIN_NORMAL = 2.0 ** -126  # smallest normal fp32 magnitude (IEEE 754 binary32)
_LOW29 = (1 << 29) - 1  # fp64 mantissa bits that fp32 drops (52 - 23 = 29)
_HALF29 = 1 << 28  # those bits of an fp64 value exactly halfway between two fp32 values


def fma32(a, b, c) -> np.ndarray:
    """fp32 fused multiply-add: a·b + c rounded once (round to nearest even), elementwise, as float32.

    a·b of two fp32 values is exact in fp64 (24 + 24 bits < 53), so fp64 ``s = a·b + c`` has a single rounding;
    rounding s again to fp32 is correct except when s lies exactly halfway between two fp32 values (or in the
    fp32 subnormal range) while s itself was inexact. Those few elements are redone with the exact error of the
    fp64 sum (Knuth's TwoSum) and round-to-odd, which makes the second rounding correct (Boldo & Melquiond 2008).
    """
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    b64 = np.asarray(b, dtype=np.float32).astype(np.float64)
    c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
    ab = a64 * b64  # exact
    s = np.array(ab + c64)  # one rounding (fp64); np.array keeps 0-d inputs assignable
    low = s.view(np.int64) & _LOW29
    doubtful = ((low == _HALF29) | (np.abs(s) < _F32_MIN_NORMAL)) & (s != 0) & np.isfinite(s)
    if np.any(doubtful):
        ab_b, c_b = np.broadcast_to(ab, s.shape)[doubtful], np.broadcast_to(c64, s.shape)[doubtful]
        sd = s[doubtful]
        back = sd - ab_b
        err = (ab_b - (sd - back)) + (c_b - back)  # TwoSum: ab + c == sd + err exactly
        odd_fix = (err != 0) & ((sd.view(np.int64) & 1) == 0)  # round to odd: step toward the exact value
        sd = np.where(odd_fix, np.nextafter(sd, np.where(err > 0, np.inf, -np.inf)), sd)
        s[doubtful] = sd
    return s.astype(np.float32)


def _sqrt(x: np.ndarray, how: str) -> np.ndarray:
    if how == "numpy":
        return np.sqrt(x)
    try:
        import torch
    except ModuleNotFoundError as exc:  # optional dependency (ringemu[torch])
        raise ValueError("AdamConfig(sqrt='torch') needs torch; install ringemu[torch]") from exc
    return torch.sqrt(torch.from_numpy(x)).numpy()


_BLOCK = 1 << 15  # elements per block; fp64 temporaries stay in cache (2^24 elements: 2.9 s unblocked, 0.17 s)


def _check_args(master, grad, m, v, step) -> None:
    for name, a in (("master", master), ("grad", grad), ("m", m), ("v", v)):
        if not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.ndim != 1 or a.shape != grad.shape:
            raise TypeError(f"adam_step: {name} must be a 1-D float32 array of length {grad.shape}")
        if name != "grad" and not a.flags.writeable:
            raise ValueError(f"adam_step: {name} is updated in place and must be writeable; got a read-only array")
    if not is_integer(step) or step < 1:
        raise ValueError(f"adam_step: step must be an integer counting from 1; got {step!r}")


def _bias_corrections(c: AdamConfig, step: int) -> tuple[float, float]:
    """(step_size, sqrt(bias_correction2)) in Python floats (fp64), as torch computes them."""
    bias_correction1 = 1 - c.beta1 ** int(step)
    bias_correction2 = 1 - c.beta2 ** int(step)
    return c.lr / bias_correction1, bias_correction2 ** 0.5


def kernel_constants(config: AdamConfig, step: int) -> tuple:
    """The per-step scalars of the compiled kernels, each rounded to fp32 exactly where the reference rounds it:
    (has_wd, decoupled, wd, decay, lerp_small, w, w - 1, beta2, 1 - beta2, sqrt(bc2), eps, -step_size)."""
    c, f32 = config, np.float32
    step_size, bc2_sqrt = _bias_corrections(c, step)
    weight = f32(1 - c.beta1)
    return (bool(c.weight_decay), bool(c.decoupled), f32(c.weight_decay), f32(1 - c.lr * c.weight_decay),
            bool(abs(weight) < 0.5), weight, weight - f32(1), f32(c.beta2), f32(1 - c.beta2), f32(bc2_sqrt),
            f32(c.eps), f32(-step_size))


def adam_step(master: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int,
              config: AdamConfig = AdamConfig()) -> None:
    """Update ``master``, ``m`` and ``v`` (1-D fp32, same length as ``grad``) in place; ``step`` counts from 1.

    ``grad`` is not modified. The result is :func:`adam_step_reference`'s bit for bit; it is computed by the
    compiled kernel when the JIT is on and ``config.sqrt == "numpy"``, else by the reference itself.
    """
    _check_args(master, grad, m, v, step)
    from ringemu._jit import JIT_ENABLED
    if not JIT_ENABLED or config.sqrt != "numpy":
        adam_step_reference(master, grad, m, v, step, config)
        return
    from ._adam_kernel import adam_kernel
    adam_kernel(master, grad, m, v, *kernel_constants(config, step))


def adam_step_reference(master: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int,
                        config: AdamConfig = AdamConfig()) -> None:
    """The numpy reference of :func:`adam_step` (same contract). The result equals
    ``torch.optim.Adam(foreach=False)`` (or ``AdamW`` when ``config.decoupled``) on the CPU bit for bit, given
    ``config.sqrt == "torch"`` (module doc). The update is elementwise, so it is computed block by block; blocks
    change no bits.
    """
    _check_args(master, grad, m, v, step)
    c = config
    step_size, bc2_sqrt = _bias_corrections(c, step)
    for lo in range(0, grad.shape[0], _BLOCK):
        part = slice(lo, lo + _BLOCK)
        _update(master[part], grad[part], m[part], v[part], c, step_size, bc2_sqrt)


def _update(master, g, m, v, c: AdamConfig, step_size: float, bias_correction2_sqrt: float) -> None:
    f32 = np.float32
    if c.weight_decay:
        if c.decoupled:
            master *= f32(1 - c.lr * c.weight_decay)  # param.mul_(1 - lr * weight_decay)
        else:
            g = fma32(master, f32(c.weight_decay), g)  # grad.add(param, alpha=weight_decay)
    weight = f32(1 - c.beta1)  # lerp weight, as the kernel's opmath float
    diff = g - m  # end - self
    if abs(weight) < 0.5:
        m[...] = fma32(weight, diff, m)  # self + weight·(end - self)
    else:
        m[...] = fma32(weight - f32(1), diff, g)  # end - (end - self)·(1 - weight)
    v *= f32(c.beta2)  # exp_avg_sq.mul_(beta2)
    v[...] = fma32(f32(1 - c.beta2) * g, g, v)  # addcmul_: self + (value·t1)·t2
    denom = _sqrt(v, c.sqrt) / f32(bias_correction2_sqrt)
    denom += f32(c.eps)
    master += (f32(-step_size) * m) / denom  # addcdiv_: self + (value·t1) / t2
