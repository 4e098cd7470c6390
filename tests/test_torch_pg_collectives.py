"""The "ringemu" torch.distributed backend: each collective equals ringemu's emulator, bit for bit and byte for
byte, for every algorithm, dtype and N drawn; copies, reduce ops, failures and unsupported calls."""
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torch_support import require_torch

torch = require_torch()
import torch.distributed as dist  # noqa: E402

import ringemu  # noqa: E402
from ringemu.algorithms import algorithm as catalog_entry, names  # noqa: E402
from ringemu.torch import RankError, spawn  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # torch 2.13 renames the *_tensor collectives
TORCH_OF = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16, "bf16": torch.bfloat16,
            "int64": torch.int64}


def as_torch(row: np.ndarray, name: str) -> torch.Tensor:
    if name == "bf16":
        return torch.from_numpy(row.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(row.copy())


def as_bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy()


def world_of(name: str, n: int, numel: int, seed: int) -> np.ndarray:
    if name == "int64":
        return ringemu.integer_blocks(n_ranks=n, numel=numel, seed=seed, dtype="int64")
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, numel)) * 10).astype(ringemu.resolve_dtype(name))


@st.composite
def cases(draw):
    n = draw(st.integers(1, 5))
    algorithm = draw(st.sampled_from([a for a in names("all-reduce")
                                      if catalog_entry("all-reduce", a).unsupported(n) is None
                                      and a != "hierarchical-ring"]))
    return n, draw(st.sampled_from(list(TORCH_OF))), draw(st.sampled_from([0, 1, 2, 3, 7, 13])), algorithm


@settings(max_examples=20)
@given(case=cases(), seed=st.integers(0, 2 ** 16))
def test_reductions_and_gathers_equal_the_emulator(case, seed):
    """all_reduce, reduce_scatter_tensor and all_gather_into_tensor on the backend give the bits and the per-rank
    bytes of ringemu's own collectives with the same algorithm (the emulator is the oracle)."""
    n, dtype, per_rank, algorithm = case
    world = world_of(dtype, n, n * per_rank, seed)

    def fn(rank):
        t = as_torch(world[rank], dtype)
        reduced = t.clone()
        dist.all_reduce(reduced)
        shard = torch.empty(per_rank, dtype=t.dtype)
        dist.reduce_scatter_tensor(shard, t)
        gathered = torch.empty(n * per_rank, dtype=t.dtype)
        dist.all_gather_into_tensor(gathered, t[:per_rank].contiguous())
        return as_bits(reduced), as_bits(shard), as_bits(gathered)

    ledger = ringemu.CommLedger()
    result = spawn(fn, n, algorithm=algorithm, ledger=ledger)
    expected_ledger = ringemu.CommLedger()
    want_ar = ringemu.all_reduce(world, ledger=expected_ledger, algorithm=algorithm)
    want_rs = ringemu.reduce_scatter(world, ledger=expected_ledger, algorithm=algorithm)
    want_ag = ringemu.all_gather([row[:per_rank] for row in world], ledger=expected_ledger, algorithm=algorithm)
    bits = (lambda a: a.view(np.int16) if a.dtype.itemsize == 2 else a)
    for rank, (ar, rs, ag) in enumerate(result.results):
        np.testing.assert_array_equal(ar, bits(np.ascontiguousarray(want_ar[rank])))
        np.testing.assert_array_equal(rs, bits(np.ascontiguousarray(want_rs[rank])))
        np.testing.assert_array_equal(ag, bits(np.ascontiguousarray(want_ag[rank])))
    got = [(t.sent.bytes, t.received.bytes) for t in ledger.per_rank()]
    assert got == [(t.sent.bytes, t.received.bytes) for t in expected_ledger.per_rank()]


def test_reduce_ops_are_exact():
    """MIN, MAX and PRODUCT against numpy over the ranks' int64 blocks; AVG = the ring sum / N in fp32."""
    n = 4
    world = ringemu.integer_blocks(n_ranks=n, numel=11, seed=5, dtype="int64") % 5 + 1  # small: products fit
    floats = world.astype(np.float32)

    def fn(rank):
        out = {}
        for op in ("MIN", "MAX", "PRODUCT"):
            t = torch.from_numpy(world[rank].copy())
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            out[op] = t.numpy()
        t = torch.from_numpy(floats[rank].copy())
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        out["AVG"] = t.numpy()
        return out

    for got in spawn(fn, n).results:
        np.testing.assert_array_equal(got["MIN"], world.min(axis=0))
        np.testing.assert_array_equal(got["MAX"], world.max(axis=0))
        np.testing.assert_array_equal(got["PRODUCT"], world.prod(axis=0))
        np.testing.assert_array_equal(got["AVG"], ringemu.all_reduce(floats)[0] / np.float32(n))


def test_copies_move_values_and_count_the_chain_and_direct_patterns():
    """broadcast, scatter, gather, all_to_all_single and send/recv: values by their definitions; bytes by the
    patterns of ringemu.algorithms.direct (chain broadcast: every rank but the chain's last sends the buffer)."""
    n = 3

    def fn(rank):
        b = torch.full((5,), float(rank))
        dist.broadcast(b, src=1)
        out = torch.empty(2)
        dist.scatter(out, [torch.full((2,), 10.0 + i) for i in range(n)] if rank == 2 else None, src=2)
        pieces = [torch.empty(2) for _ in range(n)] if rank == 0 else None
        dist.gather(torch.full((2,), 20.0 + rank), pieces, dst=0)
        a2a = torch.empty(2 * n)
        dist.all_to_all_single(a2a, torch.arange(2 * n, dtype=torch.float32) + 100 * rank)
        got = torch.empty(1)
        if rank == 0:
            dist.send(torch.tensor([42.0]), dst=2)
        if rank == 2:
            dist.recv(got, src=0)
        return b, out, pieces, a2a, got

    ledger = ringemu.CommLedger()
    results = spawn(fn, n, ledger=ledger).results
    for rank, (b, out, pieces, a2a, got) in enumerate(results):
        assert b.tolist() == [1.0] * 5
        assert out.tolist() == [10.0 + rank] * 2
        assert a2a.tolist() == [float(100 * s + 2 * rank + k) for s in range(n) for k in range(2)]
    assert [p.tolist() for p in results[0][2]] == [[20.0 + r] * 2 for r in range(n)]
    assert results[2][4].tolist() == [42.0]
    broadcast = [t.sent.bytes for t in _only(ledger, "broadcast").per_rank()]
    assert broadcast == [0, 20, 20]  # chain 1 -> 2 -> 0: ranks 1 and 2 send 5 fp32 = 20 B, rank 0 is last
    scatter = [t.received.bytes for t in _only(ledger, "scatter").per_rank()]
    assert scatter == [8, 8, 0]  # the root (rank 2) sends 2 fp32 to each other rank
    assert [t.sent.bytes for t in _only(ledger, "send").per_rank()] == [4, 0, 0]


def _only(ledger, call: str) -> ringemu.CommLedger:
    part = ringemu.CommLedger()
    part.records.extend(r for r in ledger.records if r.label.startswith(call + ":"))
    return part


@pytest.mark.parametrize("late", [False, True])
def test_a_failing_rank_is_named_and_nobody_hangs(late):
    """Whether the others reach the collective before or after rank 2 fails, they are woken by its failure and
    the report names rank 2's own error (ranks left to time out would report their CollectiveTimeout, and
    rank 0's would be named)."""
    def fn(rank):
        if rank == 2:
            raise KeyError("boom")
        if late:
            time.sleep(0.2)  # rank 2 has failed before this rank's group meets
        dist.all_reduce(torch.ones(3))

    with pytest.raises(RankError, match=r"(?s)rank 2 failed.*KeyError: 'boom'"):
        spawn(fn, 4, timeout_s=60)


def test_mismatched_calls_and_missing_ranks_are_reported():
    def mismatch(rank):
        dist.all_reduce(torch.ones(3 if rank else 4))

    with pytest.raises(RankError, match="ranks disagree"):
        spawn(mismatch, 2, timeout_s=30)

    def missing(rank):
        if rank != 1:
            dist.all_reduce(torch.ones(3))

    with pytest.raises(RankError, match=r"rank\(s\) \[1\] never arrived"):
        spawn(missing, 3, timeout_s=0.5)


@pytest.mark.parametrize("call, pattern", [
    (lambda: dist.reduce(torch.ones(2), dst=0), "reduce is not supported"),
    (lambda: dist.all_reduce(torch.ones(2, dtype=torch.uint32)), "dtype torch.uint32 is not supported"),
    (lambda: dist.all_reduce(torch.ones(2).to(torch.float8_e4m3fn)),
     "dtype torch.float8_e4m3fn is not supported"),
])
def test_unsupported_calls_say_what(call, pattern):
    with pytest.raises(RankError, match=pattern):
        spawn(lambda rank: call(), 2, timeout_s=5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="algorithm for all-reduce must be one of"):
        spawn(lambda r: None, 2, algorithm="bogus")
    with pytest.raises(ValueError, match="timeout_s must be a finite number"):
        spawn(lambda r: None, 2, timeout_s=float("inf"))
    with pytest.raises(TypeError, match="world_size must be an integer"):
        spawn(lambda r: None, 2.0)
