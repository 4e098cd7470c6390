"""run_schedule's contract: three modes, one result; bad input is refused clearly; the JIT switch and the
numba cache location behave as ringemu._jit documents."""
import json
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ringemu
from ringemu._jit import jit_disabled_from_env
from ringemu.execute import MODES, default_tile, run_schedule
from ringemu.algorithms.ring import ring_all_reduce, ring_reduce_scatter
from ringemu.schedule import ADD, COPY, Schedule

from test_kernels import assert_modes_agree

ROOT = Path(ringemu.__file__).resolve().parent.parent

# A fixed set of runs whose bytes are hashed in this process and in a JIT-disabled one (seed 3).
HASH_SCRIPT = """
import hashlib, numpy as np
from ringemu.dtypes import DTYPES
from ringemu.execute import run_schedule
from ringemu.algorithms import op_names, schedule_for
SCHEDULES = {op: (lambda n, op=op: schedule_for(op, n)) for op in op_names()}
h = hashlib.sha256()
rng = np.random.default_rng(3)
for name, dtype in DTYPES.items():
    for op, build in SCHEDULES.items():
        for n in (1, 3, 8):
            s = build(n)
            world = (rng.standard_normal((n, s.n_chunks * 5)) * 50).astype(dtype)
            for mode in ("fused", "step"):
                w = world.copy()
                links = run_schedule(s, w, mode, tile=2) if mode == "fused" else run_schedule(s, w, mode)
                h.update(w.view(np.uint8).tobytes()); h.update(links.tobytes())
print(h.hexdigest())
"""


def run_python(code: str, env_extra: dict, cwd=None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "RINGEMU_"))}
    env.update(env_extra)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def hand_schedule(table, n_ranks, n_chunks, name="hand") -> Schedule:
    table = np.asarray(table, dtype=np.int64).reshape(-1, 5)
    n_steps = int(table[:, 0].max()) + 1 if len(table) else 0
    return Schedule(name, n_ranks, n_chunks, n_steps, table, "all", "reduced-all")


def test_modes_are_the_documented_three():
    assert MODES == ("fused", "step", "reference")
    assert [default_tile(e) for e in (2, 4, 8)] == [2048, 1024, 512]  # 4 KiB per rank and tile


@given(n=st.integers(2, 12), numel=st.integers(0, 40), seed=st.integers(0, 2 ** 32 - 1), data=st.data())
def test_fused_is_generic_over_hand_written_schedules(n, numel, seed, data):
    # Property: fused mode is not special-cased to the ring: a random valid schedule (random transfers, each
    # step's senders never among its receivers for that chunk) gives the same bytes in all modes.
    rng = np.random.default_rng(seed)
    n_chunks = data.draw(st.integers(1, 4), label="n_chunks")
    rows = []
    for step in range(data.draw(st.integers(1, 5), label="n_steps")):
        receivers = set()
        for _ in range(int(rng.integers(1, 2 * n))):
            src, dst, chunk = (int(x) for x in rng.integers(0, [n, n, n_chunks]))
            if src == dst or (src, chunk) in receivers or any((dst, chunk) == (r[1], r[3]) for r in rows
                                                               if r[0] == step):
                continue
            receivers.add((dst, chunk))
            rows.append((step, src, dst, chunk, int(rng.integers(0, 2))))
    schedule = hand_schedule(rows, n, n_chunks)
    world = (rng.standard_normal((n, n_chunks * numel)) * 10).astype(np.float32)
    assert_modes_agree(schedule, world, tile=data.draw(st.integers(1, numel + 2), label="tile"))


def test_non_contiguous_world_is_updated_in_place():
    # Example: a column-sliced (non C-contiguous) world is computed and written back like a contiguous one.
    rng = np.random.default_rng(11)
    base = rng.standard_normal((4, 16)).astype(np.float64)
    expected = base[:, ::2].copy()
    run_schedule(ring_all_reduce(4), expected, "reference")
    view = base[:, ::2]
    assert not view.flags.c_contiguous
    run_schedule(ring_all_reduce(4), view, "fused")
    assert view.tobytes() == expected.tobytes()


@pytest.mark.parametrize("mode", ["fused", "step"])
@pytest.mark.parametrize("rows, message", [
    ([(0, 0, 5, 0, ADD)], "rank outside"),
    ([(0, 0, 1, 3, ADD)], "chunk outside"),
    ([(0, 0, 1, 0, 7)], "op other than"),
    ([(1, 0, 1, 0, ADD), (0, 1, 0, 0, ADD)], "step out of order"),
    ([(0, 0, 1, 0, ADD), (0, 1, 2, 0, ADD)], "sends a chunk|sending a chunk"),
])
def test_invalid_tables_are_refused(mode, rows, message):
    # A table the kernels cannot run in place (or out of range, which would write outside the buffer) is a
    # clear ValueError naming the transfer, before anything is written.
    schedule = hand_schedule(rows, 3, 2)
    world = np.arange(3 * 4, dtype=np.float32).reshape(3, 4)
    before = world.copy()
    with pytest.raises(ValueError, match=message):
        run_schedule(schedule, world, mode)
    assert world.tobytes() == before.tobytes()


def test_bad_arguments_are_refused():
    s = ring_reduce_scatter(4)
    with pytest.raises(ValueError, match="mode must be one of fused, step, reference"):
        run_schedule(s, np.zeros((4, 4), np.float32), "fast")
    with pytest.raises(TypeError, match="world must be a numpy array"):
        run_schedule(s, [[0.0] * 4] * 4)
    with pytest.raises(TypeError, match="schedule must be"):
        run_schedule("ring", np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        run_schedule(s, np.zeros((4, 6), np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        run_schedule(s, np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="dtype must be one of"):
        run_schedule(s, np.zeros((4, 4), np.int16))
    with pytest.raises(ValueError, match="tile must be an integer >= 1"):
        run_schedule(s, np.zeros((4, 4), np.float32), tile=0)
    frozen = np.zeros((4, 4), np.float32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="writeable"):
        run_schedule(s, frozen)


def test_copy_and_add_ops_are_the_schedule_constants():
    # Example: a two-rank, one-chunk schedule: ADD 0 -> 1 then COPY 1 -> 0 leaves x0 + x1 everywhere.
    schedule = hand_schedule([(0, 0, 1, 0, ADD), (1, 1, 0, 0, COPY)], 2, 1)
    world = np.array([[1.5, 2.0], [0.25, 4.0]], dtype=np.float64)
    for mode in MODES:
        w = world.copy()
        links = run_schedule(schedule, w, mode)
        assert w.tolist() == [[1.75, 6.0], [1.75, 6.0]]
        assert links.tolist() == [[0, 2], [2, 0]]


@pytest.mark.parametrize("value, disabled", [("1", True), ("true", True), ("ON", True), ("", False),
                                             (None, False), ("0", False), ("off", False)])
def test_jit_switch_values(value, disabled):
    assert jit_disabled_from_env(value) is disabled


def test_jit_switch_rejects_garbage():
    with pytest.raises(ValueError, match="RINGEMU_DISABLE_JIT must be one of"):
        jit_disabled_from_env("maybe")


def test_jit_on_and_off_agree():
    # The same runs hashed with numba and with RINGEMU_DISABLE_JIT=1 (plain Python kernels) give the same bytes.
    on = run_python(HASH_SCRIPT, {})
    off = run_python(HASH_SCRIPT, {"RINGEMU_DISABLE_JIT": "1"})
    assert len(on) == 64 and on == off


def test_import_and_size_only_counting_do_not_import_numba():
    # Start-up: numba is imported by the first real-data kernel call, not by `import ringemu` or counting.
    code = ("import sys, ringemu\nfrom ringemu import VirtualBuffer, CommLedger, all_reduce\n"
            "all_reduce(VirtualBuffer((8, 10**9), 'bf16'), ledger=CommLedger())\n"
            "print('numba' in sys.modules)")
    assert run_python(code, {}) == "False"


def test_read_only_package_caches_in_user_cache_dir(tmp_path):
    # A copy of the package whose __pycache__ cannot be created (a plain file stands in its place, which no
    # user, root included, can write into) compiles into $XDG_CACHE_HOME/numba instead, and a second process
    # finds the cache there.
    pkg = tmp_path / "site" / "ringemu"
    shutil.copytree(ROOT / "ringemu", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "__pycache__").write_text("not a directory")
    cache = tmp_path / "cache"
    env = {"PYTHONPATH": str(tmp_path / "site"), "XDG_CACHE_HOME": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    code = ("import numpy as np, ringemu\nfrom ringemu import kernels\n"
            "print(ringemu.__file__)\n"
            "w = np.ones((3, 6), np.float32); ringemu.execute.run_schedule(ringemu.ring_all_reduce(3), w)\n"
            "print(w[0, 0], sum(kernels.run_fused.stats.cache_hits.values()))")
    first = run_python(code, env, cwd=tmp_path).splitlines()
    assert first[0].startswith(str(pkg)) and first[1] == "3.0 0"  # compiled, not loaded
    index = list(cache.glob("numba/**/kernels.run_fused-*.nbi"))
    assert index, f"no cache index under {cache}"
    second = run_python(code, env, cwd=tmp_path).splitlines()
    assert second[1] == "3.0 1"  # loaded from the user-wide cache



def test_bench_traffic_models():
    # Example: N = 8, S = 2^24 fp32 (the benchmark's main case), from the formulas in ringemu.cli.bench's
    # docstring: floor RS (2N-1)·S·e, AG N·S·e, AR 2N·S·e; ring model RS 3(N-1)·S·e, AG 2(N-1)·S·e.
    from ringemu.algorithms import build
    from ringemu.cli.bench import bus_factor, floor_bytes, schedule_model_bytes

    s, e = 2 ** 24, 4
    assert floor_bytes("reduce-scatter", 8, s, e) == (15 * s * e, "add")
    assert floor_bytes("all-gather", 8, s, e) == (8 * s * e, "copy")
    assert floor_bytes("all-reduce", 8, s, e) == (16 * s * e, "add")
    chunk = s // 8  # the ring's chunk: S/N
    assert schedule_model_bytes(build("reduce-scatter", 8, "ring"), chunk, e) == 21 * s * e
    assert schedule_model_bytes(build("all-reduce", 8, "ring"), chunk, e) == 35 * s * e
    assert (bus_factor("all-reduce", 8), bus_factor("all-gather", 8)) == (Fraction(7, 4), Fraction(7, 8))


def test_bench_command_quick_json(capsys):
    # `ringemu bench --quick --json`: every op has direct, fused, step and numpy rows (the numpy loop's bits were
    # checked against ringemu inside the run); no timing is asserted.
    from ringemu.cli import main

    assert main(["bench", "--quick", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(r["op"], r["impl"]) for r in out["rows"]} == {
        (op, impl) for op in ("reduce-scatter", "all-gather", "all-reduce")
        for impl in ("ringemu-direct", "ringemu-fused", "ringemu-step", "numpy-loop")}
    assert all(r["min_s"] <= r["median_s"] <= r["max_s"] for r in out["rows"])
    scale = out["scale"]  # the emulated world beside a direct call, and size-only runs in child processes
    assert [row["ranks"] for row in scale["latency"]] == [8, 32]
    assert all(set(row["seconds"]) == {"direct", "greenlet", "threads"} for row in scale["latency"])
    assert [(p["ranks"], p["units"]) for p in scale["size_only"]] == [(8, 4), (1024, 4)]
    assert all(p["wall_s"] > 0 and (p["peak_rss_bytes"] is None or p["peak_rss_bytes"] > 0)
               for p in scale["size_only"])
    assert main(["bench", "--ranks", "0"]) == 2
