"""The registry's engine orders against the bits the engines themselves returned, recorded where they ran.

Expected values: ``benchmarks/results/engine_records.json``, written by ``python -m benchmarks.engines.records``
from the outputs of gloo (torch 2.13), Open MPI 5.0.11, MPICH 5.0.2 and XLA CPU (JAX 0.10.2) — each record is the
sha256 of every rank's output as the engine returned it (and, for Open MPI, the bytes its pml monitoring counted
per peer), never a value ringemu computed. ``tests/test_engines.py`` checks, where the engines run (CI), that the
records are still what the live engines return. Here no engine is needed: each recorded case is replayed through
the registry entry named for the engine's algorithm and must give the same digest — so an engine order that still
reduces correctly but in another order, grouping or rank placement fails here, not only where the engine is.
"""
import importlib
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from ringemu.ledger import CommLedger

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.engines import ompi  # noqa: E402
from benchmarks.engines.records import RECORDS, case_key, digest, load  # noqa: E402

_RECORDED = load(RECORDS)
_GROUPS: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
for _case in _RECORDED["cases"]:
    _GROUPS[(_case["engine"], _case["entry"], _case["collective"])].append(_case)


def test_the_records_cover_every_engine_entry_of_the_registry():
    from ringemu.algorithms import names
    prefixes = {"gloo:": "gloo", "ompi:": "ompi", "mpich:": "mpich", "xla-cpu:": "xla"}
    wanted = {(prefixes[p], entry, collective) for collective in ("all-reduce", "reduce-scatter", "all-gather")
              for entry in names(collective) for p in prefixes if entry.startswith(p)}
    assert wanted - set(_GROUPS) == set()
    assert len({case_key(c) for c in _RECORDED["cases"]}) == len(_RECORDED["cases"])  # no case twice


@pytest.mark.parametrize("group", sorted(_GROUPS), ids="|".join)
def test_every_recorded_case_replays_to_the_engines_bits(group):
    module = importlib.import_module(f"benchmarks.engines.{group[0]}")
    differ = []
    for case in _GROUPS[group]:
        ledger = CommLedger()
        outputs = module.replay(case, ledger) if group[0] == "ompi" else module.replay(case)
        if digest(outputs) != case["sha256"]:
            differ.append(f"N={case['n']} {case['dtype']} {case['kind']} S={case['numel']} seed={case['seed']}")
        elif group[0] == "ompi" and not ompi.bytes_agree(case, ledger):
            differ.append(f"N={case['n']} {case['dtype']} S={case['numel']}: bytes per peer")
    assert differ == [], f"{len(differ)} of {len(_GROUPS[group])} cases differ from the engine: {differ[:5]}"


def test_the_digest_sees_every_bit_shape_and_rank_order():
    a, b = np.arange(6, dtype=np.float32), np.arange(6, dtype=np.float32)
    base = digest([a, b])
    flipped = a.copy()
    flipped.view(np.uint32)[3] ^= 1  # the lowest mantissa bit of one element
    assert digest([flipped, b]) != base
    assert digest([a.reshape(2, 3), b]) != base                  # the same bytes, another shape
    assert digest([b[:5], np.concatenate([b[5:], a])]) != base   # the same bytes, split otherwise between ranks
    assert digest([a.astype(np.float64), b]) != base
    assert digest([np.float32(-0.0) * a[:1], b]) != digest([a[:1] * 0, b])  # -0.0 is not +0.0
