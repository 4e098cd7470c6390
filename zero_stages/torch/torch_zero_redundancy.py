"""The project's ZeRO-1 against torch's own ZeRO-1, ``ZeroRedundancyOptimizer`` wrapping ``Adam(foreach=False)``.

Both partition the optimizer states (ZeRO §5.1, P_os) and update only their partition: ours by flat chunks of
each unit (rank r owns chunk r), torch's by whole parameter tensors (a greedy size balance), followed by a
broadcast of the updated parameters. Adam is elementwise, so the partitioning does not change any bit: given the
same averaged fp32 gradients, both must end with the same master weights, m and v.

:func:`compare_zero1_with_torch` trains ZeRO-1 on the emulator with ``AdamConfig(sqrt="torch")`` (torch's square
root, the one operation numpy does not reproduce, :mod:`zero_stages.adam`), records the averaged fp32 gradient
of every step, then runs ``ZeroRedundancyOptimizer`` on N gloo processes with one ``nn.Parameter`` per unit fed
those gradients, consolidates its state on rank 0 and compares master, m and v bit for bit.
"""
from __future__ import annotations

import numpy as np

from ringemu.worlds.torch_launch import TorchWorld

__all__ = ["compare_zero1_with_torch"]


def _zero_redundancy_rank(comm, initial: list, grads_per_step: list, lr: float, betas: tuple, eps: float):
    """Per rank: torch's ZeRO-1 over the given steps; rank 0 returns parameters and consolidated m, v."""
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer

    params = [torch.nn.Parameter(torch.from_numpy(np.array(u, dtype=np.float32))) for u in initial]
    opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=lr, betas=betas, eps=eps,
                                  foreach=False)
    for grads in grads_per_step:
        for p, g in zip(params, grads):
            p.grad = torch.from_numpy(np.array(g, dtype=np.float32))
        opt.step()
    opt.consolidate_state_dict(to=0)
    if comm.rank != 0:
        return None
    state = opt.state_dict()["state"]
    m = [state[i]["exp_avg"].numpy().copy() for i in range(len(params))]
    v = [state[i]["exp_avg_sq"].numpy().copy() for i in range(len(params))]
    return [p.detach().numpy().copy() for p in params], m, v


def compare_zero1_with_torch(n_ranks: int = 4, steps: int = 3, wire_dtype: str = "bf16", seed: int = 0,
                             grads: str = "model", unit_sizes=None, timeout: float = 120.0) -> dict:
    """JSON-ready comparison of the project's ZeRO-1 with ``ZeroRedundancyOptimizer(Adam(foreach=False))``.

    ``equal`` maps master, m and v to whether all elements agree bit for bit; ``mismatched_elements`` counts
    the disagreements. Steps skipped by fp16 loss scaling are skipped on the torch side as well.
    """
    from ..adam import AdamConfig
    from ..api import DEFAULT_UNIT_SIZES, train
    from ..flat import FlatParams
    from ..model import MLP, default_width
    from ..precision import check_wire_dtype
    from ..workload import BlockWorkload

    units = tuple(unit_sizes or DEFAULT_UNIT_SIZES)
    adam = AdamConfig(sqrt="torch")
    rep = train("zero1", n_ranks, steps, wire_dtype, seed, grads, list(units), adam=adam)
    flat = FlatParams(units, n_ranks)
    if grads == "model":
        source = MLP(units, default_width(units), 4, seed)
    else:
        source = BlockWorkload(units, n_ranks, check_wire_dtype(wire_dtype), seed)
    initial = [source.init_unit(u) for u in range(len(units))]
    if any(i is None for i in initial):
        raise ValueError("this gradient source has no initial parameters to compare")

    def split(full):
        return [full[flat.offsets[u]:flat.offsets[u] + s] for u, s in enumerate(units)]

    fed = [split(h["grad32"]) for h in rep.history if not h["skipped"]]
    theirs = TorchWorld(n_ranks, timeout=timeout).run(_zero_redundancy_rank, initial, fed, adam.lr,
                                                      (adam.beta1, adam.beta2), adam.eps)[0]
    out = {"n_ranks": n_ranks, "steps": steps, "updates": len(fed), "dtype": wire_dtype, "grads": grads,
           "unit_sizes": list(units), "equal": {}, "mismatched_elements": {}}
    for name, ours, their in zip(("master", "m", "v"), (rep.master, rep.m, rep.v), theirs):
        their = np.concatenate(their)
        bad = int(np.count_nonzero(ours.view(np.uint32) != their.view(np.uint32)))
        out["equal"][name], out["mismatched_elements"][name] = bad == 0, bad
    return out
