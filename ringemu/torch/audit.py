"""``ringemu audit torch``: a user's training script on N thread-ranks, its traffic beside DDP's, from the ledger.

The script (see ``examples/fsdp2_mlp.py``) defines ``make_model(rank)``, ``wrap(model)``, ``batch(rank, step)``,
``loss(output, target)`` and optionally ``STEPS`` (default 3). The audit trains ``wrap(make_model(rank))`` and
``DistributedDataParallel(make_model(rank))`` with Adam for the same steps under the ``"ringemu"`` backend and
reads, for the last (steady) step, every collective call from each run's :class:`~ringemu.ledger.CommLedger`.

FSDP-style sharding should cost 3/2 of DDP per step on a ring (ZeRO-3, the lesson's claim C3): an all-gather in
forward, one in backward and a reduce-scatter, each a pass over Ψ, against DDP's all-reduce, two passes. The
report names every departure in bytes, measured: each pass's bytes minus half of DDP's, with the element counts
that explain it — elements beyond Ψ (the sharding's own padding), elements gathered in forward but not again
in backward (modules kept unsharded after forward, such as the root), and the ring's padding to N chunks.

A script that cannot be imported (a syntax error, an exception at import, an import that runs longer than
``IMPORT_TIMEOUT_S``), or whose own code raises while training (``make_model``, ``wrap``, ``batch``, ``loss``, the
model's forward), is reported as a :class:`ScriptError` (a ValueError: the command line prints one line naming the
script, the function, the exception and the script's line, and exits 2), not as a traceback.

``barrier()`` is not free in these numbers: the backend counts it as NCCL sends it, a one-element fp32 all-reduce
by the algorithm (:data:`BARRIER_COUNTING`), and the audit says so with each run's barrier bytes.
"""
from __future__ import annotations

import importlib.util
import threading
import traceback
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel

from ..ledger import CommLedger
from .launcher import RankError, spawn

__all__ = ["IMPORT_TIMEOUT_S", "ScriptError", "AuditRun", "Audit", "audit_script", "load_script", "BARRIER_COUNTING"]

IMPORT_TIMEOUT_S = 10.0  # s: a script's import should only define functions (and import torch modules)


class ScriptError(ValueError):
    """The audited script failed to import or raised in its own code; the message is one line."""


def _where(path: Path, exc: BaseException) -> str:
    """ ``(FILE line L)`` of the innermost frame of ``exc`` inside the script, or '' if none is."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f" (line {exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" (line {frames[-1].lineno})" if frames else ""


def _one_line(exc: BaseException) -> str:
    text = str(exc.msg if isinstance(exc, SyntaxError) else exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")

BARRIER_COUNTING = "barrier() counted as NCCL sends it: a one-element fp32 all-reduce (not free)"

_NEEDED = ("make_model", "wrap", "batch", "loss")


@dataclass(frozen=True)
class AuditRun:
    """One run's last step: per label (call, elements moved, bytes the busiest rank sent, ring padding bytes)."""

    name: str
    rows: tuple[tuple[str, int, int, int, int], ...]  # label, calls, elements, max bytes sent per rank, padding B
    step_bytes: int  # the busiest rank's bytes sent in the step
    ledger: CommLedger

    def elements(self, collective: str, backward: bool | None = None) -> int:
        return sum(r[2] for r in self.rows if r[0].startswith(collective + ":")
                   and (backward is None or r[0].endswith("(backward)") == backward))

    def barrier_note(self) -> str:
        """How this run's barriers are counted, with their calls and bytes in the audited step."""
        calls = sum(r[1] for r in self.rows if r[0].startswith("barrier:"))
        return f"{BARRIER_COUNTING}; {calls} in the audited step, {self.bytes_of('barrier'):,} B"

    def bytes_of(self, collective: str, backward: bool | None = None) -> int:
        return sum(r[3] for r in self.rows if r[0].startswith(collective + ":")
                   and (backward is None or r[0].endswith("(backward)") == backward))


@dataclass(frozen=True)
class Audit:
    n_ranks: int
    algorithm: str
    steps: int
    psi: int  # parameters of the model
    user: AuditRun
    ddp: AuditRun

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.user.step_bytes, self.ddp.step_bytes) if self.ddp.step_bytes else Fraction(0)

    def departures(self) -> list[tuple[str, int | Fraction, str]]:
        """(what, bytes, why) for each pass of the sharded run against half of DDP's step: the bytes beyond it,
        and the element counts behind them (read from the ledger's collective sizes)."""
        half = Fraction(self.ddp.step_bytes, 2)
        fwd = self.user.elements("all_gather", backward=False)
        bwd = self.user.elements("all_gather", backward=True)
        rs = self.user.elements("reduce_scatter")

        def extra(collective, backward=None):
            value = self.user.bytes_of(collective, backward) - half
            return int(value) if value.denominator == 1 else value

        kept = fwd - bwd  # gathered for forward and kept: not gathered again for backward
        out = [
            ("all_gather in forward", extra("all_gather", False),
             f"{fwd:,} elements against Ψ = {self.psi:,}: {fwd - self.psi:,} elements of padding"),
            ("all_gather in backward", extra("all_gather", True),
             f"{bwd:,} elements: {fwd - self.psi:,} of padding, less {kept:,} gathered in forward and kept "
             f"(modules not resharded after forward, such as the root)"),
            ("reduce_scatter", extra("reduce_scatter"),
             f"{rs:,} elements against Ψ = {self.psi:,}: {rs - self.psi:,} elements of padding"),
        ]
        other = self.user.step_bytes - self.user.bytes_of("all_gather") - self.user.bytes_of("reduce_scatter")
        if other:
            out.append(("other collectives", other, "calls that are neither all_gather nor reduce_scatter"))
        return out


def load_script(path: str | Path, import_timeout_s: float | None = None):
    """Import the training script (in at most ``import_timeout_s``, default ``IMPORT_TIMEOUT_S``); a
    ScriptError if it cannot be imported or lacks a function the audit calls."""
    timeout = IMPORT_TIMEOUT_S if import_timeout_s is None else float(import_timeout_s)
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--script: no such file {str(path)!r}")
    path = path.resolve()
    spec = importlib.util.spec_from_file_location(f"ringemu_audit_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: reported in one line below
            failed.append(exc)
    importer = threading.Thread(target=run, name="ringemu-audit-import", daemon=True)
    importer.start()
    importer.join(timeout)
    if importer.is_alive():  # the daemon thread is left behind; the command exits
        raise ScriptError(f"--script {path}: importing it took more than {timeout:g} s (a script should only "
                          f"define its functions at import; --import-timeout gives it longer)")
    if failed:
        raise ScriptError(f"--script {path}: cannot be imported: {_one_line(failed[0])}{_where(path, failed[0])}")
    missing = [name for name in _NEEDED if not callable(getattr(module, name, None))]
    if missing:
        raise ValueError(f"--script {path}: must define {', '.join(_NEEDED)}; missing {', '.join(missing)}")
    return module


def _own_errors(script, fn, failures: list):
    """``fn`` with every exception it raises recorded in ``failures`` as (rank, exception): the script's own."""
    def guarded(rank: int):
        try:
            return fn(rank)
        except Exception as exc:
            failures.append((rank, exc))
            raise
    return guarded


def _script_failure(script, failures: list) -> ScriptError:
    path = Path(script.__file__)
    rank, exc = min(failures, key=lambda f: f[0])
    return ScriptError(f"--script {path}: rank {rank} raised {_one_line(exc)}{_where(path, exc)} while training")


def _train(script, steps: int, use_ddp: bool, marks: list[int], ledger: CommLedger):
    def fn(rank: int):
        model = script.make_model(rank)
        model = DistributedDataParallel(model) if use_ddp else script.wrap(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(steps):
            if rank == 0:  # every earlier collective has completed: rank 0 took part in it
                marks.append(len(ledger.records))
            x, y = script.batch(rank, step)
            value = script.loss(model(x), y)
            opt.zero_grad()
            value.backward()
            opt.step()
        if rank == 0:
            marks.append(len(ledger.records))  # the end of the last step: what follows is the audit's own
        params = model.module.parameters() if use_ddp else model.parameters()
        return [p.full_tensor().detach().clone() if hasattr(p, "full_tensor") else p.detach().clone()
                for p in params]
    return fn


def _run(name: str, script, n: int, steps: int, algorithm: str, use_ddp: bool) -> tuple[AuditRun, list]:
    ledger, marks, failures = CommLedger(), [], []
    try:
        result = spawn(_own_errors(script, _train(script, steps, use_ddp, marks, ledger), failures), n,
                       algorithm=algorithm, ledger=ledger)
    except RankError:
        own = [f for f in failures if type(f[1]).__name__ != "PeerFailure"] or failures
        if own:
            raise _script_failure(script, own) from None
        raise
    last = ledger.records[marks[-2]:marks[-1]]  # the last step: steady state
    step = CommLedger()
    rows: dict[str, list[int]] = {}
    for rec in last:
        step.records.append(rec)
        one = CommLedger()
        one.records.append(rec)
        row = rows.setdefault(rec.label, [0, 0, 0, 0])
        row[0] += 1
        row[1] += rec.layout.numel
        row[2] += max((t.sent.bytes for t in one.per_rank()), default=0)
        row[3] += max((t.sent.padding_bytes for t in one.per_rank()), default=0)
    step_bytes = max((t.sent.bytes for t in step.per_rank()), default=0)
    run = AuditRun(name, tuple((label, *vals) for label, vals in rows.items()), step_bytes, ledger)
    return run, result.results


def audit_script(path: str | Path, n_ranks: int, algorithm: str = "ring", steps: int | None = None,
                 import_timeout_s: float | None = None) -> Audit:
    """Run the script's sharding and DDP on ``n_ranks`` thread-ranks; see the module doc."""
    script = load_script(path, import_timeout_s)
    steps = getattr(script, "STEPS", 3) if steps is None else steps
    if isinstance(steps, bool) or not isinstance(steps, int) or not 3 <= steps <= 1000:
        raise ValueError(f"steps must be an integer in 3..1000 (the last step is audited: DDP rebuilds its "
                         f"buckets at the start of step 2); got {steps!r}")
    try:
        psi = sum(p.numel() for p in script.make_model(0).parameters())
    except Exception as exc:
        raise _script_failure(script, [(0, exc)]) from None
    user, _ = _run("sharded", script, n_ranks, steps, algorithm, use_ddp=False)
    ddp, _ = _run("ddp", script, n_ranks, steps, algorithm, use_ddp=True)
    return Audit(n_ranks, algorithm, steps, psi, user, ddp)
