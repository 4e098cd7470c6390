"""Every consumer reads the algorithm registry and nothing else: the emulated world and its Communicators, the
command line, ``ringemu.testing``, ``bench`` and the ZeRO stages (whose parity with DP holds for every algorithm).
The torch backend's send/recv path is checked in ``test_torch_backend.py``."""
import ast
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringemu import algorithms, collectives
from ringemu.worlds import EmulatedWorld, RankFailure, check_algorithm, communicator_algorithms
from ringemu.worlds.emulator import EmulatorCommunicator
from ringemu.cli import build_parser, main
from ringemu.layout import ChunkLayout
from ringemu.ledger import CommLedger
from ringemu.testing import algorithm_names, assert_matches_ringemu, float_worlds, integer_worlds, run_op

ROOT = Path(__file__).resolve().parent.parent
ALL = communicator_algorithms()
TEXTBOOK = tuple(a for a in ALL if ":" not in a)
# Engines whose reduce-scatter adds in their all-reduce's order, so ZeRO equals DP bit for bit on them too:
# torch 2.13's gloo runs reduce_scatter_tensor as its all-reduce cut per shard (ProcessGroupGloo), XLA CPU sums
# every collective in rank order (in_process_communicator.cc). Open MPI's reduce-scatter ring finishes each block on
# its owner (coll_base_reduce_scatter.c) and its all-reduce ring on the rank before (coll_base_allreduce.c): other
# associations, so ZeRO departs from DP there, as it would on Open MPI itself (test below).
SAME_ORDER_ENGINES = ("gloo:ring", "xla-cpu:in-process")


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def test_the_catalog_has_more_than_the_ring_and_every_name_runs_all_three_collectives():
    # alg's guarantee: build(c, n, A) exists for all three collectives for every textbook name A, which a world
    # runs; the engine orders (engine:alg, for the collectives their engine has them) are the rest of the catalog
    assert TEXTBOOK == tuple(a for a in algorithms.names() if ":" not in a)
    assert len(TEXTBOOK) > 2 and ALL[0] == algorithms.DEFAULT_ALGORITHM
    assert set(ALL) - set(TEXTBOOK) == {a for a in algorithms.names() if ":" in a
                                        and all((c, a) in algorithms.REGISTRY for c in algorithms.COLLECTIVES)}


# -- the emulated world and its Communicators --------------------------------------------------------------------
def _rs_ag_ar(comm, world):
    mine = world[comm.rank].copy()
    rs = comm.reduce_scatter(mine, "rs")
    return rs, comm.all_gather(rs, mine.shape[0], "ag"), comm.all_reduce(mine, "ar")


@given(world=float_worlds(max_ranks=9, max_numel=40), data=st.data())
def test_a_world_runs_its_algorithm_with_the_collectives_bits_and_ledger(world, data):
    """Property: EmulatedWorld(n, algorithm=A) gives, rank by rank, the bits and the ledger of
    ringemu.collectives with algorithm=A, and reduce-scatter's shard r is shard r of the all-reduce."""
    n, numel = world.shape
    name = data.draw(algorithm_names(n_ranks=n))
    ledger, want_ledger = CommLedger(), CommLedger()
    out = EmulatedWorld(n, ledger, algorithm=name).run(_rs_ag_ar, world)
    want_rs = collectives.reduce_scatter(world, ledger=want_ledger, label="rs", algorithm=name)
    want_ag = collectives.all_gather(want_rs, ledger=want_ledger, label="ag", algorithm=name)
    want_ar = collectives.all_reduce(world, ledger=want_ledger, label="ar", algorithm=name)
    shards = ChunkLayout(numel, n)
    for r, (rs, ag, ar) in enumerate(out):
        assert np.array_equal(_bits(rs), _bits(want_rs[r])) and np.array_equal(_bits(ag), _bits(want_ag[r]))
        assert np.array_equal(_bits(ar), _bits(want_ar[r]))
        assert np.array_equal(_bits(rs), _bits(ar[shards.payload_slice(r)]))  # DP and ZeRO add alike
    assert ledger.summary() == want_ledger.summary()


def test_the_algorithm_is_per_world_per_communicator_and_per_call():
    world = EmulatedWorld(4)
    assert world.algorithm == algorithms.DEFAULT_ALGORITHM
    assert [c.algorithm for c in world.communicators()] == [algorithms.DEFAULT_ALGORITHM] * 4
    other = ALL[-1]
    assert EmulatorCommunicator(world, 0, algorithm=other).algorithm == other
    ledger = CommLedger()
    x = np.arange(4 * 6, dtype=np.int64).reshape(4, 6)
    EmulatedWorld(4, ledger).run(lambda c: c.all_reduce(x[c.rank].copy(), "ar", algorithm=other))
    want = CommLedger()
    collectives.all_reduce(x, ledger=want, label="ar", algorithm=other)
    assert ledger.summary() == want.summary()


def test_ranks_that_name_different_algorithms_fail_clearly():
    x = np.ones((3, 5), np.int32)

    def body(comm):
        return comm.all_reduce(x[comm.rank].copy(), "ar", algorithm=ALL[comm.rank % 2])

    with pytest.raises(RankFailure, match="different collective calls.*algorithm="):
        EmulatedWorld(3, timeout=30).run(body)


@pytest.mark.parametrize("bad", ["no-such-algorithm", None, 3])
def test_an_unknown_algorithm_is_refused_with_the_catalog(bad):
    with pytest.raises(ValueError) as info:
        EmulatedWorld(4, algorithm=bad)
    assert all(name in str(info.value) for name in ALL)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        check_algorithm(bad, 4)


# -- ringemu.testing -------------------------------------------------------------------------------------------
@given(n=st.integers(1, 33), data=st.data())
def test_algorithm_names_draws_registry_names_that_support_n(n, data):
    collective = data.draw(st.sampled_from((None,) + algorithms.COLLECTIVES))
    name = data.draw(algorithm_names(collective, n_ranks=n))
    for c in (algorithms.COLLECTIVES if collective is None else (collective,)):
        assert algorithms.algorithm(c, name).unsupported(n) is None


@given(world=integer_worlds(max_ranks=9, max_numel=30), data=st.data())
def test_run_op_matches_numpy_sum_for_every_algorithm(world, data):
    """Property: for integer blocks every algorithm's all-reduce is the exact numpy sum (order-free)."""
    name = data.draw(algorithm_names("all-reduce", n_ranks=world.shape[0]))
    wide = np.int64 if world.dtype.kind == "i" else np.float64
    out = run_op("all-reduce", world, algorithm=name)
    assert np.array_equal(out.astype(wide), np.broadcast_to(world.astype(wide).sum(axis=0), world.shape))


def test_the_oracle_checks_the_algorithm_it_is_given():
    # fp32 normals on 8 ranks: the tree and the ring add in different orders, so some bits differ
    world = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    assert_matches_ringemu(lambda w: collectives.all_reduce(w, algorithm="tree"), "all-reduce", world,
                           algorithm="tree")
    with pytest.raises(AssertionError, match="differ"):
        assert_matches_ringemu(lambda w: collectives.all_reduce(w, algorithm="tree"), "all-reduce", world)


# -- the command line --------------------------------------------------------------------------------------------
def _choices(command: str, option: str = "--algorithm"):
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    return tuple(next(a for a in sub._actions if option in a.option_strings).choices)


@pytest.mark.parametrize("command", ["run", "trace", "count", "zero", "memory", "bench"])
def test_every_algorithm_option_offers_the_registry(command):
    # a collective's commands offer the whole catalog (engine orders included); ZeRO and bench what a world runs
    assert _choices(command) == (algorithms.names() if command in ("run", "trace", "count") else ALL)


def test_count_by_recursive_doubling_sends_log2_n_whole_buffers(capsys):
    # Expected: recursive doubling exchanges the whole buffer log2(N) times (Thakur, Rabenseifner & Gropp 2005,
    # §4): N = 8, S = 800 bf16 elements -> 3 · 800 · 2 B = 4,800 B per rank.
    assert main(["count", "--op", "all-reduce", "--ranks", "8", "--numel", "800", "--dtype", "bf16",
                 "--algorithm", "recursive-doubling", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithm"] == "recursive-doubling" and out["max_sent_bytes_per_rank"] == 4_800


@pytest.mark.parametrize("algorithm", TEXTBOOK + SAME_ORDER_ENGINES)
def test_zero_keeps_parity_with_dp_for_every_algorithm(algorithm, capsys):
    """`ringemu zero --stage all --ranks 8 --algorithm A`: every stage equals DP bit for bit, for every textbook A
    and every engine whose reduce-scatter adds in its all-reduce's order."""
    assert main(["zero", "--stage", "all", "--ranks", "8", "--algorithm", algorithm, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["algorithm"] == algorithm and len(out["stages"]) == 4
    assert all(s["parity_with_dp"] for s in out["stages"])


@pytest.mark.parametrize("algorithm, ratio", [("ring", "3/2"), ("gloo:ring", "2")])
def test_memory_shows_zero3_over_dp_per_algorithm(algorithm, ratio, capsys):
    # Expected: ZeRO §7.2, ZeRO-3 moves 3Ψ against DP's 2Ψ on a true ring; gloo's reduce-scatter is an
    # all-reduce (2Ψ), so ZeRO-3 = 1Ψ + 1Ψ + 2Ψ = 4Ψ = 2 × DP. Ψ = 8,000 on 8 ranks: no padding.
    assert main(["memory", "--params", "8000", "--ranks", "8", "--algorithm", algorithm, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sent = {s["name"]: max(s["traffic_sent_bytes_per_rank"]) for s in out["stages"]}
    assert out["algorithm"] == algorithm and Fraction(sent["zero3"], sent["dp"]) == Fraction(ratio)


# -- one home for the names ------------------------------------------------------------------------------------
def _listed_names(source: str) -> list[tuple[int, list[str]]]:
    """Literal tuples, lists, sets and dict keys that hold two or more algorithm names or op names (``__all__``,
    a list of Python names, excepted)."""
    algs = set(algorithms.names())
    ops = set(algorithms.op_names()) | {op.replace("-", "_") for op in algorithms.op_names()}
    tree = ast.parse(source)
    exported = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)}
    found = []
    for node in ast.walk(tree):
        elts = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if elts is None or id(node) in exported or not isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            continue
        strings = {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        if len(strings & algs) >= 2 or len(strings & ops) >= 2:
            found.append((node.lineno, sorted(strings & (algs | ops))))
    return found


def test_no_module_outside_the_registry_lists_op_or_algorithm_names():
    files = [p for pkg in ("ringemu", "zero_stages", "proofs") for p in sorted((ROOT / pkg).rglob("*.py"))
             if (ROOT / "ringemu" / "algorithms") not in p.parents]
    found = {str(p.relative_to(ROOT)): hits for p in files if (hits := _listed_names(p.read_text("utf-8")))}
    assert found == {}


def test_the_name_scan_catches_a_table():
    assert _listed_names('RUN = {"all-reduce": f, "reduce-scatter": g}') == [(1, ["all-reduce", "reduce-scatter"])]
    assert _listed_names('CHOICES = ("native", "ring", "tree")') == [(1, ["ring", "tree"])]
    assert _listed_names('__all__ = ["all_reduce", "reduce_scatter"]') == []


@pytest.mark.parametrize("algorithm", ["ompi:ring", "ompi:default"])
def test_zero_departs_from_dp_on_open_mpi_s_own_orders_unless_sums_are_exact(algorithm, capsys):
    # the model's float gradients: Open MPI's reduce-scatter associates each block's sum differently from its
    # all-reduce (module comment above), so ZeRO's weights differ from DP's; integer-block gradients sum exactly
    # in any order, so parity holds there. A finding of the engine orders, not a fault of the stages.
    assert main(["zero", "--stage", "zero2", "--ranks", "5", "--algorithm", algorithm, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    zero2 = next(s for s in out["stages"] if s["name"] == "zero2")
    assert not zero2["parity_with_dp"] and "final master" in zero2["parity_mismatches"]
    assert main(["zero", "--stage", "zero2", "--ranks", "5", "--algorithm", algorithm, "--grads", "blocks",
                 "--json"]) == 0
    assert all(s["parity_with_dp"] for s in json.loads(capsys.readouterr().out)["stages"])
