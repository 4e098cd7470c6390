"""Collectives into a caller's buffer: ``out=`` and the in-place form give the bits of a fresh call, and the
kernel that loads the input inside its walk leaves what copying it in first and running leaves."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ringemu
from ringemu import algorithms
from ringemu.execute import run_schedule
from ringemu.layout import ChunkLayout
from ringemu.partition import layout_for
from strategies import float_worlds, integer_worlds


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def algorithm_for(data, n, collective="all-reduce"):
    return data.draw(st.sampled_from([a for a in algorithms.names(collective)
                                      if algorithms.algorithm(collective, a).unsupported(n) is None]))


@given(data=st.data(), world=st.one_of(float_worlds(max_ranks=12, max_numel=80),
                                       integer_worlds(max_ranks=12, max_numel=80)))
def test_out_and_in_place_equal_a_fresh_all_reduce(data, world):
    algorithm = algorithm_for(data, world.shape[0])
    kept = world.copy()
    fresh = ringemu.all_reduce(world, algorithm=algorithm)
    buf = np.full_like(world, 7)
    assert ringemu.all_reduce(world, out=buf, algorithm=algorithm) is buf and same_bits(buf, fresh)
    assert same_bits(world, kept)  # the input is untouched unless it is the output
    in_place = world.copy()
    assert ringemu.all_reduce(in_place, out=in_place, algorithm=algorithm) is in_place
    assert same_bits(in_place, fresh)


@given(data=st.data(), world=float_worlds(max_ranks=12, max_numel=80))
def test_reduce_scatter_into_out_gives_the_same_shards(data, world):
    algorithm = algorithm_for(data, world.shape[0], "reduce-scatter")
    fresh = ringemu.reduce_scatter(world, algorithm=algorithm)
    buf = np.empty_like(world)
    for got, want in zip(ringemu.reduce_scatter(world, out=buf, algorithm=algorithm), fresh):
        assert same_bits(got, want)


@settings(max_examples=40)
@given(data=st.data(), n=st.integers(min_value=1, max_value=9), numel=st.integers(min_value=0, max_value=300),
       dtype=st.sampled_from(["fp32", "bf16", "fp16", "int64"]), tile=st.sampled_from([None, 1, 8, 64]),
       threads=st.sampled_from([1, 2]), streaming=st.booleans())
def test_loading_inside_the_walk_equals_copying_first(data, n, numel, dtype, tile, threads, streaming):
    key = data.draw(st.sampled_from([k for k, a in sorted(algorithms.REGISTRY.items()) if a.unsupported(n) is None]))
    schedule = algorithms.build(key[0], n, key[1], numel=numel,
                                itemsize=ringemu.dtypes.resolve_dtype(dtype).itemsize)
    layout = layout_for(schedule, numel)
    rng = np.random.default_rng(numel)
    source = rng.integers(-40, 40, (n, layout.padded_numel if not layout.contiguous else numel))
    source = source.astype(ringemu.dtypes.resolve_dtype(dtype))
    copied = np.zeros((n, layout.padded_numel), source.dtype)
    copied[:, :source.shape[1]] = source
    run_schedule(schedule, copied, tile=tile, threads=threads, streaming=streaming)
    loaded = np.full((n, layout.padded_numel), 5, source.dtype)  # anything on entry
    run_schedule(schedule, loaded, tile=tile, threads=threads, streaming=streaming, source=source)
    assert same_bits(loaded, copied)


def test_out_is_checked():
    world = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match=r"out must be a numpy array of shape \(4, 8\) and dtype float32"):
        ringemu.all_reduce(world, out=np.ones((4, 8), np.float64))
    frozen = np.ones((4, 8), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writeable"):
        ringemu.all_reduce(world, out=frozen)


def test_out_reuses_memory():
    n, s = 8, 1 << 15  # 1 MiB fp32 world; S a multiple of N: nothing to pad, the kernel runs in out
    world, buf = np.ones((n, s), np.float32), np.empty((n, s), np.float32)
    ringemu.all_reduce(world, out=buf)
    tracemalloc.start()
    try:
        ringemu.all_reduce(world, out=buf)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < world.nbytes / 10  # no second world (the schedule and link counters are a few KiB)


def test_a_prebuilt_schedule_is_used_and_checked():
    world = np.arange(24, dtype=np.float32).reshape(4, 6)
    schedule = algorithms.build("all-reduce", 4)
    assert same_bits(ringemu.all_reduce(world, schedule=schedule), ringemu.all_reduce(world))
    assert same_bits(ringemu.all_reduce(world, schedule=schedule), ringemu.all_reduce(world, schedule=schedule))
    with pytest.raises(ValueError, match="schedule must be a Schedule of all-reduce on 4 ranks"):
        ringemu.all_reduce(world, schedule=algorithms.build("all-reduce", 3))
