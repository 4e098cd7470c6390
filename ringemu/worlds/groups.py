"""Sub-groups of a world: the ranks of one node, or the ranks of one local index across nodes (a 2-D mesh).

N = R nodes × K ranks per node; rank g = m·K + l is local rank l of node m. A :class:`Partition` cuts the world
into disjoint groups of equal size, all of which run the same collective at once:

* ``"node"``: R groups of K ranks, ``{m·K + l : l}`` (FSDP2's shard dimension of an HSDP ``DeviceMesh``);
* ``"cross"``: K groups of R ranks, ``{m·K + l : m}`` (its replicate dimension; one rank per node).

:func:`group_communicator` gives a rank a :class:`GroupCommunicator` for its group: a Communicator of
``n_ranks = group size`` and ``rank = index in the group`` whose shard map is ``ChunkLayout(S, group size)``, as
``torch.distributed.new_group`` gives. Every rank of the world must make the same group call at the same time
(each group's collective is one ring of the registry on the group's ranks, run group by group). The world's
CommLedger records each group call once, as one N-rank schedule (:func:`lift`): the group schedule copied onto
every group, so per-link, per-rank and per-link-class counts (:mod:`ringemu.link_bytes`) see the real ranks.

``all_to_all`` (used by ZeRO++'s qgZ, Wang et al. 2023 §3.3) is a group collective of its own: rank i sends its
piece j to rank j (K−1 pieces of p elements each); its schedule moves chunk j·K + i from rank i to rank j over
K² chunks of p elements, so the ledger counts exactly (K−1)·p elements per rank.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import collectives
from ..algorithms import DEFAULT_ALGORITHM, build
from ..checks import check_int, check_n_ranks
from ..layout import ChunkLayout
from ..schedule import COPY, Schedule
from ..virtual import VirtualBuffer, is_virtual

__all__ = ["PARTITION_KINDS", "Partition", "GroupCommunicator", "group_communicator", "lift",
           "all_to_all_schedule", "group_schedule", "group_layout", "execute_group", "group_result_shape"]

PARTITION_KINDS = ("node", "cross")


@dataclass(frozen=True)
class Partition:
    """The world of ``n_ranks`` ranks, ``ranks_per_node`` per node, cut into ``kind`` groups."""

    kind: str
    n_ranks: int
    ranks_per_node: int

    def __post_init__(self) -> None:
        if self.kind not in PARTITION_KINDS:
            raise ValueError(f"partition kind must be one of {', '.join(PARTITION_KINDS)}; got {self.kind!r}")
        n = check_n_ranks(self.n_ranks)
        k = check_int(self.ranks_per_node, "ranks_per_node", minimum=1, maximum=n)
        if n % k:
            raise ValueError(f"ranks_per_node must divide n_ranks; got {k} and {n}")

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.ranks_per_node}"

    @property
    def group_size(self) -> int:
        return self.ranks_per_node if self.kind == "node" else self.n_ranks // self.ranks_per_node

    def groups(self) -> np.ndarray:
        """(groups, group size) int64 array of world ranks; row g is group g in group-rank order."""
        grid = np.arange(self.n_ranks, dtype=np.int64).reshape(self.n_ranks // self.ranks_per_node,
                                                                self.ranks_per_node)  # [node, local]
        return grid if self.kind == "node" else np.ascontiguousarray(grid.T)

    def place(self, rank: int) -> tuple[int, int]:
        """(group, index in the group) of world rank ``rank``."""
        node, local = divmod(rank, self.ranks_per_node)
        return (node, local) if self.kind == "node" else (local, node)


def all_to_all_schedule(k: int) -> Schedule:
    """All-to-all on ``k`` ranks over k² chunks: at step s (1..k−1) rank i copies chunk j·k + i to rank
    j = (i + s) mod k. Afterwards rank j holds chunks j·k .. j·k + k − 1 (piece j of every rank)."""
    k = check_n_ranks(k)
    rows = []
    for s in range(1, k):
        for i in range(k):
            j = (i + s) % k
            rows.append((s - 1, i, j, j * k + i, COPY))
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return Schedule(f"direct_all_to_all[{k}]", k, k * k, k - 1, table, "own", "gathered")


def group_schedule(op: str, k: int) -> Schedule:
    """The k-rank schedule a group call of ``op`` runs (the registry's ring, or :func:`all_to_all_schedule`)."""
    if op == "all_to_all":
        return all_to_all_schedule(k)
    return build(op.replace("_", "-"), k, DEFAULT_ALGORITHM)


def group_layout(op: str, numel: int, schedule: Schedule, k: int) -> ChunkLayout:
    """The chunk layout of a group call on a ``numel``-element buffer (all-to-all: k pieces of numel/k)."""
    if op == "all_to_all":
        return ChunkLayout(numel * k, k * k, k)  # every rank's k pieces at their own k chunk slots
    return ChunkLayout(numel, schedule.n_chunks, k)


def lift(schedule: Schedule, partition: Partition) -> Schedule:
    """``schedule`` (on the group size) run on every group of ``partition`` at once, as one schedule on the
    world's N ranks: each transfer is repeated once per group with its ranks renamed; steps keep their order and,
    within a step, each group's transfers keep theirs (groups are disjoint, so they never meet)."""
    if schedule.n_ranks != partition.group_size:
        raise ValueError(f"schedule {schedule.name} runs on {schedule.n_ranks} ranks; the groups of "
                         f"{partition.name} have {partition.group_size}")
    groups = partition.groups()
    table = np.repeat(schedule.table[None, :, :], groups.shape[0], axis=0)
    table[:, :, 1] = groups[:, schedule.table[:, 1]]
    table[:, :, 2] = groups[:, schedule.table[:, 2]]
    flat = table.reshape(-1, 5)
    flat = flat[np.argsort(flat[:, 0], kind="stable")]
    return Schedule(f"{schedule.name}@{partition.name}", partition.n_ranks, schedule.n_chunks, schedule.n_steps,
                    np.ascontiguousarray(flat), schedule.initial, schedule.final)


def group_result_shape(op: str, numel: int, k: int, index: int) -> int:
    """Length of what group rank ``index`` gets back from ``op`` on a ``numel``-element call."""
    if op == "reduce_scatter":
        return ChunkLayout(numel, k).payload(index)
    return numel


def execute_group(op: str, partition: Partition, buffers: list, numel: int, mode: str = "fused") -> list:
    """Run ``op`` group by group on the world's real buffers (rank order); return each rank's result.
    Nothing is recorded here: the caller records the lifted schedule once."""
    k = partition.group_size
    out: list = [None] * partition.n_ranks
    schedule = None if op == "all_to_all" else group_schedule(op, k)
    for members in partition.groups():
        rows = [buffers[r] for r in members]
        if op == "all_to_all":
            pieces = [np.split(row, k) for row in rows]
            results = [np.concatenate([pieces[i][j] for i in range(k)]) for j in range(k)]
        elif op == "reduce_scatter":
            results = collectives.reduce_scatter(rows, mode=mode, schedule=schedule)
        elif op == "all_gather":
            results = list(collectives.all_gather(rows, mode=mode, schedule=schedule))
        else:
            results = list(collectives.all_reduce(rows, mode=mode, schedule=schedule))
        for r, res in zip(members, results):
            out[int(r)] = res
    return out


class GroupCommunicator:
    """One rank's Communicator for its group of ``partition`` (see the module docstring). ``parent`` is the
    rank's world communicator; it must offer ``_group_call`` (the emulated and size-only worlds do)."""

    def __init__(self, parent, partition: Partition):
        if not hasattr(parent, "_group_call"):
            raise TypeError(f"{type(parent).__name__} has no sub-groups: node and cross-node groups need the "
                            f"emulated or size-only world")
        if partition.n_ranks != parent.n_ranks:
            raise ValueError(f"partition of {partition.n_ranks} ranks for a world of {parent.n_ranks}")
        self.parent, self.partition = parent, partition
        self.group, self.rank = partition.place(parent.rank)
        self.n_ranks = partition.group_size
        self.algorithm = DEFAULT_ALGORITHM
        self.ledger = parent.ledger
        self.faults = None

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)

    def _call(self, op: str, buffer, numel, label: str):
        if not ((isinstance(buffer, np.ndarray) or is_virtual(buffer)) and buffer.ndim == 1):
            raise TypeError(f"rank {self.parent.rank}: group {op} needs a 1-D numpy array or VirtualBuffer; got "
                            f"{type(buffer).__name__}")
        if not isinstance(label, str):
            raise TypeError(f"rank {self.parent.rank}: {op} label must be a str; got {label!r}")
        return self.parent._group_call(op, buffer, numel, label, self.partition)

    def reduce_scatter(self, buffer, label: str = "reduce_scatter", algorithm: str | None = None):
        """Sum ``buffer`` over the group; return this rank's chunk of ``ChunkLayout(S, group size)``."""
        return self._call("reduce_scatter", buffer, None, label)

    def all_gather(self, shard, numel: int, label: str = "all_gather", algorithm: str | None = None):
        """Concatenate the group's shards of a ``numel``-element buffer."""
        return self._call("all_gather", shard, numel, label)

    def all_reduce(self, buffer, label: str = "all_reduce", algorithm: str | None = None):
        """Sum ``buffer`` over the group; every rank of the group gets the sum."""
        return self._call("all_reduce", buffer, None, label)

    def all_to_all(self, buffer, label: str = "all_to_all"):
        """``buffer`` is k pieces of equal length; piece j goes to group rank j. Returns the k pieces this rank
        received, piece i from group rank i."""
        if buffer.shape[0] % self.n_ranks:
            raise ValueError(f"all_to_all needs a buffer of a multiple of {self.n_ranks} elements; got "
                             f"{buffer.shape[0]}")
        return self._call("all_to_all", buffer, None, label)


def group_communicator(comm, kind: str, ranks_per_node: int) -> GroupCommunicator:
    """Rank ``comm.rank``'s communicator for its ``kind`` group (``"node"`` or ``"cross"``)."""
    return GroupCommunicator(comm, Partition(kind, comm.n_ranks, ranks_per_node))


def virtual_result(op: str, buffer, numel: int, partition: Partition, rank: int):
    """The size-only result group rank of world rank ``rank`` gets back."""
    index = partition.place(rank)[1]
    return VirtualBuffer((group_result_shape(op, numel, partition.group_size, index),), buffer.dtype)
