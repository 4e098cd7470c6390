"""``mpich:default``: what MPICH 5.0 runs when nothing is forced, on one node, under ``MPI_THREAD_MULTIPLE`` (the
level mpi4py starts it at): the fixed MPIR decision tree ``maint/tuning/coll/mpir/generic.json``, by N and message
size (the rules of :mod:`ringemu.algorithms._mpich`). Proven against the engine with nothing set.

Where it comes from: ``MPIR_Allreduce`` goes to the ch4 device (``MPID_Allreduce``, ``ch4_coll.h`` 408-497), whose
shared-memory path (``posix_coll.h`` 293-353) selects its release-gather tree only for single-threaded processes
(``posix_generic.json``, ``is_multi_threaded=no``) and otherwise falls back to ``MPIR_Allreduce_impl``, i.e. the
rule here; reduce-scatter-block and all-gather end in ``MPIR_*_impl`` on one node either way. A single-threaded
process (``MPI4PY_RC_THREAD_LEVEL=single``) runs the release-gather tree from a communicator's fifth collective
on, which is not modelled here.

* all-reduce: at most 8 B, or fewer elements than pof2(N): ``mpich:recursive-doubling``; else
  ``mpich:reduce-scatter-allgather`` (same bits, fewer bytes).
* reduce-scatter: N·k·itemsize < 512 KiB: ``mpich:recursive-halving``; else ``mpich:pairwise``.
* all-gather: N a power of two: total < 512 KiB ``mpich:recursive-doubling``, else ``mpich:ring``; other N: total
  < 80 KiB ``mpich:brucks``, else ``mpich:ring``.

The costs apply the same rules to S bytes; the all-reduce's "fewer elements than pof2(N)" needs the element count,
which a cost is not given, so its cost applies only the 8 B rule.
"""
from __future__ import annotations

from fractions import Fraction

from ..schedule import Schedule, check_n_ranks
from . import Algorithm
from ._mpich import (AG_LONG_BYTES, AG_SHORT_BYTES, ENGINES, RS_LONG_BYTES, SHORT_BYTES, all_gather_rule,
                     allreduce_rule, reduce_scatter_rule)
from ._steps import pow2_below
from .mpich_allgather import BUILDERS as _AG_BUILDERS, _log_cost as _ag_log_cost, mpich_recursive_doubling_all_gather
from .mpich_allreduce import _doubling_cost, _rabenseifner_cost, mpich_rsag_all_reduce, whole_buffer_doubling
from .mpich_reduce_scatter import BUILDERS as _RS_BUILDERS, _halving_cost, _pairwise_cost
from .ring import _ring_half

__all__ = ["mpich_default_all_reduce", "mpich_default_reduce_scatter", "mpich_default_all_gather", "ALGORITHMS"]


def mpich_default_all_reduce(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """MPIR_Allreduce's automatic choice for this buffer: recursive doubling or reduce_scatter_allgather."""
    n = check_n_ranks(n_ranks)
    if allreduce_rule(n, numel, itemsize) == "recursive-doubling":
        return whole_buffer_doubling(n, numel)
    return mpich_rsag_all_reduce(n, numel)


def mpich_default_reduce_scatter(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """MPIR_Reduce_scatter_block's automatic choice for this buffer: recursive halving or pairwise."""
    n = check_n_ranks(n_ranks)
    return _RS_BUILDERS[reduce_scatter_rule(n, numel, itemsize)](n, numel)


def mpich_default_all_gather(n_ranks: int, numel: int, itemsize: int) -> Schedule:
    """MPIR_Allgather's automatic choice for this buffer: recursive doubling, Bruck's or the ring."""
    n = check_n_ranks(n_ranks)
    choice = all_gather_rule(n, numel, itemsize)
    if choice == "recursive-doubling":
        return mpich_recursive_doubling_all_gather(n, numel, itemsize)
    return _AG_BUILDERS[choice](n, numel)


def _ar_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """Recursive doubling's cost up to 8 B, Rabenseifner's above (Thakur, Rabenseifner & Gropp 2005, §4.5)."""
    return (_doubling_cost if nbytes <= SHORT_BYTES else _rabenseifner_cost)(n, nbytes, alpha, beta)


def _rs_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """Recursive halving's cost below 512 KiB, pairwise exchange's above (Thakur et al. 2005, §4.4)."""
    return (_halving_cost if nbytes < RS_LONG_BYTES else _pairwise_cost)(n, nbytes, alpha, beta)


def _ag_cost(n: int, nbytes: int, alpha: Fraction, beta: Fraction) -> Fraction:
    """Recursive doubling's or Bruck's cost below the threshold, the ring's above (Thakur et al. 2005, §4.1)."""
    limit = AG_LONG_BYTES if n == pow2_below(n) else AG_SHORT_BYTES
    return (_ag_log_cost if nbytes < limit else _ring_half)(n, nbytes, alpha, beta)


_RULES = "MPICH 5.0.2 (pmodels/mpich 5.0.x), maint/tuning/coll/mpir/generic.json (the compiled-in MPIR decision tree), via "
_OPTIONS = ("numel", "itemsize")
ALGORITHMS = (
    Algorithm("reduce-scatter", "mpich:default", mpich_default_reduce_scatter,
              "MPICH with nothing forced: mpich:recursive-halving below 512 KiB in all, else mpich:pairwise",
              _RULES + "MPIR_Reduce_scatter_block_impl", ENGINES, _rs_cost, options=_OPTIONS),
    Algorithm("all-gather", "mpich:default", mpich_default_all_gather,
              "MPICH with nothing forced: recursive doubling (N = 2^k) or Bruck's for short totals, else the ring",
              _RULES + "MPIR_Allgather_impl", ENGINES, _ag_cost, options=_OPTIONS),
    Algorithm("all-reduce", "mpich:default", mpich_default_all_reduce,
              "MPICH with nothing forced: mpich:recursive-doubling up to 8 B or below pof2(N) elements, else "
              "mpich:reduce-scatter-allgather (same bits)",
              _RULES + "MPIR_Allreduce_impl (ch4 posix falls back to it under MPI_THREAD_MULTIPLE)", ENGINES,
              _ar_cost, options=_OPTIONS),
)
