"""The Communicator interface that per-rank code (the ZeRO stages) is written against.

One Communicator belongs to one rank. Buffers are flat (1-D) and unpadded; the communicator pads to the layout of
its algorithm's schedule internally, as a real engine's flat-parameter code must; the shard map is always
``ChunkLayout(numel, n_ranks)``. Size-only buffers (:class:`~ringemu.virtual.VirtualBuffer`) are accepted wherever
an array is, and only count.

Which algorithm a collective runs is data from the registry (:mod:`ringemu.algorithms`): a communicator has an
``algorithm`` (default ``"ring"``), and each call may name another with ``algorithm=``.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .. import algorithms
from ..checks import check_n_ranks, check_numel
from ..layout import ChunkLayout
from ..ledger import CommLedger
from ..virtual import is_virtual

__all__ = ["Communicator", "NATIVE", "RankFailure", "check_algorithm", "check_call", "communicator_algorithms"]

NATIVE = "native"  # a real engine's own collectives (the torch backend); every other name is a registry schedule


def communicator_algorithms() -> tuple[str, ...]:
    """The registry's algorithm names that a Communicator can run: those built for all three collectives, in
    catalog order — the textbook orders and the engine orders an engine has for all three (built for each buffer:
    the worlds keep one schedule per length and element size). Only the textbook orders promise that the
    reduce-scatter adds in the all-reduce's order (so that ZeRO equals DP bit for bit); an engine's may not."""
    return tuple(a for a in algorithms.names()
                 if all((c, a) in algorithms.REGISTRY for c in algorithms.COLLECTIVES))


def check_algorithm(name: object, n_ranks: int, ranks_per_node: int | None = None) -> str:
    """``name`` if it is an algorithm of the registry that runs all three collectives on ``n_ranks`` ranks (with
    ``ranks_per_node`` for the hierarchical ones), else a ValueError that lists the names available."""
    n = check_n_ranks(n_ranks)
    available = communicator_algorithms()
    if not isinstance(name, str) or name not in available:
        raise ValueError(f"algorithm must be one of {', '.join(available)}; got {name!r}")
    if ranks_per_node is not None:
        algorithms.check_ranks_per_node(ranks_per_node, n)
    for collective in algorithms.COLLECTIVES:
        reason = algorithms.algorithm(collective, name).unsupported(n)
        if reason is not None:
            raise ValueError(f"algorithm {name!r} does not support n_ranks={n} ({collective}): {reason}")
    return name


@runtime_checkable
class Communicator(Protocol):
    """Collectives seen from one rank. Every rank of the world must make the same calls in the same order.

    Guarantees shared by every implementation: results are bit-identical to the order of addition of the
    algorithm's schedule (:mod:`ringemu.algorithms`; ``algorithm=None`` means the communicator's own
    ``algorithm``), reduce-scatter's shard r equals shard r of all-reduce with the same algorithm, and ``ledger``
    (if not None) records each call under ``label``.
    """

    rank: int
    n_ranks: int
    algorithm: str
    ledger: CommLedger | None

    def reduce_scatter(self, buffer: np.ndarray, label: str = "reduce_scatter",
                       algorithm: str | None = None) -> np.ndarray:
        """Sum ``buffer`` (length S) over ranks; return this rank's chunk of ``ChunkLayout(S, n_ranks)``."""

    def all_gather(self, shard: np.ndarray, numel: int, label: str = "all_gather",
                   algorithm: str | None = None) -> np.ndarray:
        """Concatenate every rank's shard (rank r's shard = chunk r of ``ChunkLayout(numel, n_ranks)``)."""

    def all_reduce(self, buffer: np.ndarray, label: str = "all_reduce", algorithm: str | None = None) -> np.ndarray:
        """Sum ``buffer`` over ranks; every rank gets the sum."""

    def layout(self, numel: int) -> ChunkLayout:
        """The shard map of a flat buffer of ``numel`` elements: rank r owns chunk r."""


class RankFailure(RuntimeError):
    """A rank raised, or the ranks' collective calls did not match (raised by the in-process worlds)."""


def check_call(comm, op: str, buffer, numel: int | None, label: str, algorithm: str | None,
               arrays: bool = True) -> tuple[int, str]:
    """(numel, algorithm) of rank ``comm.rank``'s ``op`` call, checked the same way by every in-process world:
    ``buffer`` 1-D (a numpy array where ``arrays``, or a VirtualBuffer), ``label`` a str, ``numel`` a count, and
    ``algorithm`` None (the communicator's own) or a registry name that runs on the world's N."""
    allowed = isinstance(buffer, np.ndarray) if arrays else False
    if not ((allowed or is_virtual(buffer)) and buffer.ndim == 1):
        needs = "needs a 1-D numpy array or VirtualBuffer" if arrays else \
            "in a size-only world needs a 1-D VirtualBuffer"
        raise TypeError(f"rank {comm.rank}: {op} {needs}; got {type(buffer).__name__} of shape "
                        f"{getattr(buffer, 'shape', None)}")
    if not isinstance(label, str):
        raise TypeError(f"rank {comm.rank}: {op} label must be a str; got {label!r}")
    numel = buffer.shape[0] if numel is None else check_numel(numel, "numel")
    if algorithm is None:
        algorithm = comm.algorithm
    elif algorithm != comm.algorithm:
        algorithm = check_algorithm(algorithm, comm.n_ranks, comm.world.ranks_per_node)
    return numel, algorithm
