"""The one place ringemu meets numba: the ``jit`` decorators, a few LLVM-level scalar operations, the JIT switch.

The scalar operations are numba intrinsics (a few lines of LLVM IR each): float32 <-> uint32 bitcasts,
binary16 <-> float32 with LLVM's ``half`` type (F16C on x86), bfloat16 <-> float32 in 32-bit integer operations,
a copy with non-temporal 64-byte stores plus the fence that orders it, and an array view of a buffer
named by its address (the direct kernels' per-rank buffers). Each has a plain numpy fallback with
the same results for the JIT-disabled mode.

Guarantees:

* ``jit(fn)`` compiles ``fn`` lazily in nopython mode with ``nogil=True`` and numba's on-disk cache
  (``cache=True``): only the signatures actually called are compiled, and a later process loads them from disk.
* ``RINGEMU_DISABLE_JIT=1`` (also ``true``/``yes``/``on``) makes ``jit`` return the plain Python function and the
  scalar operations plain numpy; numba is then never imported. The variable is read once, when this module is imported.
* numba itself is imported only when this module is (``ringemu.execute`` imports the kernels on the first real
  collective), so size-only counting and ``import ringemu`` never pay numba's start-up.

Limits: numba keys its on-disk cache on the kernel's own source file, so an edit to this file alone does not
invalidate kernels cached from ``kernels.py`` or ``zero_stages/_adam_kernel.py`` (delete the cache after editing
it). ``half_to_f32`` / ``f32_to_half`` need F16C on x86-64 (every x86 CPU since 2012); ``f32_to_half`` quiets a
signalling NaN where numpy keeps it.

Cache location (no environment variable is set or changed here): numba tries, in order, ``NUMBA_CACHE_DIR`` if
the user set it, the ``__pycache__`` directory beside ``kernels.py`` if it is writable, and otherwise a user-wide
cache directory (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba`` on Linux). A package installed read-only
therefore caches in the user's cache directory. If no location is writable at all, the kernels are compiled
without a cache (one ``RuntimeWarning``) and still run.
"""
from __future__ import annotations

import ctypes
import os
import warnings

import ml_dtypes
import numpy as np

__all__ = ["JIT_ENABLED", "jit", "jit_inline", "fma_f32", "f32_to_bits", "bits_to_f32", "half_to_f32", "f32_to_half", "bf16_to_f32_fast",
           "f32_to_bf16_fast", "stream_copy", "store_fence", "address_view", "by_kernel_dtype",
           "jit_disabled_from_env"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def jit_disabled_from_env(value: str | None) -> bool:
    """True if ``RINGEMU_DISABLE_JIT`` set to ``value`` disables the JIT; a clear ValueError for other values."""
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"RINGEMU_DISABLE_JIT must be one of {', '.join(_TRUE + _FALSE[1:])} or empty; got {value!r}")


_BF16 = np.dtype(ml_dtypes.bfloat16)

JIT_ENABLED = not jit_disabled_from_env(os.environ.get("RINGEMU_DISABLE_JIT"))

_NO_CACHE_WARNING = ("numba found no writable cache directory (set NUMBA_CACHE_DIR to one); ringemu's kernels "
                     "are compiled without an on-disk cache in this process")

if JIT_ENABLED:
    import numba
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    def jit(fn, **options):
        """Compile ``fn`` lazily (nopython, nogil, on-disk cache)."""
        try:
            return numba.njit(cache=True, nogil=True, **options)(fn)
        except RuntimeError as exc:  # numba: "cannot cache function ...: no locator available"
            if "no locator" not in str(exc):
                raise
            warnings.warn(_NO_CACHE_WARNING, RuntimeWarning, stacklevel=2)
            return numba.njit(cache=False, nogil=True, **options)(fn)

    def jit_inline(fn):
        """Like :func:`jit`, and inlined into jitted callers at numba's IR level (for small scalar functions:
        a call that LLVM does not inline keeps the caller's loop from vectorising, about 5x slower)."""
        return jit(fn, inline="always")

    @intrinsic
    def fma_f32(typingctx, a, b, c):
        """a·b + c rounded once to fp32 (LLVM's ``llvm.fma.f32``: ``vfmadd`` on a CPU with FMA, a correctly
        rounded ``fmaf`` call otherwise)."""
        if not (a == b == c == types.float32):
            return None

        def codegen(context, builder, signature, args):
            return builder.fma(*args)

        return types.float32(types.float32, types.float32, types.float32), codegen

    @intrinsic
    def f32_to_bits(typingctx, value):
        """The IEEE-754 bits of a float32 as a uint32 (an LLVM bitcast; no conversion)."""
        if value != types.float32:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(32))

        return types.uint32(types.float32), codegen

    @intrinsic
    def bits_to_f32(typingctx, bits):
        """The float32 whose IEEE-754 bits are the uint32 ``bits`` (an LLVM bitcast; no conversion)."""
        if bits != types.uint32:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.FloatType())

        return types.float32(types.uint32), codegen

    @intrinsic
    def half_to_f32(typingctx, bits):
        """binary16 bits (uint16) -> float32 with LLVM's ``fpext half`` (F16C ``vcvtph2ps`` on x86): exact, but
        a signalling NaN comes out quiet. Used only where a float32 addition follows (which quiets NaNs anyway)."""
        if bits != types.uint16:
            return None

        def codegen(context, builder, signature, args):
            return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

        return types.float32(types.uint16), codegen

    @intrinsic
    def f32_to_half(typingctx, value):
        """float32 -> binary16 bits (uint16) with LLVM's ``fptrunc`` (F16C ``vcvtps2ph``): round to nearest even,
        overflow to inf, NaN payload truncated and quieted (numpy's result for every quiet NaN)."""
        if value != types.float32:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

        return types.uint16(types.float32), codegen

    @intrinsic
    def bf16_to_f32_fast(typingctx, bits):
        """bfloat16 bits (uint16) -> float32: the bits become the top half (32-bit integer operations only)."""
        if bits != types.uint16:
            return None

        def codegen(context, builder, signature, args):
            wide = builder.shl(builder.zext(args[0], ir.IntType(32)), ir.IntType(32)(16))
            return builder.bitcast(wide, ir.FloatType())

        return types.float32(types.uint16), codegen

    @intrinsic
    def f32_to_bf16_fast(typingctx, value):
        """float32 -> bfloat16 bits (uint16), round to nearest even; NaN -> 0x7FC0 with the sign kept, as
        ml_dtypes does. 32-bit integer operations only, so that LLVM vectorises 16 lanes at a time."""
        if value != types.float32:
            return None

        def codegen(context, builder, signature, args):
            i32 = ir.IntType(32)
            f = builder.bitcast(args[0], i32)
            lsb = builder.and_(builder.lshr(f, i32(16)), i32(1))
            rounded = builder.lshr(builder.add(f, builder.add(lsb, i32(0x7FFF))), i32(16))
            nan = builder.or_(builder.and_(builder.lshr(f, i32(16)), i32(0x8000)), i32(0x7FC0))
            is_nan = builder.fcmp_unordered("uno", args[0], args[0])
            return builder.trunc(builder.select(is_nan, nan, rounded), ir.IntType(16))

        return types.uint16(types.float32), codegen

    @intrinsic
    def stream_copy(typingctx, dst, src):
        """dst[:] = src (equal-length, same-dtype, contiguous 1-D arrays) with non-temporal 64-byte stores for the
        cache-line-aligned part of ``dst``: the destination is written without being read first (no
        read-for-ownership) and is not left in cache. Call :func:`store_fence` before other threads read ``dst``."""
        if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.ndim == src.ndim == 1
                and dst.dtype == src.dtype and dst.layout == src.layout == "C"):
            return None

        def codegen(context, builder, signature, args):
            dst_ary = context.make_array(signature.args[0])(context, builder, args[0])
            src_ary = context.make_array(signature.args[1])(context, builder, args[1])
            itemsize = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
            byte = ir.IntType(8).as_pointer()
            intp = dst_ary.nitems.type
            d = builder.bitcast(dst_ary.data, byte)
            s = builder.bitcast(src_ary.data, byte)
            nbytes = builder.mul(dst_ary.nitems, intp(itemsize))
            head = builder.and_(builder.neg(builder.ptrtoint(d, intp)), intp(63))  # bytes to a 64-byte boundary
            head = builder.select(builder.icmp_unsigned(">", head, nbytes), nbytes, head)
            cgutils.raw_memcpy(builder, d, s, head, 1)
            n_lines = builder.lshr(builder.sub(nbytes, head), intp(6))
            line = ir.VectorType(ir.IntType(8), 64).as_pointer()
            nontemporal = builder.module.add_metadata([ir.IntType(32)(1)])
            with cgutils.for_range(builder, n_lines) as loop:
                offset = builder.add(head, builder.shl(loop.index, intp(6)))
                value = builder.load(builder.bitcast(builder.gep(s, [offset]), line), align=1)
                store = builder.store(value, builder.bitcast(builder.gep(d, [offset]), line), align=64)
                store.set_metadata("nontemporal", nontemporal)
            done = builder.add(head, builder.shl(n_lines, intp(6)))
            cgutils.raw_memcpy(builder, builder.gep(d, [done]), builder.gep(s, [done]), builder.sub(nbytes, done), 1)
            return context.get_dummy_value()

        return types.none(dst, src), codegen

    @intrinsic
    def _pointer_to(typingctx, address, like):
        """The integer ``address`` as a pointer to ``like``'s element type."""
        if not (isinstance(address, types.Integer) and isinstance(like, types.Array)):
            return None
        pointer = types.CPointer(like.dtype)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(pointer))

        return pointer(address, like), codegen

    @jit_inline
    def address_view(address, like, length):
        """The C-contiguous 1-D array of ``length`` elements of ``like``'s dtype at byte ``address`` (a rank's
        buffer named by its address; the caller keeps the buffer alive and in bounds)."""
        return numba.carray(_pointer_to(address, like), length)

    def by_kernel_dtype(native, sixteen):
        """A jitted call that runs ``sixteen(out, ...)`` when ``out`` holds 16-bit floats viewed as uint16 and
        ``native(out, ...)`` otherwise, chosen when numba types the caller: a kernel compiled for fp32 does not
        compile the 16-bit loops, nor one for uint16 views the native ones (12 positional arguments)."""
        from numba.extending import overload

        def choose(out, a, b, c, d, e, f, g, h, i, j, k):
            return (sixteen if out.dtype == np.uint16 else native)(out, a, b, c, d, e, f, g, h, i, j, k)

        @overload(choose, inline="always")
        def _typed(out, a, b, c, d, e, f, g, h, i, j, k):
            chosen = sixteen if out.dtype == types.uint16 else native

            def impl(out, a, b, c, d, e, f, g, h, i, j, k):
                chosen(out, a, b, c, d, e, f, g, h, i, j, k)
            return impl

        return choose

    @intrinsic
    def store_fence(typingctx):
        """A full memory fence (``mfence`` on x86): orders earlier non-temporal stores before later accesses."""
        def codegen(context, builder, signature, args):
            builder.fence("seq_cst")
            return context.get_dummy_value()

        return types.none(), codegen

else:
    def jit(fn):
        """JIT disabled (RINGEMU_DISABLE_JIT): return ``fn`` itself."""
        return fn

    jit_inline = jit

    def fma_f32(a, b, c):
        """a·b + c rounded once to fp32: the fp64 sum (one rounding; a·b is exact in fp64) is made round-to-odd
        with its exact error (TwoSum), so that rounding it to fp32 is correct (Boldo & Melquiond 2008)."""
        ab = np.float64(a) * np.float64(b)
        with np.errstate(all="ignore"):
            s = ab + np.float64(c)
            if s != 0 and np.isfinite(s):
                back = s - ab
                err = (ab - (s - back)) + (np.float64(c) - back)
                if err != 0 and (int(np.array(s).view(np.int64)) & 1) == 0:
                    s = np.nextafter(s, np.inf if err > 0 else -np.inf)
            return np.float32(s)

    def f32_to_bits(value):
        """The IEEE-754 bits of a float32 as a uint32."""
        return np.float32(value).view(np.uint32)

    def bits_to_f32(bits):
        """The float32 whose IEEE-754 bits are the uint32 ``bits``."""
        return np.uint32(bits).view(np.float32)

    def half_to_f32(bits):
        """binary16 bits -> float32 (numpy's conversion)."""
        return np.uint16(bits).view(np.float16).astype(np.float32)

    def bf16_to_f32_fast(bits):
        """bfloat16 bits -> float32 (ml_dtypes' conversion)."""
        return np.uint16(bits).view(_BF16).astype(np.float32)

    def f32_to_bf16_fast(value):
        """float32 -> bfloat16 bits, round to nearest even (ml_dtypes' conversion)."""
        return np.float32(value).astype(_BF16).view(np.uint16)

    def stream_copy(dst, src):
        """dst[:] = src."""
        for i in range(dst.shape[0]):
            dst[i] = src[i]

    def store_fence():
        """Nothing to order without the JIT."""

    def by_kernel_dtype(native, sixteen):
        """``sixteen(out, ...)`` for uint16 views of 16-bit floats, else ``native(out, ...)``."""
        def choose(out, *args):
            return (sixteen if out.dtype == np.uint16 else native)(out, *args)
        return choose

    def address_view(address, like, length):
        """The 1-D array of ``length`` elements of ``like``'s dtype at byte ``address`` (through ctypes)."""
        if length <= 0:
            return np.empty(0, dtype=like.dtype)
        raw = (ctypes.c_char * (int(length) * like.itemsize)).from_address(int(address))
        return np.frombuffer(raw, dtype=like.dtype, count=int(length))

    def f32_to_half(value):
        """float32 -> binary16 bits, round to nearest even (numpy's conversion); a signalling NaN is quieted
        first, as ``fptrunc`` does, so that JIT on and off agree."""
        value = np.float32(value)
        if value != value:
            value = np.uint32(value.view(np.uint32) | np.uint32(0x00400000)).view(np.float32)
        return value.astype(np.float16).view(np.uint16)
