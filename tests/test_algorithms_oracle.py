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
