"""The kernels run every schedule exactly: fused == step == reference bit for bit, integer blocks give
numpy.sum exactly, and the kernels' own link counters equal the CommLedger.

Worlds come from tests/strategies.py (N in 1..64, S from 0 including S < N and S not a multiple of N); a few
larger rings are fixed examples. Comparisons are on bytes (``view(uint8)``), so NaN payloads count too.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringemu.blocks import integer_blocks
from ringemu.dtypes import DTYPES
from ringemu.execute import run_schedule
from ringemu.layout import ChunkLayout
from ringemu.ledger import CommLedger
from ringemu.algorithms.ring import naive_reduce_broadcast, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from strategies import SCHEDULES

from strategies import float_worlds, integer_worlds, ops, seeds

BUILDERS = list(SCHEDULES.values())


def padded(world: np.ndarray, n_chunks: int) -> np.ndarray:
    layout = ChunkLayout(world.shape[1], n_chunks)
    out = np.zeros((world.shape[0], layout.padded_numel), dtype=world.dtype)
    out[:, :world.shape[1]] = world
    return out


def run_all_modes(schedule, world, tile=None, threads=None):
    """(bytes of the world after the schedule, link counts) for reference, step and fused."""
    results = []
    for mode in ("reference", "step", "fused"):
        work = world.copy()
        if mode == "reference":
            links = run_schedule(schedule, work, mode)
        else:
            links = run_schedule(schedule, work, mode, tile=tile if mode == "fused" else None, threads=threads)
        results.append((work.view(np.uint8).tobytes(), links))
    return results


def assert_modes_agree(schedule, world, tile=None, threads=None):
    (ref, ref_links), (step, step_links), (fused, fused_links) = run_all_modes(schedule, world, tile, threads)
    assert step == ref, f"step differs from reference for {schedule} on {world.dtype}"
    assert fused == ref, f"fused differs from reference for {schedule} on {world.dtype} (tile {tile})"
    np.testing.assert_array_equal(step_links, ref_links)
    np.testing.assert_array_equal(fused_links, ref_links)


def random_bits(rng, shape, dtype):
    """Arbitrary bit patterns of ``dtype``: NaNs with payloads, infinities, subnormals, signed zeros."""
    dtype = np.dtype(dtype)
    raw = rng.integers(0, 256, size=shape + (dtype.itemsize,), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@given(world=float_worlds(max_ranks=64, max_numel=200), op=ops(), data=st.data())
def test_modes_agree_on_float_worlds(world, op, data):
    # Property: for any float world, every schedule leaves the same bytes in every rank's buffer in all modes,
    # whatever the fused tile (smaller than, equal to and larger than a chunk) and the number of threads (each
    # runs the schedule on its own slab of every chunk; slabs are cut at multiples of 64 elements).
    schedule = SCHEDULES[op](world.shape[0])
    w = padded(world, schedule.n_chunks)
    chunk = w.shape[1] // schedule.n_chunks
    tile = data.draw(st.integers(1, chunk + 2), label="tile")
    threads = data.draw(st.integers(1, 3), label="threads")
    assert_modes_agree(schedule, w, tile, threads)


@given(n=st.integers(1, 16), numel=st.integers(0, 64), op=ops(),
       dtype=st.sampled_from(list(DTYPES)), seed=seeds())
def test_modes_agree_on_arbitrary_bit_patterns(n, numel, op, dtype, seed):
    # Property: with NaN payloads, infinities, subnormals and integer wrap-around in the inputs, the modes agree.
    # Which NaN a NaN + NaN returns is the hardware's choice (x86 SIMD returns the left operand, scalar code
    # compiled by C compilers may swap operands), so where the reference holds a NaN the others must hold a NaN;
    # every other element must match byte for byte.
    schedule = SCHEDULES[op](n)
    world = padded(random_bits(np.random.default_rng(seed), (n, numel), DTYPES[dtype]), schedule.n_chunks)
    with np.errstate(all="ignore"):  # inf - inf and integer wrap-around are part of the test
        results = {}
        for mode in ("reference", "step", "fused"):
            work = world.copy()
            results[mode] = (work, run_schedule(schedule, work, mode))
        ref, ref_links = results["reference"]
        ref_nan = np.isnan(ref.astype(np.float64)) if ref.dtype.kind != "i" else np.zeros(ref.shape, bool)
        got_nan = {m: np.isnan(results[m][0].astype(np.float64)) if ref.dtype.kind != "i" else ref_nan
                   for m in ("step", "fused")}
    for mode in ("step", "fused"):
        got, links = results[mode]
        shape = ref.shape + (ref.dtype.itemsize,)
        same = (got.view(np.uint8).reshape(shape) == ref.view(np.uint8).reshape(shape)).all(axis=-1)
        ok = same | (ref_nan & got_nan[mode])
        assert ok.all(), f"{mode} differs from reference at {np.argwhere(~ok)[:3].tolist()} for {schedule}"
        np.testing.assert_array_equal(links, ref_links)


@given(world=integer_worlds(max_ranks=64, max_numel=200), mode=st.sampled_from(["fused", "step"]))
def test_integer_blocks_reduce_to_numpy_sum(world, mode):
    # Property: with fixed-seed integer blocks every partial sum is exact, so every rank's all-reduce result equals
    # numpy.sum over ranks (computed in float64/int64, exact here), and reduce-scatter's owned chunk r is chunk r
    # of that sum.
    n, numel = world.shape
    expected = world.astype(np.float64 if world.dtype.kind == "f" or world.dtype.itemsize == 2 else np.int64)
    expected = expected.sum(axis=0).astype(world.dtype)
    layout = ChunkLayout(numel, n)
    for schedule in (ring_all_reduce(n), naive_reduce_broadcast(n)):
        w = padded(world, schedule.n_chunks)
        run_schedule(schedule, w, mode)
        for r in range(n):
            assert w[r, :numel].tobytes() == expected.tobytes(), f"{schedule.name} rank {r}"
    w = padded(world, n)
    run_schedule(ring_reduce_scatter(n), w, mode)
    for r in range(n):
        part = layout.payload_slice(r)
        assert w[r, layout.start(r):layout.start(r) + layout.payload(r)].tobytes() == expected[part].tobytes()


@given(world=integer_worlds(max_ranks=64, max_numel=200), mode=st.sampled_from(["fused", "step"]))
def test_all_gather_copies_every_shard(world, mode):
    # Property: after all-gather, every rank's buffer is the concatenation of the owners' chunks.
    n, numel = world.shape
    w = padded(world, n)
    chunk = w.shape[1] // n
    owners = np.concatenate([w[c, c * chunk:(c + 1) * chunk] for c in range(n)])
    run_schedule(ring_all_gather(n), w, mode)
    for r in range(n):
        assert w[r].tobytes() == owners.tobytes()


@given(n=st.integers(1, 64), numel=st.integers(0, 300), op=ops(), mode=st.sampled_from(["fused", "step"]),
       dtype=st.sampled_from(list(DTYPES)))
def test_kernel_link_counts_equal_ledger(n, numel, op, mode, dtype):
    # Property: the kernel's own (N, N) per-link element counter equals CommLedger.per_link elements (padding
    # included) for every link, and is zero on links the schedule never uses.
    schedule = SCHEDULES[op](n)
    layout = ChunkLayout(numel, schedule.n_chunks)
    world = np.zeros((n, layout.padded_numel), dtype=DTYPES[dtype])
    links = run_schedule(schedule, world, mode)
    ledger = CommLedger()
    ledger.record(schedule, layout, dtype, "x")
    expected = np.zeros((n, n), dtype=np.int64)
    for (src, dst), traffic in ledger.per_link().items():
        expected[src, dst] = traffic.elements
    np.testing.assert_array_equal(links, expected)
    assert links.dtype == np.int64


@pytest.mark.parametrize("n", [100, 257])
@pytest.mark.parametrize("build", [ring_reduce_scatter, ring_all_reduce, naive_reduce_broadcast],
                         ids=lambda b: b.__name__)
def test_larger_rings_agree(n, build):
    # Example: rings beyond the drawn range, S = N + 3 fp32 and bf16 standard normals (seed 7), all modes agree.
    rng = np.random.default_rng(7)
    schedule = build(n)
    for dtype in ("fp32", "bf16"):
        world = rng.standard_normal((n, n + 3)).astype(DTYPES[dtype])
        assert_modes_agree(schedule, padded(world, schedule.n_chunks), tile=2)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_threaded_slabs_agree(dtype):
    # Example: N = 5, S = 5·300 + 2 (chunks of 301 elements: slabs of 128, 128, 45 with 3 threads); standard
    # normals times 100 (seed 9); step and fused with 1, 2 and 3 threads equal the reference.
    rng = np.random.default_rng(9)
    world = (rng.standard_normal((5, 5 * 300 + 2)) * 100).astype(DTYPES[dtype])
    for build in (ring_reduce_scatter, ring_all_gather, ring_all_reduce, naive_reduce_broadcast):
        schedule = build(5)
        for threads in (1, 2, 3):
            assert_modes_agree(schedule, padded(world, schedule.n_chunks), tile=50, threads=threads)


def test_integer_blocks_at_1024_ranks():
    # Example: N = 1024, S = 3000 int64 fixed-seed blocks (seed 1); ring all-reduce in fused mode equals numpy.sum.
    n, numel = 1024, 3000
    world = integer_blocks(n, numel, 1, "int64")
    w = padded(world, n)
    run_schedule(ring_all_reduce(n), w, "fused")
    assert np.array_equal(w[:, :numel], np.broadcast_to(world.sum(axis=0), (n, numel)))


@pytest.mark.parametrize("build", [ring_all_gather, ring_all_reduce, naive_reduce_broadcast],
                         ids=lambda b: b.__name__)
def test_streaming_copies_agree(build):
    # Example: streaming-store copies forced on (they are chosen by size for worlds >= STREAMING_BYTES) with
    # chunks of 20,011 elements (odd, so rows start off cache-line boundaries; larger than the 16 K-element
    # copy-only tile), N = 2 and 3, random normals (seed 4): every mode equals the reference with 1 and 2
    # threads, in fp32 and fp16.
    rng = np.random.default_rng(4)
    for n in (2, 3):
        schedule = build(n)
        for dtype in ("fp32", "fp16"):
            world = rng.standard_normal((n, schedule.n_chunks * 20_011)).astype(DTYPES[dtype])
            ref = world.copy()
            run_schedule(schedule, ref, "reference")
            for mode in ("step", "fused"):
                for threads in (1, 2):
                    got = world.copy()
                    run_schedule(schedule, got, mode, threads=threads, streaming=True)
                    assert got.tobytes() == ref.tobytes(), (mode, threads, dtype)

