"""The checkpoint round-trip table of docs/checkpoint.md: save each stage on N ranks, load at M ranks into every
stage, continue, and compare bit for bit with DP continued in memory from the same step (no files).

A cell counts the resuming stages (of 4) whose final 16-bit weights, master, m, v, skip decisions and loss scales
equal DP's. Exit status 1 if any cell is short.

Usage: ``python benchmarks/checkpoint_table.py [--units 40,17,5] [--dtype fp16] [--out FILE.md]``

``--tamper``: instead, the tampering table. A root with two complete steps (ZeRO-2 on 3 ranks, fp16) is damaged
one byte at a time, one bit flipped (bit ``i mod 8`` of byte i), in the files loading the root reads: every byte
of ``latest`` and of the newest step's ``metadata.json``, every 16th byte of its rank files (each of which the
SHA-256 in the metadata covers alike; ``--stride 1`` flips them all); each damaged root is
loaded and the outcome counted: refused (CheckpointError), or loaded exactly the state of one of its complete
steps (undetectable by design and harmless: see docs/checkpoint.md). Exit status 1 if any load returned another
state or raised anything else.
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


def _state(ck) -> tuple:
    s = ck.state
    return (tuple(a.tobytes() for k in ("weights16", "master", "m", "v") for a in getattr(s, k)), s.adam_step,
            s.loss_scale, s.clean_steps, s.steps_done)


def tamper_table(stride: int = 16) -> tuple[str, int]:
    """The tampering table (module doc) and the number of loads that went wrong."""
    import shutil
    from zero_stages.checkpoint.format import CheckpointError
    scaling = LossScaling("dynamic", init_scale=8.0, growth_interval=4)
    bad, lines = 0, ["| file | bytes | flipped | refused | loaded a complete step | wrong |",
                     "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        run_training("zero2", training_job(3, 2, "fp16", 1, "model", (7, 5), loss_scaling=scaling), root, 1)
        good = {_state(load_checkpoint(root / d)) for d in ("step-000001", "step-000002")}
        files = [Path("latest")] + sorted(p.relative_to(root) for p in (root / "step-000002").iterdir())
        for name in files:
            original = (root / name).read_bytes()
            counts = [0, 0, 0]
            for i in range(0, len(original), stride if name.suffix == ".npz" else 1):
                damaged = bytearray(original)
                damaged[i] ^= 1 << (i % 8)
                (root / name).write_bytes(bytes(damaged))
                try:
                    counts[1 if _state(load_checkpoint(root)) in good else 2] += 1
                except CheckpointError:
                    counts[0] += 1
            (root / name).write_bytes(original)
            bad += counts[2]
            lines.append(f"| `{name.as_posix()}` | {len(original):,} | {sum(counts):,} | {counts[0]:,} | {counts[1]:,} | "
                         f"{counts[2]:,} |")
    return "\n".join(lines), bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="40,17,5")
    parser.add_argument("--dtype", default="fp16", choices=("bf16", "fp16"))
    parser.add_argument("--tamper", action="store_true", help="the tampering table instead (module doc)")
    parser.add_argument("--stride", type=int, default=16, help="with --tamper: flip every K-th byte of rank files")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.tamper:
        text, bad = tamper_table(max(1, args.stride))
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return 1 if bad else 0
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
