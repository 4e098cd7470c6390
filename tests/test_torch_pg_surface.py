"""The rest of PyTorch's process-group surface on the "ringemu" backend, each test written from torch.distributed's
documented semantics (torch 2.13 docs, "Distributed communication package"): the *_object collectives, the
narrow integer and bool dtypes, the bitwise ops and PREMUL_SUM, all_to_all_single's split sizes, calls from a
thread that is not a rank, abandoned collectives, subgroup names in timeouts, barrier's bytes, and the support
tables of docs/torch.md."""
import pickle
import subprocess
import sys
import threading
import time
from functools import reduce
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torch_support import require_torch

torch = require_torch()
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

import ringemu  # noqa: E402
from ringemu.torch import RankError, RingemuProcessGroup, spawn  # noqa: E402
from ringemu.torch.surface import CALLS  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
ROOT = Path(__file__).resolve().parent.parent
BITS = {torch.uint8: (8, False), torch.int8: (8, True), torch.int16: (16, True), torch.int32: (32, True),
        torch.int64: (64, True)}


def _only(ledger, call):
    return [r for r in ledger.records if r.label.startswith(call + ":")]


def test_object_collectives_move_every_object_and_count_the_pickles_as_uint8():
    """broadcast_object_list, all_gather_object, gather_object and scatter_object_list return the objects the docs
    say; the broadcast's uint8 payload is the pickle's length (torch pickles with the default protocol)."""
    n = 3
    sent = {"weights": [1.5, 2.5], "name": "ring"}

    def fn(rank):
        objs = [sent, 7] if rank == 1 else [None, None]
        dist.broadcast_object_list(objs, src=1)
        everyone = [None] * n
        dist.all_gather_object(everyone, ("rank", rank))
        gathered = [None] * n if rank == 0 else None
        dist.gather_object(rank * 10, gathered, dst=0)
        mine = [None]
        dist.scatter_object_list(mine, [f"piece {i}" for i in range(n)] if rank == 2 else None, src=2)
        return objs, everyone, gathered, mine[0]

    ledger = ringemu.CommLedger()
    results = spawn(fn, n, ledger=ledger).results
    for rank, (objs, everyone, gathered, mine) in enumerate(results):
        assert objs == [sent, 7]
        assert everyone == [("rank", r) for r in range(n)]
        assert mine == f"piece {rank}"
    assert results[0][2] == [0, 10, 20]
    payloads = [r for r in _only(ledger, "broadcast") if r.dtype == "uint8"]
    assert [r.layout.numel for r in payloads] == [len(pickle.dumps(sent)) + len(pickle.dumps(7))]
    assert payloads[0].itemsize == 1


def _fold(op: str, values: list[int], bits: int, signed: bool) -> int:
    """op over Python ints, wrapped to a ``bits``-wide integer (torch's integer tensors wrap)."""
    total = reduce({"SUM": lambda a, b: a + b, "PRODUCT": lambda a, b: a * b, "MIN": min, "MAX": max,
                    "BAND": lambda a, b: a & b, "BOR": lambda a, b: a | b, "BXOR": lambda a, b: a ^ b}[op], values)
    total %= 2 ** bits
    return total - 2 ** bits if signed and total >= 2 ** (bits - 1) else total


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 5), dtype=st.sampled_from(list(BITS)), op=st.sampled_from(
    ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]), numel=st.integers(1, 9), seed=st.integers(0, 2 ** 16))
def test_integer_reductions_fold_the_ranks_values_wrapped_to_the_dtype(n, dtype, op, numel, seed):
    """Property: for every integer dtype and op, every rank's result is the op folded over the ranks' values in
    Python integers, wrapped to the dtype's width (int32/int64 SUM: values small enough that the sum fits, which
    ringemu's kernels require)."""
    bits, signed = BITS[dtype]
    rng = np.random.default_rng(seed)
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1)) if signed else (0, 2 ** bits)
    if bits >= 32:
        low, high = -1000, 1000
    world = [[int(v) for v in rng.integers(low, high, numel)] for _ in range(n)]

    def fn(rank):
        t = torch.tensor(world[rank], dtype=dtype)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        return t.tolist()

    want = [_fold(op, [world[r][i] for r in range(n)], bits, signed) for i in range(numel)]
    for got in spawn(fn, n).results:
        assert got == want


def test_bool_reductions_follow_ncclS_mapping():
    """bool: SUM and MAX are logical or, PRODUCT and MIN logical and (ProcessGroupNCCL's getNcclReduceOp), BXOR
    exclusive or; the bytes are 1 per element."""
    world = [[True, False, False, True], [True, True, False, False], [True, False, False, False]]
    ops = ("SUM", "MAX", "BOR", "PRODUCT", "MIN", "BAND", "BXOR")

    def fn(rank):
        out = {}
        for op in ops:
            t = torch.tensor(world[rank])
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            out[op] = t.tolist()
        return out

    ledger = ringemu.CommLedger()
    results = spawn(fn, 3, ledger=ledger).results
    cols = list(zip(*world))
    for got in results:
        for op in ("SUM", "MAX", "BOR"):
            assert got[op] == [any(c) for c in cols]
        for op in ("PRODUCT", "MIN", "BAND"):
            assert got[op] == [all(c) for c in cols]
        assert got["BXOR"] == [sum(c) % 2 == 1 for c in cols]
    assert {r.itemsize for r in ledger.records} == {1}


@pytest.mark.parametrize("op, dtype, pattern", [
    ("BAND", torch.float32, r"ReduceOp.BAND is not defined on floating tensors \(float32\)"),
    ("BXOR", torch.bfloat16, r"ReduceOp.BXOR is not defined on floating tensors"),
    ("AVG", torch.int64, r"ReduceOp.AVG is not defined on integer tensors \(int64\)"),
    ("PREMUL_SUM", torch.uint8, r"ReduceOp.PREMUL_SUM is not defined on integer tensors \(uint8\)"),
])
def test_an_op_a_dtype_does_not_define_is_named(op, dtype, pattern):
    red = dist._make_nccl_premul_sum(0.5) if op == "PREMUL_SUM" else getattr(dist.ReduceOp, op)
    with pytest.raises(RankError, match=pattern):
        spawn(lambda rank: dist.all_reduce(torch.ones(2, dtype=dtype), op=red), 2, timeout_s=10)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_premul_sum_scales_each_input_then_sums_in_the_rings_order(dtype):
    """PREMUL_SUM(f): each rank's input times f (f and the product rounded to the dtype, NCCL's pre-multiplied
    sum), then the ring's sum; the oracle is numpy's multiply followed by ringemu's reduce-scatter."""
    n, per_rank, factor = 4, 5, 0.3
    dt = ringemu.resolve_dtype(dtype)
    world = (np.random.default_rng(3).standard_normal((n, n * per_rank)) * 8).astype(dt)
    wide = np.float32
    scaled = (world.astype(wide) * np.asarray(factor, dt).astype(wide)).astype(dt)
    want = ringemu.reduce_scatter(scaled)
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]

    def fn(rank):
        row = torch.from_numpy(world[rank].view(np.int16 if dt.itemsize == 2 else np.float32).copy()).view(tdt)
        out = torch.empty(per_rank, dtype=tdt)
        dist.reduce_scatter_tensor(out, row, op=dist._make_nccl_premul_sum(factor))
        return out.view(torch.int16 if dt.itemsize == 2 else torch.int32).numpy()

    for rank, got in enumerate(spawn(fn, n).results):
        np.testing.assert_array_equal(got, want[rank].view(np.int16 if dt.itemsize == 2 else np.int32))


def test_fsdp2_gradient_divide_factor_runs_as_premul_sum():
    """FSDP2's set_gradient_divide_factor(4) on N = 2 reduce-scatters with PREMUL_SUM(1/4): the gradients are the
    default's (AVG: sum / 2) halved, exactly (scaling by powers of two is exact away from subnormals)."""
    def run(factor):
        def fn(rank):
            gen = torch.Generator().manual_seed(0)
            model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4))
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(torch.randn(p.shape, generator=gen))
            for layer in model:
                fully_shard(layer)
            fully_shard(model)
            if factor:
                for module in (*model, model):
                    module.set_gradient_divide_factor(factor)
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))
            model(x).pow(2).sum().backward()
            return [p.grad.full_tensor().clone() for p in model.parameters()]
        return spawn(fn, 2).results[0]

    for default, divided in zip(run(None), run(4.0)):
        assert torch.equal(default / 2, divided)


def test_all_to_all_single_takes_lists_and_tensors_of_unequal_splits():
    """Rank s sends rows input_split_sizes[d] of its input to rank d; rank d's output is the pieces in rank order
    (the docs' example, with 2-D rows); split sizes as a list on some ranks and a tensor on others. Bytes: each
    rank sends what it splits off for the others (row of 2 fp32 = 8 B)."""
    n = 3
    sends = [[1, 2, 0], [0, 1, 3], [2, 2, 1]]  # sends[s][d]: rows rank s sends to rank d

    def fn(rank):
        rows = sum(sends[rank])
        inp = (torch.arange(rows * 2, dtype=torch.float32) + 100 * rank).reshape(rows, 2)
        takes = [sends[s][rank] for s in range(n)]
        out = torch.empty(sum(takes), 2)
        as_split = torch.tensor if rank % 2 else list
        dist.all_to_all_single(out, inp, as_split(takes), as_split(sends[rank]))
        return inp, out

    ledger = ringemu.CommLedger()
    results = spawn(fn, n, ledger=ledger).results
    for d in range(n):
        pieces = []
        for s in range(n):
            start = sum(sends[s][:d])
            pieces.append(results[s][0][start:start + sends[s][d]])
        assert torch.equal(results[d][1], torch.cat(pieces))
    sent = [t.sent.bytes for t in ledger.per_rank()]
    assert sent == [8 * sum(v for d, v in enumerate(sends[s]) if d != s) for s in range(n)]


def test_all_to_all_single_refuses_splits_that_do_not_match():
    def fn(rank):
        dist.all_to_all_single(torch.empty(2), torch.ones(2), [1, 1], [2, 0] if rank == 0 else [1, 1])

    with pytest.raises(RankError, match="rank 0 sends 2 elements to rank 0, which expects 1 from it"):
        spawn(fn, 2, timeout_s=10)
    with pytest.raises(RankError, match=r"input_split_sizes \[1, 1\] sum to 2, but dim 0 has 3 rows"):
        spawn(lambda rank: dist.all_to_all_single(torch.empty(3), torch.ones(3), [1, 2], [1, 1]), 2, timeout_s=10)


def test_a_thread_that_is_not_a_rank_gets_a_clear_error():
    def fn(rank):
        group, caught = dist.group.WORLD, []

        def other():
            try:
                dist.all_reduce(torch.ones(2), group=group)
            except RuntimeError as exc:
                caught.append(str(exc))

        if rank == 0:
            helper = threading.Thread(target=other, name="helper")
            helper.start()
            helper.join()
        dist.barrier()
        return caught

    got = spawn(fn, 2).results[0]
    assert len(got) == 1 and "thread 'helper', which is not a rank" in got[0] and "ringemu-rank-0" in got[0]


def test_a_rank_arriving_after_its_peers_timed_out_raises_and_leaves_its_buffer():
    """Ranks 0 and 1 time out waiting for rank 2; rank 2 arrives later: it raises naming the collective and the
    ranks that left, and its tensor is as it was (the collective never ran)."""
    def fn(rank):
        t = torch.full((3,), float(rank + 1))
        if rank == 2:
            time.sleep(1.0)
        try:
            dist.all_reduce(t)
        except RuntimeError as exc:
            return str(exc), t.tolist()
        return None, t.tolist()

    results = spawn(fn, 3, timeout_s=0.4).results
    why, values = results[2]
    assert "rank 2 reached all_reduce:" in why and "after rank(s) [0, 1] timed out" in why
    assert "abandoned" in why and values == [3.0, 3.0, 3.0]
    assert all("never arrived" in results[r][0] for r in (0, 1))


def test_timeouts_name_the_subgroup_and_its_global_ranks():
    def fn(rank):
        group = dist.new_group([0, 2])
        if rank == 0:
            dist.all_reduce(torch.ones(2), group=group)

    with pytest.raises(RankError, match=r"\(global ranks \[0, 2\]\)\): rank\(s\) \[2\] never arrived"):
        spawn(fn, 3, timeout_s=0.4)


@pytest.mark.parametrize("n", [2, 4])
def test_barrier_is_counted_as_a_one_element_fp32_all_reduce(n):
    """The ring's closed form for all-reduce, 2(N-1)·ceil(S/N) elements per rank, at S = 1 fp32 (4 B): 8(N-1) B
    per rank (the chunks beyond the one real element are padding, counted as the ring sends them)."""
    ledger = ringemu.CommLedger()
    spawn(lambda rank: dist.barrier(), n, ledger=ledger)
    (rec,) = _only(ledger, "barrier")
    one = ringemu.CommLedger()
    one.records.append(rec)
    assert [t.sent.bytes for t in one.per_rank()] == [2 * (n - 1) * 4] * n


def test_the_support_tables_in_docs_are_the_backends_own():
    """docs/torch.md's tables are what benchmarks/torch_surface_table.py writes; every method CALLS names exists,
    and every collective method the group defines is listed."""
    check = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "torch_surface_table.py"), "--check"],
                           cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, "docs/torch.md is stale: run python benchmarks/torch_surface_table.py"
    listed = {m for _, methods, _, _ in CALLS for m in methods}
    assert all(callable(getattr(RingemuProcessGroup, m, None)) for m in listed)
    own = {name for name, value in vars(RingemuProcessGroup).items()
           if callable(value) and not name.startswith("_") and name != "getBackendName"}
    unsupported = {"reduce", "recv_anysource"}
    assert own - unsupported == listed
