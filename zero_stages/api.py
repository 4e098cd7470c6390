"""Run a stage on N emulated ranks: :func:`train` (real numbers) and :func:`run_size_only` (counting only).

Both build one :class:`~zero_stages.job.Job`, run the stage's per-rank function on every rank with
``EmulatedWorld(n, comm_ledger).run`` and read the ledgers into a :class:`~zero_stages.report.StageReport`.
"""
from __future__ import annotations


import numpy as np

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.backends.emulator import EmulatedWorld
from ringemu.blocks import value_bound
from ringemu.checks import MAX_NUMEL, check_budget, check_choice, check_int, check_n_ranks
from ringemu.dtypes import dtype_name
from ringemu.ledger import CommLedger
from ringemu.memory import MemoryLedger

from . import dp, zero1, zero2, zero3
from .adam import AdamConfig
from .closed_forms import STAGES, check_stage
from .flat import FlatParams, check_psi, check_unit_sizes
from .job import Job
from .model import MLP, default_width
from .precision import LOSS_SCALING_KINDS, LossScaling, check_wire_dtype, default_loss_scaling
from .report import StageReport, build_report
from .workload import GRADIENT_SOURCES, BlockWorkload, ModelWorkload, SizeOnlyWorkload

__all__ = ["STAGES", "RANK_FUNCTIONS", "DEFAULT_UNIT_SIZES", "train", "run_size_only", "run_job", "training_job",
           "size_only_job", "MAX_SIZE_ONLY_RANKS", "MAX_TRAINING_RANKS", "MAX_TRAINING_STEPS", "SIZE_ONLY_LINK_BUDGET",
           "SIZE_ONLY_RANK_UNIT_BUDGET", "TRAINING_STATE_BUDGET", "TRAINING_WORK_BUDGET", "TRAINING_LINK_BUDGET",
           "MAX_MICRO_BATCH",
           "MAX_WIDTH"]

RANK_FUNCTIONS = {"dp": dp.run_rank, "zero1": zero1.run_rank, "zero2": zero2.run_rank, "zero3": zero3.run_rank}
DEFAULT_UNIT_SIZES = (272, 272, 272, 100)  # three dense 16→16 layers and one tied layer: 916 parameters
MAX_SIZE_ONLY_RANKS = 1024  # each counted collective walks its N·(N−1)-transfer schedule; the lesson's largest N
MAX_TRAINING_RANKS = 1024  # one thread (or process) per rank, each holding its own model states; the lesson's largest N
MAX_TRAINING_STEPS = 100_000  # steps of one training run
# Work bounds, checked before anything is allocated (ringemu.checks.check_budget):
SIZE_ONLY_LINK_BUDGET = 2 ** 22  # units·N²: every counted collective records an N×N link table per unit (8 B each)
SIZE_ONLY_RANK_UNIT_BUDGET = 2 ** 14  # units·N: one thread per rank walks every unit's collectives (~1 ms each)
TRAINING_STATE_BUDGET = 2 ** 26  # Ψ·N: DP keeps 16 B per parameter on every rank, 1 GiB in all at the bound
TRAINING_WORK_BUDGET = 2 ** 34  # steps·Ψ·N: elements the ranks update in all
TRAINING_LINK_BUDGET = 2 ** 23  # steps·units·N²: link-table entries recorded (about 30 s per stage at the bound)
MAX_MICRO_BATCH = 4096  # rows of a rank's micro-batch
MAX_WIDTH = 4096  # layer width w of the MLP (a w×w weight per layer), unless the largest unit needs more


def _rank_function(stage):
    if callable(stage):
        return stage, getattr(stage, "stage_name", getattr(stage, "__name__", "custom"))
    name = check_stage(stage)
    return RANK_FUNCTIONS[name], name


def run_job(stage, job: Job, mode: str = "fused", world_factory=None,
            algorithm: str = DEFAULT_ALGORITHM) -> StageReport:
    """Run ``stage`` (a name in STAGES, or a per-rank function ``fn(comm, job)``) for ``job``.

    The ranks run in ``EmulatedWorld(n, comm_ledger, mode, algorithm=algorithm)`` (``algorithm``: a name of
    :func:`ringemu.backends.communicator_algorithms`; every stage's reduce-scatter adds in the order of the same
    algorithm's all-reduce, so parity with DP holds for each), or in ``world_factory(n, comm_ledger)``: any world
    whose ``run(fn, job)`` calls ``fn(comm, job)`` once per rank with a Communicator and returns the results in
    rank order (e.g. ``ringemu.backends.torch_launch.TorchWorld``, one torch.distributed process per rank).
    """
    fn, name = _rank_function(stage)
    comm = CommLedger()
    n = job.flat.n_ranks
    world = (EmulatedWorld(n, comm, mode=mode, algorithm=algorithm) if world_factory is None
             else world_factory(n, comm))
    results = world.run(fn, job)
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
    check_budget(len(units) * n * n, SIZE_ONLY_LINK_BUDGET, "units·n_ranks² of a size-only run",
                 "each counted collective records an N×N link table per unit")
    check_budget(len(units) * n, SIZE_ONLY_RANK_UNIT_BUDGET, "units·n_ranks of a size-only run",
                 "one thread per rank walks every unit's collectives")
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
    steps = check_int(steps, "steps", minimum=0, maximum=MAX_TRAINING_STEPS)
    seed = check_int(seed, "seed", minimum=0)
    wire = check_wire_dtype(wire_dtype)
    check_choice(grads, "grads", GRADIENT_SOURCES)
    units = DEFAULT_UNIT_SIZES if unit_sizes is None else check_unit_sizes(unit_sizes)
    psi = sum(units)
    check_budget(psi * n, TRAINING_STATE_BUDGET, "psi·n_ranks of a training run",
                 "DP keeps 16 B of model states per parameter on every rank")
    check_budget(steps * psi * n, TRAINING_WORK_BUDGET, "steps·psi·n_ranks of a training run",
                 "the elements all ranks update")
    check_budget(steps * len(units) * n * n, TRAINING_LINK_BUDGET, "steps·units·n_ranks² of a training run",
                 "every collective records an N×N link table per unit and step")
    scaling = _loss_scaling(loss_scaling, wire)
    if adam is not None and not isinstance(adam, AdamConfig):
        raise TypeError(f"adam must be an AdamConfig or None; got {type(adam).__name__}")
    if grads == "model":
        micro_batch = check_int(micro_batch, "micro_batch", minimum=1, maximum=MAX_MICRO_BATCH)
        smallest = default_width(units)
        width = smallest if width is None else check_int(width, "width", minimum=smallest,
                                                          maximum=max(MAX_WIDTH, smallest),
                                                          why="w² + w must hold the largest unit")
        workload = ModelWorkload(MLP(units, width, micro_batch, seed), wire)
    else:
        value_bound(n, wire)  # raises a clear ValueError if no exact integer blocks exist for N ranks
        workload = BlockWorkload(units, n, wire, seed)
    return Job(FlatParams(units, n), wire, steps, workload, adam or AdamConfig(), scaling, MemoryLedger(n),
               size_only=False, record_history=record_history)


def _loss_scaling(loss_scaling, wire) -> LossScaling:
    """``loss_scaling`` as a LossScaling: None (the dtype's default), a kind name (``"dynamic"``), or a
    LossScaling; anything else is a TypeError naming the argument."""
    if loss_scaling is None:
        return default_loss_scaling(wire)
    if isinstance(loss_scaling, str):
        return LossScaling(check_choice(loss_scaling, "loss_scaling", LOSS_SCALING_KINDS))
    if not isinstance(loss_scaling, LossScaling):
        raise TypeError(f"loss_scaling must be None, one of {', '.join(LOSS_SCALING_KINDS)} or a LossScaling; "
                        f"got {loss_scaling!r} ({type(loss_scaling).__name__})")
    return loss_scaling


def train(stage, n_ranks, steps, wire_dtype="bf16", seed=0, grads="model", unit_sizes=None, *,
          micro_batch: int = 4, width: int | None = None, adam: AdamConfig | None = None,
          loss_scaling: LossScaling | None = None, record_history: bool = True, mode: str = "fused",
          algorithm: str = DEFAULT_ALGORITHM) -> StageReport:
    """Train with real numbers for ``steps`` steps on ``n_ranks`` emulated ranks; keep every rank's final state
    (and, with ``record_history``, its state after every step) so that parity with DP can be checked.

    ``grads="model"`` trains :class:`~zero_stages.model.MLP` (``unit_sizes`` default ``DEFAULT_UNIT_SIZES``,
    ``width`` default :func:`~zero_stages.model.default_width`); ``grads="blocks"`` feeds fixed-seed integer
    blocks as the 16-bit gradients. fp16 defaults to dynamic loss scaling, bf16 to none. The collectives run
    ``algorithm`` (a name of :func:`ringemu.backends.communicator_algorithms`, default the ring).
    """
    _rank_function(stage)
    job = training_job(n_ranks, steps, wire_dtype, seed, grads, unit_sizes, micro_batch=micro_batch, width=width,
                       adam=adam, loss_scaling=loss_scaling, record_history=record_history)
    return run_job(stage, job, mode, algorithm=algorithm)
