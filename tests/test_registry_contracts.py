"""What every schedule of the registry promises its readers, whatever order it runs: the collective's pre- and
postcondition (proved symbolically by ``check_provenance``), a name that says whose order and which collective,
the ``exchange`` flag exactly where a rank sends a chunk it receives in the same step (``ringemu.schedule``'s module
doc: only such schedules pay for a staging buffer), and, for the orders that cut each buffer size their own way,
the size they were built for."""
import re

import numpy as np
import pytest

import ringemu
from ringemu.algorithms import REGISTRY, build
from ringemu.provenance import check_provenance

RANKS = (1, 2, 3, 4, 5, 8, 9)
SIZES = (0, 1, 13, 4099)
# (initial, final) per collective, from Schedule's docstring; a reduce-scatter that leaves the whole sum on every
# rank (gloo's: an all-reduce kept per shard) may say so, "reduced-all" holding "reduced-own"
CONTRACTS = {"all-reduce": {("all", "reduced-all")},
             "reduce-scatter": {("all", "reduced-own"), ("all", "reduced-all")},
             "all-gather": {("own", "gathered")}}


def _schedules(collective, name):
    entry = REGISTRY[(collective, name)]
    for n in RANKS:
        if entry.unsupported(n) is None:
            for numel in SIZES:
                yield n, numel, build(collective, n, name, numel=numel, itemsize=4)


def _stages(schedule) -> bool:
    """Some rank sends, in some step, a chunk it also receives in that step."""
    table = schedule.table
    for lo, hi in zip(schedule.step_bounds()[:-1], schedule.step_bounds()[1:]):
        rows = table[lo:hi]
        received = set(zip(rows[:, 2].tolist(), rows[:, 3].tolist()))
        if received & set(zip(rows[:, 1].tolist(), rows[:, 3].tolist())):
            return True
    return False


@pytest.mark.parametrize("collective, name", sorted(REGISTRY))
def test_every_schedule_states_and_proves_its_collectives_contract(collective, name):
    for n, numel, s in _schedules(collective, name):
        assert (s.initial, s.final) in CONTRACTS[collective], (n, numel, s.initial, s.final)
        check_provenance(s)  # every rank ends as `final` says, from `initial`, no contribution lost or doubled


@pytest.mark.parametrize("collective, name", sorted(REGISTRY))
def test_every_schedule_is_named_for_its_order_and_collective(collective, name):
    """Lower case, ending in the collective (``_all_reduce``; hierarchical ones add ``[k/node]``), and an engine's
    order starts with the engine (``mpich_``, ``xla_cpu_``): what a trace or an error message shows its reader.
    The middle names the order, or the engine's fallback (Open MPI's ring runs recursive doubling on small buffers);
    XLA's, its only order, names none."""
    order = rf"{name.split(':')[0].replace('-', '_')}_(?:[a-z_]+_)?" if ":" in name else "[a-z_]+_"
    pattern = re.compile(rf"{order}{collective.replace('-', '_')}(\[\d+/node\])?")
    for n, numel, s in _schedules(collective, name):
        assert isinstance(s.name, str) and pattern.fullmatch(s.name), (n, numel, s.name)


@pytest.mark.parametrize("collective, name", sorted(REGISTRY))
def test_steps_are_numbered_in_order_and_none_is_empty(collective, name):
    """The table is sorted by step and every step 0 .. n_steps - 1 moves something: a step is a latency (α) in the
    ledger and the trace, so an empty one would be a step the order does not take."""
    for n, numel, s in _schedules(collective, name):
        steps = s.table[:, 0]
        assert np.all(np.diff(steps) >= 0) and sorted(set(steps.tolist())) == list(range(s.n_steps)), (n, numel)


@pytest.mark.parametrize("collective, name", sorted(REGISTRY))
def test_exchange_is_set_exactly_where_a_step_stages(collective, name):
    """On two or more ranks the flag is true exactly when some rank sends a chunk it receives in that step (on one
    rank there are no steps, and the flag changes nothing)."""
    for n, numel, s in _schedules(collective, name):
        if n > 1:
            assert s.exchange is _stages(s), (n, numel)


@pytest.mark.parametrize("collective, name", sorted(k for k, e in REGISTRY.items() if e.sized))
def test_a_sized_engine_schedule_refuses_another_buffer_size(collective, name):
    """On two or more ranks, an engine order cut for S elements per rank (its partition ends at S, its fallbacks'
    too) is refused, with the reason, when run on S + 1: its cut would not be the engine's. (On one rank nothing
    moves and nothing is cut; a schedule without a partition is the textbook shard map, which fits any S.)"""
    run = {"all-reduce": ringemu.all_reduce, "reduce-scatter": ringemu.reduce_scatter}.get(collective)
    for n, numel, s in _schedules(collective, name):
        if n == 1 or s.partition is None:
            continue
        assert s.partition[0] == 0 and s.partition[-1] == numel, (n, numel)
        if run is not None:
            with pytest.raises(ValueError, match=f"built for {numel} elements per rank; got {numel + 1}"):
                run(np.ones((n, numel + 1), np.float32), schedule=s)
