"""Run a stage on N emulated ranks: :func:`train` (real numbers) and :func:`run_size_only` (counting only).

Both build one :class:`~zero_stages.job.Job`, run the stage's per-rank function on every rank with
``EmulatedWorld(n, comm_ledger).run`` and read the ledgers into a :class:`~zero_stages.report.StageReport`.
"""
from __future__ import annotations


import numpy as np

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.backends.emulator import EmulatedWorld, RankFailure
from ringemu.blocks import value_bound
from ringemu.checks import MAX_NUMEL, check_int, check_n_ranks
from ringemu.dtypes import dtype_name
from ringemu.faults import CollectiveFault, as_plan
from ringemu.ledger import CommLedger
from ringemu.memory import MemoryLedger

from . import dp, zero1, zero2, zero3
from .adam import AdamConfig
from .closed_forms import STAGES, check_stage
from .flat import FlatParams, check_psi, check_unit_sizes
from .job import Job
from .model import MLP, default_width
from .precision import LossScaling, check_wire_dtype, default_loss_scaling
from .report import StageReport, build_report
from .step_guard import StepFailed
from .workload import GRADIENT_SOURCES, BlockWorkload, ModelWorkload, SizeOnlyWorkload

__all__ = ["STAGES", "RANK_FUNCTIONS", "DEFAULT_UNIT_SIZES", "StepFailed", "train", "run_size_only", "run_job", "training_job",
           "size_only_job", "MAX_SIZE_ONLY_RANKS", "MAX_TRAINING_RANKS"]

RANK_FUNCTIONS = {"dp": dp.run_rank, "zero1": zero1.run_rank, "zero2": zero2.run_rank, "zero3": zero3.run_rank}
DEFAULT_UNIT_SIZES = (272, 272, 272, 100)  # three dense 16→16 layers and one tied layer: 916 parameters
MAX_SIZE_ONLY_RANKS = 1024  # each counted collective walks its N·(N−1)-transfer schedule; the lesson's largest N
MAX_TRAINING_RANKS = 1024  # one thread (or process) per rank, each holding its own model states; the lesson's largest N


def _rank_function(stage):
    if callable(stage):
        return stage, getattr(stage, "stage_name", getattr(stage, "__name__", "custom"))
    name = check_stage(stage)
    return RANK_FUNCTIONS[name], name


def run_job(stage, job: Job, mode: str = "fused", world_factory=None,
            algorithm: str = DEFAULT_ALGORITHM, faults=None) -> StageReport:
    """Run ``stage`` (a name in STAGES, or a per-rank function ``fn(comm, job)``) for ``job``.

    The ranks run in ``EmulatedWorld(n, comm_ledger, mode, algorithm=algorithm)`` (``algorithm``: a name of
    :func:`ringemu.backends.communicator_algorithms`; every stage's reduce-scatter adds in the order of the same
    algorithm's all-reduce, so parity with DP holds for each), or in ``world_factory(n, comm_ledger)``: any world
    whose ``run(fn, job)`` calls ``fn(comm, job)`` once per rank with a Communicator and returns the results in
    rank order (e.g. ``ringemu.backends.torch_launch.TorchWorld``, one torch.distributed process per rank).

    ``faults`` (emulator only; :mod:`ringemu.faults`): a step that meets one is rolled back on every rank
    (:mod:`zero_stages.step_guard`) and :class:`~zero_stages.step_guard.StepFailed` is raised — or, with a
    ``FaultPlan(retry=True)``, the step runs again. A fault that never fires is a ValueError.
    """
    fn, name = _rank_function(stage)
    comm = CommLedger()
    n = job.flat.n_ranks
    plan = as_plan(faults)
    if plan is not None and (world_factory is not None or job.size_only):
        raise ValueError("faults need the emulator backend and a training job (real numbers)")
    world = (EmulatedWorld(n, comm, mode=mode, algorithm=algorithm, faults=plan) if world_factory is None
             else world_factory(n, comm))
    try:
        results = world.run(fn, job)
    except RankFailure as exc:
        if isinstance(exc.__cause__, CollectiveFault) and exc.__cause__.states:
            raise StepFailed(exc.__cause__) from exc.__cause__
        raise
    if plan is not None and plan.unfired():
        raise ValueError(f"fault {plan.unfired()[0]} never fired: {name} made no matching collective call "
                         f"(labels seen: {', '.join(plan.labels_seen())})")
    return build_report(name, job.flat, job.wire, dtype_name(job.wire), job.steps, job.size_only, results,
                        job.memory, comm)


def size_only_job(n_ranks, psi=None, unit_sizes=None, wire_dtype="bf16", activation_bytes=0,
                  loss_scaling: LossScaling | None = None) -> Job:
    """The :class:`Job` of :func:`run_size_only` (one step on size-only buffers)."""
    n = check_n_ranks(n_ranks)
    if n > MAX_SIZE_ONLY_RANKS:
        raise ValueError(f"n_ranks must be at most {MAX_SIZE_ONLY_RANKS} for size-only runs (every collective is "
                         f"counted by walking its N·(N-1) transfers, one thread per rank); got {n}")
    if (psi is None) == (unit_sizes is None):
        raise ValueError("give exactly one of psi (a parameter count) and unit_sizes (a list of unit sizes)")
    units = (check_psi(psi),) if unit_sizes is None else check_unit_sizes(unit_sizes)
    wire = check_wire_dtype(wire_dtype)
    act = check_int(activation_bytes, "activation_bytes", minimum=0, maximum=MAX_NUMEL)
    return Job(FlatParams(units, n), wire, 1, SizeOnlyWorkload(units, act), AdamConfig(),
               loss_scaling or default_loss_scaling(wire), MemoryLedger(n), size_only=True, record_history=False)


def run_size_only(stage, n_ranks, psi=None, unit_sizes=None, wire_dtype="bf16", activation_bytes=0,
                  loss_scaling: LossScaling | None = None, algorithm: str = DEFAULT_ALGORITHM) -> StageReport:
    """One training step of ``stage`` on size-only buffers: the ledgers count, nothing is computed.

    Give exactly one of ``psi`` (the model as one unit of Ψ parameters) or ``unit_sizes``. ``activation_bytes``
    per rank are recorded as activations during the step. bf16 runs without loss scaling; fp16 adds the
    one-element ``overflow_check`` all-reduce (not part of ``traffic_sent_*``). The collectives run ``algorithm``
    (:func:`run_job`).
    """
    _rank_function(stage)
    return run_job(stage, size_only_job(n_ranks, psi, unit_sizes, wire_dtype, activation_bytes, loss_scaling),
                   algorithm=algorithm)


def training_job(n_ranks, steps, wire_dtype="bf16", seed=0, grads="model", unit_sizes=None, *,
                 micro_batch: int = 4, width: int | None = None, adam: AdamConfig | None = None,
                 loss_scaling: LossScaling | None = None, record_history: bool = True) -> Job:
    """The :class:`Job` of :func:`train` (the same arguments), e.g. to run the stages on another Communicator.

    Every argument is checked here: ``n_ranks`` in [1, MAX_TRAINING_RANKS], ``steps`` and ``seed`` integers >= 0,
    and for ``grads="blocks"`` that exact integer blocks exist for N ranks (:func:`ringemu.blocks.value_bound`).
    """
    n = check_n_ranks(n_ranks)
    if n > MAX_TRAINING_RANKS:
        raise ValueError(f"n_ranks must be at most {MAX_TRAINING_RANKS} for training runs (one thread or process "
                         f"per rank, each holding its own model states); got {n}")
    steps = check_int(steps, "steps", minimum=0)
    seed = check_int(seed, "seed", minimum=0)
    wire = check_wire_dtype(wire_dtype)
    if grads not in GRADIENT_SOURCES:
        raise ValueError(f"grads must be one of {', '.join(GRADIENT_SOURCES)}; got {grads!r}")
    units = DEFAULT_UNIT_SIZES if unit_sizes is None else check_unit_sizes(unit_sizes)
    if grads == "model":
        workload = ModelWorkload(MLP(units, width or default_width(units), micro_batch, seed), wire)
    else:
        value_bound(n, wire)  # raises a clear ValueError if no exact integer blocks exist for N ranks
        workload = BlockWorkload(units, n, wire, seed)
    return Job(FlatParams(units, n), wire, steps, workload, adam or AdamConfig(),
               loss_scaling or default_loss_scaling(wire), MemoryLedger(n), size_only=False,
               record_history=record_history)


def train(stage, n_ranks, steps, wire_dtype="bf16", seed=0, grads="model", unit_sizes=None, *,
          micro_batch: int = 4, width: int | None = None, adam: AdamConfig | None = None,
          loss_scaling: LossScaling | None = None, record_history: bool = True, mode: str = "fused",
          algorithm: str = DEFAULT_ALGORITHM, faults=None) -> StageReport:
    """Train with real numbers for ``steps`` steps on ``n_ranks`` emulated ranks; keep every rank's final state
    (and, with ``record_history``, its state after every step) so that parity with DP can be checked.

    ``grads="model"`` trains :class:`~zero_stages.model.MLP` (``unit_sizes`` default ``DEFAULT_UNIT_SIZES``,
    ``width`` default :func:`~zero_stages.model.default_width`); ``grads="blocks"`` feeds fixed-seed integer
    blocks as the 16-bit gradients. fp16 defaults to dynamic loss scaling, bf16 to none. The collectives run
    ``algorithm`` (a name of :func:`ringemu.backends.communicator_algorithms`, default the ring). ``faults``: see
    :func:`run_job`.
    """
    _rank_function(stage)
    job = training_job(n_ranks, steps, wire_dtype, seed, grads, unit_sizes, micro_batch=micro_batch, width=width,
                       adam=adam, loss_scaling=loss_scaling, record_history=record_history)
    return run_job(stage, job, mode, algorithm=algorithm, faults=faults)
