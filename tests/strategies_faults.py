"""Hypothesis strategies for the fault tests: a schedule of the registry, a world, and one message fault on it."""
import numpy as np
from hypothesis import strategies as st

from ringemu.algorithms import REGISTRY, build
from ringemu.blocks import integer_blocks
from ringemu.dtypes import resolve_dtype
from ringemu.execute import MODES
from ringemu.faults.spec import Fault
from ringemu.layout import ChunkLayout

__all__ = ["ENTRIES", "FAULT_DTYPES", "faulty_runs"]

ENTRIES = sorted(k for k in REGISTRY if not REGISTRY[k].sized)  # orders cut per buffer: test_mpich_orders.py
FAULT_DTYPES = ("int32", "fp32", "bf16")


@st.composite
def faulty_runs(draw, kinds=("drop", "corrupt", "duplicate", "misroute")):
    """(schedule, padded world, fault, its table row, mode): one message of a random step of any registered
    algorithm on 2-6 ranks, every chunk at least one element; int32 blocks or standard-normal fp32/bf16."""
    key = draw(st.sampled_from(ENTRIES))
    n = draw(st.integers(2, 6).filter(lambda n: REGISTRY[key].unsupported(n) is None))
    schedule = build(key[0], n, key[1])
    numel = draw(st.integers(schedule.n_chunks, 4 * schedule.n_chunks + 3))  # every chunk >= 1 element
    dtype = draw(st.sampled_from(FAULT_DTYPES))
    kind = draw(st.sampled_from(kinds))
    step = draw(st.integers(0, schedule.n_steps - 1))
    bounds = schedule.step_bounds()
    row = draw(st.integers(int(bounds[step]), int(bounds[step + 1]) - 1))
    _, src, dst, chunk, _ = schedule.table[row].tolist()
    extra = {}
    if kind == "corrupt":
        width = ChunkLayout(numel, schedule.n_chunks).chunk_size
        size = {"int32": 32, "fp32": 32, "bf16": 16}[dtype]
        extra = {"elem": draw(st.integers(0, width - 1)), "bits": (draw(st.integers(0, size - 1)),)}
    if kind == "misroute":
        extra = {"to": draw(st.sampled_from([r for r in range(n) if r != dst]))}
    fault = Fault(kind, step, src=src, dst=dst, chunk=chunk, **extra)
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    padded = ChunkLayout(numel, schedule.n_chunks).padded_numel
    if dtype == "int32":
        world = integer_blocks(n, padded, seed, "int32")
    else:
        world = rng.standard_normal((n, padded)).astype(resolve_dtype(dtype))
    return schedule, world, fault, row, draw(st.sampled_from(MODES))
