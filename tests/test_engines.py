"""Every engine order of the registry against the running engine (the quick slice of benchmarks/engines/).

Each engine module runs its engine here (gloo through torch processes, Open MPI and MPICH under mpirun/mpiexec on
127.0.0.1 from their own venvs, XLA CPU through JAX host devices), feeds fixed-seed inputs, and compares every
bit of every rank's output with the registry entry named for that engine's algorithm. Where an engine is not
installed the test skips, except under CI=true, where .ci/run installs every engine and a missing one fails.
The same run checks ``benchmarks/results/engine_records.json`` (what ``tests/test_engine_records.py`` replays
where no engine is installed): every case of the quick slice is recorded there with the live engine's digest.
"""
import importlib
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.engines import ENGINES  # noqa: E402
from benchmarks.engines.records import case_key, load  # noqa: E402


@pytest.mark.parametrize("name", ENGINES)
def test_engine_orders_reproduce_the_running_engine_bit_for_bit(name):
    module = importlib.import_module(f"benchmarks.engines.{name}")
    why = module.available()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed in CI: {why}")
        pytest.skip(why)
    live: list[dict] = []
    rows = module.run(quick=True, record=live)
    assert rows and sum(r["cases"] for r in rows) > 0
    failed = [f"{r['entry']} {r['collective']}: {r['bits_equal']}/{r['cases']} ({r['first_mismatch']})"
              for r in rows if r["bits_equal"] != r["cases"]]
    assert failed == []
    bytes_failed = [r for r in rows if r["bytes_equal"] != r["bytes_cases"]]
    assert bytes_failed == []
    recorded = {case_key(c): c for c in load()["cases"]}

    def result(case):  # what the engine returned: its digest, and Open MPI's bytes per peer
        return case.get("sha256"), case.get("bytes")
    stale = [case_key(c) for c in live if case_key(c) not in recorded or result(recorded[case_key(c)]) != result(c)]
    assert stale == [], f"{len(stale)} of {len(live)} live cases are missing or differ in the records " \
                        f"(python -m benchmarks.engines.records): {stale[:3]}"
