"""Shared hypothesis strategies for ringemu's own tests.

The public strategies of :mod:`ringemu.testing` (ring sizes, awkward buffer sizes, dtypes, fixed-seed integer
and float worlds) plus a few that only the test suite needs.
"""
from hypothesis import strategies as st

from ringemu.algorithms import op_names, schedule_for
from ringemu.testing import AWKWARD_SIZES, buffer_sizes, dtype_names, float_worlds, integer_worlds, ring_sizes, seeds

__all__ = ["AWKWARD_SIZES", "OPS", "RING_OPS", "ring_sizes", "buffer_sizes", "dtype_names", "seeds",
           "integer_worlds", "float_worlds", "ops", "world_shapes", "large_ring_sizes", "lesson_sizes"]

OPS = op_names()
SCHEDULES = {op: (lambda n, op=op: schedule_for(op, n)) for op in OPS}  # op name -> builder of its default
RING_OPS = OPS[:3]


def ops(names=OPS):
    """Collective names as on the command line."""
    return st.sampled_from(list(names))


def world_shapes(max_ranks: int = 64, max_numel: int = 200):
    """(N, S) pairs with S drawn from buffer_sizes(N): S = 0, S < N, S not a multiple of N all occur."""
    return ring_sizes(1, max_ranks).flatmap(lambda n: st.tuples(st.just(n), buffer_sizes(n, max_numel)))


def large_ring_sizes():
    """N up to 1024 for size-only counting and schedule structure: a few large rings, mostly N <= 128."""
    return st.one_of(st.sampled_from([1, 2, 3, 7, 8, 63, 64, 65, 127, 1000, 1023, 1024]), st.integers(1, 128))


def lesson_sizes():
    """Buffer sizes up to the lesson's anchor Ψ = 27,781,427,952 parameters (size-only counting only)."""
    return st.one_of(st.sampled_from([0, 1, 27_781_427_952, 7_500_000_000, 2 ** 40 + 1]),
                     st.integers(0, 10 ** 12))
