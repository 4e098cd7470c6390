"""``ringemu zero`` (train every stage, check parity with DP) and ``ringemu memory`` (size-only table).

GB = 10^9 bytes, printed with one decimal rounded half-up as the lesson prints them
(:func:`ringemu.units.format_gb`); JSON carries the exact integers. Every flag is checked as it is parsed, so a
bad value is reported under the flag's own name (``--ranks``, ``--params``, ...), in one line, with exit 2.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from decimal import Decimal
from fractions import Fraction

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.backends.base import NATIVE, communicator_algorithms
from ringemu.blocks import EXACT_LIMITS
from ringemu.checks import parse_number
from ringemu.units import GB, format_gb

from .api import (DEFAULT_UNIT_SIZES, MAX_SIZE_ONLY_RANKS, MAX_TRAINING_RANKS, MAX_TRAINING_STEPS, run_size_only,
                  training_job)
from .checkpoint import load_checkpoint, resume_job, run_training
from .closed_forms import STAGES
from .flat import MAX_PSI
from .precision import LOSS_SCALING_KINDS, WIRE_DTYPES, LossScaling
from .report import OVERFLOW_LABEL, StageReport, stage_json
from .workload import GRADIENT_SOURCES

__all__ = ["register", "zero_command", "memory_command", "BACKENDS", "NO_RATIO", "NO_STEP_RATIO", "MAX_CARD_GB"]

BACKENDS = ("emulator", "torch")
NO_RATIO = "n/a (DP sends nothing)"  # printed when DP sends no elements (N = 1, or --steps 0)
NO_STEP_RATIO = "n/a (no step was taken)"  # printed when every step was skipped
MAX_CARD_GB = 10 ** 12  # GB: a thousand exabytes


def _integer(minimum: int, maximum: int | None = None):
    """An argparse ``type``: an integer in [minimum, maximum]; argparse names the flag in the error."""
    allowed = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {value}")
        return value

    return parse


def _positive(what: str):
    """An argparse ``type``: a finite number > 0 (``what`` names it in the error: "number of seconds")."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be a finite {what} > 0; got {text!r}")
        return value

    return parse


def _card_gb(text: str) -> Decimal:
    """An argparse ``type``: card memory in GB, a decimal number in (0, MAX_CARD_GB] kept exact (``80``, ``40.5``,
    ``1e3``); the bounds are checked before any exact arithmetic (:func:`ringemu.checks.parse_number`)."""
    try:
        parse_number(text, "card memory", 0, MAX_CARD_GB, minimum_allowed=False, unit="GB")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("card memory ", "")) from None
    return Decimal(text.strip())


def _unit_list(text: str) -> list[int]:
    """An argparse ``type``: comma-separated integers >= 1 summing to at most MAX_PSI (2^61 - 1)."""
    allowed = "comma-separated integers >= 1"
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
    if any(x < 1 for x in sizes):
        raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
    if sum(sizes) > MAX_PSI:
        raise argparse.ArgumentTypeError(f"must sum to at most {MAX_PSI:_} parameters; got {sum(sizes):_}")
    return sizes


def _ratio_text(ratio: str | None) -> str:
    return NO_RATIO if ratio is None else ratio


def register(subparsers) -> None:
    z = subparsers.add_parser("zero", help="train DP / ZeRO-1 / ZeRO-2 / ZeRO-3 on N emulated ranks; parity with DP")
    z.add_argument("--stage", choices=(*STAGES, "all"), default=None,
                   help="the stage to train beside DP (default all; with --resume, the checkpoint's)")
    z.add_argument("--ranks", type=_integer(1, MAX_TRAINING_RANKS), default=None,
                   help=f"N, the data-parallel degree (1 to {MAX_TRAINING_RANKS}); required unless --resume gives it")
    z.add_argument("--steps", type=_integer(0, MAX_TRAINING_STEPS), default=3,
                   help=f"training steps (0 to {MAX_TRAINING_STEPS:,}; default 3)")
    z.add_argument("--dtype", choices=WIRE_DTYPES, default=None, help="16-bit weight and gradient type (default bf16)")
    z.add_argument("--seed", type=_integer(0), default=None, help="seed of the model and data (default 0)")
    z.add_argument("--grads", choices=GRADIENT_SOURCES, default=None,
                   help="gradients from the MLP (default), or fixed-seed integer blocks")
    z.add_argument("--units", type=_unit_list, default=None,
                   help=f"unit sizes, comma-separated (default {','.join(map(str, DEFAULT_UNIT_SIZES))})")
    z.add_argument("--loss-scaling", choices=LOSS_SCALING_KINDS, default=None,
                   help="default: dynamic for fp16, none for bf16")
    z.add_argument("--init-scale", type=_positive("number"), default=None,
                   help="initial (or static) loss scale (default 2^16); fp16 uses dynamic scaling unless "
                        "--loss-scaling says otherwise")
    z.add_argument("--backend", choices=BACKENDS, default="emulator",
                   help="emulator (in-process) or torch (N gloo processes on 127.0.0.1, checked against the emulator)")
    _algorithm_argument(z)
    z.add_argument("--torch-algorithm", choices=(NATIVE, *communicator_algorithms()), default=None,
                   help="torch backend: a registry schedule over send/recv (default: --algorithm, the emulator's "
                        "summation order), or native, the engine's own collectives (gloo's order)")
    z.add_argument("--timeout", type=_positive("number of seconds"), default=None,
                   help="torch backend: seconds before a stage's run is declared hung and its processes are killed "
                        "(default 300)")
    z.add_argument("--checkpoint", metavar="DIR", default=None,
                   help="save a sharded checkpoint of --stage into DIR (one file per rank) every --save-every steps")
    z.add_argument("--save-every", metavar="K", type=_integer(1, MAX_TRAINING_STEPS), default=None,
                   help="steps between checkpoints (with --checkpoint)")
    z.add_argument("--resume", metavar="DIR", default=None,
                   help="continue from a checkpoint (its latest step, or a step directory) for --steps more steps, "
                        "at --ranks and --stage (default: the checkpoint's); model, data and settings come from it")
    z.add_argument("--json", action="store_true")
    z.set_defaults(handler=zero_command)

    m = subparsers.add_parser("memory", help="size-only model-state memory and traffic per rank of the four stages")
    size = m.add_mutually_exclusive_group(required=True)
    size.add_argument("--params", type=_integer(1, MAX_PSI),
                      help=f"Ψ, the parameter count (1 to {MAX_PSI:_} = 2^61 - 1), as one unit")
    size.add_argument("--units", type=_unit_list,
                      help="Ψ as unit (layer) sizes, comma-separated: each unit is sharded and, in ZeRO-3, gathered "
                           "on its own, so the peak shows the largest units in flight")
    m.add_argument("--ranks", type=_integer(1, MAX_SIZE_ONLY_RANKS), required=True,
                   help=f"N, the data-parallel degree (1 to {MAX_SIZE_ONLY_RANKS})")
    m.add_argument("--gpu-gb", type=_card_gb, default=Decimal(80),
                   help="card memory in GB (10^9 B), a decimal number; default 80")
    m.add_argument("--dtype", choices=WIRE_DTYPES, default="bf16")
    _algorithm_argument(m)
    m.add_argument("--json", action="store_true")
    m.set_defaults(handler=memory_command)


def _algorithm_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algorithm", choices=communicator_algorithms(), default=DEFAULT_ALGORITHM,
                   help=f"the collectives' algorithm, from the catalog (default {DEFAULT_ALGORITHM}; "
                        f"`ringemu compare` lists them)")


def _print_stage(report: StageReport, info: dict) -> None:
    n = report.n_ranks
    parity = info["parity_with_dp"]
    print(f"\n== {report.name}: parity with DP "
          + ("NOT CHECKED (no step was taken)" if parity is None else "yes" if parity else
             f"NO ({'; '.join(info['parity_mismatches'][:4])})"))
    cats = list(info["memory_by_category"][0])
    print("memory per rank, bytes current/peak")
    print("rank  " + "  ".join(f"{c:>13}" for c in cats) + f"  {'peak total':>11}")
    for r in range(n):
        row = info["memory_by_category"][r]
        cells = "  ".join(f"{row[c]['current']:>6}/{row[c]['peak']:<6}" for c in cats)
        print(f"{r:>4}  {cells}  {report.peak_bytes_per_rank[r]:>11}")
    ratio = NO_STEP_RATIO if parity is None else _ratio_text(info["traffic_ratio_to_dp"])
    print(f"traffic sent per rank over {report.steps} step(s), ratio to DP {ratio}")
    for label, t in report.traffic_by_label.items():
        per = t["sent_bytes_per_rank"]
        shown = f"{per[0]} B" if len(set(per)) == 1 else f"{per} B"
        note = "  [not in the total]" if label == OVERFLOW_LABEL else ""
        print(f"  {label:<22} {shown} (elements {t['sent_elements_per_rank'][0]}, "
              f"padding {t['padding_elements_per_rank'][0]}){note}")


def _torch_command(args, units, scaling) -> int:
    from zero_stages.torch.torch_zero import run_zero_on_torch  # torch is an optional extra
    out = run_zero_on_torch(args.stage, args.ranks, args.steps, args.dtype, args.seed, args.grads, args.timeout,
                            unit_sizes=units, loss_scaling=scaling, algorithm=args.torch_algorithm or args.algorithm)
    ok = all(e["parity_with_dp"] and e["parity_with_emulator"] is not False for e in out["stages"])
    if args.json:
        print(json.dumps(out))
        return 0 if ok else 1
    print(f"torch.distributed ({out['torch_backend']}, {out['algorithm']} collectives), {out['ranks']} processes, "
          f"{args.grads} gradients, Ψ = {out['psi']}, {out['steps']} steps, {out['dtype']}")
    print(f"{'stage':<6} {'parity with DP':>15} {'parity with emulator':>21} {'sent B/rank':>14} {'ratio to DP':>12}")
    for e in out["stages"]:
        print(f"{e['name']:<6} {'yes' if e['parity_with_dp'] else 'NO':>15} "
              f"{'yes' if e['parity_with_emulator'] else 'NO':>21} {max(e['traffic_sent_bytes_per_rank']):>14,} "
              f"{_ratio_text(e['traffic_ratio_to_dp']):>12}")
    print(f"traffic: {out['traffic_source']}")
    return 0 if ok else 1


def _check_blocks(args) -> None:
    """``--grads blocks`` needs every sum over N ranks exact in the wire dtype (:mod:`ringemu.blocks`)."""
    limit = EXACT_LIMITS[args.dtype]
    if args.grads == "blocks" and args.ranks > limit:
        raise ValueError(f"--ranks must be at most {limit} with --grads blocks --dtype {args.dtype} (integer "
                         f"sums over N ranks stay exact in {args.dtype} only up to {limit}); got {args.ranks}")


def _check_backend_flags(args) -> None:
    """``--torch-algorithm`` and ``--timeout`` only mean something on the torch backend: refuse them elsewhere."""
    if args.backend != "torch":
        for flag, value in (("--torch-algorithm", args.torch_algorithm), ("--timeout", args.timeout)):
            if value is not None:
                raise ValueError(f"{flag} applies to --backend torch only; got it with --backend {args.backend}")
    args.timeout = 300.0 if args.timeout is None else args.timeout


def _loss_scaling(args) -> LossScaling | None:
    """The run's LossScaling from ``--loss-scaling`` and ``--init-scale``; None: the dtype's default. An
    ``--init-scale`` for a run without loss scaling would be ignored, so it is refused."""
    kind = args.loss_scaling or ("dynamic" if args.dtype == "fp16" else "none")
    if args.init_scale is not None and kind == "none":
        raise ValueError(f"--init-scale needs loss scaling; {args.dtype} runs with --loss-scaling {kind} "
                         f"(give --loss-scaling static or dynamic)")
    if args.loss_scaling is None and args.init_scale is None:
        return None
    return LossScaling(kind, **({} if args.init_scale is None else {"init_scale": args.init_scale}))


_FROM_CHECKPOINT = ("dtype", "seed", "grads", "units", "loss_scaling", "init_scale")
_DEFAULTS = {"dtype": "bf16", "seed": 0, "grads": "model", "stage": "all"}


def _checkpoint_flags(args):
    """Check --checkpoint/--save-every/--resume and fill the defaults they leave open; return the loaded
    checkpoint (or None)."""
    if (args.checkpoint is None) != (args.save_every is None):
        raise ValueError("--checkpoint and --save-every go together (where, and how often)")
    if args.backend == "torch" and (args.checkpoint or args.resume):
        raise ValueError("--checkpoint and --resume apply to --backend emulator only")
    loaded = None
    if args.resume is not None:
        given = [f"--{name.replace('_', '-')}" for name in _FROM_CHECKPOINT if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} come(s) from the checkpoint with --resume; drop them")
        loaded = load_checkpoint(args.resume)
        meta = loaded.metadata
        args.dtype, args.seed, args.grads = meta["wire_dtype"], meta["seed"], meta["grads"]
        args.units = list(meta["unit_sizes"])
        args.ranks = meta["n_ranks"] if args.ranks is None else args.ranks
        args.stage = meta["stage"] if args.stage is None else args.stage
    for name, value in _DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.ranks is None:
        raise ValueError("--ranks is required (unless --resume gives it)")
    if args.checkpoint is not None and args.stage == "all":
        raise ValueError("--checkpoint saves one stage: give --stage dp, zero1, zero2 or zero3")
    return loaded


def _train_stages(args, stages, scaling, loaded) -> dict:
    """Every stage's report; the chosen stage saves checkpoints when asked; a resumed run starts every stage
    (DP included) from the same checkpoint."""
    reports = {}
    for s in stages:
        if loaded is not None:
            job = resume_job(loaded, args.ranks, args.steps)
        else:
            job = training_job(args.ranks, args.steps, args.dtype, args.seed, args.grads, args.units,
                               loss_scaling=scaling)
        saving = args.checkpoint is not None and s == args.stage
        reports[s], writer = run_training(s, job, args.checkpoint if saving else None,
                                          args.save_every if saving else None, algorithm=args.algorithm)
        if writer is not None and not args.json:
            print(f"checkpoints of {s} written: {', '.join(str(p) for p in writer.saved) or 'none'}",
                  file=sys.stderr)
    return reports


def zero_command(args) -> int:
    loaded = _checkpoint_flags(args)
    _check_backend_flags(args)
    _check_blocks(args)
    units = args.units
    scaling = _loss_scaling(args) if loaded is None else None
    if args.backend == "torch":
        return _torch_command(args, units, scaling)
    stages = STAGES if args.stage == "all" else ("dp", args.stage) if args.stage != "dp" else ("dp",)
    reports = _train_stages(args, stages, scaling, loaded)
    dp = reports["dp"]
    shown = STAGES if args.stage == "all" else (args.stage,)
    infos = {s: stage_json(reports[s], dp) for s in shown}
    taken = sum(not skipped for skipped in dp.skipped_steps)
    no_step = args.steps > 0 and taken == 0
    if no_step:  # nothing was trained: equal untrained states are no evidence, and the traffic is not a step's
        for info in infos.values():
            info.update(parity_with_dp=None, traffic_ratio_to_dp=None)
    out = {"ranks": dp.n_ranks, "steps": dp.steps, "steps_taken": taken, "dtype": dp.wire_dtype, "seed": args.seed,
           "grads": args.grads, "algorithm": args.algorithm, "unit_sizes": list(dp.unit_sizes), "psi": dp.psi,
           "parity_checked": not no_step, "resumed_from": None if loaded is None else str(loaded.directory),
           "first_step": 0 if loaded is None else loaded.state.steps_done,
           "stages": [infos[s] for s in shown]}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.grads} gradients, Ψ = {dp.psi} in units {list(dp.unit_sizes)}, N = {dp.n_ranks}, "
              f"{dp.steps} steps, {dp.wire_dtype}, seed {args.seed}, {args.algorithm} collectives; skipped steps "
              f"{dp.skipped_steps}")
        if loaded is not None:
            print(f"resumed from {loaded.directory} ({loaded.metadata['stage']} on {loaded.metadata['n_ranks']} "
                  f"ranks, after step {loaded.state.steps_done}); DP resumed from the same checkpoint")
        for s in shown:
            _print_stage(reports[s], infos[s])
    if no_step:
        print(f"ringemu: failed: no step was taken: all {args.steps} steps were skipped (loss-scale overflow at "
              f"scale {dp.loss_scales[0]:g}); parity with DP was NOT checked (try a smaller --init-scale)",
              file=sys.stderr)
        return 1
    return 0 if all(i["parity_with_dp"] for i in infos.values()) else 1


def memory_command(args) -> int:
    card = Fraction(args.gpu_gb) * GB  # bytes, exact
    rows = []
    size = {"unit_sizes": args.units} if args.units else {"psi": args.params}
    for s in STAGES:
        rep = run_size_only(s, args.ranks, wire_dtype=args.dtype, algorithm=args.algorithm, **size)
        worst = max(rep.model_state_bytes_per_rank)
        rows.append({
            "name": s,
            "model_state_bytes_per_rank": rep.model_state_bytes_per_rank,
            "model_state_padding_bytes_per_rank": rep.model_state_padding_bytes_per_rank,
            "model_state_gb": format_gb(worst),
            "traffic_sent_bytes_per_rank": rep.traffic_sent_bytes_per_rank,
            "traffic_sent_elements_per_rank": rep.traffic_sent_elements_per_rank,
            "traffic_gb": format_gb(max(rep.traffic_sent_bytes_per_rank)),
            "peak_bytes_per_rank": rep.peak_bytes_per_rank,
            "fits": worst <= card,
        })
    psi = sum(args.units) if args.units else args.params
    out = {"params": psi, "unit_sizes": args.units or [psi], "ranks": args.ranks, "gpu_gb": f"{args.gpu_gb:f}",
           "dtype": args.dtype, "algorithm": args.algorithm, "stages": rows}
    if args.json:
        print(json.dumps(out))
        return 0
    shape = f" in {len(args.units)} units" if args.units else ""
    print(f"Ψ = {psi:,} parameters{shape}, N = {args.ranks} ranks, {args.dtype}, {args.algorithm} collectives, "
          f"card {args.gpu_gb:f} GB "
          f"(GB = 10^9 B); model states per rank (fp32 master + m + v = 12 B, 16-bit weight and gradient 2 B each)")
    print(f"{'stage':<6} {'model states B/rank':>22} {'GB':>8} {'padding B':>10} {'fits':>5} "
          f"{'traffic B/rank/step':>22} {'GB':>7} {'peak B/rank':>18}")
    for r in rows:
        print(f"{r['name']:<6} {max(r['model_state_bytes_per_rank']):>22,} {r['model_state_gb']:>8} "
              f"{max(r['model_state_padding_bytes_per_rank']):>10,} {'yes' if r['fits'] else 'no':>5} "
              f"{max(r['traffic_sent_bytes_per_rank']):>22,} {r['traffic_gb']:>7} "
              f"{max(r['peak_bytes_per_rank']):>18,}")
    print("peak: model states plus transient buffers (gathered parameters, gradient buckets, the fp32 averaged "
          "gradient of one unit)" + ("" if args.units else "; Ψ is one unit here, so ZeRO-3 gathers all of it at "
                                     "once: give --units for per-layer peaks (lesson claim M10)"))
    return 0
