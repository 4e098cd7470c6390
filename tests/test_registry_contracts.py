"""What every schedule of the registry promises its readers, whatever order it runs: the collective's pre- and
postcondition (proved symbolically by ``check_provenance``), a name that says whose order and which collective,
the ``exchange`` flag exactly where a rank sends a chunk it receives in the same step (``ringemu.schedule``'s module
doc: only such schedules pay for a staging buffer), and, for the orders that cut each buffer size their own way,
the size they were built for. It also checks the contracts of Open MPI's building blocks (block and shard
bounds, Ranges steps, the all-gather message patterns, the reduce-scatter costs and the ranks they are modelled
for) against coll_base_*.c worked by hand."""
import re
from fractions import Fraction

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


# --- Open MPI's building blocks (ringemu/algorithms/ompi_common.py, ompi_allgather.py, ompi_reduce_scatter.py) ---

@pytest.mark.parametrize("count, n, want", [(8, 4, (2, 2, 0)), (10, 4, (3, 2, 2)), (3, 4, (1, 0, 3)), (0, 3, (0, 0, 0))])
def test_blockcount_is_coll_base_compute_blockcount(count, n, want):
    """coll_base_functions.h, COLL_BASE_COMPUTE_BLOCKCOUNT: early = late = count / n; split = count % n; early + 1
    only when split != 0 (so an even cut has early == late)."""
    from ringemu.algorithms.ompi_common import blockcount
    assert blockcount(count, n) == want


@pytest.mark.parametrize("numel, n, want", [(10, 4, [0, 3, 6, 9, 10]), (1, 4, [0, 1, 1, 1, 1]), (8, 4, [0, 2, 4, 6, 8])])
def test_shard_bounds_are_the_textbook_shards_as_integers(numel, n, want):
    """ChunkLayout(S, N)'s shards: ceil(S/N) each, the last shorter or empty; integer offsets (they index buffers)."""
    from ringemu.algorithms.ompi_common import shard_bounds
    got = shard_bounds(numel, n)
    assert got.tolist() == want and np.issubdtype(got.dtype, np.integer)


def test_ranges_refuse_a_message_to_self_or_outside_the_buffer():
    """Ranges.step's guards, each alone: src == dst; lo < 0 with hi inside; hi > S with lo inside (4 elements)."""
    from ringemu.algorithms.ompi_common import ADD, Ranges
    with pytest.raises(AssertionError, match="^a message from a rank to itself$"):
        Ranges(4).step((2, 1, 0, 1, ADD), (1, 1, 0, 2, ADD))
    with pytest.raises(AssertionError, match="^a range outside the buffer$"):
        Ranges(4).step((0, 1, -1, 2, ADD))
    with pytest.raises(AssertionError, match="^a range outside the buffer$"):
        Ranges(4).step((0, 1, 2, 5, ADD))


def test_ranges_keep_empty_messages_only_on_an_empty_buffer():
    """ompi_common's module doc: a zero-length range is no message, except for S = 0, where the order keeps its
    steps over one empty chunk (0 bytes) so its postcondition still holds symbolically."""
    from ringemu.algorithms.ompi_common import ADD, COPY, Ranges
    r = Ranges(0)
    r.step((0, 1, 0, 0, ADD), (1, 0, 0, 0, ADD))
    r.step((1, 2, 0, 0, COPY))
    s = r.schedule("x", 3, "all", "reduced-all")
    assert (s.n_steps, s.n_chunks, s.partition) == (2, 1, (0, 0))
    assert s.table.tolist() == [[0, 0, 1, 0, ADD], [0, 1, 0, 0, ADD], [1, 1, 2, 0, COPY]]
    r = Ranges(4)
    r.step((0, 1, 2, 2, ADD))  # empty on a 4-element buffer: dropped, and the step with it
    r.step((0, 1, 1, 3, ADD))
    s = r.schedule("x", 2, "all", "reduced-all")
    assert (s.n_steps, s.partition) == (1, (0, 1, 3, 4)) and s.table.tolist() == [[0, 0, 1, 1, ADD]]


def test_ranges_bounds_stay_exact_past_float_precision():
    """Only bounds are computed, so S = 2^53 + 1 (not a float64) is cut exactly, with steps or without."""
    from ringemu.algorithms.ompi_common import COPY, Ranges
    big = 2 ** 53 + 1
    assert Ranges(big).schedule("x", 2, "all", "reduced-all").partition == (0, big)
    r = Ranges(big)
    r.step((0, 1, 0, big, COPY))
    assert r.schedule("x", 2, "all", "reduced-all").partition == (0, big)


def test_emptied_keeps_table_steps_and_exchange_and_drops_the_partition():
    """ompi_common.emptied: the same schedule without its partition (chunk c = shard c); one chunk per shard only."""
    from ringemu.algorithms.ompi_common import ADD, Ranges, emptied
    r = Ranges(2)
    r.step((0, 1, 0, 1, ADD), (1, 0, 0, 1, ADD))  # rank 0 sends chunk 0 and receives it: an exchange step
    s = emptied(r.schedule("x", 2, "all", "reduced-all", (0, 1, 2)))
    assert s.exchange is True and s.partition is None and (s.n_chunks, s.n_steps) == (2, 1)
    assert s.table.tolist() == [[0, 0, 1, 0, ADD], [0, 1, 0, 0, ADD]]
    with pytest.raises(AssertionError, match="^an emptied order needs one chunk per shard$"):
        emptied(Ranges(3).schedule("x", 2, "all", "reduced-all", (0, 1, 2, 3)))


def test_recursive_doubling_all_gather_on_four_ranks_is_the_engines_message_table():
    """coll_base_allgather.c, ompi_coll_base_allgather_intra_recursivedoubling, N = 4 (a power of two, so not
    Bruck), one element a block: step 0 r <-> r^1 block r; step 1 r -> r^2 blocks 2(r//2), 2(r//2) + 1."""
    from ringemu.algorithms.ompi_common import COPY
    want = [[0, r, r ^ 1, r, COPY] for r in range(4)]
    want += [[1, r, r ^ 2, b, COPY] for r in range(4) for b in (r - r % 2, r - r % 2 + 1)]
    assert build("all-gather", 4, "ompi:recursive-doubling", numel=4, itemsize=4).table.tolist() == want


def test_two_procs_all_gather_refuses_other_rank_counts():
    """coll_base_allgather.c, ompi_coll_base_allgather_intra_two_procs runs on a 2-rank communicator only."""
    from ringemu.algorithms.ompi_allgather import ompi_ag_two_procs
    with pytest.raises(ValueError, match="runs on 2 ranks only; got n_ranks=3"):
        ompi_ag_two_procs(3, numel=6)


@pytest.mark.parametrize("n, want_alpha, want_beta", [(5, 4, Fraction(4, 5)), (7, 6, Fraction(6, 7)),
                                                     (6, 3, Fraction(5, 6))])
def test_neighbor_exchange_cost_is_the_rings_on_odd_n(n, want_alpha, want_beta):
    """Odd N runs the ring: (N-1)α + (N-1)/N·S·β; even N: N/2·α + (N-1)/N·S·β (ompi_allgather's module doc)."""
    a, b, s = Fraction(7), Fraction(1, 3), 8192
    assert ringemu.algorithms.cost("all-gather", "ompi:neighbor-exchange", n, s, a, b) == \
        want_alpha * a + want_beta * s * b


@pytest.mark.parametrize("n, log", [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (9, 4)])
def test_nonoverlapping_reduce_scatter_cost_is_a_binomial_reduce_then_a_linear_scatter(n, log):
    """ceil(log2 N)·(α + S·β) + (N-1)·α + (N-1)/N·S·β (ompi_reduce_scatter's docstring), ceil(log2 N) by hand."""
    a, b, s = Fraction(7), Fraction(1, 3), 8192
    want = log * (a + s * b) + (n - 1) * a + Fraction(n - 1, n) * s * b
    assert ringemu.algorithms.cost("reduce-scatter", "ompi:nonoverlapping", n, s, a, b) == want


def test_nonoverlapping_reduce_scatter_is_modelled_below_32_ranks():
    """Its reduce is tuned's fixed reduce decision, transcribed for N < 32 (coll_tuned_decision_fixed.c)."""
    entry = REGISTRY[("reduce-scatter", "ompi:nonoverlapping")]
    assert entry.unsupported(31) is None
    assert "N < 32" in entry.unsupported(32) and "N < 32" in entry.unsupported(40)

