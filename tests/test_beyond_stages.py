"""The stages beyond the four: HSDP and ZeRO-Offload equal DP bit for bit where they claim to (integer blocks for
HSDP, always for Offload), ZeRO++ does not and says by how much; each headline (HSDP's inter-node bytes, Offload's
PCIe bytes and GPU memory, ZeRO++'s cross-node bytes) is checked against sums written out here by hand."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringemu.cli import main
from ringemu.ledger import CommLedger
from ringemu.link_bytes import sent_per_class
from ringemu.topology import Topology
from ringemu.virtual import VirtualBuffer
from ringemu.worlds.emulator import EmulatedWorld
from ringemu.worlds.groups import Partition, group_communicator, lift, group_schedule
from ringemu.worlds.size_only import SizeOnlyWorld
from zero_stages import train
from zero_stages.api import ZeroPPConfig, run_size_only
from zero_stages.report import parity_mismatches

from strategies_zero import examples, seeds

UNITS = (272, 272, 272, 100)  # the default model: Ψ = 916


def ceil(a, b):
    return -(-a // b)


# meshes (N, K) with R = N/K nodes; integer blocks stay exact up to N = 16 in bf16 (ringemu.blocks)
meshes = st.sampled_from([(4, 2), (8, 4), (8, 2), (16, 8), (16, 4), (6, 3), (8, 1), (8, 8)])
units_st = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=3).map(tuple)


# -- sub-groups --------------------------------------------------------------------------------------------------

@settings(max_examples=examples(0.5))
@given(mesh=meshes, numel=st.integers(min_value=1, max_value=30), seed=seeds)
def test_node_reduce_scatter_then_cross_all_reduce_is_the_world_sum(mesh, numel, seed):
    """Property: RS over a node, AR of the (padded) shard across nodes, AG over the node gives every rank the sum
    over all N ranks (numpy's exact integer sum), and each call's bytes per rank are the ring's on its group."""
    n, k = mesh
    r, c = n // k, ceil(numel, k)
    data = np.random.default_rng(seed).integers(-50, 50, (n, numel)).astype(np.int32)

    def rank_fn(comm):
        node, cross = group_communicator(comm, "node", k), group_communicator(comm, "cross", k)
        shard = node.reduce_scatter(data[comm.rank], label="rs")
        padded = np.zeros(c, np.int32)
        padded[:shard.size] = shard
        summed = cross.all_reduce(padded, label="ar")
        return node.all_gather(summed[:shard.size], numel, label="ag")

    ledger = CommLedger()
    results = EmulatedWorld(n, ledger).run(rank_fn)
    for got in results:
        np.testing.assert_array_equal(got, data.sum(axis=0, dtype=np.int32))
    if k > 1:  # the ring on K ranks: (K−1) chunks of ceil(S/K) elements of 4 B
        assert {t.sent.bytes for t in ledger.per_rank("rs")} == {(k - 1) * c * 4}
    if r > 1:  # the ring all-reduce on R ranks of c elements: 2(R−1)·ceil(c/R)
        assert {t.sent.bytes for t in ledger.per_rank("ar")} == {2 * (r - 1) * ceil(c, r) * 4}
    per_class = sent_per_class(ledger, Topology(n, k))
    assert all(d["inter_node"] == sum(t.sent.bytes for t in [ledger.per_rank("ar")[q]]) for q, d in
               enumerate(per_class))  # only the cross-node all-reduce leaves a node


def test_all_to_all_moves_piece_j_to_rank_j():
    n, k = 6, 3
    def rank_fn(comm):
        node = group_communicator(comm, "node", k)
        return node.all_to_all(np.arange(6, dtype=np.int32) + 100 * comm.rank, label="a2a")
    ledger = CommLedger()
    out = EmulatedWorld(n, ledger).run(rank_fn)
    # rank 4 is local rank 1 of node 1 (ranks 3, 4, 5): piece 1 (elements 2, 3) of each of them
    np.testing.assert_array_equal(out[4], [302, 303, 402, 403, 502, 503])
    assert {t.sent.bytes for t in ledger.per_rank("a2a")} == {2 * 2 * 4}  # K−1 pieces of 2 int32


def test_lift_renames_ranks_and_keeps_step_order():
    part = Partition("cross", 8, 4)  # groups {0, 4}, {1, 5}, {2, 6}, {3, 7}
    lifted = lift(group_schedule("all_reduce", 2), part)
    assert lifted.n_ranks == 8 and lifted.n_transfers == 4 * group_schedule("all_reduce", 2).n_transfers
    pairs = {(int(s), int(d)) for s, d in lifted.table[:, 1:3]}
    assert pairs == {(0, 4), (4, 0), (1, 5), (5, 1), (2, 6), (6, 2), (3, 7), (7, 3)}
    assert np.all(np.diff(lifted.table[:, 0]) >= 0)


def test_size_only_world_records_what_the_emulator_records():
    n, k, s = 8, 4, 13

    def rank_fn(comm, virtual):
        node, cross = group_communicator(comm, "node", k), group_communicator(comm, "cross", k)
        buf = VirtualBuffer((s,), np.int32) if virtual else np.ones(s, np.int32)
        shard = node.reduce_scatter(buf, label="rs")
        cross.all_reduce(VirtualBuffer((ceil(s, k),), np.int32) if virtual else np.zeros(ceil(s, k), np.int32),
                         label="ar")
        node.all_gather(shard, s, label="ag")

    a, b = CommLedger(), CommLedger()
    EmulatedWorld(n, a).run(rank_fn, False)
    SizeOnlyWorld(n, b).run(rank_fn, True)
    assert sent_per_class(a, Topology(n, k)) == sent_per_class(b, Topology(n, k))
    assert [t.sent for t in a.per_rank()] == [t.sent for t in b.per_rank()]


def test_group_communicator_refuses_a_world_without_groups():
    class Plain:
        rank, n_ranks, ledger = 0, 4, None
    with pytest.raises(TypeError, match="no sub-groups"):
        group_communicator(Plain(), "node", 2)
    with pytest.raises(ValueError, match="divide"):
        Partition("node", 8, 3)


# -- HSDP ----------------------------------------------------------------------------------------------------------

@settings(max_examples=examples(0.4), deadline=None)
@given(mesh=meshes, units=units_st, seed=seeds)
def test_hsdp_equals_dp_bit_for_bit_with_integer_blocks(mesh, units, seed):
    """Property: with integer gradient blocks every sum is exact, so HSDP's order (RS inside the node, AR across
    nodes) gives DP's bits after every step."""
    n, k = mesh
    dp = train("dp", n, 2, "bf16", seed, "blocks", units)
    hsdp = train("hsdp", n, 2, "bf16", seed, "blocks", units, ranks_per_node=k)
    assert parity_mismatches(hsdp, dp) == []


@settings(max_examples=examples(0.4), deadline=None)
@given(mesh=meshes, units=units_st)
def test_hsdp_bytes_per_link_class_and_memory(mesh, units):
    n, k = mesh
    r = n // k
    rep = run_size_only("hsdp", n, unit_sizes=units, ranks_per_node=k)
    # by hand: across nodes only the shard's all-reduce, 2(R−1)·ceil(ceil(S/K)/R) elements of 2 B
    inter = sum(2 * (r - 1) * ceil(ceil(s, k), r) * 2 for s in units)
    intra = sum(3 * (k - 1) * ceil(s, k) * 2 for s in units)  # two all-gathers and one reduce-scatter on K
    assert {d["inter_node"] for d in rep.link_bytes_per_rank} == {inter}
    assert {d["intra_node"] for d in rep.link_bytes_per_rank} == {intra}
    assert set(rep.model_state_bytes_per_rank) == {16 * sum(ceil(s, k) for s in units)}  # 16Ψ/K, padded


def test_hsdp_with_float_gradients_differs_only_in_order():
    """With the model's float gradients the orders differ; the run still trains close to DP (not asserted equal)."""
    dp = train("dp", 16, 2)
    hsdp = train("hsdp", 16, 2, ranks_per_node=8)
    assert np.allclose(hsdp.master, dp.master, rtol=1e-2, atol=1e-3)


def test_hsdp_needs_ranks_per_node():
    with pytest.raises(ValueError, match="ranks_per_node"):
        train("hsdp", 8, 1)
    with pytest.raises(ValueError, match="divide"):
        train("hsdp", 8, 1, ranks_per_node=3)


# -- Offload -------------------------------------------------------------------------------------------------------

@settings(max_examples=examples(0.4), deadline=None)
@given(n=st.integers(min_value=1, max_value=12), units=units_st, seed=seeds, grads=st.sampled_from(["model", "blocks"]))
def test_offload_equals_dp_and_moves_4_psi_over_pcie(n, units, seed, grads):
    dp = train("dp", n, 2, "bf16", seed, grads, units)
    off = train("offload", n, 2, "bf16", seed, grads, units)
    assert parity_mismatches(off, dp) == []
    psi = sum(units)
    assert sum(d["pcie"] for d in off.link_bytes_per_rank) == 2 * 4 * psi  # two steps of 2Ψ down + 2Ψ up
    shards = sum(ceil(s, n) for s in units)
    assert set(off.model_state_bytes_per_rank) == {2 * psi + 2 * shards}  # GPU: 2Ψ + 2Ψ/N
    assert set(off.host_model_state_bytes_per_rank) == {14 * shards}  # host: 16-bit grads + 12 B of Adam


# -- ZeRO++ --------------------------------------------------------------------------------------------------------

def test_zeropp_without_cuts_is_zero3_and_hpz_alone_is_lossless():
    z3 = train("zero3", 8, 2, ranks_per_node=4)
    none = train("zeropp", 8, 2, ranks_per_node=4, options=ZeroPPConfig(False, False, False))
    hpz = train("zeropp", 8, 2, ranks_per_node=4, options=ZeroPPConfig(False, True, False))
    assert parity_mismatches(none, z3) == [] and parity_mismatches(hpz, z3) == []
    inter = [sum(d["inter_node"] for d in r.link_bytes_per_rank) for r in (z3, none, hpz)]
    assert inter[1] == inter[0] and 3 * inter[2] == 2 * inter[0]  # hpZ keeps the backward gather in the node


@pytest.mark.parametrize("n,k", [(8, 4), (16, 8), (16, 2)])
def test_zeropp_cross_node_bytes_by_hand(n, k):
    r = n // k
    rep = run_size_only("zeropp", n, unit_sizes=UNITS, ranks_per_node=k)
    z3 = run_size_only("zero3", n, unit_sizes=UNITS, ranks_per_node=k)
    total = sum(d["inter_node"] for d in rep.link_bytes_per_rank)
    # by hand, per unit with c = ceil(S/N): the ring over N leaves a node R times per step; int8 codes are
    # ceil(c/4) words and int4 ceil(c/8) words of 4 B, one 4-byte scale per 256 values
    want = 0
    for s in UNITS:
        c = ceil(s, n)
        want += r * (n - 1) * 4 * (ceil(c, 4) + ceil(c, 256))  # qwZ forward gather, codes and scales
        want += n * (r - 1) * 4 * (ceil(c, 8) + ceil(c, 256))  # qgZ inter-node all-to-all
    assert total == want
    assert sum(d["inter_node"] for d in z3.link_bytes_per_rank) == sum(3 * r * (n - 1) * 2 * ceil(s, n)
                                                                         for s in UNITS)


def test_zeropp_error_against_dp_is_measured_not_zero():
    dp = train("dp", 8, 3)
    zpp = train("zeropp", 8, 3, ranks_per_node=4)
    err = np.linalg.norm(zpp.master - dp.master) / np.linalg.norm(dp.master)
    assert 0 < err < 0.05  # lossy codes, still training the same model


# -- the command line ----------------------------------------------------------------------------------------------

def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out)


def test_cli_hsdp_done_when(capsys):
    code, d = run_json(capsys, "zero", "--stage", "hsdp", "--ranks", "16", "--ranks-per-node", "8", "--grads",
                       "blocks")
    (info,) = d["stages"]
    assert code == 0 and info["parity_with_dp"] and info["beyond"]["formula_exact"]
    # by hand for the default units: 2·(2−1)·ceil(ceil(S/8)/2)·2 B summed: 3·(2·17·2) + 2·7·2
    assert info["beyond"]["formula_bytes"] == 3 * 68 + 28
    assert {row["inter_node"] for row in info["bytes_per_link_class_per_rank"]} == {3 * (3 * 68 + 28)}


def test_cli_zeropp_and_offload(capsys):
    code, d = run_json(capsys, "zero", "--stage", "zeropp", "--ranks", "16", "--ranks-per-node", "8")
    b = d["stages"][0]["beyond"]
    assert code == 0 and b["formula_exact"] and b["scale_bytes"] > 0 and b["ratio_to_zero3"] is not None
    code, d = run_json(capsys, "zero", "--stage", "offload", "--ranks", "8", "--steps", "1")
    b = d["stages"][0]["beyond"]
    assert code == 0 and b["pcie_bytes_per_step"] == 4 * 916 and b["pcie_exact"]


@pytest.mark.parametrize("argv,message", [
    (["zero", "--stage", "hsdp", "--ranks", "8"], "--ranks-per-node"),
    (["zero", "--stage", "hsdp", "--ranks", "8", "--ranks-per-node", "3"], "divide"),
    (["zero", "--stage", "zeropp", "--ranks", "8", "--ranks-per-node", "4", "--zeropp", "qwz,bogus"], "--zeropp"),
    (["memory", "--params", "1000", "--ranks", "8", "--ranks-per-node", "3"], "divide"),
])
def test_cli_bad_mesh_is_one_line_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and message in err and err.count("\n") <= 2


def test_zeropp_loss_curve_beside_dp():
    from zero_stages.cli.beyond import loss_curve
    dp = train("dp", 8, 4)
    zpp = train("zeropp", 8, 4, ranks_per_node=4)
    a, b = loss_curve(zpp, 0), loss_curve(dp, 0)
    assert len(a) == len(b) == 4
    assert a[0] == b[0]  # before the first update both hold the same initial weights
    assert a[1:] != b[1:] and np.allclose(a, b, rtol=1e-2)  # lossy, and still the same training


def test_cli_zeropp_cuts_only_with_zeropp(capsys):
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["zero", "--stage", "zero3", "--ranks", "4", "--zeropp", "hpz"]))
    assert exc.value.code == 2 and "--zeropp" in capsys.readouterr().err
