"""The checkpoint round-trip table of docs/checkpoint.md: save each stage on N ranks, load at M ranks into every
stage, continue, and compare bit for bit with DP continued in memory from the same step (no files).

A cell counts the resuming stages (of 4) whose final 16-bit weights, master, m, v, skip decisions and loss scales
equal DP's. Exit status 1 if any cell is short.

Usage: ``python benchmarks/checkpoint_table.py [--units 40,17,5] [--dtype fp16] [--out FILE.md]``
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zero_stages.api import STAGES, run_job, training_job  # noqa: E402
from zero_stages.precision import LossScaling  # noqa: E402
from zero_stages.checkpoint.save_load import load_checkpoint, resume_job, run_training, state_of_report  # noqa: E402

RANKS = (1, 3, 8)
SAVED_AT, MORE = 2, 2


def _equal(a, b) -> bool:
    return all(getattr(a, k).tobytes() == getattr(b, k).tobytes() for k in ("weights16", "master", "m", "v")) \
        and a.skipped_steps == b.skipped_steps and a.loss_scales == b.loss_scales


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="40,17,5")
    parser.add_argument("--dtype", default="fp16", choices=("bf16", "fp16"))
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    units = tuple(int(x) for x in args.units.split(","))
    scaling = LossScaling("dynamic", init_scale=256.0) if args.dtype == "fp16" else None  # steps taken at N <= 8
    setting = dict(wire_dtype=args.dtype, seed=0, grads="model", unit_sizes=units, loss_scaling=scaling)
    references, skipped = {}, 0
    for n in RANKS:
        dp = run_job("dp", training_job(n, SAVED_AT, **setting))
        state = state_of_report(dp, training_job(n, 0, **setting).loss_scaling)
        skipped += sum(dp.skipped_steps)
        for m in RANKS:
            job = dataclasses.replace(training_job(m, MORE, **setting), resume=state, first_step=SAVED_AT)
            references[n, m] = run_job("dp", job)
            skipped += sum(references[n, m].skipped_steps)
    lines = [f"Units {list(units)}, {args.dtype}, model gradients: saved after step {SAVED_AT} on N ranks, loaded at M "
             f"ranks, {MORE} more steps; a cell counts the stages (of {len(STAGES)}) that resumed to DP's bits.", "",
             "| saved by | N | " + " | ".join(f"M = {m}" for m in RANKS) + " |",
             "|---|---:|" + "---:|" * len(RANKS)]
    short = 0
    for stage_a in STAGES:
        for n in RANKS:
            cells = []
            with tempfile.TemporaryDirectory() as root:
                run_training(stage_a, training_job(n, SAVED_AT, **setting), root, SAVED_AT)
                checkpoint = load_checkpoint(root)
                for m in RANKS:
                    good = sum(_equal(run_job(stage_b, resume_job(checkpoint, m, MORE)), references[n, m])
                               for stage_b in STAGES)
                    short += len(STAGES) - good
                    cells.append(f"{good}/{len(STAGES)}")
            lines.append(f"| {stage_a} | {n} | " + " | ".join(cells) + " |")
    lines += ["", f"Steps skipped on loss-scale overflow across the DP references: {skipped} of "
                  f"{len(RANKS) * SAVED_AT + len(RANKS) ** 2 * MORE}" + (" (fp16, dynamic scaling from 256)"
                                                                       if scaling else "")]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
