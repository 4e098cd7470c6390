"""Size-only runs by class of ranks: ranks whose shards have the same sizes in every unit run the same way.

In a size-only run the stage code computes nothing; what a rank allocates, sends and receives depends on its rank
only through the sizes of its shards, chunk r of ``ChunkLayout(S_u, N)`` for every unit u (ZeRO §5, the shard
map of :class:`~zero_stages.flat.FlatParams`). For unit u with chunk c_u = ceil(S_u/N) and q_u = S_u // c_u, rank
r's shard is full for r < q_u, holds the remainder S_u − q_u·c_u for r = q_u, and is empty for r > q_u. So the
ranks split into at most 2·(distinct q_u) + 1 intervals whose ranks have equal shard sizes in every unit: a model
of 64 equal layers on 1,024 ranks has at most three classes, whatever N.

:func:`run_by_class` runs the stage's per-rank function on one rank per class (the first) in a
:class:`~ringemu.worlds.SizeOnlyWorld` and copies its result and MemoryLedger row to the rest of the class.
This relies on the built-in stages reading their rank only through the shard map; the tests check, on awkward
unit sizes and N up to 64, that the outcome equals running every rank (and running every rank in the
:class:`~ringemu.worlds.EmulatedWorld`), figure by figure.
"""
from __future__ import annotations

import dataclasses

from ringemu.worlds.size_only import SizeOnlyWorld

from .flat import FlatParams
from .job import Job

__all__ = ["rank_classes", "run_by_class"]


def rank_classes(flat: FlatParams) -> list[range]:
    """The ranks 0..N−1 as consecutive ranges; ranks in one range have equal shard sizes in every unit."""
    n = flat.n_ranks
    cuts = {0, n}
    for s in set(flat.unit_sizes):
        chunk = -(-s // n)  # ceil(S_u / N)
        q = s // chunk  # ranks below q hold a full chunk, rank q the remainder, ranks above q nothing
        cuts.update(x for x in (q, q + 1) if 0 < x < n)
    edges = sorted(cuts)
    return [range(a, b) for a, b in zip(edges[:-1], edges[1:])]


def run_by_class(fn, job: Job, world: SizeOnlyWorld) -> list:
    """Run ``fn(comm, job)`` (a built-in stage's per-rank function) on the first rank of every class of
    :func:`rank_classes`; give every other rank a copy of its class's result and MemoryLedger row.

    Returns the per-rank results in rank order, as ``world.run(fn, job)`` would."""
    if not job.size_only:
        raise ValueError("run_by_class is for size-only jobs (real numbers differ from rank to rank)")
    classes = rank_classes(job.flat)
    first = world.run_ranks([c.start for c in classes], fn, job)
    results = []
    for members in classes:
        rep = first[members.start]
        for rank in members:
            if rank == members.start:
                results.append(rep)
                continue
            job.memory.copy_rank(members.start, rank)
            by_category = {c: dict(v) for c, v in rep.memory_by_category.items()}  # {category: {current, peak}}
            results.append(dataclasses.replace(rep, rank=rank, memory_by_category=by_category))
    return results
