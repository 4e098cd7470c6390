"""identify names the orders that reproduce captured outputs, and says where the nearest one departs otherwise."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringemu import all_reduce, identify, identify_dump, reduce_scatter
from ringemu.algorithms import names


def _normal(n, numel, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((n, numel)).astype(dtype)


@given(st.sampled_from([a for a in names("all-reduce")]), st.integers(2, 9), st.integers(1, 300),
       st.integers(0, 2 ** 31))
def test_the_order_that_made_the_outputs_is_among_the_matches(name, n, numel, seed):
    world = _normal(n, numel, seed)
    from ringemu.algorithms import algorithm
    if algorithm("all-reduce", name).unsupported(n) is not None:
        return
    found = identify(world, list(all_reduce(world, algorithm=name)), "all-reduce")
    assert name in found.matches and found.nearest is None


def test_textbook_orders_tell_themselves_apart_on_random_floats():
    world = _normal(8, 4096)
    found = identify(world, list(all_reduce(world, algorithm="ring")), "all-reduce")
    assert found.matches[0] == "ring" and "naive" not in found.matches


def test_an_order_no_entry_has_gets_the_nearest_departure():
    # a sum in reverse rank order, ((x7 + x6) + ...) + x0, on every element: not an order of the catalog
    world = _normal(8, 64, seed=3)
    reverse = world[::-1].copy()
    total = reverse[0].copy()
    for row in reverse[1:]:
        total = total + row
    found = identify(world, [total.copy() for _ in range(8)], "all-reduce",
                     candidates=["ring", "naive", "recursive-doubling"])
    assert found.matches == () and found.nearest is not None
    d = found.nearest
    assert 0 < d.differing <= 8 * 64 and d.rank == 0 and d.chunk is not None
    assert np.float32(d.engine_value) == total[d.element]  # expected: the value we built by hand above


def test_gloo_s_order_is_not_the_ring_at_four_ranks_and_more():
    world = _normal(5, 5000, seed=1)
    gloo = all_reduce(world, algorithm="gloo:ring")  # checked against torch's gloo: tests/test_engines.py
    found = identify(world, list(gloo), "all-reduce", candidates=["ring", "gloo:ring"])
    assert found.matches == ("gloo:ring",)
    assert identify(world, list(gloo), "all-reduce", candidates=["ring"]).nearest.differing > 0


def test_reduce_scatter_dumps_and_the_command_line(tmp_path):
    world = _normal(4, 10, seed=2)
    shards = reduce_scatter(world, algorithm="ring")
    padded = np.zeros((4, 3), dtype=np.float32)
    for r, s in enumerate(shards):
        padded[r, :s.size] = s
    dump = tmp_path / "rs.npz"
    np.savez(dump, collective="reduce-scatter", inputs=world, outputs=padded)
    assert "ring" in identify_dump(dump).matches
    done = subprocess.run([sys.executable, "-m", "ringemu", "identify", str(dump), "--algorithm", "ring"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "reproduced bit for bit by ring" in done.stdout


def test_bf16_dumps_store_bit_patterns(tmp_path):
    import ml_dtypes
    world = _normal(3, 20, seed=4).astype(ml_dtypes.bfloat16)
    out = all_reduce(world, algorithm="ring")
    dump = tmp_path / "bf16.npz"
    np.savez(dump, collective="all-reduce", dtype="bf16", inputs=world.view(np.uint16), outputs=out.view(np.uint16))
    found = identify_dump(dump, ["ring"])
    assert found.matches == ("ring",) and found.dtype == "bf16"


@pytest.mark.parametrize("content, message", [
    ({"inputs": np.zeros((2, 3))}, "needs arrays 'inputs' and 'collective'"),
    ({"collective": "all-reduce", "inputs": np.zeros((2, 3), np.float32)}, "needs 'outputs' or output_0"),
    ({"collective": "all-reduce", "inputs": np.zeros((2, 3), np.float32), "outputs": np.zeros((2, 4), np.float32)},
     "outputs must be 2 arrays"),
    ({"collective": "broadcast", "inputs": np.zeros((2, 3), np.float32)}, "collective must be one of"),
])
def test_bad_dumps_get_one_line_and_exit_2(tmp_path, content, message):
    dump = tmp_path / "bad.npz"
    np.savez(dump, **content)
    done = subprocess.run([sys.executable, "-m", "ringemu", "identify", str(dump)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
