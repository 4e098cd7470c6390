"""Every catalog algorithm against an independent slow implementation of its order of additions.

The oracles below are written from each algorithm's description (the papers and the family modules' docstrings),
element block by element block with numpy: they never read a schedule table. Each hop adds the receiver's partial
sum and the incoming one in the wire arithmetic (16-bit floats: fp32 add, one rounding). Addition is commutative
bit for bit on finite values, so only the grouping matters, and the data here is finite.

The reduce-scatter of every algorithm is checked against the same all-reduce oracle: that is the property that
keeps data parallelism (all-reduce) and ZeRO (reduce-scatter) bit-identical for every algorithm.
"""
import numpy as np
from hypothesis import given, strategies as st

from ringemu import collectives
from ringemu.algorithms import COLLECTIVES, REGISTRY, default_ranks_per_node, names
from ringemu.dtypes import resolve_dtype
from ringemu.execute import MODES
from strategies import buffer_sizes, dtype_names, integer_worlds, seeds
import pytest
from ringemu.algorithms import algorithm, build
from ringemu.provenance import check_provenance
from ringemu.schedule import ADD, COPY

# the textbook orders, each for every collective (engine orders cut by size: tests/test_engines.py and their own)
ALGORITHMS = tuple(a for a in names("all-reduce")
                   if all((c, a) in REGISTRY and not REGISTRY[(c, a)].sized for c in COLLECTIVES))
FLOATS = ("fp16", "bf16", "fp32", "fp64")


def hop(acc: np.ndarray, incoming: np.ndarray) -> np.ndarray:
    """One hop's addition: 16-bit floats widen to fp32, add once, round to nearest even; else the dtype's add."""
    if acc.dtype.itemsize == 2:
        return (acc.astype(np.float32) + incoming.astype(np.float32)).astype(acc.dtype)
    return acc + incoming


def chain(parts) -> np.ndarray:
    """((p0 + p1) + p2) + ...: a ring's or a root's running sum."""
    parts = list(parts)
    acc = parts[0].copy()
    for p in parts[1:]:
        acc = hop(acc, p)
    return acc


def ring_order(x, start):  # ranks start, start+1, ..., start-1 (mod N)
    n = len(x)
    return chain(x[(start + k) % n] for k in range(n))


def ring_back_order(x, start):  # ranks start, start-1, ..., start+1 (mod N)
    n = len(x)
    return chain(x[(start - k) % n] for k in range(n))


def heap_tree(x):
    """Binary heap tree on positions: a node adds its left child's sum, then its right child's, into its own."""
    n = len(x)

    def value(i):
        acc = x[i].copy()
        for child in (2 * i + 1, 2 * i + 2):
            if child < n:
                acc = hop(acc, value(child))
        return acc
    return value(0)


def folded(x):
    """The standard reduction to p = 2^floor(log2 N) ranks: rank 2i (i < N - p) adds into rank 2i + 1; returns the
    p active partial sums in new-rank order."""
    n = len(x)
    p = 1 << (n.bit_length() - 1)
    r = n - p
    return [hop(x[2 * j + 1], x[2 * j]) if j < r else x[j + r].copy() for j in range(p)]


def butterfly(x):
    """Recursive doubling on whole buffers: at distance 1, 2, ..., both partners add each other's sum."""
    vals = folded(x)
    d = 1
    while d < len(vals):
        vals = [hop(vals[j], vals[j ^ d]) for j in range(len(vals))]
        d *= 2
    return vals[0]


def halving(x, chunk, n_chunks):
    """Recursive halving of chunks [0, n_chunks): at distance p/2, ..., 1 the pair splits its range at the lower
    half's end (size // 2) and the rank whose distance bit is 0 keeps the lower part; a keeper adds its partner's
    partial sum of ``chunk``."""
    vals = folded(x)
    p = len(vals)
    ranges = [(0, n_chunks)] * p
    d = p // 2
    while d >= 1:
        new_ranges, new_vals = [], []
        for j, (lo, hi) in enumerate(ranges):
            mid = lo + (hi - lo) // 2
            new_ranges.append((lo, mid) if not j & d else (mid, hi))
            new_vals.append(hop(vals[j], vals[j ^ d]) if lo <= chunk < hi else vals[j])
        ranges, vals = new_ranges, new_vals
        d //= 2
    holder = next(j for j, (lo, hi) in enumerate(ranges) if lo <= chunk < hi)
    return vals[holder]


def two_level(x, shard, ranks_per_node):
    """Ring inside each node over local ranks (block l' starts at local l' + 1), then ring across nodes (node m'
    starts at node m' + 1)."""
    n = len(x)
    r = ranks_per_node
    m_nodes = n // r
    node_of, local = divmod(shard, r)
    partial = [ring_order([x[m * r + l] for l in range(r)], (local + 1) % r) for m in range(m_nodes)]
    return ring_order(partial, (node_of + 1) % m_nodes)


def oracle_all_reduce(name: str, world: np.ndarray, ranks_per_node: int) -> np.ndarray:
    """The all-reduce result (one row) of algorithm ``name``, shard block by shard block."""
    n, numel = world.shape
    size = -(-numel // n)  # ChunkLayout(S, N) shard size
    out = np.empty(numel, dtype=world.dtype)
    half = -(-size // 2)  # split into two halves: bidirectional ring, double binary tree
    for c in range(n):
        lo, hi = min(numel, c * size), min(numel, (c + 1) * size)
        x = [world[r, lo:hi] for r in range(n)]
        if name == "ring":
            out[lo:hi] = ring_order(x, (c + 1) % n)
        elif name == "naive":
            out[lo:hi] = chain(x)
        elif name == "bidirectional-ring":
            out[lo:min(hi, lo + half)] = ring_order([v[:half] for v in x], (c + 1) % n)
            out[min(hi, lo + half):hi] = ring_back_order([v[half:] for v in x], (c - 1) % n)
        elif name == "halving-doubling":
            out[lo:hi] = halving(x, c, n)
        elif name == "recursive-doubling":
            out[lo:hi] = butterfly(x)
        elif name == "tree":
            out[lo:hi] = heap_tree(x)
        elif name == "double-binary-tree":
            out[lo:min(hi, lo + half)] = heap_tree([v[:half] for v in x])
            out[min(hi, lo + half):hi] = heap_tree([v[half:] for v in x][::-1])  # position i is rank N-1-i
        elif name == "hierarchical-ring":
            out[lo:hi] = two_level(x, c, ranks_per_node)
        else:
            raise AssertionError(f"no oracle for {name!r}: write one when adding an algorithm")
    return out


def float_world(n, numel, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, numel)) * 8).astype(resolve_dtype(dtype))


def assert_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.view(np.uint8).tobytes() == b.view(np.uint8).tobytes()


def test_every_algorithm_has_an_oracle():
    world = float_world(5, 11, "fp32", 0)
    for name in ALGORITHMS:
        oracle_all_reduce(name, world, default_ranks_per_node(5))


@given(name=st.sampled_from(ALGORITHMS), n=st.integers(1, 33), data=st.data(), dtype=dtype_names(FLOATS),
       seed=seeds())
def test_all_reduce_and_reduce_scatter_follow_the_oracle_in_every_mode(name, n, data, dtype, seed):
    numel = data.draw(buffer_sizes(n, 80), label="numel")
    rpn = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]), label="ranks_per_node")
    world = float_world(n, numel, dtype, seed)
    expected = oracle_all_reduce(name, world, rpn)
    size = -(-numel // n)
    for mode in MODES:
        result = collectives.all_reduce(world, mode=mode, algorithm=name, ranks_per_node=rpn)
        for r in range(n):
            assert_bits(result[r], expected)
        shards = collectives.reduce_scatter(world, mode=mode, algorithm=name, ranks_per_node=rpn)
        for r in range(n):
            assert_bits(shards[r], expected[min(numel, r * size):min(numel, (r + 1) * size)])


@given(name=st.sampled_from(ALGORITHMS), world=integer_worlds(max_ranks=33, max_numel=80), data=st.data())
def test_integer_blocks_sum_exactly(name, world, data):
    n, numel = world.shape
    rpn = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]), label="ranks_per_node")
    mode = data.draw(st.sampled_from(MODES), label="mode")
    total = world.sum(axis=0)  # exact: integer_blocks bound every partial sum
    size = -(-numel // n)
    shards = [world[r, min(numel, r * size):min(numel, (r + 1) * size)] for r in range(n)]
    np.testing.assert_array_equal(collectives.all_reduce(world, mode=mode, algorithm=name, ranks_per_node=rpn),
                                  np.broadcast_to(total, world.shape))
    rs = collectives.reduce_scatter(world, mode=mode, algorithm=name, ranks_per_node=rpn)
    for r in range(n):
        np.testing.assert_array_equal(rs[r], total[min(numel, r * size):min(numel, (r + 1) * size)])
    gathered = collectives.all_gather(shards, mode=mode, algorithm=name, ranks_per_node=rpn)
    np.testing.assert_array_equal(gathered, np.broadcast_to(np.concatenate(shards), world.shape))


@given(name=st.sampled_from(ALGORITHMS), n=st.integers(1, 33), data=st.data(), dtype=dtype_names(FLOATS),
       seed=seeds())
def test_all_gather_moves_bits_unchanged(name, n, data, dtype, seed):
    numel = data.draw(buffer_sizes(n, 80), label="numel")
    world = float_world(n, numel, dtype, seed)
    size = -(-numel // n)
    shards = [world[r, min(numel, r * size):min(numel, (r + 1) * size)] for r in range(n)]
    for mode in MODES:
        assert_bits(collectives.all_gather(shards, mode=mode, algorithm=name),
                    np.broadcast_to(np.concatenate(shards), (n, numel)))


@given(n=st.integers(2, 9), numel=st.integers(0, 300), dtype=dtype_names(FLOATS), seed=seeds(),
       tile=st.sampled_from([1, 3, 64, None]), threads=st.sampled_from([1, 2, 3]))
def test_staged_exchange_kernels_match_the_reference_for_any_tile_and_thread_count(n, numel, dtype, seed, tile,
                                                                                   threads):
    # recursive doubling's exchange steps go through the staging kernel; slabs and tiles must not change a bit
    from ringemu.algorithms import build
    from ringemu.execute import run_schedule
    schedule = build("all-reduce", n, "recursive-doubling")
    world = float_world(n, numel, dtype, seed)
    want = world.copy()
    run_schedule(schedule, want, "reference")
    for mode in ("fused", "step"):
        got = world.copy()
        run_schedule(schedule, got, mode, tile=tile, threads=threads)
        assert_bits(got, want)
    assert_bits(want[0], oracle_all_reduce("recursive-doubling", world, 1))


# Open MPI 5.0's all-reduce orders (ompi:*), as message lists: independent transcriptions of the per-rank loops of
# open-mpi/ompi v5.0.10 ompi/mca/coll/base/coll_base_allreduce.c, in Python ints, one (src, dst, lo, hi, op)
# message per receive (op: how the receiver applies it). Their bits follow from these messages; the boundaries
# (bytes per message) only show here, since every cut gives the same additions per element.

def ompi_ring_messages(n, count):
    """ompi_coll_base_allreduce_intra_ring: COLL_BASE_COMPUTE_BLOCKCOUNT blocks; reduce-scatter step s: rank r
    sends block (r - s) to r + 1, which reduces it; distribution step k: r sends block (r + 1 - k)."""
    if n > 1 and count < n:  # "count less than size - use recursive doubling" (after the size == 1 return)
        return ompi_recursive_doubling_messages(n, count)
    split, late = count % n, count // n
    early = late + 1 if split else late
    def block(b):
        return (b * early, (b + 1) * early) if b < split else (b * late + split, (b + 1) * late + split)
    return ([[(r, (r + 1) % n, *block((r - s) % n), ADD) for r in range(n)] for s in range(n - 1)]
            + [[(r, (r + 1) % n, *block((r + 1 - k) % n), COPY) for r in range(n)] for k in range(n - 1)])


def ompi_recursive_doubling_messages(n, count):
    """..._intra_recursivedoubling: even r < 2·extra sends all to r + 1; exchanges at distance 1, 2, ... between
    newranks (remote = 2·newremote + 1 below extra, else newremote + extra), both reduce; odd r sends back."""
    p = 1 << (n.bit_length() - 1)
    extra = n - p
    real = [2 * v + 1 if v < extra else v + extra for v in range(p)]
    steps = [[(e, e + 1, 0, count, ADD) for e in range(0, 2 * extra, 2)]]
    steps += [[(real[v ^ d], real[v], 0, count, ADD) for v in range(p)] for d in (1 << k for k in range(30)) if d < p]
    return steps + [[(e + 1, e, 0, count, COPY) for e in range(0, 2 * extra, 2)]]


def ompi_basic_linear_messages(n, count):
    """..._intra_basic_linear as ringemu books it (ompi_allreduce.py doc): coll_base_reduce.c's linear reduce
    x0 + (x1 + (... + x[N-1])) gathered on rank N-1 from N-2 down to 1, then rank 0 adds it; a linear bcast."""
    if n == 1:
        return []
    whole = (0, count)
    reduce = [[(1, 0, *whole, ADD)]] if n == 2 else [[(k, n - 1, *whole, ADD) for k in range(n - 2, 0, -1)],
                                                     [(n - 1, 0, *whole, ADD)]]
    return reduce + [[(0, k, *whole, COPY) for k in range(1, n)]]


def ompi_rabenseifner_messages(n, count):
    """..._intra_redscat_allgather: count < nprocs_pof2 runs basic linear; fold by halves (count / 2) onto the even
    ranks; halving with rank < dest receiving the left wsize / 2; doubling back in reverse; even ranks send on."""
    p = 1 << (n.bit_length() - 1)
    if count < p:
        return ompi_basic_linear_messages(n, count)
    rem = n - p
    steps = []
    if rem:
        lh = count // 2
        steps.append([m for e in range(0, 2 * rem, 2) for m in ((e + 1, e, 0, lh, ADD), (e, e + 1, lh, count, ADD))])
        steps.append([(e + 1, e, lh, count, COPY) for e in range(0, 2 * rem, 2)])
    real = [2 * v if v < rem else v + rem for v in range(p)]
    windows = []  # per vrank, per step: (rindex, rcount, sindex, scount), the C arrays
    for v in range(p):
        rindex = sindex = 0
        wsize, rows, mask = count, [], 1
        while mask < p:
            if real[v] < real[v ^ mask]:
                rcount = wsize // 2
                scount = wsize - rcount
                sindex = rindex + rcount
            else:
                scount = wsize // 2
                rcount = wsize - scount
                rindex = sindex + scount
            rows.append((rindex, rcount, sindex, scount))
            sindex, wsize, mask = rindex, rcount, mask << 1
        windows.append(rows)
    k_steps = p.bit_length() - 1
    for k in range(k_steps):  # receive rcount at rindex from vdest, reduce
        steps.append([(real[v ^ 1 << k], real[v], w[k][0], w[k][0] + w[k][1], ADD) for v, w in enumerate(windows)])
    for k in reversed(range(k_steps)):  # receive scount at sindex from vdest, a copy
        steps.append([(real[v ^ 1 << k], real[v], w[k][2], w[k][2] + w[k][3], COPY) for v, w in enumerate(windows)])
    return steps + ([[(e, e + 1, 0, count, COPY) for e in range(0, 2 * rem, 2)]] if rem else [])


OMPI_ORACLES = {"ompi:ring": ompi_ring_messages, "ompi:segmented-ring": ompi_ring_messages,
                "ompi:recursive-doubling": ompi_recursive_doubling_messages,
                "ompi:rabenseifner": ompi_rabenseifner_messages, "ompi:basic-linear": ompi_basic_linear_messages}


def _by_receiver(steps):
    """Empty messages and steps dropped (0 bytes: no message); within a step messages ordered by receiver, keeping
    the order of several into one receiver (that order is the order of its additions)."""
    kept = [[m for m in step if m[3] > m[2]] for step in steps]
    return [sorted(step, key=lambda m: m[1]) for step in kept if step]


def schedule_messages(schedule):
    """The schedule's rows as messages: consecutive rows of one (step, src, dst, op) over adjacent chunks merged."""
    b = schedule.partition
    steps = [[] for _ in range(schedule.n_steps)]
    for step, src, dst, c, op in schedule.table.tolist():
        last = steps[step][-1] if steps[step] else None
        if last and last[:2] == (src, dst) and last[4] == op and last[3] == b[c]:
            steps[step][-1] = (src, dst, last[2], b[c + 1], op)
        else:
            steps[step].append((src, dst, b[c], b[c + 1], op))
    return _by_receiver(steps)


@pytest.mark.parametrize("name", sorted(OMPI_ORACLES))
def test_ompi_orders_send_the_element_ranges_of_coll_base_allreduce(name):
    # Property: every Open MPI order sends, step by step, exactly the element ranges its C loop sends
    for n in range(1, 13):
        for numel in sorted({1, 2, 3, n - 1, n, n + 1, 2 * n + 3, 37, 64, 101} - {0}):
            schedule = build("all-reduce", n, name, numel=numel, itemsize=4)
            assert schedule_messages(schedule) == _by_receiver(OMPI_ORACLES[name](n, numel)), (n, numel)


def test_ompi_rabenseifner_windows_stay_exact_past_two_to_the_53():
    # Property: the halving's windows are C ints, exact for any S (float64 would round S / 2 = 2^55 + 1.5 and
    # 2^55 + 1): S = 2^56 + 3 on 3 ranks is cut at S / 2 = 2^55 + 1 (fold, halving and doubling alike)
    numel = 2 ** 56 + 3
    schedule = build("all-reduce", 3, "ompi:rabenseifner", numel=numel, itemsize=4)
    assert schedule.partition == (0, 2 ** 55 + 1, numel)
    assert schedule_messages(schedule) == _by_receiver(ompi_rabenseifner_messages(3, numel))


def test_ompi_ring_on_one_rank_returns_before_the_count_check():
    # Property (intra_ring: "Special case for size == 1" returns before "count less than size"): one rank never
    # falls back to recursive doubling, even for count 0
    for numel in (0, 1, 5):
        s = build("all-reduce", 1, "ompi:ring", numel=numel, itemsize=4)
        assert (s.name, s.n_steps, s.partition) == ("ompi_ring_all_reduce", 0, (0, numel))


def test_ompi_nonoverlapping_reduce_follows_tuned_fixed_rules():
    # Property (coll_tuned_decision_fixed.c ompi_coll_tuned_reduce_intra_dec_fixed, commutative): 1000 elements of
    # the default 4 B are 4000 B < 4096 on 4 ranks: binary (4); build_tree(2) from 0: 0 <- 1, 2 and 1 <- 3
    from ringemu.algorithms.ompi_allreduce import ompi_nonoverlapping
    assert schedule_messages(ompi_nonoverlapping(4, numel=1000)) == [
        [(3, 1, 0, 1000, ADD)], [(1, 0, 0, 1000, ADD), (2, 0, 0, 1000, ADD)],
        [(0, 1, 0, 1000, COPY), (0, 2, 0, 1000, COPY), (0, 3, 0, 1000, COPY)]]
    # under 8 B on N < 4 the rules pick reduce's rabenseifner (7), which is not modelled (count >= pof2): refused
    with pytest.raises(ValueError, match="not modelled"):
        build("all-reduce", 2, "ompi:nonoverlapping", numel=2, itemsize=2)
    # the rules are transcribed for N < 32 only: the entry says so instead of building
    entry = algorithm("all-reduce", "ompi:nonoverlapping")
    assert entry.unsupported(31) is None and "32" in entry.unsupported(32)


def test_ompi_orders_on_an_empty_buffer_keep_their_steps_over_one_empty_chunk():
    # Property (ompi_common.py doc; MPI returns before any message for count 0): the postcondition holds
    # symbolically at 0 bytes; nonoverlapping books the linear reduce then the bcast there (as basic linear)
    for name in ("ompi:ring", "ompi:recursive-doubling", "ompi:rabenseifner", "ompi:basic-linear",
                 "ompi:nonoverlapping"):
        for n in range(1, 10):
            check_provenance(build("all-reduce", n, name, numel=0, itemsize=4))
    for n in (2, 3, 4, 5):  # N = 4: (0, 2 -> 3), (0, 1 -> 3), (1, 3 -> 0), (2, 0 -> 1), (2, 0 -> 2), (2, 0 -> 3)
        want = [(k, m[0], m[1], m[4]) for k, step in enumerate(ompi_basic_linear_messages(n, 0)) for m in step]
        for name in ("ompi:nonoverlapping", "ompi:basic-linear"):
            s = build("all-reduce", n, name, numel=0, itemsize=4)
            assert s.partition == (0, 0) and [tuple(r) for r in s.table[:, [0, 1, 2, 4]].tolist()] == want
