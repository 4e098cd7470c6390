"""ringemu.testing.conformance on its defaults: a correct unpadded ring passes, written per rank and as list-of-N
code; each planted bug (wrong direction, off-by-one shard, missing 1/N, wrong shard index) fails the properties it
breaks and no other; the smallest failing example does not depend on hypothesis's seed; declared orders and
traffic; ringemu's own worlds conform."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ringemu.layout import ChunkLayout
from ringemu.testing import GLOO_NATIVE, ListWorld, Orders, assert_conforms, check_communicator, which_orders
from ringemu.worlds import EmulatedWorld
from torch_support import require_torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from mailbox_communicator import MailboxWorld  # noqa: E402  (a padded textbook ring, docs/testing.md)
from ring_communicators import worlds  # noqa: E402  (unpadded rings with planted bugs, docs/testing.md)

# What each planted bug breaks, from what the bug does (examples/ring_communicators.py), not from a run:
# a mirrored ring adds in another order (visible from N = 4) and sends its uneven chunks from other ranks;
# a short shard is a wrong reduce-scatter value; sending the whole buffer is a traffic bug with exact sums;
# handing back a partly reduced chunk is wrong in the values of both reductions.
BREAKS = {
    None: set(),
    "wrong-direction": {"reduce-scatter order", "all-reduce order"},
    "off-by-one-shard": {"reduce-scatter values"},
    "missing-1/N": {"reduce-scatter bytes", "all-reduce bytes"},
    "wrong-shard-index": {"reduce-scatter values", "all-reduce values"},
}
KEEPS = {  # properties the bug cannot touch
    None: {"reduce-scatter values", "all-gather values", "all-reduce values"},
    "wrong-direction": {"reduce-scatter values", "all-gather values", "all-reduce values"},
    "off-by-one-shard": {"all-reduce values", "all-gather values", "all-reduce bytes", "all-reduce order"},
    "missing-1/N": {"reduce-scatter values", "all-reduce values", "reduce-scatter order", "all-reduce order",
                    "all-gather bytes"},
    "wrong-shard-index": {"all-gather values", "all-gather bytes"},
}


@pytest.mark.parametrize("shape", ["per-rank", "list-of-N"])
@pytest.mark.parametrize("bug", list(BREAKS))
def test_planted_bugs_are_classified_on_the_defaults(bug, shape):
    report = check_communicator(worlds(bug)[shape], name=f"{shape} {bug}")
    failing = set(report.failing)
    assert BREAKS[bug] <= failing, report.text()
    assert not KEEPS[bug] & failing, report.text()
    assert report.ok == (bug is None), report.text()
    if bug is None:
        for c in ("reduce-scatter", "all-reduce"):
            assert "ring" in report.collectives[c].orders and "tree" not in report.collectives[c].orders, report


def test_the_summary_names_each_failing_property():
    report = check_communicator(worlds("missing-1/N")["list-of-N"], name="broken")
    text = str(report)  # print(report) is the readable table
    assert "FAILED: reduce-scatter bytes, all-reduce bytes" in text, text
    assert "reduce-scatter bytes, smallest failing example:" in text and \
        "all-reduce bytes, smallest failing example:" in text, text


@pytest.mark.parametrize("seed", range(4))
def test_missing_one_over_n_is_caught_in_the_bytes_whatever_the_seed(seed):
    """The padded mailbox ring with the whole buffer sent per step. The smallest example is found by the suite's
    own deterministic shrink, so it is the same under every hypothesis seed: N = 2 ranks, S = 1 element. There a
    padded ring all-reduce sends 2(N-1) chunks of ceil(1/2) = 1 int32: 8 B; the bug sends the padded 2-element
    buffer in its reduce-scatter step (8 B), then one chunk (4 B): 12 B."""
    report = check_communicator(lambda n: MailboxWorld(n, "missing-1/N"), name="broken", count="padded",
                                max_examples=20, seed=seed)
    assert report.collectives["all-reduce"].bytes == "fail" and report.collectives["all-reduce"].values == "pass"
    message = report.collectives["all-reduce"].failures["bytes"]
    assert message.startswith("N = 2 ranks, S = 1 element, integer blocks int32, floats fp16 (seed 0)"), message
    assert "rank 0 sent 12 B, the ring order sends 8 B" in message, message


def test_a_padded_ring_passes_counted_padded_and_fails_counted_as_payload():
    report = assert_conforms(lambda n: MailboxWorld(n), name="padded ring", count="padded", max_examples=15)
    assert all(report.collectives[c].bytes == "pass" for c in report.collectives), report.text()
    payload = check_communicator(lambda n: MailboxWorld(n), name="padded ring", max_examples=15)
    # N = 2, S = 1: a padded chunk carries one element of padding that an unpadded engine never sends
    assert "all-reduce bytes" in payload.failing, payload.text()


def test_the_emulator_conforms():
    report = check_communicator(lambda n: EmulatedWorld(n), max_examples=10, order="ring")
    assert report.ok, report.text()


def test_the_suite_tells_a_tree_from_a_ring():
    """An emulated world running the registry's binary tree: its bits are the tree's, not the ring's (N >= 3 and
    S >= 8: there the two orders of addition differ on random floats)."""
    report = check_communicator(lambda n: EmulatedWorld(n, algorithm="tree"), min_ranks=3, max_ranks=8, min_numel=8,
                                max_examples=10, order="tree")
    assert report.ok, report.text()
    for c in ("reduce-scatter", "all-reduce"):
        assert "tree" in report.collectives[c].orders and "ring" not in report.collectives[c].orders, report.text()
    failing = check_communicator(lambda n: EmulatedWorld(n, algorithm="tree"), min_ranks=3, max_numel=16,
                                 max_examples=5, order="ring")
    assert "all-reduce order" in failing.failing, failing.text()


def test_which_orders_tells_the_mirrored_ring_from_the_ring():
    found = which_orders(worlds(None)["list-of-N"], collectives=("all-reduce",), max_examples=10)
    assert "ring" in found["all-reduce"] and "tree" not in found["all-reduce"], found
    mirrored = which_orders(worlds("wrong-direction")["list-of-N"], collectives=("all-reduce",), max_examples=10)
    assert "ring" not in mirrored["all-reduce"], mirrored


def test_order_must_be_a_known_order():
    with pytest.raises(ValueError, match="order must be None"):
        check_communicator(lambda n: EmulatedWorld(n), order="butterfly")
    with pytest.raises(ValueError, match="count must be one of"):
        check_communicator(lambda n: EmulatedWorld(n), count="wire")


def _sum_at_rank_0_then_scatter(buffers, log=None):
    """Reduce-scatter as "every rank sends its buffer to rank 0, rank 0 adds in rank order and sends shard r to
    rank r": naive's order of addition, but its own traffic."""
    n, numel = len(buffers), buffers[0].shape[0]
    layout = ChunkLayout(numel, n)
    total = buffers[0].copy()
    for r in range(1, n):
        if log is not None:
            log.send(r, 0, buffers[r])
        wide = np.float32 if total.dtype.itemsize == 2 and total.dtype.kind not in "iu" else total.dtype
        total = (total.astype(wide) + buffers[r].astype(wide)).astype(total.dtype)
    for r in range(1, n):
        if log is not None:
            log.send(0, r, total[layout.payload_slice(r)])
    return [total[layout.payload_slice(r)].copy() for r in range(n)]


def _its_traffic(n_ranks, numel, itemsize):
    """Bytes sent per rank by _sum_at_rank_0_then_scatter: rank 0 the shards of ranks 1..N-1, every other rank
    its whole buffer (none when N = 1)."""
    layout = ChunkLayout(numel, n_ranks)
    return [itemsize * sum(layout.payload(r) for r in range(1, n_ranks))] + [itemsize * numel] * (n_ranks - 1)


def test_a_declared_order_and_traffic_model_make_a_communicator_pass():
    make_world = lambda n: ListWorld(n, reduce_scatter=_sum_at_rank_0_then_scatter)  # noqa: E731
    plain = check_communicator(make_world, collectives=("reduce-scatter",), max_examples=10)
    assert "naive" in plain.collectives["reduce-scatter"].orders, plain.text()
    assert plain.failing == ["reduce-scatter bytes"], plain.text()  # naive's bits, nobody's bytes
    mine = Orders().declare("sum at 0, scatter", "reduce-scatter", results=lambda world: _sum_at_rank_0_then_scatter(
        list(world)), traffic=_its_traffic)
    report = check_communicator(make_world, collectives=("reduce-scatter",), max_examples=10, orders=mine)
    assert report.ok and "sum at 0, scatter" in report.collectives["reduce-scatter"].orders, report.text()
    assert "sum at 0, scatter" not in Orders().names("reduce-scatter")  # the global registry is untouched


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


def test_a_torch_process_group_conforms_through_the_adapter():
    require_torch()
    from ringemu.testing import TorchGroupWorld

    report = check_communicator(lambda n: TorchGroupWorld(n), name="ringemu's process group", max_ranks=5,
                                max_numel=24, max_examples=4, dtypes=("int32", "fp32"), order="ring")
    assert report.ok, report.text()
