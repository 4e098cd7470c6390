"""``ringemu zero`` (train every stage, check parity with DP); it also registers ``ringemu memory``
(:mod:`zero_stages.cli.memory_command`, the size-only table) and holds the argument parsers both use.

GB = 10^9 bytes, printed with one decimal rounded half-up as the lesson prints them
(:func:`ringemu.units.format_gb`); JSON carries the exact integers. Every flag is checked as it is parsed, so a
bad value is reported under the flag's own name (``--ranks``, ``--params``, ...), in one line, with exit 2.
"""
from __future__ import annotations

import json
import sys

from ringemu.worlds.base import NATIVE, communicator_algorithms
from ringemu.blocks import EXACT_LIMITS
from ringemu.faults.plan import FaultPlan
from ringemu.memory_guard import check_fits

from .arguments import (algorithm_argument, integer, positive, ranks_per_node_argument, unit_list,
                        zeropp_cuts)
from .memory_command import register_memory
from ..api import DEFAULT_UNIT_SIZES, MAX_TRAINING_RANKS, MAX_TRAINING_STEPS, training_bytes, training_job
from ..checkpoint.save_load import load_checkpoint, resume_job, run_training
from ..memory.closed_forms import ALL_STAGES, BEYOND_STAGES, STAGES
from .beyond import NOT_CLAIMED, PARITY_EXPECTED, beyond_info, beyond_stages, print_beyond, zeropp_config
from ..precision import LOSS_SCALING_KINDS, WIRE_DTYPES, LossScaling
from ..report import OVERFLOW_LABEL, StageReport, stage_json
from ..workload import GRADIENT_SOURCES

__all__ = ["register", "zero_command", "BACKENDS", "NO_RATIO", "NO_STEP_RATIO"]

BACKENDS = ("emulator", "torch")
NO_RATIO = "n/a (DP sends nothing)"  # printed when DP sends no elements (N = 1, or --steps 0)
NO_STEP_RATIO = "n/a (no step was taken)"  # printed when every step was skipped


def _ratio_text(ratio: str | None) -> str:
    return NO_RATIO if ratio is None else ratio


def register(subparsers) -> None:
    z = subparsers.add_parser("zero", help="train DP / ZeRO-1 / ZeRO-2 / ZeRO-3 (and hsdp, zeropp, offload) on N "
                                           "emulated ranks; parity with DP")
    z.add_argument("--stage", choices=(*ALL_STAGES, "all"), default=None,
                   help="the stage to train beside DP (default all; with --resume, the checkpoint's)")
    z.add_argument("--ranks", type=integer(1, MAX_TRAINING_RANKS), default=None,
                   help=f"N, the data-parallel degree (1 to {MAX_TRAINING_RANKS}); required unless --resume gives it")
    z.add_argument("--steps", type=integer(0, MAX_TRAINING_STEPS), default=3,
                   help=f"training steps (0 to {MAX_TRAINING_STEPS:,}; default 3)")
    z.add_argument("--dtype", choices=WIRE_DTYPES, default=None, help="16-bit weight and gradient type (default bf16)")
    z.add_argument("--seed", type=integer(0), default=None, help="seed of the model and data (default 0)")
    z.add_argument("--grads", choices=GRADIENT_SOURCES, default=None,
                   help="gradients from the MLP's backward (model, the default), or fixed-seed integer blocks, exact "
                        "in any order of addition (blocks)")
    z.add_argument("--units", type=unit_list, default=None,
                   help=f"unit sizes, comma-separated (default {','.join(map(str, DEFAULT_UNIT_SIZES))})")
    z.add_argument("--loss-scaling", choices=LOSS_SCALING_KINDS, default=None,
                   help="default: dynamic for fp16, none for bf16")
    z.add_argument("--init-scale", type=positive("number"), default=None,
                   help="initial (or static) loss scale (default 2^16); fp16 uses dynamic scaling unless "
                        "--loss-scaling says otherwise")
    z.add_argument("--backend", choices=BACKENDS, default="emulator",
                   help="emulator (in-process, default) or torch (N gloo processes on 127.0.0.1, checked against "
                        "the emulator)")
    algorithm_argument(z)
    z.add_argument("--torch-algorithm", choices=(NATIVE, *communicator_algorithms()), default=None,
                   help="torch backend: a registry schedule over send/recv (default: --algorithm, the emulator's "
                        "summation order), or native, the engine's own collectives (gloo's order)")
    z.add_argument("--timeout", type=positive("number of seconds"), default=None,
                   help="torch backend: seconds before a stage's run is declared hung and its processes are killed "
                        "(default 300)")
    z.add_argument("--checkpoint", metavar="DIR", default=None,
                   help="save a sharded checkpoint of --stage into DIR (one file per rank) every --save-every steps")
    z.add_argument("--save-every", metavar="K", type=integer(1, MAX_TRAINING_STEPS), default=None,
                   help="steps between checkpoints (with --checkpoint)")
    z.add_argument("--resume", metavar="DIR", default=None,
                   help="continue from a checkpoint (its latest step, or a step directory) for --steps more steps, "
                        "at --ranks and --stage (default: the checkpoint's); model, data and settings come from it")
    z.add_argument("--fault", action="append", metavar="SPEC", default=[],
                   help="inject a fault into the chosen stage's run, e.g. stop:rank=5,label=param_all_gather_bwd,"
                        "step=2 (grammar: docs/faults.md); repeatable; needs one --stage")
    z.add_argument("--on-fault", choices=("raise", "retry"), default="raise",
                   help="after rolling the failed step back: stop with an error (default), or run the step again")
    ranks_per_node_argument(z)
    z.add_argument("--zeropp", type=zeropp_cuts, default=None, metavar="CUTS",
                   help="zeropp: the cuts switched on, comma-separated from qwz, hpz, qgz, or none (default all)")
    z.add_argument("--json", action="store_true", help="print one JSON object on one line")
    z.set_defaults(handler=zero_command)
    register_memory(subparsers)



def _print_stage(report: StageReport, info: dict) -> None:
    n = report.n_ranks
    parity = info["parity_with_dp"]
    expected = info.get("parity_expected", True)
    print(f"\n== {report.name}: parity with DP "
          + ("NOT CHECKED (no step was taken)" if parity is None else "yes" if parity else
             f"NO ({'; '.join(info['parity_mismatches'][:4])})" if expected else
             f"no, not claimed bit for bit ({NOT_CLAIMED.get(report.name, '')})"))
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
    from ringemu.progress import progress_bar
    from ..torch import torch_zero  # torch is an optional extra

    runs = torch_zero.torch_steps(args.stage)
    with progress_bar(runs, f"zero on torch, {args.ranks} ranks", enabled=not args.json) as bar:
        out = torch_zero.run_zero_on_torch(args.stage, args.ranks, args.steps, args.dtype, args.seed, args.grads,
                                           args.timeout, unit_sizes=units, loss_scaling=scaling,
                                           algorithm=args.torch_algorithm or args.algorithm,
                                           faults=tuple(args.fault) or None, bar=bar)
    expected = out["emulator_parity_expected"]
    ok = all(e["parity_with_dp"] and (e["parity_with_emulator"] is not False or not expected) for e in out["stages"])
    if args.json:
        print(json.dumps(out))
        return 0 if ok else 1
    print(f"torch.distributed ({out['torch_backend']}, {out['algorithm']} collectives), {out['ranks']} processes, "
          f"{args.grads} gradients, Ψ = {out['psi']}, {out['steps']} steps, {out['dtype']}")
    print(f"compared: {out['compared']}; with DP on this engine, and with the emulator "
          f"({out['emulator_order']} order of addition; this engine: {out['engine_order']} order)")
    print(f"{'stage':<6} {'parity with DP':>15} {'parity with emulator':>21} {'sent B/rank':>14} {'ratio to DP':>12}")
    for e in out["stages"]:
        same = e["parity_with_emulator"]
        emulator = "yes" if same else "NO" if expected else "differs"
        print(f"{e['name']:<6} {'yes' if e['parity_with_dp'] else 'NO':>15} "
              f"{emulator:>21} {max(e['traffic_sent_bytes_per_rank']):>14,} "
              f"{_ratio_text(e['traffic_ratio_to_dp']):>12}")
    if not expected:
        print(f"emulator parity is not expected here: {out['engine_order']} adds floats in its own order, not the "
              f"ring's (docs/real_engine.md); --torch-algorithm ring or --grads blocks makes it exact")
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


def _train_stages(args, stages, scaling, loaded, plan) -> dict:
    """Every stage's report; the chosen stage saves checkpoints when asked and meets the faults; a resumed run
    starts every stage (DP included) from the same checkpoint. The chosen stage runs first, so that a failed step
    stops the command before any other run."""
    reports = {}
    for s in sorted(stages, key=lambda s: s != args.stage):
        if loaded is not None:
            job = resume_job(loaded, args.ranks, args.steps)
        else:
            job = training_job(args.ranks, args.steps, args.dtype, args.seed, args.grads, args.units,
                               loss_scaling=scaling, ranks_per_node=args.ranks_per_node,
                               options=zeropp_config(args) if s == "zeropp" else None)
        saving = args.checkpoint is not None and s == args.stage
        reports[s], writer = run_training(s, job, args.checkpoint if saving else None,
                                          args.save_every if saving else None, algorithm=args.algorithm,
                                          faults=plan if s == args.stage else None)
        if writer is not None and not args.json:
            print(f"checkpoints of {s} written: {', '.join(str(p) for p in writer.saved) or 'none'}",
                  file=sys.stderr)
    return reports


def _check_fits(args, stages, units) -> None:
    """Refuse (exit 2) a training run whose real arrays cannot fit this machine's memory; name ``ringemu memory``."""
    sizes = list(units or DEFAULT_UNIT_SIZES)
    need = sum(training_bytes(s, args.ranks, args.steps, sizes, args.dtype) for s in stages)  # all reports are kept
    shown = ",".join(map(str, sizes)) if len(sizes) <= 8 else f"<the same {len(sizes)} units>"
    check_fits(need, f"ringemu zero on {args.ranks} ranks ({', '.join(stages)}; steps: {args.steps})",
               f"ringemu memory --units {shown} --ranks {args.ranks} --dtype {args.dtype}")


def zero_command(args) -> int:
    loaded = _checkpoint_flags(args)
    _check_backend_flags(args)
    _check_blocks(args)
    units = args.units
    scaling = _loss_scaling(args) if loaded is None else None
    if args.on_fault != "raise" and not args.fault:
        raise ValueError("--on-fault needs --fault (without faults no step fails)")
    if args.fault and args.stage == "all":
        raise ValueError("--fault needs one --stage (dp, zero1, zero2 or zero3): a fault names one run's collective")
    stages = STAGES if args.stage == "all" else ("dp", args.stage) if args.stage != "dp" else ("dp",)
    stages = beyond_stages(args, loaded, stages)
    if args.backend == "torch":
        if args.on_fault == "retry":
            raise ValueError("--on-fault retry runs on the emulator backend only (on torch the ranks that lost a "
                             "peer cannot all retry together)")
        if args.fault and args.torch_algorithm == NATIVE:
            raise ValueError("--fault needs a registry schedule over send/recv on the torch backend (drop "
                             "--torch-algorithm native)")
        return _torch_command(args, units, scaling)
    _check_fits(args, tuple(s if s in STAGES else "zero2" for s in stages), units)
    plan = FaultPlan(tuple(args.fault), retry=args.on_fault == "retry") if args.fault else None
    reports = _train_stages(args, stages, scaling, loaded, plan)
    dp = reports["dp"]
    shown = STAGES if args.stage == "all" else (args.stage,)
    infos = {s: stage_json(reports[s], dp) for s in shown}
    for s in shown:
        infos[s]["parity_expected"] = PARITY_EXPECTED(s, args.grads)
        if s in BEYOND_STAGES:
            infos[s]["beyond"] = beyond_info(s, reports[s], dp, reports.get("zero3"),
                                             args.seed if args.grads == "model" else None)
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
            if s in BEYOND_STAGES:
                print_beyond(s, reports[s], infos[s]["beyond"])
    if no_step:
        print(f"ringemu: failed: no step was taken: all {args.steps} steps were skipped (loss-scale overflow at "
              f"scale {dp.loss_scales[0]:g}); parity with DP was NOT checked (try a smaller --init-scale)",
              file=sys.stderr)
        return 1
    return 0 if all(i["parity_with_dp"] or not i["parity_expected"] for i in infos.values()) else 1

