"""The *run* side of the checks: the project's own code producing the lesson's numbers.

A :class:`RunContext` is made once per report and memoizes what several claims share (the anchor's four
size-only stage runs feed M2, M4, M6, M7, C2, C3). Nothing is global: a test can build a context over a
different stage provider (e.g. a broken ZeRO-3) and see the claims fail.

Sources:

* traffic — :class:`ringemu.CommLedger` filled by the registry's schedules (:mod:`ringemu.algorithms`), run on
  size-only :class:`ringemu.VirtualBuffer` worlds (:func:`ringemu.testing.run_op`);
* memory and per-stage traffic — ``zero_stages.run_size_only`` (the stage code over size-only buffers);
* parity and activations — ``zero_stages.train`` (a small real run).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from ringemu import CommLedger, VirtualBuffer
from ringemu.algorithms import resolve_op
from ringemu.testing import run_op

from .claim import NotAvailable, NotCheckableHere

__all__ = ["RunContext", "rank_max", "torch_ddp_default_bucket_bytes"]

def rank_max(value) -> int:
    """A per-rank figure as one int: the busiest rank of a per-rank list, or the int itself."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError("empty per-rank list")
        return max(int(v) for v in value)
    if isinstance(value, bool) or int(value) != value:
        raise TypeError(f"expected an exact byte count, got {value!r}")
    return int(value)


class RunContext:
    """Runs shared by the claims of one report. ``stages`` is the stage provider (default: the
    ``zero_stages`` package), which must offer ``run_size_only``, ``train`` and ``parity_with_dp``."""

    def __init__(self, stages=None):
        self._stages = stages
        self._cache: dict = {}

    # -- providers ----------------------------------------------------------------------------------------
    def stages(self):
        """The stage provider, or :class:`NotAvailable` naming what is missing."""
        if self._stages is None:
            try:
                self._stages = importlib.import_module("zero_stages")
            except ImportError as exc:  # pragma: no cover - the package ships with the project
                raise NotAvailable(f"zero_stages is not importable: {exc}") from exc
        return self._stages

    def _stage_fn(self, name: str):
        fn = getattr(self.stages(), name, None)
        if fn is None:
            raise NotAvailable(f"zero_stages.{name} is not available; this run check cannot run")
        return fn

    def _memo(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # -- runs ---------------------------------------------------------------------------------------------
    def size_only(self, stage: str, n_ranks: int, psi: int | None = None, unit_sizes=None,
                  activation_bytes: int = 0, wire_dtype: str = "bf16", activations: tuple | None = None,
                  ranks_per_node: int | None = None):
        """``zero_stages.run_size_only(...)``'s StageReport (memoized). ``activations`` is
        ``(seq, batch, hidden, layers, recompute)``: the stages record them layer by layer through
        ``zero_stages.ActivationShape`` (Korthikanti et al. 2022)."""
        units = tuple(unit_sizes) if unit_sizes is not None else None
        key = ("size_only", stage, n_ranks, psi, units, activation_bytes, wire_dtype, activations, ranks_per_node)
        fn = self._stage_fn("run_size_only")
        extra = {} if ranks_per_node is None else {"ranks_per_node": ranks_per_node}
        if activations is not None:
            extra["activations"] = self._stage_fn("ActivationShape")(*activations)
        return self._memo(key, lambda: fn(stage, n_ranks, psi=psi, unit_sizes=units, wire_dtype=wire_dtype,
                                          activation_bytes=activation_bytes, **extra))

    def train(self, stage: str, n_ranks: int, steps: int, wire_dtype: str = "bf16", seed: int = 0, **kwargs):
        """``zero_stages.train(...)``'s report of a small real run (memoized)."""
        key = ("train", stage, n_ranks, steps, wire_dtype, seed, tuple(sorted(kwargs.items())))
        fn = self._stage_fn("train")
        return self._memo(key, lambda: fn(stage, n_ranks, steps, wire_dtype, seed, **kwargs))

    def parity_with_dp(self, report, dp_report) -> bool:
        return bool(self._stage_fn("parity_with_dp")(report, dp_report))

    def collective(self, op: str, n_ranks: int, numel: int, dtype: str = "bf16",
                   algorithm: str | None = None) -> CommLedger:
        """A CommLedger holding one collective ``op`` (an op name of :func:`ringemu.algorithms.op_names`) by
        ``algorithm`` (default the ring, or the op's own) on a size-only (N, numel) world (memoized)."""
        collective, name = resolve_op(op, algorithm)

        def make():
            ledger = CommLedger()
            run_op(collective, VirtualBuffer((n_ranks, numel), dtype), algorithm=name, ledger=ledger, label=op)
            return ledger
        return self._memo(("collective", collective, name, n_ranks, numel, dtype), make)

    def ring(self, op: str, n_ranks: int, numel: int, dtype: str = "bf16") -> CommLedger:
        """:meth:`collective` by the op's default algorithm, the op spelt as a Python name (``all_reduce``,
        ``naive_all_reduce``)."""
        return self.collective(op.replace("_", "-"), n_ranks, numel, dtype)

    # -- report fields ------------------------------------------------------------------------------------
    def field(self, report, name: str) -> int:
        """An exact per-rank figure of a StageReport (the busiest rank if it is a list)."""
        if not hasattr(report, name):
            raise NotAvailable(f"StageReport has no field {name!r}")
        return rank_max(getattr(report, name))


def torch_ddp_default_bucket_bytes() -> int:
    """PyTorch DDP's default gradient bucket in bytes, read from the installed source without importing
    torch: ``_DEFAULT_BUCKET_CAP_MB * _MB_TO_BYTES`` in ``torch/nn/parallel/distributed.py``."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise NotCheckableHere("PyTorch is not installed (pip install ringemu[torch]); its DDP default cannot "
                               "be read")
    path = Path(list(spec.submodule_search_locations)[0]) / "nn" / "parallel" / "distributed.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise NotCheckableHere(f"cannot read {path}: {exc}") from exc
    consts: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("_DEFAULT_BUCKET_CAP_MB", "_MB_TO_BYTES"):
                consts[name] = _int_expr(node.value)
    if set(consts) != {"_DEFAULT_BUCKET_CAP_MB", "_MB_TO_BYTES"}:
        raise NotAvailable(f"{path} defines no _DEFAULT_BUCKET_CAP_MB/_MB_TO_BYTES; found {sorted(consts)}")
    return consts["_DEFAULT_BUCKET_CAP_MB"] * consts["_MB_TO_BYTES"]


def _int_expr(node: ast.AST) -> int:
    """Evaluate an integer literal expression of + - * only (e.g. ``1024 * 1024``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
        a, b = _int_expr(node.left), _int_expr(node.right)
        return a * b if isinstance(node.op, ast.Mult) else a + b if isinstance(node.op, ast.Add) else a - b
    raise NotAvailable(f"unexpected expression in torch's DDP source: {ast.dump(node)}")


