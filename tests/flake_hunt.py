"""Run every property test (a function decorated with hypothesis's ``@given``) of the given test files under K
hypothesis seeds, and report each test that failed under any of them.

    python tests/flake_hunt.py --seeds 20 tests/test_checkpoint_trust.py tests/test_robustness.py
    python tests/flake_hunt.py --seeds 3 --first-seed 100 tests/        # every test file below tests/
    python tests/flake_hunt.py --seeds 20 --every-test tests/test_conformance.py   # hypothesis inside the tests

Each seed is one pytest process (``--hypothesis-seed=K``, the ``flake-hunt`` profile of tests/conftest.py: no
example database, so an earlier failure cannot be replayed into every seed; default example counts) over all the
property tests found, with a JUnit XML report read back per test. A test that passes under some seeds and fails
under others is flaky: its result depends on the examples drawn, which is a bug in the test or in the code, to be
fixed at its cause. Exit status 1 if any test failed under any seed, 0 otherwise.

Property tests are found by reading the files (``ast``): module-level test functions with a ``@given(...)``
decorator. Parametrized property tests run with all their parameters.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["property_tests", "run_seed", "main"]


def _is_given(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "given"


def property_tests(paths: list[Path], every_test: bool = False) -> list[str]:
    """pytest node ids (``file::function``) of every ``@given`` test in ``paths`` (files or folders); with
    ``every_test``, of every test function (for tests that run hypothesis inside, such as the conformance
    suite's ``check_communicator``, which the seed reaches as well)."""
    ids = [str(p) for p in paths if "::" in str(p)]  # node ids given as they are
    paths = [p for p in paths if "::" not in str(p)]
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("test_*.py"))})
    for f in files:
        tree = ast.parse(f.read_text(), filename=str(f))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and \
                    (every_test or any(_is_given(d) for d in node.decorator_list)):
                ids.append(f"{f.resolve().relative_to(ROOT)}::{node.name}")
    return ids


def run_seed(ids: list[str], seed: int, timeout_s: float) -> tuple[dict[str, str], float]:
    """{test id (parameters included): "passed" | "failed" | "error" | "skipped"} for one seed, and seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = dict(os.environ, HYPOTHESIS_PROFILE="flake-hunt", PYTHONPATH=str(ROOT))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--hypothesis-seed={seed}",
                        f"--junitxml={report}", *ids], cwd=ROOT, env=env, timeout=timeout_s,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        outcome = {}
        if report.is_file():
            for case in ET.parse(report).getroot().iter("testcase"):
                name = f"{case.get('classname')}::{case.get('name')}"
                kinds = {child.tag for child in case}
                outcome[name] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                                 else "skipped" if "skipped" in kinds else "passed")
        return outcome, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="test files or folders, or pytest node ids (FILE::TEST)")
    parser.add_argument("--seeds", type=int, default=20, help="K: seeds first-seed .. first-seed + K - 1 (default 20)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--every-test", action="store_true",
                        help="every test function of the files, not only @given ones (hypothesis run inside)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per seed's pytest run")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    ids = property_tests([p if "::" in str(p) else p.resolve() for p in args.paths], args.every_test)
    if not ids:
        parser.error("no property test (@given) found in the given paths")
    print(f"{len(ids)} property tests, seeds {args.first_seed}..{args.first_seed + args.seeds - 1}")
    failures: dict[str, list[int]] = {}
    ran: set[str] = set()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        outcome, seconds = run_seed(ids, seed, args.timeout)
        if not outcome:
            print(f"seed {seed}: pytest produced no report (collection error?)")
            failures.setdefault("<collection>", []).append(seed)
            continue
        ran |= set(outcome)
        bad = sorted(name for name, result in outcome.items() if result in ("failed", "error"))
        for name in bad:
            failures.setdefault(name, []).append(seed)
        print(f"seed {seed}: {len(outcome)} tests, {len(bad)} failed, {seconds:.1f} s"
              + (f": {', '.join(bad)}" if bad else ""), flush=True)
    print(f"\n{len(ran)} test cases under {args.seeds} seeds: {len(failures)} failed under some seed")
    for name, seeds in sorted(failures.items()):
        print(f"  {name}: failed under seeds {seeds} ({len(seeds)} of {args.seeds})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
