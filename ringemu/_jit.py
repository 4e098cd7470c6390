"""The one place ringemu meets numba: a ``jit`` decorator, two scalar bitcasts, and the JIT switch.

Guarantees:

* ``jit(fn)`` compiles ``fn`` lazily in nopython mode with ``nogil=True`` and numba's on-disk cache
  (``cache=True``): only the signatures actually called are compiled, and a later process loads them from disk.
* ``RINGEMU_DISABLE_JIT=1`` (also ``true``/``yes``/``on``) makes ``jit`` return the plain Python function and the
  bitcasts plain numpy; numba is then never imported. The variable is read once, when this module is imported.
* numba itself is imported only when this module is (``ringemu.execute`` imports the kernels on the first real
  collective), so size-only counting and ``import ringemu`` never pay numba's start-up.

Cache location (no environment variable is set or changed here): numba tries, in order, ``NUMBA_CACHE_DIR`` if
the user set it, the ``__pycache__`` directory beside ``kernels.py`` if it is writable, and otherwise a user-wide
cache directory (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba`` on Linux). A package installed read-only
therefore caches in the user's cache directory. If no location is writable at all, the kernels are compiled
without a cache (one ``RuntimeWarning``) and still run.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

__all__ = ["JIT_ENABLED", "jit", "f32_to_bits", "bits_to_f32", "half_to_f32", "f32_to_half",
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


JIT_ENABLED = not jit_disabled_from_env(os.environ.get("RINGEMU_DISABLE_JIT"))

_NO_CACHE_WARNING = ("numba found no writable cache directory (set NUMBA_CACHE_DIR to one); ringemu's kernels "
                     "are compiled without an on-disk cache in this process")

if JIT_ENABLED:
    import numba
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    def jit(fn):
        """Compile ``fn`` lazily (nopython, nogil, on-disk cache)."""
        try:
            return numba.njit(cache=True, nogil=True)(fn)
        except RuntimeError as exc:  # numba: "cannot cache function ...: no locator available"
            if "no locator" not in str(exc):
                raise
            warnings.warn(_NO_CACHE_WARNING, RuntimeWarning, stacklevel=2)
            return numba.njit(cache=False, nogil=True)(fn)

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

else:
    def jit(fn):
        """JIT disabled (RINGEMU_DISABLE_JIT): return ``fn`` itself."""
        return fn

    def f32_to_bits(value):
        """The IEEE-754 bits of a float32 as a uint32."""
        return np.float32(value).view(np.uint32)

    def bits_to_f32(bits):
        """The float32 whose IEEE-754 bits are the uint32 ``bits``."""
        return np.uint32(bits).view(np.float32)

    def half_to_f32(bits):
        """binary16 bits -> float32 (numpy's conversion)."""
        return np.uint16(bits).view(np.float16).astype(np.float32)

    def f32_to_half(value):
        """float32 -> binary16 bits, round to nearest even (numpy's conversion)."""
        return np.float32(value).astype(np.float16).view(np.uint16)
