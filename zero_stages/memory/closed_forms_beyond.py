"""Closed forms of the stages beyond the four, in exact arithmetic (ints for padded counts, Fraction for Ψ/K).

N = R nodes × K ranks per node; S_u the unit sizes, Ψ = Σ_u S_u; 16-bit weights and gradients (2 B), K_opt = 12 B of
optimizer states per parameter. The padded forms are what the stages hold and send (each unit padded to a multiple
of the group size, as FSDP2 and the ring pad); the unpadded forms are the papers' headlines.

* HSDP (Zhao et al. 2023, arXiv 2304.11277, §3.2.2): model states 16·Σ_u ceil(S_u/K) (16Ψ/K); per step, inside the
  node 3(K−1)·ceil(S_u/K) elements per rank (two all-gathers, one reduce-scatter); across nodes only the all-reduce
  of the shard, 2(R−1)·ceil(ceil(S_u/K)/R) elements per rank (2(R−1)/R·Ψ/K).
* ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840, §4): GPU 2Ψ + 2·Σ_u ceil(S_u/N) (2Ψ + 2Ψ/N), host
  14·Σ_u ceil(S_u/N); PCIe per step 2Ψ down and 2Ψ up over all ranks (payload only): 4Ψ bytes.
* ZeRO++ (Wang et al. 2023, arXiv 2306.10209, §4): inter-node bytes per step of the whole world, with the ring
  over N ranks (R of its N links cross nodes when R > 1) and the all-to-alls across nodes (every link crosses):
  ZeRO-3 3·R·(N−1)·2c per unit (c = ceil(S_u/N)); ZeRO++ with every cut R·(N−1)·(codes8 + scales) +
  N·(R−1)·(codes4 + scales), codes of b bits packed in 4-byte words, one 4-byte scale per block.
"""
from __future__ import annotations

from fractions import Fraction

from ..quantize import INT4, INT8, QuantSpec, wire_bytes

__all__ = ["hsdp_model_state_bytes", "hsdp_intra_bytes", "hsdp_inter_bytes", "hsdp_inter_bytes_unpadded",
           "offload_gpu_bytes", "offload_gpu_bytes_unpadded", "offload_host_bytes", "offload_pcie_bytes",
           "zero3_inter_bytes", "zeropp_inter_bytes", "zeropp_headline_ratio"]

W16 = 2  # B per 16-bit weight or gradient


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def hsdp_model_state_bytes(units, k: int) -> int:
    return 16 * sum(_ceil(s, k) for s in units)


def hsdp_intra_bytes(units, k: int) -> int:
    """Per rank per step, inside the node."""
    return W16 * sum(3 * (k - 1) * _ceil(s, k) for s in units)


def hsdp_inter_bytes(units, n: int, k: int) -> int:
    """Per rank per step, across nodes (padded: what the ring sends)."""
    r = n // k
    return W16 * sum(2 * (r - 1) * _ceil(_ceil(s, k), r) for s in units)


def hsdp_inter_bytes_unpadded(units, n: int, k: int) -> Fraction:
    """2(R−1)/R · Ψ/K elements of 2 B: the formula's headline."""
    r = n // k
    return W16 * Fraction(2 * (r - 1), r) * Fraction(sum(units), k)


def offload_gpu_bytes(units, n: int) -> int:
    return W16 * sum(units) + W16 * sum(_ceil(s, n) for s in units)


def offload_gpu_bytes_unpadded(units, n: int) -> Fraction:
    return W16 * sum(units) + W16 * Fraction(sum(units), n)


def offload_host_bytes(units, n: int) -> int:
    return (W16 + 12) * sum(_ceil(s, n) for s in units)


def offload_pcie_bytes(units) -> int:
    """All ranks, one step: 2Ψ of gradients down and 2Ψ of parameters up."""
    return 2 * W16 * sum(units)


def _crossing_ring_senders(n: int, k: int) -> int:
    return n // k if n // k > 1 else 0  # the ring r → r+1 leaves a node at its last rank, R times


def zero3_inter_bytes(units, n: int, k: int) -> int:
    """Whole world, one step: ZeRO-3's two all-gathers and one reduce-scatter on the ring."""
    return sum(3 * _crossing_ring_senders(n, k) * (n - 1) * W16 * _ceil(s, n) for s in units)


def zeropp_inter_bytes(units, n: int, k: int, qwz: bool = True, hpz: bool = True, qgz: bool = True,
                       weights: QuantSpec = INT8, grads: QuantSpec = INT4) -> tuple[int, int]:
    """Whole world, one step: (bytes of codes or 16-bit values, bytes of scales) that cross nodes."""
    senders, r = _crossing_ring_senders(n, k), n // k
    data = scales = 0
    for s in units:
        c = _ceil(s, n)
        if qwz:
            codes, sc = wire_bytes(c, weights)
            data, scales = data + senders * (n - 1) * codes, scales + senders * (n - 1) * sc
        else:
            data += senders * (n - 1) * W16 * c
        if not hpz:
            data += senders * (n - 1) * W16 * c
        if qgz:
            codes, sc = wire_bytes(c, grads)
            data, scales = data + n * (r - 1) * codes, scales + n * (r - 1) * sc
        else:
            data += senders * (n - 1) * W16 * c
    return data, scales


def zeropp_headline_ratio() -> Fraction:
    """The paper's 0.75Ψ / 3Ψ: int8 forward gather (1/2 of 16 bits) plus int4 gradients (1/4), no backward gather
    across nodes, over ZeRO-3's three 16-bit collectives."""
    return (Fraction(1, 2) + Fraction(1, 4)) / 3
