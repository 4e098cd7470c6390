"""FSDP2 HSDP for ``ringemu audit torch --ranks-per-node K``: the MLP of ``fsdp2_mlp.py`` sharded inside a node
and replicated across nodes (``fully_shard`` on a 2-D ``DeviceMesh``, mesh dims ("replicate", "shard")).

    ringemu audit torch --script examples/fsdp2_hsdp.py --ranks 8 --ranks-per-node 4
    python examples/fsdp2_hsdp.py 8 4      # the audit beside ringemu's own hsdp stage on the same units

Every random number comes from a per-rank ``torch.Generator`` (thread-ranks share torch's default generator).
"""
import sys

import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

STEPS = 3
WIDTHS = (37, 29, 23, 11, 5)  # sizes no K divides, so FSDP2 pads every parameter's dim 0


def make_model(rank: int) -> nn.Module:
    gen = torch.Generator().manual_seed(0)  # the same weights on every rank
    layers = []
    for i, (d_in, d_out) in enumerate(zip(WIDTHS, WIDTHS[1:])):
        layers += [nn.Linear(d_in, d_out), nn.Tanh()] if i < len(WIDTHS) - 2 else [nn.Linear(d_in, d_out)]
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


def wrap(model: nn.Module, mesh=None) -> nn.Module:
    for layer in list(model)[:-1]:  # every Linear but the last its own unit; the last stays with the root
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, WIDTHS[0], generator=gen), torch.randn(8, WIDTHS[-1], generator=gen)


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((output - target) ** 2).mean()


def main(n: int, k: int) -> None:
    """The audit of FSDP2 HSDP and ringemu's hsdp stage on the same units: inter-node elements per rank per step."""
    from fractions import Fraction

    from ringemu.torch.audit_hsdp import audit_hsdp
    from zero_stages import run_size_only

    audit = audit_hsdp(__file__, n, k)
    stage = run_size_only("hsdp", n, unit_sizes=audit.unit_sizes, ranks_per_node=k)
    fsdp2 = Fraction(max(audit.inter_bytes_per_rank), audit.itemsize)
    ours = Fraction(max(d["inter_node"] for d in stage.link_bytes_per_rank), 2)  # bf16: 2 B per element
    formula = audit.formula_bytes() / audit.itemsize
    print(f"N = {n}, K = {k}, units {list(audit.unit_sizes)} (Ψ = {audit.psi:,}): inter-node elements per rank per "
          f"step: FSDP2 {fsdp2}, ringemu's hsdp stage {ours}, formula 2(R-1)/R·Ψ/K = {formula}")
    print(f"FSDP2 pads each parameter's dim 0 to K rows ({audit.shard_elements:,} shard elements); the stage pads "
          f"each unit to K ({sum(-(-s // k) for s in audit.unit_sizes):,}); both pad the ring to R chunks")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
