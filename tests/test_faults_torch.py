"""The fault specs on the torch backend (ringemu.faults.torch_faults): real processes, send/recv, gloo."""
import os
import re

import numpy as np
import pytest

from torch_support import require_torch

require_torch()

from ringemu.worlds.emulator import RankFailure  # noqa: E402
from ringemu.worlds.torch_launch import TorchWorld  # noqa: E402


def _all_reduce(comm):
    return comm.all_reduce(np.arange(10, dtype=np.int32) + comm.rank, label="grads")


def _running(pids):
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)  # signal 0: existence check only
            alive.append(pid)
        except ProcessLookupError:
            pass
    return alive


@pytest.mark.parametrize("spec, first, words", [
    ("stop:label=grads,rank=2,step=1", 2, r"rank 2 stopped \(injected\): collective 'grads' .* step 1 "),
    ("corrupt:step=2,src=1,dst=2,bit=3", 2, r"message corrupted: collective 'grads' .* step 2 .* link 1->2"),
    ("drop:step=0,src=0,dst=1", 1, r"message lost: collective 'grads' .* step 0 .* link 0->1.*watchdog"),
    ("misroute:step=1,src=0,dst=1,to=3", 1, r"message lost: collective 'grads' .* step 1 .* link 0->1"),
])
def test_a_fault_names_its_rank_and_every_process_is_gone(spec, first, words):
    world = TorchWorld(4, algorithm="ring", timeout=60, faults=[spec], fault_wait=1)
    named_first = rf"\(first: rank {first}\)(.|\n)*--- rank {first}: (MessageFault|RankStopped)"
    with pytest.raises(RankFailure, match=named_first) as info:
        world.run(_all_reduce)
    assert re.search(words, str(info.value))
    assert len(world.pids) == 4 and _running(world.pids) == []


def test_a_fault_that_does_not_fire_leaves_the_result_alone():
    # ring all-reduce of rank r's [0..9] + r over 4 ranks: 4·i + (0+1+2+3) = 4i + 6
    out = TorchWorld(4, algorithm="ring", timeout=60, faults=["drop:label=other,step=0,src=0,dst=1"]).run(
        _all_reduce)
    assert all(np.array_equal(o, 4 * np.arange(10) + 6) for o in out)


def test_faults_need_the_send_recv_path():
    with pytest.raises(ValueError, match="not on the engine's native collectives"):
        TorchWorld(2, algorithm="native", faults=["stop:rank=1,step=0"])
    with pytest.raises(ValueError, match="duplicate faults run on the emulator only"):
        TorchWorld(2, algorithm="ring", faults=["duplicate:step=0,src=0,dst=1"])
    with pytest.raises(ValueError, match="fault_wait"):
        TorchWorld(2, algorithm="ring", faults=["stop:rank=1,step=0"], fault_wait=0)
