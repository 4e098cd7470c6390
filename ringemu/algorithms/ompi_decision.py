"""``ompi:default``: what Open MPI 5.0's coll/tuned runs when nothing is forced, by its fixed decision rules.

``coll_tuned_decision_fixed.c`` (open-mpi/ompi v5.0.10), commutative branches (MPI_SUM), picks an algorithm by the
communicator size N and a message size in bytes, then that algorithm's own fallbacks apply (ring with count < N
runs recursive doubling; Rabenseifner with count < 2^floor(log2 N) runs basic linear). The size each rule reads:

* all-reduce (``ompi_coll_tuned_allreduce_intra_dec_fixed``): the whole vector, dsize·count;
* reduce-scatter (``ompi_coll_tuned_reduce_scatter_intra_dec_fixed``): dsize·Σ recvcounts, the whole vector;
* all-gather (``ompi_coll_tuned_allgather_intra_dec_fixed``): **one block**, dsize·scount (here the textbook
  shard, ceil(S/N) elements); N = 2 runs two-procs.

The fixed rules pass segment size 0, so a ``segmented_ring`` choice runs as the ring. N = 1 is coll/self's (no
communication). Each table row is (N bound, [(bytes bound, algorithm id), ...]), bounds exclusive, None = no bound.
"""
from __future__ import annotations

from fractions import Fraction
from functools import partial

from ..layout import ChunkLayout
from ..schedule import Schedule, check_n_ranks
from . import Algorithm
from . import ompi_allgather, ompi_allreduce, ompi_reduce_scatter
from .ompi_common import ENGINE, SOURCE_TAG

__all__ = ["default_choice", "ompi_default_all_reduce", "ompi_default_reduce_scatter", "ompi_default_all_gather",
           "ALGORITHMS"]

_ALL_REDUCE = [  # lines 118-203; 1 linear, 2 nonoverlapping, 3 recursive doubling, 4 ring, 5 segmented ring, 6 Rabenseifner
    (4, [(8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (None, 6)]),
    (8, [(16, 4), (8192, 3), (None, 6)]),
    (16, [(8192, 3), (None, 6)]),
    (32, [(64, 5), (4096, 3), (None, 6)]),
    (64, [(128, 5), (None, 6)]),
    (128, [(262144, 3), (None, 6)]),
    (256, [(131072, 2), (262144, 3), (None, 6)]),
    (512, [(4096, 2), (None, 6)]),
    (2048, [(2048, 2), (16384, 3), (None, 6)]),
    (4096, [(2048, 2), (4096, 5), (16384, 3), (None, 6)]),
    (None, [(2048, 2), (16384, 5), (32768, 3), (None, 6)]),
]
_REDUCE_SCATTER = [  # lines 851-960; 1 nonoverlapping, 2 recursive halving, 3 ring, 4 butterfly
    (4, [(65536, 3), (131072, 4), (None, 3)]),
    (8, [(8, 1), (262144, 2), (None, 3)]),
    (32, [(262144, 2), (None, 3)]),
    (64, [(64, 1), (2048, 2), (524288, 4), (None, 3)]),
    (128, [(256, 1), (512, 2), (2048, 4), (4096, 2), (None, 4)]),
    (256, [(256, 1), (512, 2), (None, 4)]),
    (512, [(256, 1), (1024, 2), (None, 4)]),
    (1024, [(512, 1), (2048, 2), (8192, 4), (16384, 2), (None, 4)]),
    (2048, [(512, 1), (4096, 2), (16384, 4), (32768, 2), (None, 4)]),
    (4096, [(512, 1), (4096, 2), (None, 4)]),
    (None, [(1024, 1), (8192, 2), (None, 4)]),
]
_ALL_GATHER = [  # lines 1110-1228; 2 Bruck, 3 recursive doubling, 4 ring, 5 neighbor exchange (N = 2: 6 two procs)
    (32, [(None, 3)]),
    (64, [(1024, 3), (65536, 5), (None, 4)]),
    (128, [(512, 3), (65536, 5), (None, 4)]),
    (256, [(512, 3), (131072, 5), (524288, 4), (1048576, 5), (None, 4)]),
    (512, [(32, 3), (128, 2), (1024, 3), (131072, 5), (524288, 4), (1048576, 5), (None, 4)]),
    (1024, [(64, 3), (256, 2), (2048, 3), (None, 5)]),
    (2048, [(4, 3), (8, 2), (16, 3), (32, 2), (256, 3), (512, 2), (4096, 3), (None, 5)]),
    (4096, [(32, 2), (128, 3), (512, 2), (4096, 3), (None, 5)]),
    (None, [(2, 3), (8, 2), (16, 3), (512, 2), (4096, 3), (None, 5)]),
]
_TABLES = {"all-reduce": _ALL_REDUCE, "reduce-scatter": _REDUCE_SCATTER, "all-gather": _ALL_GATHER}
_BUILDERS = {"all-reduce": ompi_allreduce.BUILDERS, "reduce-scatter": ompi_reduce_scatter.BUILDERS,
             "all-gather": ompi_allgather.BUILDERS}


def default_choice(collective: str, n_ranks: int, nbytes: int) -> int:
    """The algorithm id coll/tuned's fixed rules pick for ``nbytes`` (the size the collective's rule reads, module
    doc) on ``n_ranks`` ranks."""
    if collective == "all-gather" and n_ranks == 2:
        return 6
    for ranks_bound, rules in _TABLES[collective]:
        if ranks_bound is None or n_ranks < ranks_bound:
            for bytes_bound, alg in rules:
                if bytes_bound is None or nbytes < bytes_bound:
                    return alg
    raise AssertionError("every table ends with None")


def _rule_bytes(collective: str, n: int, numel: int, itemsize: int) -> int:
    if collective == "all-gather":
        return ChunkLayout(numel, n).shard_size * itemsize  # one block
    return numel * itemsize


def _default(collective: str, n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """The schedule of the algorithm the fixed rules pick for ``collective`` (module doc), named ompi_default_*; on
    one rank whatever they pick sends nothing (coll/self's local copy)."""
    n = check_n_ranks(n_ranks)
    alg = default_choice(collective, n, _rule_bytes(collective, n, numel, itemsize))
    return _BUILDERS[collective][alg](n, numel=numel, itemsize=itemsize).renamed(
        f"ompi_default_{collective.replace('-', '_')}")


def ompi_default_all_reduce(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """The all-reduce order coll/tuned's fixed rules run for this N and buffer (module doc)."""
    return _default("all-reduce", n_ranks, numel, itemsize)


def ompi_default_reduce_scatter(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """The reduce-scatter order coll/tuned's fixed rules run for this N and buffer (module doc)."""
    return _default("reduce-scatter", n_ranks, numel, itemsize)


def ompi_default_all_gather(n_ranks: int, *, numel: int, itemsize: int = 4) -> Schedule:
    """The all-gather order coll/tuned's fixed rules run for this N and buffer (module doc)."""
    return _default("all-gather", n_ranks, numel, itemsize)


_ENTRY = {"all-reduce": ompi_allreduce.ALGORITHMS, "reduce-scatter": ompi_reduce_scatter.ALGORITHMS,
          "all-gather": ompi_allgather.ALGORITHMS}
_NAMES = {  # algorithm id -> the registry entry whose cost the rule's choice has
    "all-reduce": {1: "ompi:basic-linear", 2: "ompi:nonoverlapping", 3: "ompi:recursive-doubling", 4: "ompi:ring",
                   5: "ompi:ring", 6: "ompi:rabenseifner"},
    "reduce-scatter": {1: "ompi:nonoverlapping", 2: "ompi:recursive-halving", 3: "ompi:ring", 4: "ompi:butterfly"},
    "all-gather": {2: "ompi:bruck", 3: "ompi:recursive-doubling", 4: "ompi:ring", 5: "ompi:neighbor-exchange",
                   6: "ompi:ring"},
}


def _cost(collective: str, n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """The textbook cost of the algorithm the fixed rules pick for S bytes (all-gather: S/N bytes a block), without
    the count fallbacks (they depend on the element count, which S bytes alone does not give)."""
    if n == 1:
        return Fraction(0)
    rule = nbytes // n if collective == "all-gather" else nbytes
    name = _NAMES[collective][default_choice(collective, n, rule)]
    return next(e for e in _ENTRY[collective] if e.name == name).cost(n, nbytes, alpha, beta)


_FIRST_NONOVERLAPPING = {"all-reduce": 128, "reduce-scatter": 32}  # the smallest N >= 8 whose rules pick it


def _unsupported(collective: str, n: int) -> str | None:
    if collective == "all-gather" or n < _FIRST_NONOVERLAPPING[collective]:
        return None
    return "the nonoverlapping choice's reduce (tuned's reduce decision) is modelled for N < 32"


_SRC = SOURCE_TAG + "/tuned/coll_tuned_decision_fixed.c, "
_SIZED = ("numel", "itemsize")
ALGORITHMS = (
    Algorithm("all-reduce", "ompi:default", ompi_default_all_reduce,
              "Open MPI's choice when nothing is forced: by N and the vector's bytes, then the choice's fallbacks",
              _SRC + "ompi_coll_tuned_allreduce_intra_dec_fixed", ENGINE, partial(_cost, "all-reduce"),
              partial(_unsupported, "all-reduce"), options=_SIZED),
    Algorithm("reduce-scatter", "ompi:default", ompi_default_reduce_scatter,
              "Open MPI's choice when nothing is forced: by N and the whole vector's bytes",
              _SRC + "ompi_coll_tuned_reduce_scatter_intra_dec_fixed", ENGINE, partial(_cost, "reduce-scatter"),
              partial(_unsupported, "reduce-scatter"), options=_SIZED),
    Algorithm("all-gather", "ompi:default", ompi_default_all_gather,
              "Open MPI's choice when nothing is forced: by N and one block's bytes (two-procs for N = 2)",
              _SRC + "ompi_coll_tuned_allgather_intra_dec_fixed", ENGINE, partial(_cost, "all-gather"),
              partial(_unsupported, "all-gather"), options=_SIZED),
)
