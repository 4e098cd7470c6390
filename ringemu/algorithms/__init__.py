"""The algorithm catalog: one registry maps (collective, algorithm name) to a schedule builder and its metadata.

This package is the one home of collective names and algorithm names. Every consumer (the collectives, the
emulated world and the Communicators, the torch backend, the CLI, ``ringemu.testing``, ``bench``, the proofs)
reads :data:`REGISTRY` through :func:`algorithm`, :func:`build`, :func:`names` and :func:`resolve_op`, and lists
no names of its own.

Adding an algorithm is one new file in this package (a family module that defines :class:`Algorithm` entries in a
module-level ``ALGORITHMS`` tuple) plus its name in ``_FAMILIES``; ``docs/algorithms.md`` walks through it.

May import only ringemu's core (schedule, checks, layout); everything above reads it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from ..checks import check_int
from ..schedule import Schedule, check_n_ranks

__all__ = [
    "COLLECTIVES", "CONTRACTS", "DEFAULT_ALGORITHM", "OP_ALIASES", "Algorithm", "REGISTRY", "algorithm", "build", "names",
    "resolve_op", "op_names", "schedule_for", "cost", "check_ranks_per_node", "default_ranks_per_node",
    "MAX_SCHEDULE_RANKS",
]

# The collectives a schedule can implement (CLI spelling). A schedule's postcondition says what it leaves:
COLLECTIVES = ("reduce-scatter", "all-gather", "all-reduce")
# collective -> (precondition, accepted postconditions) its schedules declare (Schedule.initial/final, proved by
# ringemu.provenance): a reduce-scatter may leave more than its own chunk reduced ("reduced-all")
CONTRACTS = {"reduce-scatter": ("all", ("reduced-own", "reduced-all")), "all-gather": ("own", ("gathered",)),
             "all-reduce": ("all", ("reduced-all",))}
DEFAULT_ALGORITHM = "ring"
# Op names kept for the command line and older callers: op -> (collective, algorithm)
OP_ALIASES = {"naive-all-reduce": ("all-reduce", "naive")}

# α-β cost model of a textbook formula: (n_ranks, nbytes per rank S, α seconds per message step, β seconds per
# byte) -> seconds, exact.
CostModel = Callable[[int, int, Fraction, Fraction], Fraction]


def _any_n(n_ranks: int) -> str | None:
    return None


def default_ranks_per_node(n_ranks: int) -> int:
    """The ranks per node a hierarchical algorithm assumes when none is given: the largest divisor of N that is
    at most sqrt(N) (N = 8: 4 nodes of 2 ranks; N = 16: 4 of 4; a prime N: N nodes of 1 rank), so that both levels
    of the hierarchy have more than one rank whenever N allows it."""
    best = 1
    d = 1
    while d * d <= n_ranks:
        if n_ranks % d == 0:
            best = d
        d += 1
    return best


def check_ranks_per_node(ranks_per_node: object, n_ranks: int) -> int:
    """``ranks_per_node`` as an int that divides ``n_ranks``, or a clear TypeError/ValueError."""
    why = f"that divides n_ranks={n_ranks}"
    value = check_int(ranks_per_node, "ranks_per_node", minimum=1, why=why)
    if n_ranks % value:
        raise ValueError(f"ranks_per_node must be an integer >= 1 ({why}), got {value}")
    return value


@dataclass(frozen=True)
class Algorithm:
    """One catalog entry: ``build(n_ranks)`` returns the :class:`~ringemu.schedule.Schedule`.

    An entry whose ``options`` name ``"ranks_per_node"`` (the hierarchical ring) is built as
    ``build(n_ranks, ranks_per_node=R)`` and costed as ``cost(n, S, α, β, ranks_per_node=R)``; :func:`build` and
    :func:`cost` pass it (default :func:`default_ranks_per_node`) and leave it out for every other entry.
    An engine order whose ``options`` name ``"numel"`` (and ``"itemsize"``) cuts each buffer its own way: it is
    built for one buffer length (and element size) and its schedule carries that partition
    (:attr:`ringemu.schedule.Schedule.partition`); :func:`build` requires them for such entries.

    ``cost`` is the textbook α-β time (Thakur, Rabenseifner & Gropp 2005 notation: α per message, β per byte,
    S bytes per rank), exact as a Fraction; the ledger's modelled time is measured from the schedule itself and
    equals it where the textbook's assumptions hold (S divisible as the algorithm needs, one link class) for every
    entry but ``naive``, whose cost is the one-port model of the lesson (rank 0's port carries N-1 buffers each
    way) while the ledger times each link on its own.
    ``unsupported(n_ranks)`` returns None, or the reason this algorithm cannot run on ``n_ranks`` ranks.

    Reduction semantics, written down per entry (DESIGN.md, "A schedule carries its partition"):
    ``average`` is how the entry's engine takes an average (ReduceOp.AVG): ``"divide"`` (the sum, then ÷N in the
    tensor's type), ``"premultiply"`` (each rank's input × T(1/N) in its own type before the sum, NCCL's
    ncclAvg) or None (the engine has no AVG: gloo). ``accumulate`` names the 16-bit float types the engine sums in
    fp32 (upcast, run the schedule in fp32, round once at the end; the bytes are then fp32's, as the engine moves
    them: XLA CPU's ``("bf16",)``); the others use 16-bit wire arithmetic (fp32 add rounded per hop). ``sum_from_zero``: the engine's sum
    starts from +0, ``((+0 + x0) + x1) + ...``, which equals the schedule's sum followed by adding +0 bit for bit
    (it only turns a -0.0 total into +0.0); the collectives apply that last addition.
    """

    collective: str
    name: str
    build: Callable[[int], Schedule]
    summary: str  # one line: what it does
    source: str  # who invented it, the paper and section
    engines: str  # which engines use it
    cost: CostModel
    unsupported: Callable[[int], str | None] = field(default=_any_n)
    options: tuple[str, ...] = ()  # keyword options of build: "ranks_per_node", "numel", "itemsize"
    modelled: str = ""  # empty: checked against the running engine; else how it was modelled (from which source)
    average: str | None = "divide"  # ReduceOp.AVG: "divide", "premultiply" or None (no AVG); see the class doc
    accumulate: tuple[str, ...] = ()  # 16-bit types summed in fp32 and rounded once ("bf16"); others per hop
    sum_from_zero: bool = False  # the engine's sum starts from +0 (a -0.0 total becomes +0.0)

    @property
    def sized(self) -> bool:
        """True when the schedule depends on the buffer's length (an engine's own partition)."""
        return "numel" in self.options

    @property
    def key(self) -> tuple[str, str]:
        return (self.collective, self.name)


# The family modules of this package, in the catalog's display order: adding an algorithm is one new module and
# its name here.
_FAMILIES = ("ring", "bidirectional", "halving_doubling", "recursive_doubling", "tree", "hierarchical", "gloo",
             "xla_cpu", "nccl_ring", "nccl_tree")
_FAMILIES += ("ompi_allreduce", "ompi_reduce_scatter", "ompi_allgather", "ompi_decision")  # Open MPI 5.0
_FAMILIES += ("mpich_allreduce", "mpich_reduce_scatter", "mpich_allgather", "mpich_decision")  # MPICH 5.0


def _families():
    return tuple(importlib.import_module(f".{name}", __name__) for name in _FAMILIES)


def _collect() -> dict[tuple[str, str], Algorithm]:
    registry: dict[tuple[str, str], Algorithm] = {}
    for module in _families():
        for entry in module.ALGORITHMS:
            if entry.collective not in COLLECTIVES:
                raise AssertionError(f"{module.__name__}: unknown collective {entry.collective!r}")
            if entry.key in registry:
                raise AssertionError(f"{module.__name__}: {entry.key} registered twice")
            registry[entry.key] = entry
    return registry


REGISTRY: dict[tuple[str, str], Algorithm] = _collect()


def names(collective: str | None = None) -> tuple[str, ...]:
    """Algorithm names, for one collective or (without an argument) for any, in catalog order."""
    if collective is not None:
        _check_collective(collective)
    seen = dict.fromkeys(name for (c, name) in REGISTRY if collective in (None, c))
    return tuple(seen)


def op_names() -> tuple[str, ...]:
    """Every op name the command line accepts: the collectives and the aliases."""
    return COLLECTIVES + tuple(OP_ALIASES)


def _check_collective(collective: object) -> str:
    if not isinstance(collective, str) or collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}; got {collective!r}")
    return collective  # type: ignore[return-value]


def resolve_op(op: str, algorithm_name: str | None = None) -> tuple[str, str]:
    """(collective, algorithm) for an op name as typed (``all-reduce``, ``naive-all-reduce``) and an optional
    algorithm; an alias fixes its algorithm, and a different explicit one is an error."""
    if not isinstance(op, str):
        raise TypeError(f"op must be one of {', '.join(op_names())} (a string); got {op!r} ({type(op).__name__})")
    if algorithm_name is not None and not isinstance(algorithm_name, str):
        raise TypeError(f"algorithm must be a name (a string) or None; got {algorithm_name!r}")
    if op in OP_ALIASES:
        collective, fixed = OP_ALIASES[op]
        if algorithm_name not in (None, fixed):
            raise ValueError(f"op {op!r} is the {fixed!r} algorithm of {collective}; drop --algorithm or use "
                             f"--op {collective}")
        return collective, fixed
    if op not in COLLECTIVES:
        raise ValueError(f"op must be one of {', '.join(op_names())}; got {op!r}")
    return op, algorithm_name if algorithm_name is not None else DEFAULT_ALGORITHM


def algorithm(collective: str, name: str = DEFAULT_ALGORITHM) -> Algorithm:
    """The catalog entry, or a ValueError that lists what is available for ``collective``."""
    _check_collective(collective)
    try:
        return REGISTRY[(collective, name)]
    except (KeyError, TypeError):
        raise ValueError(f"algorithm for {collective} must be one of {', '.join(names(collective))}; "
                         f"got {name!r}") from None


def _options(entry: Algorithm, n: int, ranks_per_node: object, numel: object = None,
             itemsize: object = None) -> dict:
    """The keyword options ``entry`` takes. ``ranks_per_node`` is checked whenever it is given (it must divide N
    for every algorithm) and passed only to the entries that use it; ``numel`` and ``itemsize`` go to the engine
    orders that cut a buffer their own way, which need them."""
    if ranks_per_node is not None:
        ranks_per_node = check_ranks_per_node(ranks_per_node, n)
    options: dict = {}
    if "ranks_per_node" in entry.options:
        options["ranks_per_node"] = default_ranks_per_node(n) if ranks_per_node is None else ranks_per_node
    for key, value, minimum in (("numel", numel, 0), ("itemsize", itemsize, 1)):
        if key in entry.options:
            if value is None:
                raise ValueError(f"{entry.collective} algorithm {entry.name!r} cuts each buffer its own way: "
                                 f"give {key}= (the buffer's {'length in elements' if key == 'numel' else 'element size in bytes'})")
            options[key] = check_int(value, key, minimum=minimum)
    return options


MAX_SCHEDULE_RANKS = 4096  # the largest N a schedule table is built for (`ringemu count`'s bound)


def build(collective: str, n_ranks: int, name: str = DEFAULT_ALGORITHM, *,
          ranks_per_node: int | None = None, numel: int | None = None, itemsize: int | None = None) -> Schedule:
    """The schedule of ``name`` for ``collective`` on ``n_ranks`` ranks (a clear ValueError where the algorithm
    does not support that N).

    ``ranks_per_node`` (the hierarchical algorithms' nodes × ranks per node; default
    :func:`default_ranks_per_node`) must divide ``n_ranks``; algorithms that are not hierarchical ignore it.
    ``numel`` (elements per rank) and ``itemsize`` (bytes per element) are required by the engine orders whose
    partition depends on the buffer (:attr:`Algorithm.sized`) and ignored by the others.
    """
    entry = algorithm(collective, name)
    n = check_n_ranks(n_ranks)
    if n > MAX_SCHEDULE_RANKS:
        raise ValueError(f"n_ranks must be <= {MAX_SCHEDULE_RANKS} to build a schedule (its table grows as N², "
                         f"40 B a row: 1.3 GB for the ring all-reduce at the bound); got {n}")
    reason = entry.unsupported(n)
    if reason is not None:
        raise ValueError(f"{collective} algorithm {name!r} does not support n_ranks={n}: {reason}")
    return entry.build(n, **_options(entry, n, ranks_per_node, numel, itemsize))


def cost(collective: str, name: str, n_ranks: int, nbytes: int, alpha, beta, *,
         ranks_per_node: int | None = None) -> Fraction:
    """The entry's α-β time (seconds, exact) for an S = ``nbytes`` buffer per rank; α and β as Fractions or ints."""
    entry = algorithm(collective, name)
    n = check_n_ranks(n_ranks)
    options = {k: v for k, v in _options(entry, n, ranks_per_node, 0, 1).items() if k == "ranks_per_node"}
    return entry.cost(n, nbytes, Fraction(alpha), Fraction(beta), **options)


def schedule_for(op: str, n_ranks: int, algorithm_name: str | None = None, *,
                 ranks_per_node: int | None = None, numel: int | None = None,
                 itemsize: int | None = None) -> Schedule:
    """The schedule of an op named as on the command line (``reduce-scatter``, ``naive-all-reduce``, ...)."""
    collective, name = resolve_op(op, algorithm_name)
    return build(collective, n_ranks, name, ranks_per_node=ranks_per_node, numel=numel, itemsize=itemsize)
