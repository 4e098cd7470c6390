"""Tools for your own tests: hypothesis strategies, an oracle, a conformance suite and a pytest plugin.

* :mod:`ringemu.testing.strategies` — ``ring_sizes``, ``buffer_sizes`` (0, 1, primes, N±1, 2N±1),
  ``dtype_names``, ``algorithm_names`` (the registry's), ``integer_worlds`` (exact in any order), ``float_worlds``
  (the order shows in the bits);
* :mod:`ringemu.testing.oracle` — :func:`assert_matches_ringemu`: your collective against ringemu's, bit for bit,
  and the traffic you report against the :class:`~ringemu.ledger.CommLedger`;
* :mod:`ringemu.testing.conformance` — :func:`~ringemu.testing.conformance.check_communicator`: your whole
  Communicator (a torch.distributed group, an mpi4py communicator, your own class) over drawn awkward worlds;
* :mod:`ringemu.testing.traffic` — :func:`assert_traffic`: a ledger against expected bytes or collective calls;
* :mod:`ringemu.testing.warmup` — :func:`warm_kernels`, which the pytest plugin (:mod:`ringemu.pytest_plugin`)
  calls once per session so that no hypothesis example pays for compiling.

The strategies need hypothesis (``pip install 'ringemu[test]'``); it is imported when a strategy is first built,
so the oracle works without it.

May import anything of ringemu below the command line (core, algorithms, collectives, worlds); the pytest
plugin and the CLI import it.
"""
from .oracle import OPS, assert_matches_ringemu, run_op, shards_of
from .strategies import AWKWARD_SIZES, FLOAT_DTYPES, algorithm_names, buffer_sizes, dtype_names, float_worlds, integer_worlds, ring_sizes, seeds
from .traffic import assert_traffic
from .warmup import warm_kernels

__all__ = ["AWKWARD_SIZES", "FLOAT_DTYPES", "OPS", "ring_sizes", "buffer_sizes", "dtype_names", "algorithm_names",
           "seeds", "integer_worlds", "float_worlds", "shards_of", "run_op", "assert_matches_ringemu",
           "assert_traffic", "warm_kernels"]
