"""ZeRO++: ZeRO-3 with three communication cuts, each switchable (Wang et al. 2023, "ZeRO++", arXiv 2306.10209).

N = R nodes × K ranks per node; rank g keeps its ZeRO-3 shard, chunk g of ``ChunkLayout(S_u, N)``, c = ceil(S_u/N)
elements of every unit (16·Σ_u c bytes of model states). ``job.options`` is a :class:`ZeroPPConfig`:

* **qwZ** (§3.1): the forward all-gather sends each rank's padded shard as block-quantised int8 codes packed into
  int32 words (``param_all_gather_fwd_int8``) and one fp32 scale per block (``qwz_scales``); every rank decodes
  the gathered codes to the 16-bit weights it computes with;
* **hpZ** (§3.2): after the forward gather each rank keeps chunk l of ``ChunkLayout(S_u, K)`` of the weights it
  used (a secondary shard, 2·ceil(S_u/K) B, category ``gathered`` until backward has used it), and the backward
  all-gather runs inside the node on those (``param_all_gather_bwd_intra``): it never leaves the node;
* **qgZ** (§3.3): the gradient reduce-scatter becomes a hierarchical all-to-all of int4 codes: inside the node
  (``qgz_intra``: local rank l' receives, from every rank of its node, the chunks m'·K + l' of every node m'), a
  decode and an fp32 sum over the K senders, a re-quantisation, then across nodes among the ranks of one local
  index (``qgz_inter``: node m' receives chunk m'·K + l), a decode and an fp32 sum over the R nodes. Rank g ends
  with chunk g summed over all N ranks (the paper's tensor slice reordering makes the pieces line up), rounded to
  16 bits. Scales travel beside the codes (``qgz_*_scales``).

Cross-node bytes: ZeRO-3's three collectives cross nodes; with all three cuts only the int8 forward gather
(≈ 0.5Ψ in 16-bit units) and the int4 inter-node all-to-all (≈ 0.25Ψ) do: 3Ψ → 0.75Ψ (§4, "4× less"), plus the
scales (:mod:`zero_stages.quantize`). The quantisation is lossy: the results differ from DP's, and the error is
measured, not asserted zero.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringemu.virtual import VirtualBuffer

from ..buffers import cast, part, write
from ..job import Job, Recorder, RankResult
from ..precision import LossScaler
from ..quantize import INT4, INT8, QuantSpec, decode, encode, n_blocks, n_words
from ..step_guard import StepGuard
from . import zero3
from .hsdp import mesh

__all__ = ["run_rank", "ZeroPPConfig"]


@dataclass(frozen=True)
class ZeroPPConfig:
    """Which of ZeRO++'s cuts are on, and the quantisation of weights (qwZ) and gradients (qgZ)."""

    qwz: bool = True
    hpz: bool = True
    qgz: bool = True
    weights: QuantSpec = INT8
    grads: QuantSpec = INT4

    def name(self) -> str:
        on = [n for n, f in (("qwZ", self.qwz), ("hpZ", self.hpz), ("qgZ", self.qgz)) if f]
        return "+".join(on) if on else "none (ZeRO-3)"


def _quantised_all_gather(comm, arena, job, spec, values16, numel, label, scale_label, u, tag):
    """All-gather this rank's ``values16`` (c elements, padding included) as codes and scales; return the fp32
    decode of every rank's shard concatenated (N·c values)."""
    n, c = comm.n_ranks, values16.shape[0]
    w, nb = n_words(c, spec), n_blocks(c, spec)
    words, scales = encode(values16, spec)
    arena.alloc(f"{tag}_codes[{u}]", "comm_buffer", n * w, np.int32)
    arena.alloc(f"{tag}_scales[{u}]", "comm_buffer", n * nb, np.float32)
    all_words = comm.all_gather(words, n * w, label=label)
    all_scales = comm.all_gather(scales, n * nb, label=scale_label)
    arena.free(f"{tag}_codes[{u}]")
    arena.free(f"{tag}_scales[{u}]")
    if job.size_only:
        return VirtualBuffer((n * c,), np.float32)
    return np.concatenate([decode(all_words[j * w:(j + 1) * w], all_scales[j * nb:(j + 1) * nb], c, spec)
                           for j in range(n)])


def _quantised_all_to_all(group, spec, pieces, label, size_only):
    """Send piece j (fp32, all of one length p) to group rank j as codes and scales; return the fp32 sum of the
    pieces received, added in group-rank order."""
    k, p = group.n_ranks, pieces[0].shape[0]
    w, nb = n_words(p, spec), n_blocks(p, spec)
    if size_only:
        group.all_to_all(VirtualBuffer((k * w,), np.int32), label=label)
        group.all_to_all(VirtualBuffer((k * nb,), np.float32), label=f"{label}_scales")
        return VirtualBuffer((p,), np.float32)
    coded = [encode(x, spec) for x in pieces]
    words = group.all_to_all(np.concatenate([c[0] for c in coded]), label=label)
    scales = group.all_to_all(np.concatenate([c[1] for c in coded]), label=f"{label}_scales")
    total = np.zeros(p, dtype=np.float32)
    for i in range(k):  # fp32 sum over senders 0..k-1
        total += decode(words[i * w:(i + 1) * w], scales[i * nb:(i + 1) * nb], p, spec)
    return total


def _qgz_reduce(node, cross, job, bucket, u):
    """qgZ: this rank's chunk g of the bucket summed over all ranks (fp32, c values)."""
    n, k = job.flat.n_ranks, node.n_ranks
    r_nodes, c = n // k, job.flat.shard_numel(u)
    cfg = job.options
    if job.size_only:
        _quantised_all_to_all(node, cfg.grads, [VirtualBuffer((r_nodes * c,), np.float32)] * k, "qgz_intra", True)
        return _quantised_all_to_all(cross, cfg.grads, [VirtualBuffer((c,), np.float32)] * r_nodes, "qgz_inter",
                                     True)
    padded = np.zeros(n * c, dtype=np.float32)
    padded[:bucket.shape[0]] = bucket.astype(np.float32)
    chunks = padded.reshape(r_nodes, k, c)  # [node m', local l', c]: chunk m'·K + l'
    node_sum = _quantised_all_to_all(node, cfg.grads, [chunks[:, j, :].reshape(-1) for j in range(k)],
                                     "qgz_intra", False)  # chunks m'·K + l of this node, summed over its K ranks
    per_node = node_sum.reshape(r_nodes, c)
    return _quantised_all_to_all(cross, cfg.grads, [per_node[m] for m in range(r_nodes)], "qgz_inter", False)


def run_rank(comm, job: Job) -> RankResult:
    """One rank of ZeRO++ for ``job.steps`` steps."""
    cfg = job.options
    if not isinstance(cfg, ZeroPPConfig):
        raise TypeError("the zeropp stage needs job.options = ZeroPPConfig (zero_stages.api builds it)")
    node, cross = mesh(comm, job)
    arena, mine, weights16, grads16, opt = zero3.init_state(comm, job)
    flat, wire, units = job.flat, job.wire, job.flat.units()
    k, local = node.n_ranks, node.rank
    scaler, rec = LossScaler(job.loss_scaling, job.resume), Recorder(job, comm.rank)
    held = [(u, mine[u].start, part(weights16[u], 0, mine[u].stop - mine[u].start)) for u in units]

    def gather_fwd(u, gathered):
        if not cfg.qwz:
            return zero3.gather_unit(comm, job, arena, weights16, mine, gathered, u, "param_all_gather_fwd")
        full = _quantised_all_gather(comm, arena, job, cfg.weights, weights16[u], flat.unit_sizes[u],
                                     "param_all_gather_fwd_int8", "qwz_scales", u, "qwz")
        gathered[u] = arena.alloc(f"gathered[{u}]", "gathered", flat.unit_sizes[u], wire)
        write(gathered[u], cast(part(full, 0, flat.unit_sizes[u]), wire))

    def keep_secondary(u, gathered, secondary):
        sl = slice(*divmod_slice(flat.unit_sizes[u], k, local))
        secondary[u] = arena.alloc(f"secondary[{u}]", "gathered", -(-flat.unit_sizes[u] // k), wire)
        write(part(secondary[u], 0, sl.stop - sl.start), part(gathered[u], sl.start, sl.stop))

    def gather_bwd(u, gathered, secondary):
        if not cfg.hpz:
            return zero3.gather_unit(comm, job, arena, weights16, mine, gathered, u, "param_all_gather_bwd")
        sl = slice(*divmod_slice(flat.unit_sizes[u], k, local))
        gathered[u] = arena.alloc(f"gathered[{u}]", "gathered", flat.unit_sizes[u], wire)
        write(gathered[u], node.all_gather(part(secondary[u], 0, sl.stop - sl.start), flat.unit_sizes[u],
                                           label="param_all_gather_bwd_intra"))
        del secondary[u]
        arena.free(f"secondary[{u}]")

    def one_step(step: int) -> None:  # one training step, atomic under faults (zero_stages.step_guard)
        ctx = job.workload.begin_step(arena, step, comm.rank)
        gathered, secondary = {}, {}
        gather_fwd(units[0], gathered)
        for u in units:  # forward, prefetching the next unit
            if u + 1 < len(units):
                gather_fwd(u + 1, gathered)
            ctx.forward(u, gathered[u])
            if cfg.hpz:
                keep_secondary(u, gathered, secondary)
            zero3.release_unit(arena, gathered, u)
        gather_bwd(units[-1], gathered, secondary)
        for u in reversed(units):  # backward, prefetching the previous unit
            if u > 0:
                gather_bwd(u - 1, gathered, secondary)
            bucket = arena.alloc(f"grad_bucket[{u}]", "comm_buffer", flat.unit_sizes[u], wire)
            ctx.backward(u, gathered[u], bucket, scaler.scale)
            rec.local_grad(u, bucket)
            zero3.release_unit(arena, gathered, u)
            own = part(grads16[u], 0, mine[u].stop - mine[u].start)
            if cfg.qgz:
                write(own, cast(part(_qgz_reduce(node, cross, job, bucket, u), 0, own.shape[0]), wire))
            else:
                write(own, comm.reduce_scatter(bucket, label="grad_reduce_scatter"))
            arena.free(f"grad_bucket[{u}]")
        ctx.end()
        overflow = zero3.optimizer_step(comm, job, weights16, grads16, mine, opt, scaler, rec)
        rec.end_step(step, overflow, scaler.scale, held, opt)
        scaler.update(overflow)
        job.end_step(comm.rank, step, opt, scaler, held)

    StepGuard(comm, job, arena, rec, opt, scaler, weights16).run(job.step_range(), one_step)
    return rec.result(arena, scaler.scale, held, opt)


def divmod_slice(numel: int, k: int, index: int) -> tuple[int, int]:
    """(start, stop) of chunk ``index`` of ``ChunkLayout(numel, k)`` (the hpZ secondary shard)."""
    chunk = -(-numel // k)
    start = min(index * chunk, numel)
    return start, min(start + chunk, numel)
