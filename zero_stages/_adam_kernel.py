"""Compiled kernels for the optimizer step: Adam, the gradient average, and the 16-bit casts, fused in one pass.

These are the fast twins of the numpy reference code in :mod:`zero_stages.adam` (``adam_step_reference``),
:mod:`zero_stages.averaging`, :func:`zero_stages.buffers.cast` and :mod:`zero_stages.model` (``np.resize`` of the
weights); ``tests/test_adam_kernel.py`` checks them bit for bit against it (NaN payloads aside where two NaNs
meet in one operation, see :mod:`zero_stages.adam`). Each element is computed with the same fp32 operations in
the same order as the reference (that of ``torch.optim.Adam(foreach=False)`` on the CPU):

* fp32 ``+ - * /`` and ``sqrt`` are IEEE 754 correctly rounded operations in numba as in numpy (no fast-math, so
  LLVM neither reassociates nor contracts a multiply and an add into an fma);
* the fused multiply-add is LLVM's ``llvm.fma.f32`` intrinsic, which LLVM defines as a·b + c rounded once (it is
  the ``vfmadd`` instruction on a CPU with FMA, a correctly rounded ``fmaf`` call otherwise);
* fp32 -> bf16 rounds to nearest even with integer arithmetic on the bits (NaN: 0x7FC0 with the sign, as
  ml_dtypes does); fp32 <-> fp16 use LLVM's ``fptrunc``/``fpext`` (IEEE conversions, as numpy).

One pass reads each element's 16-bit reduced gradient (2 B) and master, m, v (12 B), and writes master, m, v
(12 B), the fp32 averaged gradient (4 B) and the new 16-bit weight (2 B): 32 B per element, where the numpy
reference makes about a dozen passes over fp64 temporaries. The kernels release the GIL (``nogil``), so the
rank threads of an emulated world run with ``scheduler="threads"`` update their shards in parallel (greenlet
ranks, the default, run one after another in one thread).

With ``RINGEMU_DISABLE_JIT=1`` every function here is plain Python on numpy scalars (the fma then goes through
fp64 with round-to-odd, Boldo & Melquiond 2008): same bits, only slow; callers use the numpy reference instead.
All kernels live in this one file because numba's on-disk cache does not notice edits to jitted functions in
other files; the scalar operations they use (fma, bitcasts, 16-bit conversions) are the intrinsics of
:mod:`ringemu._jit`, the one module that imports numba.
"""
from __future__ import annotations

import numpy as np

from ringemu._jit import JIT_ENABLED, bits_to_f32, f32_to_bf16_fast, f32_to_half, fma_f32, half_to_f32, jit, jit_inline

__all__ = ["adam_kernel", "average_kernel", "cast16_kernel", "fused_update_kernel",
           "fma_kernel", "expand16_kernel", "BF16", "FP16"]

# The 16-bit type codes the kernels take: ringemu.wire.WIRE_BF16 and WIRE_FP16 (the one table; a test checks),
# repeated so that this file's numba cache depends on this file only.
BF16, FP16 = 2, 1


def _kernel(fn):
    """:func:`ringemu._jit.jit` with numpy's error model: x / 0 is IEEE inf or NaN as in numpy, not Python's
    ZeroDivisionError, and the per-element zero test that would keep LLVM from vectorising the loop is gone."""
    return jit(fn, error_model="numpy") if JIT_ENABLED else jit(fn)

@jit_inline
def _to_f32(bits, kind16):
    """16-bit bits (uint16) of type ``kind16`` (:data:`BF16` or :data:`FP16`) -> float32 (exact)."""
    if kind16 == BF16:
        return bits_to_f32(np.uint32(np.uint32(bits) << np.uint32(16)))
    return half_to_f32(bits)


@jit_inline
def _from_f32(value, kind16):
    """float32 -> 16-bit bits of type ``kind16``."""
    if kind16 == BF16:
        return f32_to_bf16_fast(value)
    return f32_to_half(value)


@jit_inline
def _adam_element(p, g, mm, vv, has_wd, decoupled, wd, decay, lerp_small, w, w_minus_1, beta2, one_minus_beta2,
                  bc2_sqrt, eps, neg_step):
    """One element of :func:`zero_stages.adam.adam_step_reference`, every operation fp32: returns (p, m, v)."""
    if has_wd:
        if decoupled:
            p = p * decay  # param.mul_(1 - lr·wd)
        else:
            g = fma_f32(p, wd, g)  # grad.add(param, alpha=wd)
    diff = g - mm
    if lerp_small:
        mm = fma_f32(w, diff, mm)  # lerp, weight < 0.5
    else:
        mm = fma_f32(w_minus_1, diff, g)  # lerp, weight >= 0.5
    vv = vv * beta2
    vv = fma_f32(one_minus_beta2 * g, g, vv)  # addcmul_
    denom = np.sqrt(vv) / bc2_sqrt
    denom = denom + eps
    p = p + (neg_step * mm) / denom  # addcdiv_
    return p, mm, vv


@_kernel
def adam_kernel(master, grad, m, v, has_wd, decoupled, wd, decay, lerp_small, w, w_minus_1, beta2, one_minus_beta2,
                bc2_sqrt, eps, neg_step):
    """Adam on fp32 ``master``, ``m``, ``v`` in place from the fp32 ``grad`` (all 1-D, one length); the
    float32 constants come from :func:`zero_stages.adam.kernel_constants`."""
    for i in range(grad.shape[0]):
        master[i], m[i], v[i] = _adam_element(master[i], grad[i], m[i], v[i], has_wd, decoupled, wd, decay,
                                              lerp_small, w, w_minus_1, beta2, one_minus_beta2, bc2_sqrt, eps,
                                              neg_step)


@_kernel
def average_kernel(reduced16, kind16, divisor, out):
    """out[i] = fp32(reduced16[i]) / divisor (reduced16: uint16 bits of type ``kind16``; divisor fp32)."""
    for i in range(reduced16.shape[0]):
        out[i] = _to_f32(reduced16[i], kind16) / divisor


@_kernel
def cast16_kernel(src, kind16, out):
    """out[i] = the 16-bit bits of fp32 ``src[i]`` rounded to type ``kind16`` (nearest even)."""
    for i in range(src.shape[0]):
        out[i] = _from_f32(src[i], kind16)


@_kernel
def fused_update_kernel(reduced16, kind16, divisor, master, m, v, grad_out, weights16_out, has_wd, decoupled, wd,
                        decay, lerp_small, w, w_minus_1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step):
    """:func:`average_kernel`, then :func:`adam_kernel`, then :func:`cast16_kernel` of the new master, in one
    pass: grad_out gets the averaged fp32 gradient, weights16_out the 16-bit bits of the new master."""
    for i in range(reduced16.shape[0]):
        g = _to_f32(reduced16[i], kind16) / divisor
        grad_out[i] = g
        p, mm, vv = _adam_element(master[i], g, m[i], v[i], has_wd, decoupled, wd, decay, lerp_small, w, w_minus_1,
                                  beta2, one_minus_beta2, bc2_sqrt, eps, neg_step)
        master[i], m[i], v[i] = p, mm, vv
        weights16_out[i] = _from_f32(p, kind16)


@_kernel
def fma_kernel(a, b, c, out):
    """out[i] = fma_f32(a[i], b[i], c[i]) (fp32 arrays of one length): the fma exposed for tests."""
    for i in range(a.shape[0]):
        out[i] = fma_f32(a[i], b[i], c[i])


@_kernel
def expand16_kernel(w16, kind16, out):
    """out[j] = fp32(w16[j mod len(w16)]) for every j (w16: uint16 bits of type ``kind16``): the tied MLP's
    layer entries (:mod:`zero_stages.model`), ``np.resize(w16.astype(float32), len(out))`` in one pass."""
    size = w16.shape[0]
    for lo in range(0, out.shape[0], size):
        chunk = out[lo:lo + size]
        for j in range(chunk.shape[0]):
            chunk[j] = _to_f32(w16[j], kind16)
