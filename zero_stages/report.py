"""What one run of a stage produced (:class:`StageReport`), and bitwise parity with DP (:func:`parity_with_dp`).

Memory figures are read from the MemoryLedger the stage code wrote, traffic from the CommLedger the
Communicator wrote; nothing here is computed from a formula. ``traffic_*`` counts the model-state collectives
(every label except ``overflow_check``, whose one-element flag is listed under ``traffic_by_label``), summed over
the run's steps; padding is included, as the ring sends whole chunks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ringemu.ledger import CommLedger
from ringemu.memory import MemoryLedger

from .flat import FlatParams

__all__ = ["StageReport", "parity_with_dp", "parity_mismatches", "build_report", "traffic_ratio", "traffic_ratios",
           "stage_json",
           "OVERFLOW_LABEL"]

OVERFLOW_LABEL = "overflow_check"
_STATES = ("weights16", "master", "m", "v")


@dataclass
class StageReport:
    """One stage's run on N ranks. Byte and element counts are Python ints, one entry per rank.

    For real runs ``weights16``, ``master``, ``m``, ``v`` are the final states gathered from the ranks' shards
    (length Ψ), ``weights16_per_rank[r]`` the 16-bit pieces rank r holds, and ``history`` (if recorded) the
    same per step, plus ``grad32`` (the averaged fp32 gradient) and ``local_grads16`` (each rank's own 16-bit
    gradients before the reduction, per unit).
    """

    name: str
    n_ranks: int
    psi: int
    unit_sizes: tuple[int, ...]
    wire_dtype: str
    steps: int
    size_only: bool
    model_state_bytes_per_rank: list[int]
    model_state_padding_bytes_per_rank: list[int]
    peak_bytes_per_rank: list[int]
    activation_peak_bytes_per_rank: list[int]
    traffic_sent_bytes_per_rank: list[int]
    traffic_sent_elements_per_rank: list[int]
    traffic_padding_elements_per_rank: list[int]
    traffic_by_label: dict[str, dict[str, list[int]]]
    memory: MemoryLedger  # the ranks' shared ledger (emulator); per-rank figures above come from the ranks
    comm: CommLedger
    memory_by_category_per_rank: list[dict] = field(default_factory=list)
    weights16: np.ndarray | None = None
    master: np.ndarray | None = None
    m: np.ndarray | None = None
    v: np.ndarray | None = None
    weights16_per_rank: list | None = None
    history: list[dict] = field(default_factory=list)
    skipped_steps: list[bool] = field(default_factory=list)
    loss_scales: list[float] = field(default_factory=list)
    # beyond the four stages (zero_stages.api.attach_links): K, bytes sent per link class per rank
    # ({"intra_node", "inter_node", "pcie"}), the host's model states (offload) and zeropp's cuts
    ranks_per_node: int | None = None
    link_bytes_per_rank: list[dict] = field(default_factory=list)
    host_model_state_bytes_per_rank: list[int] = field(default_factory=list)
    options: str = ""

    def _repr_html_(self) -> str:
        """Notebooks: memory per rank by category (current / peak) and traffic per collective label."""
        from ringemu.views.notebook import table_html
        cats = list(self.memory_by_category_per_rank[0]) if self.memory_by_category_per_rank else []
        memory = table_html(
            f"{self.name}: memory per rank, bytes now / peak (N = {self.n_ranks}, Ψ = {self.psi:,}"
            f"{', size-only' if self.size_only else ''})", ["rank", *cats, "peak total"],
            [[r, *(f"{row[c]['current']:,} / {row[c]['peak']:,}" for c in cats), self.peak_bytes_per_rank[r]]
             for r, row in enumerate(self.memory_by_category_per_rank)])
        traffic = table_html(f"{self.name}: bytes sent per rank over {self.steps} step(s)", ["label", "busiest rank",
                                                                                          "elements", "padding"],
                             [[label, max(t["sent_bytes_per_rank"]), max(t["sent_elements_per_rank"]),
                               max(t["padding_elements_per_rank"])] for label, t in self.traffic_by_label.items()])
        return memory + traffic

    def memory_by_category(self) -> list[dict[str, dict[str, int]]]:
        """Per rank: ``{category: {"current": bytes, "peak": bytes}}``."""
        return self.memory_by_category_per_rank


def _assemble(flat: FlatParams, pieces_by_rank, dtype) -> np.ndarray | None:
    """The full length-Ψ vector from every rank's (unit, start, values) pieces; None if a part is missing."""
    out = np.zeros(flat.psi, dtype=dtype)
    covered = np.zeros(flat.psi, dtype=bool)
    for pieces in pieces_by_rank:
        for u, start, values in pieces:
            lo = flat.offsets[u] + start
            out[lo:lo + values.size] = values
            covered[lo:lo + values.size] = True
    return out if covered.all() else None


def _gather_record(flat: FlatParams, records, wire) -> dict:
    out = {name: _assemble(flat, [getattr(r, name) for r in records], wire if name == "weights16" else np.float32)
           for name in _STATES}
    out["grad32"] = _assemble(flat, [r.grad32 for r in records], np.float32) if records[0].grad32 else None
    out["weights16_per_rank"] = [r.weights16 for r in records]
    out["local_grads16"] = [r.local_grads16 for r in records]
    out["skipped"] = records[0].skipped
    out["loss_scale"] = records[0].loss_scale
    return out


def build_report(name: str, flat: FlatParams, wire, wire_name: str, steps: int, size_only: bool,
                 results, memory: MemoryLedger, comm: CommLedger) -> StageReport:
    n = flat.n_ranks
    labels = comm.labels()
    main = [lab for lab in labels if lab != OVERFLOW_LABEL]
    sent = comm.per_rank(main) if comm.records and main else []

    def column(rank_traffic, attr):
        return [getattr(t.sent, attr) for t in rank_traffic] if rank_traffic else [0] * n

    by_label = {}
    for lab in labels:
        per = comm.per_rank(lab)
        by_label[lab] = {"sent_bytes_per_rank": column(per, "bytes"), "sent_elements_per_rank": column(per, "elements"),
                         "padding_elements_per_rank": column(per, "padding_elements")}
    report = StageReport(
        name=name, n_ranks=n, psi=flat.psi, unit_sizes=flat.unit_sizes, wire_dtype=wire_name, steps=steps,
        size_only=size_only,
        model_state_bytes_per_rank=[res.model_state_bytes for res in results],
        model_state_padding_bytes_per_rank=[res.model_state_padding_bytes for res in results],
        peak_bytes_per_rank=[res.peak_bytes for res in results],
        activation_peak_bytes_per_rank=[res.memory_by_category["activations"]["peak"] for res in results],
        traffic_sent_bytes_per_rank=column(sent, "bytes"),
        traffic_sent_elements_per_rank=column(sent, "elements"),
        traffic_padding_elements_per_rank=column(sent, "padding_elements"),
        traffic_by_label=by_label, memory=memory, comm=comm,
        memory_by_category_per_rank=[res.memory_by_category for res in results])
    if not size_only:
        final = _gather_record(flat, [res.final for res in results], wire)
        report.weights16, report.master, report.m, report.v = (final[k] for k in _STATES)
        report.weights16_per_rank = final["weights16_per_rank"]
        report.history = [_gather_record(flat, [res.history[s] for res in results], wire)
                          for s in range(len(results[0].history))]
        report.skipped_steps = [h["skipped"] for h in report.history]
        report.loss_scales = [h["loss_scale"] for h in report.history]
    return report


def _same_bits(a, b) -> bool:
    if a is None or b is None:
        return False
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return bool(np.array_equal(a.view(width), b.view(width)))


def _pieces_match(pieces_by_rank, full, offsets) -> bool:
    for pieces in pieces_by_rank:
        for u, start, values in pieces:
            lo = offsets[u] + start
            if not _same_bits(values, full[lo:lo + values.size]):
                return False
    return True


def parity_mismatches(report: StageReport, dp_report: StageReport) -> list[str]:
    """What differs from DP, bit for bit: final states, every rank's 16-bit pieces, and (when both runs
    recorded a history) the same after every step plus the averaged gradient and the skip decisions."""
    if report.size_only or dp_report.size_only:
        return ["size-only runs carry no numbers"]
    if (report.n_ranks, report.unit_sizes, report.wire_dtype, report.steps) != \
            (dp_report.n_ranks, dp_report.unit_sizes, dp_report.wire_dtype, dp_report.steps):
        return ["runs differ in N, unit sizes, dtype or steps"]
    flat = FlatParams(report.unit_sizes, report.n_ranks)
    bad = [f"final {k}" for k in _STATES if not _same_bits(getattr(report, k), getattr(dp_report, k))]
    if dp_report.weights16 is not None and not _pieces_match(report.weights16_per_rank, dp_report.weights16,
                                                             flat.offsets):
        bad.append("final weights16 held by some rank")
    if report.history and dp_report.history:
        if len(report.history) != len(dp_report.history):
            bad.append("number of recorded steps")
        for s, (h, d) in enumerate(zip(report.history, dp_report.history)):
            bad += [f"step {s} {k}" for k in (*_STATES, "grad32")
                    if (h[k] is not None or d[k] is not None) and not _same_bits(h[k], d[k])]
            if d["weights16"] is not None and not _pieces_match(h["weights16_per_rank"], d["weights16"],
                                                                flat.offsets):
                bad.append(f"step {s} weights16 held by some rank")
            if (h["skipped"], h["loss_scale"]) != (d["skipped"], d["loss_scale"]):
                bad.append(f"step {s} skip decision or loss scale")
    return bad


def parity_with_dp(report: StageReport, dp_report: StageReport) -> bool:
    """True if ``report`` equals ``dp_report`` bit for bit: final 16-bit weights (every rank's and gathered),
    fp32 master, m, v, and after every recorded step the same plus the averaged gradient (lesson claim M11)."""
    return not parity_mismatches(report, dp_report)


def traffic_ratios(report: StageReport, dp_report: StageReport) -> list[Fraction | None]:
    """Per rank: elements it sent in ``report`` over those it sent in ``dp_report`` (None where DP sent nothing)."""
    return [Fraction(a, b) if b else None for a, b in zip(report.traffic_sent_elements_per_rank,
                                                          dp_report.traffic_sent_elements_per_rank)]


def traffic_ratio(report: StageReport, dp_report: StageReport) -> str | None:
    """The traffic ratio to DP as an exact fraction ("3/2") when every rank has the same one; else the range over
    ranks, "5/4 to 29/12 (per rank)" (a tree's ranks send unequal shares, so no single rank speaks for all);
    None when DP sends nothing (N = 1, or no steps)."""
    ratios = [r for r in traffic_ratios(report, dp_report) if r is not None]
    if not ratios:
        return None
    low, high = min(ratios), max(ratios)
    return str(low) if low == high else f"{low} to {high} (per rank)"


def stage_json(report: StageReport, dp_report: StageReport) -> dict:
    """The JSON-ready summary of one stage's run, as ``ringemu zero --json`` prints it: parity with DP, memory
    and traffic per rank (exact integers), the traffic ratio to DP, and the loss-scaling history."""
    mismatches = parity_mismatches(report, dp_report)
    return {
        "name": report.name,
        "parity_with_dp": not mismatches,
        "parity_mismatches": mismatches,
        "model_state_bytes_per_rank": report.model_state_bytes_per_rank,
        "model_state_padding_bytes_per_rank": report.model_state_padding_bytes_per_rank,
        "peak_bytes_per_rank": report.peak_bytes_per_rank,
        "activation_peak_bytes_per_rank": report.activation_peak_bytes_per_rank,
        "traffic_sent_bytes_per_rank": report.traffic_sent_bytes_per_rank,
        "traffic_sent_elements_per_rank": report.traffic_sent_elements_per_rank,
        "traffic_ratio_to_dp": traffic_ratio(report, dp_report),
        "traffic_ratio_to_dp_per_rank": [None if r is None else str(r) for r in traffic_ratios(report, dp_report)],
        "traffic_by_label": report.traffic_by_label,
        "memory_by_category": report.memory_by_category(),
        "skipped_steps": report.skipped_steps,
        "loss_scales": report.loss_scales,
        "ranks_per_node": report.ranks_per_node,
        "bytes_per_link_class_per_rank": report.link_bytes_per_rank,
        "host_model_state_bytes_per_rank": report.host_model_state_bytes_per_rank,
        "options": report.options,
    }
