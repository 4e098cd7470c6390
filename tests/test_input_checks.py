"""Edge cases of the core API: exact counts near the int64 limit, and clear errors for bad input."""
import threading
import time
from fractions import Fraction

import numpy as np
import pytest

import ringemu
from ringemu.worlds import EmulatedWorld, RankFailure
from ringemu.memory import MemoryLedger
from ringemu.testing import assert_matches_ringemu


def test_counts_near_int64_limit_stay_exact():
    # S = 9·10^18 is divisible by 3, so no padding; every rank sends 2(N-1)·S/N = 4·3·10^18 elements
    # (closed form of ring all-reduce); the bytes exceed 2^63 and must still be exact Python ints.
    s = 9 * 10 ** 18
    ledger = ringemu.CommLedger()
    ringemu.all_reduce(ringemu.VirtualBuffer((3, s), "fp32"), ledger=ledger)
    for t in ledger.per_rank():
        assert t.sent.elements == 4 * s // 3 and t.sent.bytes == 16 * s // 3
        assert t.sent.padding_elements == 0 and t.received.padding_bytes == 0
    assert ledger.total().padding_bytes == 0


def test_numel_at_2_to_63_is_refused():
    with pytest.raises(ValueError, match="below 2\\*\\*63"):
        ringemu.ChunkLayout(2 ** 63, 4)


def test_alpha_beta_time_refuses_floats_and_bools():
    ledger = ringemu.CommLedger()
    ringemu.all_reduce(ringemu.VirtualBuffer((2, 4), "fp32"), ledger=ledger)
    # 2 steps, each carrying one 2-element fp32 chunk = 8 B per link: 2·(α + 8/β)
    assert ledger.alpha_beta_time(8, latency="1e-6") == 2 * (Fraction(1, 10 ** 6) + 1)
    for bad in (1e9, True, np.float32(1)):
        with pytest.raises(TypeError, match="bandwidth must be an int"):
            ledger.alpha_beta_time(bad)


def test_dtype_none_is_refused():
    with pytest.raises(ValueError, match="dtype must be one of"):
        ringemu.resolve_dtype(None)


def test_memory_ledger_refuses_non_integer_bytes():
    mem = MemoryLedger(1)
    for bad, error in ((2.0, TypeError), (True, TypeError), (-1, ValueError)):
        with pytest.raises(error, match="nbytes"):
            mem.alloc(0, "w", "weights16", bad)


@pytest.mark.parametrize("kwargs, match", [({"mode": "zz"}, "mode must be one of"),
                                           ({"timeout": -1}, "timeout must be"),
                                           ({"timeout": float("inf")}, "timeout must be"),
                                           ({"ledger": 3}, "ledger must be a CommLedger"),
                                           ({"scheduler": "fibers"}, "scheduler must be one of greenlet, threads")])
def test_emulated_world_checks_its_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        EmulatedWorld(2, **kwargs)


def test_size_only_collectives_check_mode_too():
    with pytest.raises(ValueError, match="mode must be one of"):
        ringemu.all_reduce(ringemu.VirtualBuffer((2, 3), "fp32"), mode="nope")


@pytest.mark.parametrize("scheduler", ["greenlet", "threads"])
def test_hung_world_names_the_rank_that_did_not_arrive(scheduler):
    world = EmulatedWorld(3, timeout=0.5, scheduler=scheduler)

    def late(comm):
        if comm.rank == 2:
            time.sleep(1.5)  # arrives after the others gave up
        return comm.all_reduce(np.zeros(3), "grads")

    with pytest.raises(RankFailure, match=r"ranks \[0, 1\] waited .* at 'grads'; ranks \[2\] did not arrive"):
        world.run(late)


def test_thread_start_failure_releases_started_ranks(monkeypatch):
    real_start, calls = threading.Thread.start, []

    def failing_start(self):
        calls.append(self.name)
        if len(calls) == 3:
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", failing_start)
    world = EmulatedWorld(4, timeout=600, scheduler="threads")
    with pytest.raises(RuntimeError, match="can't start new thread"):
        world.run(lambda comm: comm.all_reduce(np.zeros(2)))
    monkeypatch.undo()
    # the two ranks that started were released by the aborted barrier and have ended (left waiting, they
    # would still be alive here: run() used to return while they waited for the 600 s timeout)
    assert not any(t.name in ("rank0", "rank1") and t.is_alive() for t in threading.enumerate())


def test_communicator_rejects_a_list_and_a_float_numel():
    world = EmulatedWorld(1)
    with pytest.raises(RankFailure, match="needs a 1-D numpy array"):
        world.run(lambda comm: comm.reduce_scatter([1.0, 2.0]))
    with pytest.raises(RankFailure, match="numel must be an integer"):
        world.run(lambda comm: comm.all_gather(np.zeros(2), 2.7))


def test_oracle_refuses_fractional_traffic_counts():
    def ring_with_fuzzy_traffic(world):
        return ringemu.all_reduce(world), [8.9, 8.2, 8.0]

    world = ringemu.integer_blocks(3, 12, 0, "int32")
    with pytest.raises(AssertionError, match="integers"):
        assert_matches_ringemu(ring_with_fuzzy_traffic, "all-reduce", world, check_traffic="elements")


def test_shared_checks_name_the_argument_and_what_is_allowed():
    # Examples: each message is written out by hand from ringemu.checks' documented form.
    from ringemu import checks
    assert checks.check_int(np.int64(5), "steps", minimum=0) == 5 and type(checks.check_int(np.int64(5), "s")) is int
    for bad, error, message in [
            (True, TypeError, "steps must be an integer >= 0, got True (bool)"),
            (2.0, TypeError, "steps must be an integer >= 0, got 2.0 (float)"),
            (-1, ValueError, "steps must be an integer >= 0, got -1")]:
        with pytest.raises(error) as info:
            checks.check_int(bad, "steps", minimum=0)
        assert str(info.value) == message
    with pytest.raises(ValueError, match="psi must be an integer >= 1 and <= 10 \\(a count\\), got 11"):
        checks.check_int(11, "psi", minimum=1, maximum=10, why="a count")
    with pytest.raises(ValueError, match="numel must be below 2\\*\\*63"):
        checks.check_numel(2 ** 63)
    assert checks.check_timeout(None, allow_none=True) is None and checks.check_timeout(3) == 3.0
    for bad in (0, -1.0, float("inf"), float("nan"), True, "5", None):
        with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
            checks.check_timeout(bad)
