"""``ringemu audit torch --ranks-per-node K``: PyTorch FSDP2's HSDP (``fully_shard`` on a 2-D ``DeviceMesh``) on N
thread-ranks, its bytes per link class against the formula.

The mesh is ``init_device_mesh("cpu", (R, K), mesh_dim_names=("replicate", "shard"))``: rank g = m·K + l sits on
node m, the ``shard`` groups are the nodes (FSDP2's all-gathers and reduce-scatters: intra-node, NVLink) and the
``replicate`` groups hold one rank per node (FSDP2's all-reduce of each gradient shard: inter-node, InfiniBand).
The script is the one ``ringemu audit torch`` takes, with ``wrap(model, mesh)`` accepting the mesh. The
``"ringemu"`` backend gives every sub-group its own :class:`~ringemu.ledger.CommLedger`; FSDP2 makes the same
calls in every step, so the last step is the last 1/steps of each group's records (checked: each group's record
count is a multiple of the steps).

Formula (Zhao et al. 2023, arXiv 2304.11277, §3.2.2): inter-node elements per rank per step 2(R−1)/R·Ψ/K. What
FSDP2 sends departs from it, in bytes, for two reasons read from the run: each parameter is sharded on dim 0,
padded to a multiple of K rows (its shard holds ceil(d_0/K)·(numel/d_0) elements), and the ring pads each
all-reduce to R chunks.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import torch
from torch.distributed.device_mesh import init_device_mesh

from ..checks import check_int
from .audit import load_script
from .launcher import spawn

__all__ = ["HsdpAudit", "audit_hsdp"]


@dataclass(frozen=True)
class HsdpAudit:
    """The last step of FSDP2 HSDP on N = R·K thread-ranks; bytes are what each rank sent."""

    n_ranks: int
    ranks_per_node: int
    steps: int
    psi: int
    itemsize: int  # bytes per element of the gradient all-reduce (the model's dtype)
    unit_sizes: tuple[int, ...]  # parameters per fully_shard unit
    shard_elements: int  # Σ over parameters of ceil(d_0/K)·(numel/d_0): one rank's padded shard
    intra_bytes_per_rank: tuple[int, ...]
    inter_bytes_per_rank: tuple[int, ...]
    inter_ring_padding_bytes: int  # the busiest rank's ring padding in the inter-node all-reduces

    @property
    def n_nodes(self) -> int:
        return self.n_ranks // self.ranks_per_node

    def formula_bytes(self) -> Fraction:
        """2(R−1)/R·Ψ/K elements of ``itemsize`` bytes."""
        r = self.n_nodes
        return self.itemsize * Fraction(2 * (r - 1), r) * Fraction(self.psi, self.ranks_per_node)

    def departures(self) -> list[tuple[str, Fraction, str]]:
        """(what, bytes, why): the measured inter-node bytes of the busiest rank over the formula, in parts."""
        r, k = self.n_nodes, self.ranks_per_node
        shard_pad = self.itemsize * Fraction(2 * (r - 1), r) * (self.shard_elements - Fraction(self.psi, k))
        measured = max(self.inter_bytes_per_rank)
        ring = measured - self.formula_bytes() - shard_pad
        return [("FSDP2's dim-0 padding", shard_pad,
                 f"one rank's shard holds {self.shard_elements:,} elements against Ψ/K = {Fraction(self.psi, k)}: "
                 f"each parameter padded to a multiple of K = {k} rows, then 2(R−1)/R of it all-reduced"),
                ("the ring's padding", ring,
                 f"each all-reduce padded to R = {r} chunks ({self.inter_ring_padding_bytes:,} B counted as "
                 f"padding by the ledger)")]


def _train(script, steps: int, n: int, k: int):
    def fn(rank: int):
        mesh = init_device_mesh("cpu", (n // k, k), mesh_dim_names=("replicate", "shard"))
        model = script.wrap(script.make_model(rank), mesh)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(steps):
            x, y = script.batch(rank, step)
            value = script.loss(model(x), y)
            opt.zero_grad()
            value.backward()
            opt.step()
        return mesh["shard"].get_group().group_name, mesh["replicate"].get_group().group_name, _units(model)
    return fn


def _units(model) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(parameters per fully_shard unit, the full shape of every parameter)."""
    from torch.distributed.fsdp import FSDPModule
    units, shapes, seen = [], [], set()
    for module in reversed(list(model.modules())):  # children before parents: a unit owns what is left
        if isinstance(module, FSDPModule):
            own = [p for p in module.parameters() if id(p) not in seen]
            seen.update(id(p) for p in own)
            units.append(sum(p.numel() for p in own))
            shapes += [tuple(p.shape) for p in own]
    return tuple(reversed(units)), shapes


def _last_step(ledger, steps: int, name: str):
    records = ledger.records
    if len(records) % steps:
        raise RuntimeError(f"group {name}: {len(records)} collective calls in {steps} steps: the steps differ, so "
                           f"the last step cannot be read as the last 1/{steps} of the calls")
    return records[len(records) - len(records) // steps:]


def audit_hsdp(path, n_ranks: int, ranks_per_node: int, steps: int | None = None,
               algorithm: str = "ring") -> HsdpAudit:
    """Run the script's ``wrap(model, mesh)`` on an (R, K) mesh of thread-ranks; see the module doc."""
    n = check_int(n_ranks, "n_ranks", minimum=1)
    k = check_int(ranks_per_node, "ranks_per_node", minimum=1, maximum=n)
    if n % k:
        raise ValueError(f"--ranks-per-node must divide --ranks; got {k} for {n} ranks")
    script = load_script(path)
    steps = getattr(script, "STEPS", 3) if steps is None else check_int(steps, "steps", minimum=1, maximum=1000)
    result = spawn(_train(script, steps, n, k), n, algorithm=algorithm)
    intra, inter, ring_pad, itemsize = [0] * n, [0] * n, [0] * n, 0
    for g, (shard_name, replicate_name, _) in enumerate(result.results):
        node, local = divmod(g, k)
        for name, index, out in ((shard_name, local, intra), (replicate_name, node, inter)):
            ledger = result.group_ledgers.get(name)
            if ledger is None or not ledger.records or ledger.n_ranks == 1:
                continue
            from ..ledger import CommLedger
            last = CommLedger()
            last.records.extend(_last_step(ledger, steps, name))
            traffic = last.per_rank()[index].sent
            out[g] = traffic.bytes
            if out is inter:
                ring_pad[g] = traffic.padding_bytes
                itemsize = last.records[0].itemsize
    units, shapes = result.results[0][2]
    shard = sum(-(-s[0] // k) * (_numel(s) // s[0]) if s and s[0] else _numel(s) for s in shapes)
    return HsdpAudit(n, k, steps, sum(units), itemsize or 4, units, shard, tuple(intra), tuple(inter),
                     max(ring_pad))


def _numel(shape) -> int:
    out = 1
    for d in shape:
        out *= d
    return out
