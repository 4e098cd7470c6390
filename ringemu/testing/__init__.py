"""Tools for your own tests: hypothesis strategies, an oracle, a conformance suite and a pytest plugin.

* :mod:`ringemu.testing.strategies` — ``ring_sizes``, ``buffer_sizes`` (0, 1, primes, N±1, 2N±1),
  ``dtype_names``, ``algorithm_names`` (the registry's), ``integer_worlds`` (exact in any order), ``float_worlds``
  (the order shows in the bits);
* :mod:`ringemu.testing.oracle` — :func:`assert_matches_ringemu`: your collective against ringemu's, bit for bit,
  and the traffic you report against the :class:`~ringemu.ledger.CommLedger`;
* :mod:`ringemu.testing.conformance` — :func:`check_communicator` / :func:`assert_conforms`: your whole
  Communicator over drawn awkward worlds, values, order of addition and bytes on every example;
  :func:`which_orders`: the orders its bits follow;
* :mod:`ringemu.testing.adapters` — worlds for per-rank code (:class:`ThreadWorld`, :func:`per_rank`), list-of-N
  code (:class:`ListWorld`, :func:`lists`) and torch process groups (:class:`TorchGroupWorld`);
* :mod:`ringemu.testing.local_registry` — :class:`Orders`: ringemu's orders plus orders and traffic models you
  declare, passed to the suite and the oracle, never touching the global registry;
* :mod:`ringemu.testing.recording` — :class:`SendLog`: your communicator's sends per link, step and label, row by
  row against a CommLedger;
* :mod:`ringemu.testing.optimizer_diff` — :func:`assert_sharded_matches`: a sharded optimizer's states against
  a data-parallel reference, naming the first step, state, shard and element that differ;
* :mod:`ringemu.testing.traffic` — :func:`assert_traffic`: a ledger against expected bytes or collective calls;
* :mod:`ringemu.testing.warmup` — :func:`warm_kernels`, which the pytest plugin (:mod:`ringemu.pytest_plugin`)
  calls once per session so that no hypothesis example pays for compiling.

The strategies need hypothesis (``pip install 'ringemu[test]'``); it is imported when a strategy is first built,
so the oracle works without it.

May import anything of ringemu below the command line (core, algorithms, collectives, worlds); the pytest
plugin and the CLI import it.
"""
from .adapters import ListWorld, ThreadWorld, TorchGroupWorld, lists, per_rank
from .conformance import assert_conforms, check_communicator, which_orders
from .local_registry import GLOO_NATIVE, Orders
from .oracle import OPS, assert_matches_ringemu, run_op, shards_of
from .strategies import (AWKWARD_SIZES, FLOAT_DTYPES, algorithm_names, buffer_sizes, dtype_names, float_worlds,
                         independent_worlds, integer_worlds, ring_sizes, seeds, shard_layouts, sharding_jobs,
                         uneven_ring_sizes)
from .optimizer_diff import Difference, assert_sharded_matches, first_difference
from .recording import SendLog
from .traffic import assert_traffic
from .warmup import warm_kernels

__all__ = ["AWKWARD_SIZES", "FLOAT_DTYPES", "OPS", "ring_sizes", "buffer_sizes", "dtype_names", "algorithm_names",
           "seeds", "integer_worlds", "float_worlds", "shards_of", "run_op", "assert_matches_ringemu",
           "assert_traffic", "warm_kernels", "check_communicator", "assert_conforms", "which_orders", "Orders",
           "GLOO_NATIVE", "SendLog", "ThreadWorld", "ListWorld", "TorchGroupWorld", "per_rank", "lists",
           "independent_worlds", "uneven_ring_sizes", "shard_layouts", "sharding_jobs", "Difference",
           "first_difference", "assert_sharded_matches"]
