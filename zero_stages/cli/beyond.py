"""What ``ringemu zero`` adds for the stages beyond the four (hsdp, zeropp, offload): each one's headline checked
against its own run, in exact integers, and printed (text) or carried (``--json``).

* hsdp: parity with DP (bit for bit expected with ``--grads blocks``: integer sums are exact in any order; with the
  model's float gradients the order differs, RS inside the node then AR across nodes, and so may the bits) and the
  inter-node bytes per rank per step against 2(R−1)·ceil(ceil(S_u/K)/R)·2 B
  (:mod:`~zero_stages.memory.closed_forms_beyond`);
* zeropp: the error against DP after the run (max and mean relative error of the 16-bit weights and the fp32
  master), and the whole world's inter-node bytes over ZeRO-3's on the same mesh, with the scales' bytes apart;
* offload: PCIe bytes per step (4Ψ over all ranks) and the GPU's model states (2Ψ + 2Ψ/N).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ringemu.topology import PCIE

from ..memory import closed_forms_beyond as cf
from ..memory.closed_forms import BEYOND_STAGES
from .arguments import ZEROPP_CUTS

__all__ = ["PARITY_EXPECTED", "NOT_CLAIMED", "beyond_info", "print_beyond", "loss_curve", "beyond_stages",
           "zeropp_config"]

NOT_CLAIMED = {"zeropp": "int8 weights and int4 gradients are lossy; the error is below",
               "hsdp": "float sums in another order: RS inside the node, then AR across nodes; --grads blocks is "
                       "exact"}


def beyond_stages(args, loaded, stages: tuple[str, ...]) -> tuple[str, ...]:
    """The stages ``ringemu zero`` trains for ``--stage`` (zeropp adds ZeRO-3 on the same mesh, the cross-node
    ratio's denominator), after checking the flags the stages beyond the four need or refuse."""
    stage = args.stage
    if stage in ("hsdp", "zeropp") and args.ranks_per_node is None:
        raise ValueError(f"--stage {stage} needs --ranks-per-node K (K ranks per node, dividing --ranks)")
    if args.ranks_per_node is not None and args.ranks % args.ranks_per_node:
        raise ValueError(f"--ranks-per-node must divide --ranks; got {args.ranks_per_node} for {args.ranks} ranks")
    if stage in BEYOND_STAGES and (args.checkpoint or loaded is not None or args.fault):
        raise ValueError(f"--stage {stage} runs without --checkpoint, --resume and --fault")
    if args.zeropp is not None and stage != "zeropp":
        raise ValueError(f"--zeropp chooses the cuts of --stage zeropp; got it with --stage {stage}")
    if stage in BEYOND_STAGES and args.backend == "torch":
        raise ValueError(f"--stage {stage} runs on --backend emulator only (its node and cross-node groups are the "
                         f"emulated world's)")
    return ("dp", "zero3", "zeropp") if stage == "zeropp" else stages


def zeropp_config(args):
    """The ZeroPPConfig of ``--zeropp`` (the cuts switched on)."""
    from ..stages.zeropp import ZeroPPConfig
    cuts = ZEROPP_CUTS if args.zeropp is None else args.zeropp
    return ZeroPPConfig(**{cut: cut in cuts for cut in ZEROPP_CUTS})


def PARITY_EXPECTED(stage: str, grads: str) -> bool:
    """Whether bit-for-bit parity with DP is a claim of ``stage``: always for the four and offload (the same
    arithmetic, elsewhere), hsdp with integer blocks only, zeropp never (its codes are lossy)."""
    return stage not in ("hsdp", "zeropp") or (stage == "hsdp" and grads == "blocks")


def _relative_error(a, b) -> dict:
    if a is None or b is None:
        return {"max": None, "mean": None, "norm": None}
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rel = np.abs(a - b) / np.maximum(np.abs(b), np.finfo(np.float32).tiny)  # elementwise: large where b ≈ 0
    norm = float(np.linalg.norm(a - b) / np.linalg.norm(b)) if np.linalg.norm(b) else None
    return {"max": float(rel.max()), "mean": float(rel.mean()), "norm": norm}


def loss_curve(report, seed: int, micro_batch: int = 4) -> list[float]:
    """The training loss at every step of a model-gradient run: the 16-bit weights the ranks held before step s
    (the initial ones for s = 0), run forward on every rank's micro-batch of step s, L = ½·Σ(y − t)²/B averaged
    over the ranks (the MLP of zero_stages.model with training_job's defaults)."""
    from ..model import MLP, default_width
    units = report.unit_sizes
    model = MLP(units, default_width(units), micro_batch, seed)
    offsets = np.cumsum((0, *units))
    wire = report.weights16.dtype
    before = [np.concatenate([model.init_unit(u).astype(wire) for u in range(len(units))])]
    before += [h["weights16"] for h in report.history[:-1]]
    curve = []
    for step, w16 in enumerate(before):
        total = 0.0
        for rank in range(report.n_ranks):
            x, t = model.micro_batch_for(step, rank)
            for u in range(len(units)):
                x = model.forward_unit(u, w16[offsets[u]:offsets[u + 1]], x)
            total += model.loss(x, t)
        curve.append(total / report.n_ranks)
    return curve


def _inter_total(report) -> int:
    return sum(d["inter_node"] for d in report.link_bytes_per_rank)


def beyond_info(stage: str, report, dp, zero3=None, seed: int | None = None) -> dict:
    """The JSON-ready check of ``stage``'s headline (exact ints; ratios as fraction strings)."""
    units, n, k, steps = report.unit_sizes, report.n_ranks, report.ranks_per_node, max(report.steps, 1)
    out: dict = {"ranks_per_node": k}
    if stage == "hsdp":
        measured = [d["inter_node"] // steps for d in report.link_bytes_per_rank]
        formula = cf.hsdp_inter_bytes(units, n, k)
        headline = cf.hsdp_inter_bytes_unpadded(units, n, k)
        out.update(inter_node_bytes_per_rank_per_step=measured, formula_bytes=formula,
                   formula_exact=all(m == formula for m in measured), headline_bytes=str(headline),
                   padding_departure_bytes=str(formula - headline),
                   intra_node_bytes_per_rank_per_step=[d["intra_node"] // steps for d in report.link_bytes_per_rank],
                   intra_formula_bytes=cf.hsdp_intra_bytes(units, k),
                   model_state_formula_bytes=cf.hsdp_model_state_bytes(units, k))
    elif stage == "zeropp":
        data, scales = cf.zeropp_inter_bytes(units, n, k, *(c in report.options for c in ("qwZ", "hpZ", "qgZ")))
        measured, z3 = _inter_total(report) // steps, _inter_total(zero3) // steps if zero3 is not None else None
        out.update(cuts=report.options, inter_node_bytes_per_step=measured, formula_bytes=data + scales,
                   formula_exact=measured == data + scales, scale_bytes=scales, code_bytes=data,
                   zero3_inter_node_bytes_per_step=z3,
                   ratio_to_zero3=str(Fraction(measured, z3)) if z3 else None,
                   ratio_to_zero3_without_scales=str(Fraction(data, z3)) if z3 else None,
                   paper_ratio=str(cf.zeropp_headline_ratio()),
                   weights16_relative_error=_relative_error(report.weights16, dp.weights16),
                   master_relative_error=_relative_error(report.master, dp.master))
        if seed is not None and report.history and dp.history:  # model gradients: the loss beside DP's
            out.update(loss_per_step=loss_curve(report, seed), dp_loss_per_step=loss_curve(dp, seed))
    elif stage == "offload":
        pcie = [d["pcie"] // steps for d in report.link_bytes_per_rank]
        seconds = PCIE.seconds(max(pcie)) if pcie else Fraction(0)  # the busiest rank's copies, one message
        out.update(pcie_bytes_per_rank_per_step=pcie, pcie_seconds_per_step=str(seconds), pcie_bytes_per_step=sum(pcie),
                   pcie_formula_bytes=cf.offload_pcie_bytes(units),
                   pcie_exact=sum(pcie) == cf.offload_pcie_bytes(units),
                   gpu_model_state_formula_bytes=cf.offload_gpu_bytes(units, n),
                   gpu_model_state_headline_bytes=str(cf.offload_gpu_bytes_unpadded(units, n)),
                   host_model_state_formula_bytes=cf.offload_host_bytes(units, n))
    return out


def print_beyond(stage: str, report, info: dict) -> None:
    """The text lines of :func:`beyond_info` under the stage's table."""
    per = report.link_bytes_per_rank
    steps = max(report.steps, 1)
    if per:
        busiest = max(range(len(per)), key=lambda r: (per[r]["inter_node"], r))
        print(f"bytes per link class per step (K = {report.ranks_per_node or report.n_ranks} ranks per node): rank 0 "
              + ", ".join(f"{c} {v // steps:,}" for c, v in per[0].items())
              + f"; busiest inter-node rank {busiest}: {per[busiest]['inter_node'] // steps:,} B")
    if stage == "hsdp":
        print(f"inter-node bytes per rank per step: {sorted(set(info['inter_node_bytes_per_rank_per_step']))} B; "
              f"formula 2(R-1)·ceil(ceil(S_u/K)/R)·2 B = {info['formula_bytes']:,} B: "
              f"{'exact' if info['formula_exact'] else 'DIFFERS'}; headline 2(R-1)/R·Ψ/K·2 B = "
              f"{info['headline_bytes']} B (padding adds {info['padding_departure_bytes']} B)")
        print(f"intra-node bytes per rank per step: {sorted(set(info['intra_node_bytes_per_rank_per_step']))} B; "
              f"formula 3(K-1)·ceil(S_u/K)·2 B = {info['intra_formula_bytes']:,} B")
    elif stage == "zeropp":
        print(f"cuts: {info['cuts']}; inter-node bytes per step (all ranks) {info['inter_node_bytes_per_step']:,} B "
              f"(codes {info['code_bytes']:,} + scales {info['scale_bytes']:,}; formula "
              f"{'exact' if info['formula_exact'] else 'DIFFERS'}); ZeRO-3 on the same mesh "
              f"{info['zero3_inter_node_bytes_per_step']:,} B")
        print(f"ratio to ZeRO-3: {info['ratio_to_zero3']} with scales, {info['ratio_to_zero3_without_scales']} "
              f"without (paper: {info['paper_ratio']}, i.e. 3Ψ -> 0.75Ψ as N, R grow)")
        w, m = info["weights16_relative_error"], info["master_relative_error"]
        if w["max"] is not None:
            if "loss_per_step" in info:
                print("loss per step (before each update): zeropp "
                      + " ".join(f"{v:.6g}" for v in info["loss_per_step"]) + "; DP "
                      + " ".join(f"{v:.6g}" for v in info["dp_loss_per_step"]))
            print(f"error against DP after {report.steps} step(s), relative per element: 16-bit weights max "
                  f"{w['max']:.3g} mean {w['mean']:.3g}, fp32 master max {m['max']:.3g} mean {m['mean']:.3g}; "
                  f"normwise |x - x_DP|/|x_DP|: weights {w['norm']:.3g}, master {m['norm']:.3g} "
                  + ("(lossy by design)" if ("qwZ" in info["cuts"] or "qgZ" in info["cuts"]) else
                     "(hpZ alone moves no number differently)"))
    elif stage == "offload":
        print(f"PCIe bytes per step: {info['pcie_bytes_per_step']:,} B over all ranks (4Ψ = "
              f"{info['pcie_formula_bytes']:,} B: {'exact' if info['pcie_exact'] else 'DIFFERS'}); per rank "
              f"{sorted(set(info['pcie_bytes_per_rank_per_step']))} B, "
              f"{float(Fraction(info['pcie_seconds_per_step'])) * 1e6:.4g} µs on {PCIE.name} at "
              f"{float(PCIE.bandwidth) / 1e9:.1f} GB/s")
        print(f"GPU model states {max(report.model_state_bytes_per_rank):,} B per rank (2Ψ + 2·Σceil(S_u/N) = "
              f"{info['gpu_model_state_formula_bytes']:,}; 2Ψ + 2Ψ/N = {info['gpu_model_state_headline_bytes']}); "
              f"host {max(report.host_model_state_bytes_per_rank):,} B per rank")
