"""Mutation testing with mutmut (pinned: ``mutmut==3.8.1``), one part of the code at a time, in a scratch copy.

    python tests/mutation/mutmut_parts.py --part checkpoint            # one part
    python tests/mutation/mutmut_parts.py --part all --json out.json   # every part, one after another

mutmut needs its own environment (it is not a dependency of ringemu): ``python3 -m venv /opt/venv-mutmut &&
/opt/venv-mutmut/bin/pip install mutmut==3.8.1`` with ringemu's dependencies importable there (``pip install
-e '.[test]'`` into the same venv), then ``--mutmut /opt/venv-mutmut/bin/mutmut``. Each part names the files
mutated and the test files run against them; mutmut plants every mutation its operators make in those files
(operators, constants, comparisons, arguments, return values ...), runs the tests that cover each mutated
function, and reports it killed (a test failed), survived, timed out, or not covered (no test reaches it). The
score printed is killed / all mutants: any other outcome is a miss (a mutant no test reaches, a timeout, a
crash), and so is one reviewed as equivalent (``equivalent.py`` lists each with its reason; they are
reported apart from the survivors, and the score without them is printed beside).
The numba kernels (``kernels.py``, ``_jit.py``, ``_adam_kernel.py``) are never mutated: mutmut's trampolines
cannot run inside ``@jit`` code; ``tests/mutation/run.py`` plants bugs there by hand.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from equivalent import EQUIVALENT  # this directory: the reviewed equivalent mutants

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["PARTS", "run_part", "main"]

# the orders' own tests, and the engines' recorded bits (benchmarks/results/engine_records.json) replayed
_ORDER_TESTS = ["tests/test_ompi_orders.py", "tests/test_mpich_orders.py", "tests/test_gloo_xla_orders.py",
                "tests/test_algorithms.py", "tests/test_algorithms_oracle.py", "tests/test_engine_records.py",
                "tests/test_nccl_tree.py", "tests/test_registry_contracts.py"]

# part -> (files mutated, test files run); the tests are those that exercise the files, as a person would pick them
PARTS = {
    "checkpoint": (["zero_stages/checkpoint/validate.py", "zero_stages/checkpoint/root.py",
                    "zero_stages/checkpoint/format.py"],
                   ["tests/test_checkpoint.py", "tests/test_checkpoint_trust.py", "tests/test_checkpoint_root.py",
                    "tests/test_checkpoint_fields.py"]),
    "faults-spec": (["ringemu/faults/spec.py", "ringemu/faults/plan.py"],
                    ["tests/test_faults.py", "tests/test_fault_spec.py",
                     "tests/test_refusals.py::test_zero_fault_specs_the_run_lacks_exit_2",
                     "tests/test_refusals.py::test_fault_specs_refuse_repeated_and_out_of_range_fields_when_parsed"]),
    "memory-guard": (["ringemu/memory_guard.py"],
                     ["tests/test_memory_guard.py", "tests/test_refusals.py::test_the_memory_guard_honours_ulimit_v",
                      "tests/test_refusals.py::test_address_space_left_reads_the_soft_limit",
                      "tests/test_refusals.py::test_address_space_left_is_the_limit_less_vmsize",
                      "tests/test_refusals.py::test_the_run_estimate_is_the_documented_sum"]),
    "activations": (["zero_stages/memory/activations.py"],
                    ["tests/test_activations.py",
                     "tests/test_refusals.py::test_memory_activation_sizes_are_bounded_before_any_work"]),
    "core-layout": (["ringemu/layout.py", "ringemu/checks.py"],
                    ["tests/test_layout.py", "tests/test_input_checks.py", "tests/test_checks.py"]),
    "proofs-core": (["proofs/exact.py", "proofs/rounding.py", "proofs/ids.py", "proofs/claim.py"],
                    ["tests/test_proofs.py", "tests/test_proofs_rules.py", "tests/test_proofs_evaluate.py"]),
    # the modules of the last round: detectors, the size-only world, compare/topology, conformance, rollback, the
    # lesson's data, the engine orders and the catalog of claims
    "faults-detect": (["ringemu/faults/locate.py", "ringemu/faults/link.py", "ringemu/faults/report.py"],
                      ["tests/test_faults_locate.py", "tests/test_faults_report.py", "tests/test_faults_explain.py",
                       "tests/test_faults.py",
                       "tests/test_fault_spec.py"]),
    "size-only": (["ringemu/worlds/size_only.py", "ringemu/ledger_counts.py"],
                  ["tests/test_size_only_world.py", "tests/test_ledger_counts.py", "tests/test_partition.py"]),
    "compare-topology": (["ringemu/compare.py", "ringemu/topology.py"],
                         ["tests/test_compare.py", "tests/test_topology.py",  # less the lesson's two anchors (19 s)
                          "--deselect=tests/test_compare.py::test_done_when_the_lesson_anchor_on_eight_nodes",
                          "--deselect=tests/test_compare.py::test_zero_latency_ring_is_the_lessons_division"]),
    "conformance": (["ringemu/testing/conformance.py", "ringemu/testing/conformance_report.py"],
                    ["tests/test_conformance.py", "tests/test_testing.py"]),
    "rollback": (["zero_stages/step_guard.py", "zero_stages/job.py"],
                 ["tests/test_faults_zero.py", "tests/test_zero_api.py", "tests/test_job.py"]),
    "lesson-data": (["zero_stages/lesson/memory_grid.py", "zero_stages/lesson/page.py"],
                    ["tests/test_lesson_page.py", "tests/test_lesson_layout.py", "tests/test_progress.py"]),
    # the engine orders the last round re-modelled on the running engines (gloo at N >= 4, Open MPI's ring, MPICH's
    # halving-doubling, NCCL's trees, XLA's in-process sum), and the rest of the engines' orders
    "engine-orders": ([f"ringemu/algorithms/{name}.py" for name in (
                          "gloo", "ompi_allreduce", "mpich_allreduce", "nccl_tree", "xla_cpu")], _ORDER_TESTS),
    "engine-orders-rest": ([f"ringemu/algorithms/{name}.py" for name in (
                               "nccl_ring", "ompi_common", "ompi_allgather", "ompi_reduce_scatter", "ompi_reduce",
                               "ompi_decision", "_mpich", "mpich_allgather", "mpich_reduce_scatter",
                               "mpich_decision")], _ORDER_TESTS),
    "textbook-orders": ([f"ringemu/algorithms/{name}.py" for name in (
                            "__init__", "_steps", "ring", "bidirectional", "direct", "tree", "halving_doubling",
                            "recursive_doubling", "hierarchical")],
                        ["tests/test_algorithms.py", "tests/test_algorithms_oracle.py", "tests/test_schedule.py",
                         "tests/test_algorithm_plumbing.py"]),
    "core-schedule": (["ringemu/schedule.py", "ringemu/ledger.py", "ringemu/blocks.py", "ringemu/units.py",
                       "ringemu/partition.py"],
                      ["tests/test_schedule.py", "tests/test_ledger.py", "tests/test_blocks.py",
                       "tests/test_partition.py", "tests/test_layout.py"]),
    "proofs-claims": (["proofs/claims_comm.py", "proofs/claims_memory.py", "proofs/claims_map.py",
                       "proofs/claims_beyond.py", "proofs/runs.py", "proofs/report.py", "proofs/catalog.py"],
                      ["tests/test_proofs.py", "tests/test_proofs_rules.py", "tests/test_proofs_evaluate.py",
                       "tests/test_proofs_bite.py", "tests/test_proofs_cli.py"]),
}

_CONFIG = """
[mutmut]
source_paths =
    ringemu
    zero_stages
    proofs
only_mutate =
{mutate}
also_copy =
    examples
    benchmarks
pytest_add_cli_args_test_selection =
{tests}
pytest_add_cli_args =
    -p
    no:cacheprovider
    -q
"""


def _scratch(part: str) -> Path:
    work = Path(tempfile.mkdtemp(prefix=f"ringemu-mutmut-{part}-"))
    for name in ("ringemu", "zero_stages", "proofs", "tests", "examples", "benchmarks"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("setup.cfg", "pyproject.toml"):
        shutil.copy(ROOT / name, work / name)
    return work


def _configure(part: str, work: Path) -> None:
    """The scratch copy's setup.cfg: the project's, and mutmut's section for the part."""
    mutate, tests = PARTS[part]
    text = (ROOT / "setup.cfg").read_text() + _CONFIG.format(mutate="\n".join(f"    {m}" for m in mutate),
                                                             tests="\n".join(f"    {t}" for t in tests))
    (work / "setup.cfg").write_text(text)


def _env(work: Path) -> dict:
    env = dict(os.environ, HYPOTHESIS_PROFILE="mutation", NUMBA_CACHE_DIR=str(work / "numba-cache"))
    env.pop("PYTHONPATH", None)
    return env


def run_part(part: str, mutmut: str, children: int) -> dict:
    """Run mutmut on one part in a scratch copy; the counts of each outcome, the score and the survivors."""
    work = _scratch(part)
    _configure(part, work)
    start = time.perf_counter()
    run = subprocess.run([mutmut, "run", "--max-children", str(children)], cwd=work, env=_env(work),
                         capture_output=True, text=True)
    return _results(part, work, mutmut, time.perf_counter() - start, run)


def rerun_part(part: str, work: Path, mutmut: str, children: int) -> dict:
    """Bring an earlier run's scratch copy ``work`` up to date and run its misses again (every mutant not killed);
    a mutant once killed stays killed, since tests are only ever added to catch one. The tests are copied as they
    are now; so is the code: mutmut re-mutates every function whose source changed (its verdicts start afresh)
    and, the call map being rebuilt, runs those new mutants first. Where the part's list of test files changed,
    mutmut itself discards every verdict: then every mutant runs again."""
    before_config = (work / "setup.cfg").read_text()
    before = _results(part, work, mutmut, 0.0, None)
    shutil.copytree(ROOT / "tests", work / "tests", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _configure(part, work)  # the part's test files as they are now
    start = time.perf_counter()
    if _sync_code(work):  # re-mutate what changed, with a call map (test -> functions) made afresh
        (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        subprocess.run([mutmut, "run", "--max-children", str(children)], cwd=work, env=_env(work),
                       capture_output=True, text=True)
    present = {line.split(":")[0].strip() for line in subprocess.run(
        [mutmut, "results", "--all", "true"], cwd=work, env=_env(work), capture_output=True, text=True).stdout
        .splitlines() if ":" in line}
    names = [s.split(" ")[0] for s in before["survivors"] if not s.endswith("(not checked)")] + [
        name for name in EQUIVALENT if any(name.startswith(_module(f) + ".") for f in PARTS[part][0])]
    names = [name for name in names if name in present]  # a changed function's old mutants are gone
    if (work / "setup.cfg").read_text() != before_config:
        names = []  # a new selection: a full run
    run = subprocess.run([mutmut, "run", "--max-children", str(children), *names], cwd=work, env=_env(work),
                         capture_output=True, text=True)
    return _results(part, work, mutmut, time.perf_counter() - start, run)


def _sync_code(work: Path) -> bool:
    """Copy every source file that differs from the scratch copy's into it; whether any did."""
    changed = False
    for name in ("ringemu", "zero_stages", "proofs", "examples", "benchmarks"):
        for source in (ROOT / name).rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            target = work / source.relative_to(ROOT)
            if not target.exists() or target.read_bytes() != source.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
                changed = True
    return changed


def _module(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _results(part: str, work: Path, mutmut: str, seconds: float, run) -> dict:
    mutate, tests = PARTS[part]
    listing = subprocess.run([mutmut, "results", "--all", "true"], cwd=work, env=_env(work), capture_output=True,
                             text=True).stdout
    counts: dict[str, int] = {}
    survivors = []
    for line in listing.splitlines():
        m = re.match(r"\s*(\S+): (.+)$", line)
        if not m:
            continue
        name, status = m.group(1), m.group(2)
        if status == "survived" and name in EQUIVALENT:
            status = "equivalent"  # reviewed: no input tells it from the original (tests/mutation/equivalent.py)
        counts[status] = counts.get(status, 0) + 1
        if status not in ("killed", "equivalent"):
            survivors.append(f"{name} ({status})")
    killed = counts.get("killed", 0)
    missed = sum(counts.values()) - killed  # every other outcome (segfault and suspicious included) is a miss
    equivalent = counts.get("equivalent", 0)
    log = "" if run is None else (run.stdout + run.stderr)[-3000:]
    return {"part": part, "files": mutate, "tests": tests, "counts": counts, "killed": killed,
            "missed": missed, "equivalent": equivalent,
            "score_without_equivalent": None if killed + missed == equivalent else
            killed / (killed + missed - equivalent),
            "score": None if killed + missed == 0 else killed / (killed + missed),
            "seconds": round(seconds, 1), "survivors": survivors, "scratch": str(work),
            "returncode": None if run is None else run.returncode, "log_tail": log}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=(*PARTS, "all"), required=True)
    parser.add_argument("--mutmut", default=shutil.which("mutmut") or "mutmut", help="the mutmut executable")
    parser.add_argument("--children", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--json", type=Path, default=None, help="write every part's result here")
    parser.add_argument("--rerun", type=Path, default=None, metavar="SCRATCH",
                        help="run the misses of an earlier run of --part again, in its scratch copy, "
                             "against the tests as they are now")
    args = parser.parse_args(argv)
    if args.rerun and args.part == "all":
        parser.error("--rerun takes one --part")
    results = []
    for part in (PARTS if args.part == "all" else [args.part]):
        r = (rerun_part(part, args.rerun, args.mutmut, args.children) if args.rerun else
             run_part(part, args.mutmut, args.children))
        results.append(r)
        score = "n/a" if r["score"] is None else f"{100 * r['score']:.1f} %"
        rest = r["score_without_equivalent"]
        rest = "n/a" if rest is None else f"{100 * rest:.1f} %"
        print(f"{part:<14} killed {r['killed']:>4} of {r['killed'] + r['missed']:>4}  score {score:>7} "
              f"({rest} without the equivalent)  {r['seconds']:>7.1f} s  {r['counts']}", flush=True)
        if r["score"] is None:
            print(r["log_tail"], file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["score"] is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
