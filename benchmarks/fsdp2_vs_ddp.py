"""Why PyTorch's FSDP2 and DDP part at N = 3 under one order of addition (docs/torch.md, "Findings").

Runs torch 2.13's DDP and FSDP2 (``fully_shard`` per layer) on the ringemu backend with the ``naive`` algorithm
(every element summed in rank order, whatever its position), 3 Adam steps of an MLP, N = 2, 3, 4, and prints:
the reduce ops each one sends (recorded where the ringemu backend receives them), and how many parameter elements
differ and by how many ulps. ``python benchmarks/fsdp2_vs_ddp.py``; nothing is typed in.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from ringemu.torch import process_group, spawn  # noqa: E402

WIDTHS = (37, 29, 23, 11, 5)


def _train(kind: str, ops: list):
    def fn(rank):
        gen = torch.Generator().manual_seed(0)
        model = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(WIDTHS, WIDTHS[1:])])
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        if kind == "fsdp":
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
        else:
            model = DDP(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(3):
            gen = torch.Generator().manual_seed(1000 * step + rank)
            x, y = torch.randn(4, WIDTHS[0], generator=gen), torch.randn(4, WIDTHS[-1], generator=gen)
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        params = model.parameters() if kind == "fsdp" else model.module.parameters()
        return [p.full_tensor().detach().clone() if hasattr(p, "full_tensor") else p.detach().clone() for p in params]
    return fn


def _recording(ops: list):
    """Record (collective, reduce op) of every reducing call the ringemu backend receives (thread-ranks share
    the module, so one wrapper sees every rank's calls)."""
    saved = {"_reduce_one": process_group._reduce_one}

    def wrapper(collective, kind, *args, **kwargs):
        ops.append(f"{collective} {kind}")
        return saved["_reduce_one"](collective, kind, *args, **kwargs)
    process_group._reduce_one = wrapper
    return saved


def run(n: int) -> dict:
    out = {}
    for kind in ("ddp", "fsdp"):
        ops: list = []
        saved = _recording(ops)
        try:
            out[kind] = spawn(_train(kind, ops), n, algorithm="naive").results[0]
        finally:
            for name, fn in saved.items():
                setattr(process_group, name, fn)
        out[kind + "_ops"] = sorted(set(ops))
    a = np.concatenate([p.numpy().view(np.int32).ravel() for p in out["ddp"]]).astype(np.int64)
    b = np.concatenate([p.numpy().view(np.int32).ravel() for p in out["fsdp"]]).astype(np.int64)
    out["differ"], out["size"], out["ulps"] = int(np.count_nonzero(a != b)), int(a.size), int(np.abs(a - b).max())
    return out


def main() -> int:
    print("N  DDP sends                      FSDP2 sends                              params differ  max ulps")
    for n in (2, 3, 4):
        r = run(n)
        print(f"{n}  {', '.join(r['ddp_ops']):30s} {', '.join(r['fsdp_ops']):40s} {r['differ']:>5,} of {r['size']:,}"
              f"  {r['ulps']:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
