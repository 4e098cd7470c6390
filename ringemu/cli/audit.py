"""``ringemu audit torch --script FILE.py --ranks N [--algorithm A] [--steps K] [--json]``.

Runs a user's PyTorch training script (its own sharding, e.g. FSDP2) and DDP on N thread-ranks under the
``"ringemu"`` torch.distributed backend (:mod:`ringemu.torch`) and prints, for the last step, every collective
call by label with the bytes the busiest rank sent, the ratio to DDP, and each departure from 3/2 in bytes.
Needs the ``torch`` extra; torch is imported only when the command runs.
"""
from __future__ import annotations

import json
from fractions import Fraction

from ..algorithms import DEFAULT_ALGORITHM, names
from ..checks import check_int

__all__ = ["register", "cmd_audit"]

MAX_AUDIT_RANKS = 64  # thread-ranks running real PyTorch models in one process


def register(subparsers) -> None:
    """Add ``audit`` (with its one target, ``torch``) to the ``ringemu`` dispatcher."""
    p = subparsers.add_parser("audit", help="traffic of a PyTorch training script on N thread-ranks, beside DDP")
    p.add_argument("target", choices=("torch",), help="the engine whose code is audited (torch)")
    p.add_argument("--script", required=True, metavar="FILE.py",
                   help="defines make_model(rank), wrap(model), batch(rank, step), loss(output, target)")
    p.add_argument("--ranks", type=int, required=True, help=f"number of thread-ranks N, 1..{MAX_AUDIT_RANKS}")
    p.add_argument("--algorithm", default=DEFAULT_ALGORITHM, choices=names("all-reduce"),
                   help=f"collective algorithm of the backend (default {DEFAULT_ALGORITHM})")
    p.add_argument("--steps", type=int, default=None, help="training steps, >= 3 (default: the script's STEPS, else 3); the last one is audited")
    p.add_argument("--import-timeout", type=float, default=None, metavar="S",
                   help="seconds the script's import may take, 0 < S <= 3600 (default 10)")
    p.add_argument("--ranks-per-node", type=int, default=None, metavar="K",
                   help="audit HSDP instead: the script's wrap(model, mesh) on an (N/K, K) DeviceMesh, bytes per "
                        "link class against 2(R-1)/R·Psi/K (K must divide --ranks)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_audit)


def _num(value) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value} B"


def cmd_audit(args) -> int:
    n = check_int(args.ranks, "--ranks", 1, MAX_AUDIT_RANKS)
    try:
        from ..torch.audit import audit_script
    except ModuleNotFoundError as exc:
        raise ValueError(f"audit torch needs PyTorch ({exc.name} is missing): pip install 'ringemu[torch]'") from None
    timeout = args.import_timeout
    if timeout is not None and not 0 < timeout <= 3600:  # NaN fails both comparisons
        raise ValueError(f"--import-timeout must be a number of seconds in (0, 3600]; got {timeout}")
    if args.ranks_per_node is not None:
        return _cmd_hsdp(args, n)
    audit = audit_script(args.script, n, args.algorithm, args.steps, timeout)
    if args.json:
        print(json.dumps({
            "ranks": n, "algorithm": audit.algorithm, "steps": audit.steps, "psi": audit.psi,
            "ratio": str(audit.ratio), "ratio_float": float(audit.ratio),
            "sharded_step_bytes": audit.user.step_bytes, "ddp_step_bytes": audit.ddp.step_bytes,
            "sharded": [dict(zip(("label", "calls", "elements", "bytes", "padding_bytes"), r)) for r in audit.user.rows],
            "ddp": [dict(zip(("label", "calls", "elements", "bytes", "padding_bytes"), r)) for r in audit.ddp.rows],
            "departures": [{"what": w, "bytes": str(b), "why": y} for w, b, y in audit.departures()],
            "barrier": {run.name: run.barrier_note() for run in (audit.user, audit.ddp)},
        }))
        return 0
    print(f"{args.script} on {n} thread-ranks, algorithm {audit.algorithm}, Ψ = {audit.psi:,} parameters; "
          f"the last of {audit.steps} steps (bytes the busiest rank sent)")
    for run in (audit.user, audit.ddp):
        print(f"{run.name}: {run.step_bytes:,} B per rank per step")
        for label, calls, elements, nbytes, padding in run.rows:
            print(f"  {label:<78} {calls:>3} calls {elements:>12,} elements {nbytes:>14,} B  (ring padding {padding:,} B)")
        print(f"  {run.barrier_note()}")
    if audit.ddp.step_bytes == 0:
        print("no traffic with one rank: nothing to compare")
        return 0
    print(f"ratio to DDP: {audit.ratio} = {float(audit.ratio):.4f} (3/2 for a ZeRO-3 style sharding on a ring)")
    excess = audit.user.step_bytes - Fraction(3, 2) * audit.ddp.step_bytes
    print(f"departure from 3/2 x DDP: {excess} B, made of:")
    for what, nbytes, why in audit.departures():
        print(f"  {what:<24} {nbytes} B  ({why})")
    return 0


def _cmd_hsdp(args, n: int) -> int:
    k = check_int(args.ranks_per_node, "--ranks-per-node", 1, n)
    if n % k:
        raise ValueError(f"--ranks-per-node must divide --ranks; got {k} for {n} ranks")
    from ..torch.audit_hsdp import audit_hsdp
    audit = audit_hsdp(args.script, n, k, args.steps, args.algorithm)
    formula = audit.formula_bytes()
    departures = audit.departures()
    if args.json:
        print(json.dumps({
            "ranks": n, "ranks_per_node": k, "steps": audit.steps, "psi": audit.psi, "itemsize": audit.itemsize,
            "unit_sizes": list(audit.unit_sizes), "shard_elements": audit.shard_elements,
            "intra_node_bytes_per_rank": list(audit.intra_bytes_per_rank),
            "inter_node_bytes_per_rank": list(audit.inter_bytes_per_rank),
            "formula_inter_node_bytes": str(formula),
            "departures": [{"what": w, "bytes": str(b), "why": y} for w, b, y in departures]}))
        return 0
    print(f"{args.script}: FSDP2 HSDP on {n} thread-ranks, {n // k} nodes of {k}, Ψ = {audit.psi:,} parameters in "
          f"units {list(audit.unit_sizes)}; the last of {audit.steps} steps, bytes each rank sent")
    print(f"  intra-node (shard groups: all-gathers, reduce-scatters): {sorted(set(audit.intra_bytes_per_rank))} B")
    print(f"  inter-node (replicate groups: all-reduce of the shard):  {sorted(set(audit.inter_bytes_per_rank))} B")
    print(f"formula 2(R-1)/R·Ψ/K elements of {audit.itemsize} B: {formula} B; departure "
          f"{max(audit.inter_bytes_per_rank) - formula} B, made of:")
    for what, nbytes, why in departures:
        print(f"  {what:<24} {nbytes} B  ({why})")
    return 0
