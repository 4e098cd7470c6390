"""Mutation testing on demand (not in CI): plant single-point bugs one at a time and see whether the tests notice.

Each mutant replaces one exact snippet of one source file (the run stops if a snippet is missing: the list must be
kept in step with the code) and runs the test files that should catch it, in a scratch copy of the repository (the
working tree is never edited). A mutant is *killed* when pytest fails. The score is killed / planted.

Usage: ``python tests/mutation/run.py [--only NAME ...] [--list]``
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = [
    Mutant("zero3 backward prefetch under the forward label", "zero_stages/stages/zero3.py",
           'gather_unit(comm, job, arena, weights16, mine, gathered, u - 1, "param_all_gather_bwd")',
           'gather_unit(comm, job, arena, weights16, mine, gathered, u - 1, "param_all_gather_fwd")',
           ("tests/test_bites.py::test_traffic_per_label_per_rank_matches_its_closed_form",)),
    Mutant("zero3 forward prefetch skipped", "zero_stages/stages/zero3.py",
           '''        if u + 1 < len(units):
            gather_unit(comm, job, arena, weights16, mine, gathered, u + 1, "param_all_gather_fwd")  # prefetch
        ctx.forward(u, gathered[u])
        release_unit(arena, gathered, u)''',
           '''        ctx.forward(u, gathered[u])
        release_unit(arena, gathered, u)
        if u + 1 < len(units):
            gather_unit(comm, job, arena, weights16, mine, gathered, u + 1, "param_all_gather_fwd")''',
           ("tests/test_bites.py::test_zero3_forward_phase_peak_holds_the_prefetched_unit",)),
    Mutant("Adam bias correction without its square root", "zero_stages/adam.py",
           "return c.lr / bias_correction1, bias_correction2 ** 0.5",
           "return c.lr / bias_correction1, bias_correction2",
           ("tests/test_bites.py::test_first_adam_step_moves_each_weight_by_lr_against_the_gradient_sign",)),
    Mutant("loss scaler clean count not reset on overflow", "zero_stages/precision.py",
           '''            self.scale *= self.config.backoff_factor
            self._clean_steps = 0''',
           '''            self.scale *= self.config.backoff_factor''',
           ("tests/test_bites.py::test_loss_scaler_resets_its_clean_count_on_overflow",)),
    Mutant("GB rounding ties to even", "ringemu/units.py",
           "rounded = (abs(value) * scale + Fraction(1, 2)).__floor__()",
           "rounded = round(abs(value) * scale)", ("tests/test_bites.py::test_gb_rounding_breaks_ties_upwards",)),
    Mutant("JIT-off fp16 conversion keeps signalling NaNs", "ringemu/_jit.py",
           "            value = np.uint32(value.view(np.uint32) | np.uint32(0x00400000)).view(np.float32)",
           "            pass", ("tests/test_bites.py::test_jit_off_fp16_conversion_quiets_signalling_nans",)),
    Mutant("cast skips quieting before astype", "zero_stages/buffers.py",
           "        src_for_astype = quiet_signalling_nans(src)", "        src_for_astype = src",
           ("tests/test_bites.py::test_jit_off_fp16_conversion_quiets_signalling_nans",)),
    Mutant("reference add takes numpy's NaN", "ringemu/reference.py",
           "    if not (left_nan.any() or right_nan.any()):", "    if True:",
           ("tests/test_robustness.py::test_modes_agree_on_nan_payloads",)),
    Mutant("average ignores the loss scale", "zero_stages/averaging.py",
           "return reduced16.astype(np.float32) / np.float32(n_ranks * loss_scale)",
           "return reduced16.astype(np.float32) / np.float32(n_ranks)",
           ("tests/test_adam_kernel.py::test_fused_update_equals_the_reference_steps",)),
    Mutant("latency without bandwidth accepted", "ringemu/cli/collective_commands.py",
           "    if args.latency_us is not None and args.bandwidth is None:", "    if False:",
           ("tests/test_robustness.py::test_ignored_flags_are_refused",)),
    Mutant("no-step run counted as parity", "zero_stages/cli/commands.py",
           "    no_step = args.steps > 0 and taken == 0", "    no_step = False",
           ("tests/test_robustness.py::test_zero_run_without_a_step_says_so_and_checks_nothing",)),
    Mutant("bench --quick overrides flags", "ringemu/cli/bench.py",
           "    if args.quick and given:", "    if False:",
           ("tests/test_robustness.py::test_ignored_flags_are_refused",)),
    Mutant("number bound checked after the exact conversion", "ringemu/checks.py",
           "    if value > hi:", "    if Fraction(value) > hi:",
           ("tests/test_robustness.py::test_inputs_that_hung_are_refused_at_once",)),
    Mutant("schedule size unbounded", "ringemu/algorithms/__init__.py",
           "    if n > MAX_SCHEDULE_RANKS:", "    if False:",
           ("tests/test_fuzz_entry_points.py::test_library_entry_point_refuses_malformed_arguments"
            "[algorithms.build]",)),
    Mutant("checkpoint checksum not verified", "zero_stages/checkpoint/format.py",
           '    if digest != expected["sha256"]:', "    if False:",
           ("tests/test_checkpoint.py::test_damaged_checkpoints_are_refused_naming_file_and_field",)),
    Mutant("resumed run restarts Adam's step count", "zero_stages/optimizer.py",
           "            self.step_count = int(resume.adam_step)", "            self.step_count = 0",
           ("tests/test_checkpoint.py::test_resharded_continuation_equals_dp",)),
    Mutant("resumed run forgets the loss scaler's clean count", "zero_stages/precision.py",
           "float(resume.loss_scale), int(resume.clean_steps)", "float(resume.loss_scale), 0",
           ("tests/test_checkpoint.py::test_loss_scaler_state_survives_a_checkpoint",)),
    Mutant("checkpoint writer saves the wrong rank's chunk", "zero_stages/checkpoint/save_load.py",
           "            own = ChunkLayout(size, flat.n_ranks).payload_slice(rank)",
           "            own = ChunkLayout(size, flat.n_ranks).payload_slice(flat.n_ranks - 1 - rank)",
           ("tests/test_checkpoint.py::test_resharded_continuation_equals_dp",)),
]


def _copy_tree(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def run(mutants, timeout: int) -> int:
    killed = 0
    with tempfile.TemporaryDirectory(prefix="ringemu-mutation-") as scratch:
        tree = Path(scratch)
        _copy_tree(tree)
        env = {**os.environ, "PYTHONPATH": str(tree), "HYPOTHESIS_PROFILE": "default"}
        files = sorted({t for m in mutants for t in m.tests})
        base = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *files],
                              cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        if base.returncode != 0:  # a mutant counts as killed only if the same tests pass without it
            raise SystemExit(f"the tests fail without any mutant:\n{base.stdout[-2000:]}")
        print(f"baseline: {', '.join(files)} pass unmutated", flush=True)
        for m in mutants:
            target = tree / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                raise SystemExit(f"mutant {m.name!r}: the snippet occurs {original.count(m.old)} times in {m.path}")
            target.write_text(original.replace(m.old, m.new))
            start = time.perf_counter()
            try:
                done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                       *m.tests], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
                verdict = "killed" if done.returncode != 0 else "SURVIVED"
            except subprocess.TimeoutExpired:
                verdict = "killed (timeout)"
            finally:
                target.write_text(original)
            killed += verdict.startswith("killed")
            print(f"{verdict:<17} {time.perf_counter() - start:6.1f} s  {m.name}  ({m.path})", flush=True)
    print(f"score: {killed} of {len(mutants)} mutants killed ({100 * killed // max(1, len(mutants))} %)")
    return 0 if killed == len(mutants) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only mutants whose name contains one of these words")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per mutant's test run")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or any(w in m.name for w in args.only)]
    if args.list:
        for m in chosen:
            print(f"{m.name}  ({m.path}; tests: {', '.join(m.tests)})")
        return 0
    return run(chosen, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
