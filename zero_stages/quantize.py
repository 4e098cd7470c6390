"""Block-wise symmetric integer quantisation with one fp32 scale per block, as ZeRO++ sends weights (qwZ, int8)
and gradients (qgZ, int4) (Wang et al. 2023, "ZeRO++", arXiv 2306.10209, §3.1 and §3.3: block-based
quantisation, each block of B consecutive values with its own scale).

For a block x of at most B values and b bits, q_max = 2^(b−1) − 1 (127 for int8, 7 for int4):

    scale = fp32(max |x|) / q_max        q = clip(rint(x / scale), −q_max, q_max)        x' = q · scale

(a block of zeros has scale 0 and q = 0). The codes are packed 32/b to an int32 word (two's complement, low bits
first), so the wire carries ceil(n·b/32) words of 4 B plus ceil(n/B) scales of 4 B: :func:`wire_bytes`. The
quantisation error is not zero and is not hidden: |x − x'| ≤ scale/2 per element (round to nearest), measured
by the stages' tests and ``ringemu zero --stage zeropp`` against DP.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringemu.checks import check_int
from ringemu.virtual import VirtualBuffer, is_virtual

__all__ = ["QuantSpec", "INT8", "INT4", "encode", "decode", "n_words", "n_blocks", "wire_bytes"]

SCALE_BYTES = 4  # one fp32 scale per block


@dataclass(frozen=True)
class QuantSpec:
    """``bits`` per value (8 or 4) and ``block`` values per scale."""

    bits: int
    block: int

    def __post_init__(self) -> None:
        if self.bits not in (4, 8):
            raise ValueError(f"bits must be 8 or 4; got {self.bits!r}")
        check_int(self.block, "block", minimum=1, maximum=2 ** 24)

    @property
    def q_max(self) -> int:
        return 2 ** (self.bits - 1) - 1

    @property
    def per_word(self) -> int:
        return 32 // self.bits


# Block sizes: the paper leaves B to the implementation; 256 values per scale keeps the scales at 1/64 B per value
# (int8: 1.6 % on top of the codes; int4: 3.1 %), stated here and counted in every ledger.
INT8 = QuantSpec(8, 256)
INT4 = QuantSpec(4, 256)


def n_words(n: int, spec: QuantSpec) -> int:
    """int32 words that carry ``n`` codes."""
    return -(-n // spec.per_word)


def n_blocks(n: int, spec: QuantSpec) -> int:
    """Scales (blocks) of ``n`` values."""
    return -(-n // spec.block)


def wire_bytes(n: int, spec: QuantSpec) -> tuple[int, int]:
    """(bytes of the packed codes, bytes of the scales) of ``n`` values."""
    return 4 * n_words(n, spec), SCALE_BYTES * n_blocks(n, spec)


def encode(values, spec: QuantSpec):
    """(int32 words, fp32 scales) of ``values`` (1-D, any float dtype); size-only in, size-only out."""
    n = values.shape[0]
    if is_virtual(values):
        return VirtualBuffer((n_words(n, spec),), np.int32), VirtualBuffer((n_blocks(n, spec),), np.float32)
    x = np.asarray(values, dtype=np.float32)
    nb = n_blocks(n, spec)
    padded = np.zeros(nb * spec.block, dtype=np.float32)
    padded[:n] = x
    blocks = padded.reshape(nb, spec.block)
    scales = (np.max(np.abs(blocks), axis=1) / np.float32(spec.q_max)).astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1))
    q = np.clip(np.rint(blocks / safe[:, None]), -spec.q_max, spec.q_max).astype(np.int64).reshape(-1)[:n]
    words = np.zeros(n_words(n, spec) * spec.per_word, dtype=np.int64)
    words[:n] = q & ((1 << spec.bits) - 1)  # two's complement in b bits
    shifts = np.arange(spec.per_word, dtype=np.int64) * spec.bits
    packed = (words.reshape(-1, spec.per_word) << shifts).sum(axis=1)
    return packed.astype(np.uint32).view(np.int32), scales


def decode(words, scales, n: int, spec: QuantSpec):
    """fp32 values x' = q · scale of ``n`` values from :func:`encode`'s output."""
    if is_virtual(words):
        return VirtualBuffer((n,), np.float32)
    shifts = np.arange(spec.per_word, dtype=np.int64) * spec.bits
    raw = (words.view(np.uint32).astype(np.int64)[:, None] >> shifts) & ((1 << spec.bits) - 1)
    raw = raw.reshape(-1)[:n]
    q = np.where(raw >= 1 << (spec.bits - 1), raw - (1 << spec.bits), raw).astype(np.float32)
    return q * np.repeat(scales, spec.block)[:n]
