"""The pytest plugin: the README's property test passes on a cold numba cache; fixtures; coexistence with a
project's own hypothesis profiles; assert_traffic."""
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import ringemu
from torch_support import require_torch
from ringemu import algorithms
from ringemu.testing import assert_traffic

ROOT = Path(__file__).resolve().parents[1]

FIXTURE_TESTS = '''
import numpy as np
from hypothesis import given, strategies as st
from ringemu.testing import integer_worlds


def rank_sum(comm, rows):
    return comm.all_reduce(rows[comm.rank], label="grads")


@given(integer_worlds(n_ranks=st.integers(1, 6), dtype="int64"))
def test_world_inside_given(ring_world, assert_traffic, world):
    n, s = world.shape
    emulated = ring_world(n)
    out = emulated.run(rank_sum, world)
    assert all(np.array_equal(o, world.sum(axis=0)) for o in out)  # integer blocks: exact in any order
    assert_traffic(emulated.ledger, calls=[("all-reduce", s, "int64", "grads")])


def test_shared_ledger(ring_world, comm_ledger, assert_traffic):
    world = np.arange(40, dtype=np.int32).reshape(4, 10)
    ring_world(4, ledger=comm_ledger).run(rank_sum, world)
    # ring all-reduce, N = 4, S = 10 int32: each rank sends 2(N-1)*ceil(S/N) = 2*3*3 = 18 elements = 72 B
    assert_traffic(comm_ledger, sent=72, received=72, label="grads")


def test_wrong_expectation_is_reported(ring_world, comm_ledger, assert_traffic):
    import pytest
    ring_world(4, ledger=comm_ledger).run(rank_sum, np.ones((4, 10), np.int32))
    with pytest.raises(AssertionError, match="rank 0: the ledger counts 72, sent= gives 60; rank 1: "):
        assert_traffic(comm_ledger, sent=60)
'''


def _first_python_block(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("\n```", start)] + "\n"


def _readme_example() -> str:
    return _first_python_block(ROOT / "README.md", "### Use it as an oracle in your own property tests")


def _plugin_args() -> list[str]:
    installed = any(ep.value == "ringemu.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "ringemu.pytest_plugin"]


def _pytest(directory: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HYPOTHESIS_PROFILE", "CI")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *_plugin_args(), *args],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=600)


def test_readme_example_and_fixtures_pass_on_a_cold_numba_cache(tmp_path):
    (tmp_path / "test_readme_example.py").write_text(_readme_example(), encoding="utf-8")
    (tmp_path / "test_fixtures.py").write_text(FIXTURE_TESTS, encoding="utf-8")
    (tmp_path / "test_docs_fixtures.py").write_text(
        _first_python_block(ROOT / "docs" / "testing.md", "## 2. Per-rank code"), encoding="utf-8")
    cache = tmp_path / "numba-cache"  # empty: every kernel compiles in this run
    run = _pytest(tmp_path, "-q", env_extra={"NUMBA_CACHE_DIR": str(cache)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "6 passed" in run.stdout, run.stdout
    # every (collective, algorithm) of the registry that runs on 4 ranks, in each of the 6 dtypes, in fused mode
    # (the direct path) and step mode (the world kernels), and the world kernels' fused mode once per collective
    entries = sum(1 for entry in algorithms.REGISTRY.values() if entry.unsupported(4) is None)
    calls = 6 * (2 * entries + len(algorithms.COLLECTIVES))
    assert f"ringemu: kernels warmed ({calls} collective calls" in run.stdout, run.stdout
    header = _pytest(tmp_path, "--co", "--ringemu-warmup=never", env_extra={"NUMBA_CACHE_DIR": str(cache)})
    assert f"ringemu {ringemu.__version__}, numba cache: {cache}, hypothesis profile: ringemu-dev" \
        in header.stdout, header.stdout


def test_warmup_follows_the_ini_value_and_rejects_others(tmp_path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n", encoding="utf-8")
    auto = _pytest(tmp_path, "-q")  # no test touches ringemu: nothing to warm
    assert auto.returncode == 0 and "kernels warmed" not in auto.stdout, auto.stdout
    (tmp_path / "pytest.ini").write_text("[pytest]\nringemu_warmup = always\n", encoding="utf-8")
    always = _pytest(tmp_path, "-q")
    assert always.returncode == 0 and "ringemu: kernels warmed" in always.stdout, always.stdout + always.stderr
    (tmp_path / "pytest.ini").write_text("[pytest]\nringemu_warmup = sometimes\n", encoding="utf-8")
    bad = _pytest(tmp_path, "-q")
    assert bad.returncode != 0 and "ringemu_warmup must be one of auto, always, never" in bad.stdout + bad.stderr


def test_a_project_profile_is_kept_and_ci_selects_ringemu_ci(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from hypothesis import settings\nsettings.register_profile('default', max_examples=3, deadline=None)\n"
        "settings.load_profile('default')\n", encoding="utf-8")
    (tmp_path / "test_profile.py").write_text(
        "from hypothesis import settings\n\ndef test_profile():\n"
        "    assert settings.default.max_examples == 3 and settings.default.deadline is None\n", encoding="utf-8")
    kept = _pytest(tmp_path, "--ringemu-warmup=never")
    assert kept.returncode == 0 and "hypothesis profile: default" in kept.stdout, kept.stdout + kept.stderr
    (tmp_path / "conftest.py").unlink()
    (tmp_path / "test_profile.py").write_text(
        "from hypothesis import settings\n\ndef test_profile():\n"
        "    assert settings.default.max_examples == 200\n", encoding="utf-8")
    ci = _pytest(tmp_path, "--ringemu-warmup=never", env_extra={"CI": "true"})
    assert ci.returncode == 0 and "hypothesis profile: ringemu-ci" in ci.stdout, ci.stdout + ci.stderr


# -- assert_traffic in process ----------------------------------------------------------------------------------
def _all_reduce_ledger(n, s, dtype="fp32", label="g"):
    ledger = ringemu.CommLedger()
    ringemu.all_reduce(ringemu.integer_blocks(n, s, 0, dtype), ledger=ledger, label=label)
    return ledger


def test_assert_traffic_numbers_and_calls():
    ledger = _all_reduce_ledger(4, 10)
    # N = 4, S = 10 fp32: ceil(10/4) = 3 elements per chunk, 2(N-1) = 6 sends of one chunk: 18 elements, 72 B;
    # the padded world has 12 elements, 2 of them padding, sent in 2 of the 6 chunk sends of some ranks
    assert_traffic(ledger, sent=72, received=72)
    assert_traffic(ledger, sent=18, unit="elements", label="g")
    assert_traffic(ledger, calls=[("all-reduce", 10, "fp32", "g")])
    with pytest.raises(AssertionError, match=r"the ledger and calls=\[\('all-reduce', 9, 'fp32'\)\] on 4 ranks differ:\n  rank 0 sent: the ledger counts .*; the calls give"):
        assert_traffic(ledger, calls=[("all-reduce", 9, "fp32")])  # same bytes, different padding
    with pytest.raises(AssertionError, match="no collective"):
        assert_traffic(ledger, sent=0, label="other")
    with pytest.raises(ValueError, match="unit must be"):
        assert_traffic(ledger, sent=72, unit="bits")
    with pytest.raises(TypeError, match="sent must be an int"):
        assert_traffic(ledger, sent=72.0)


def test_assert_traffic_per_rank_payload_only():
    ledger = _all_reduce_ledger(4, 10)
    payload = [t.sent.elements - t.sent.padding_elements for t in ledger.per_rank()]
    assert sum(payload) == 2 * 3 * 10  # each of the 10 elements is sent 2(N-1) = 6 times in all (a ring sends it
    assert_traffic(ledger, sent=payload, unit="elements", padding=False)  # N-1 times in each half)
    with pytest.raises(AssertionError, match="payload only"):
        assert_traffic(ledger, sent=[p + 1 for p in payload], unit="elements", padding=False)


TORCH_FIXTURE_TEST = '''
import torch
import torch.distributed as dist


def test_all_reduce_on_thread_ranks(torch_spawn):
    def fn(rank):
        t = torch.full((5,), float(rank))
        dist.all_reduce(t)
        return t.tolist()

    result = torch_spawn(fn, 3)
    assert result.results == [[3.0] * 5] * 3  # 0 + 1 + 2 on every rank
    # ring all-reduce, N = 3, S = 5 fp32: each rank sends 2(N-1)*ceil(S/N) = 2*2*2 = 8 elements = 32 B
    assert [t.sent.bytes for t in result.ledger.per_rank()] == [32, 32, 32]
'''


def test_torch_spawn_fixture_runs_pytorch_code_on_thread_ranks(tmp_path):
    require_torch()  # skips without torch, fails under CI=true
    (tmp_path / "test_torch_fixture.py").write_text(TORCH_FIXTURE_TEST, encoding="utf-8")
    done = _pytest(tmp_path, "-q", "--ringemu-warmup=never")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_ringemu_profiles_leave_out_hypothesis_explain_phase():
    """The explain phase reports lines that ran only in failing examples; under ringemu's oracle those are
    ringemu's own lines, so both profiles leave it out and keep every other phase (docs/testing.md)."""
    from hypothesis import Phase, settings

    from ringemu.pytest_plugin import register_profiles

    register_profiles()
    for name in ("ringemu-dev", "ringemu-ci"):
        phases = settings.get_profile(name).phases
        assert Phase.explain not in phases and Phase.shrink in phases and Phase.generate in phases, (name, phases)
