"""An FSDP2 training script for ``ringemu audit torch``: a 4-layer MLP, each Linear its own FSDP2 unit.

The audit imports this file and calls, on every thread-rank: ``make_model(rank)`` (identical on every rank),
``wrap(model)`` (the sharding under test; the audit runs ``DistributedDataParallel(model)`` beside it),
``batch(rank, step)`` and ``loss(output, target)``. Every random number comes from a per-rank
``torch.Generator``: thread-ranks share torch's default generator, so ``torch.manual_seed`` would race.
"""
import torch
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

STEPS = 3
WIDTHS = (37, 29, 23, 11, 5)  # sizes no rank count divides, so FSDP2 pads every parameter


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


def wrap(model: nn.Module) -> nn.Module:
    for layer in list(model)[:-1]:  # the last Linear stays in the root's group: FSDP2 keeps the root unsharded
        if isinstance(layer, nn.Linear):  # after forward, so its parameters are not gathered again for backward
            fully_shard(layer)  # reshard_after_forward=True: gathered again for backward
    return fully_shard(model)


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, WIDTHS[0], generator=gen), torch.randn(8, WIDTHS[-1], generator=gen)


def loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((output - target) ** 2).mean()
