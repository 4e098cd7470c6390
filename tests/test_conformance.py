"""ringemu.testing.conformance: a correct Communicator written from the textbook passes with ring bits and ledger
bytes; planted bugs (a missing 1/N, an off-by-one shard) are caught with the smallest example; ringemu's own torch
backend conforms, `ring` bit for bit and `native` in gloo's order."""
import sys
from pathlib import Path

import pytest

from ringemu.worlds import EmulatedWorld
from ringemu.testing.conformance import GLOO_NATIVE, assert_conforms, check_communicator
from torch_support import require_torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from mailbox_communicator import MailboxWorld  # noqa: E402  (the worked example docs/testing.md shows)


def test_a_textbook_ring_conforms_with_ring_bits_and_ledger_bytes():
    report = assert_conforms(lambda n: MailboxWorld(n), name="textbook ring", max_examples=15)
    for c in ("reduce-scatter", "all-gather", "all-reduce"):
        entry = report.collectives[c]
        assert entry.values == "pass" and entry.bytes == "pass" and "ring" in entry.orders, report.text()


def test_the_emulator_conforms():
    report = check_communicator(lambda n: EmulatedWorld(n), max_examples=10, expect_order="ring")
    assert report.ok, report.text()


def test_missing_one_over_n_is_caught_in_the_bytes():
    report = check_communicator(lambda n: MailboxWorld(n, "missing-1/N"), name="broken", max_examples=20)
    assert not report.ok
    assert report.collectives["reduce-scatter"].bytes == "fail"
    assert report.collectives["reduce-scatter"].values == "pass"  # the sums are right; only the traffic is not
    # the smallest example where a whole-buffer send differs from a chunk send: N = 2 ranks, S = 1 element. A ring
    # all-reduce sends 2(N-1) chunks of ceil(1/2) = 1 int32: 8 B; the bug sends the padded 2-element buffer in its
    # reduce-scatter step (8 B), then one chunk (4 B): 12 B. (Its reduce-scatter alone, 8 B, equals what gloo's
    # reduce-scatter, an all-reduce, sends at N = 2, so it is the all-reduce that fails there.)
    assert "N = 2 ranks, S = 1 elements" in report.failure, report.text()
    assert "all-reduce: rank 0 reported 12 bytes sent for 1 int32 elements on 2 ranks; the ledger of the ring " \
           "algorithm counts 8" in report.failure, report.text()


def test_off_by_one_shard_is_caught_in_the_values():
    report = check_communicator(lambda n: MailboxWorld(n, "off-by-one-shard"), name="broken", max_examples=20)
    assert report.collectives["reduce-scatter"].values == "fail"
    assert report.collectives["all-reduce"].values == "pass"
    # S // N = 0 where ceil(S/N) = 1: rank 0's shard of one element comes back empty
    assert "rank 0 (its shard: elements [0, 1) of ChunkLayout(1, 2)): expected shape (1,), got (0,)" \
        in report.failure, report.text()
    with pytest.raises(AssertionError, match="values WRONG"):
        assert_conforms(lambda n: MailboxWorld(n, "off-by-one-shard"), max_examples=20)


def test_the_suite_tells_a_tree_from_a_ring():
    """An emulated world running the registry's binary tree: its bits are the tree's, not the ring's (N >= 3 and
    S >= 8: there the two orders of addition differ on random floats)."""
    report = check_communicator(lambda n: EmulatedWorld(n, algorithm="tree"), min_ranks=3, max_ranks=8, min_numel=8,
                                max_examples=10, expect_order="tree")
    assert report.ok, report.text()
    for c in ("reduce-scatter", "all-reduce"):
        assert "tree" in report.collectives[c].orders and "ring" not in report.collectives[c].orders, report.text()


def test_expect_order_must_be_a_known_order():
    with pytest.raises(ValueError, match="expect_order must be one of"):
        check_communicator(lambda n: EmulatedWorld(n), expect_order="butterfly")


@pytest.mark.parametrize("algorithm, order", [("ring", "ring"), ("native", GLOO_NATIVE)])
def test_ringemu_torch_backend_conforms(algorithm, order):
    require_torch()
    from ringemu.worlds.torch_launch import TorchWorld

    # N >= 4 and S >= 16: below that gloo's order and the ring's can coincide (ringemu.algorithms.gloo)
    report = check_communicator(lambda n: TorchWorld(n, algorithm=algorithm, timeout=120), name=f"torch {algorithm}",
                                min_ranks=4, max_ranks=5, max_numel=40, min_numel=16, max_examples=4,
                                dtypes=("int32", "int64", "fp32", "bf16"))
    assert report.ok, report.text()
    for c in ("all-reduce", "reduce-scatter"):  # the named order matches; the other one is ruled out
        assert order in report.collectives[c].orders, report.text()
        assert ({"ring", GLOO_NATIVE} - {order}).isdisjoint(report.collectives[c].orders), report.text()
