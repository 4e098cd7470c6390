"""Run a stage on N emulated ranks: :func:`train` (real numbers) and :func:`run_size_only` (counting only).

Both build one :class:`~zero_stages.job.Job`, run the stage's per-rank function on every rank with
``EmulatedWorld(n, comm_ledger).run`` and read the ledgers into a :class:`~zero_stages.report.StageReport`.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.worlds.emulator import EmulatedWorld, RankFailure
from ringemu.worlds.size_only import SizeOnlyWorld
from ringemu.blocks import value_bound
from ringemu.checks import MAX_NUMEL, check_budget, check_choice, check_int, check_n_ranks
from ringemu.dtypes import dtype_name
from ringemu.faults.plan import as_plan
from ringemu.faults.spec import CollectiveFault
from ringemu.ledger import CommLedger
from ringemu.link_bytes import PCIE_CLASS, sent_per_class
from ringemu.topology import Topology
from ringemu.memory_guard import FIXED_BYTES, RANK_BYTES
from ringemu.memory import MemoryLedger

from .stages import dp, hsdp, offload, zero1, zero2, zero3, zeropp
from .stages.offload import OffloadHost
from .stages.zeropp import ZeroPPConfig
from .memory.activations import ActivationShape
from .adam import AdamConfig
from .memory.closed_forms import ALL_STAGES, STAGES, check_stage
from .flat import FlatParams, check_psi, check_unit_sizes
from .job import Job
from .model import MLP, default_width
from .precision import LOSS_SCALING_KINDS, LossScaling, check_wire_dtype, default_loss_scaling
from .rank_classes import run_by_class
from .report import StageReport, build_report
from .step_guard import StepFailed
from .workload import GRADIENT_SOURCES, BlockWorkload, ModelWorkload, SizeOnlyWorkload

__all__ = ["STAGES", "ALL_STAGES", "MESH_STAGES", "ZeroPPConfig", "RANK_FUNCTIONS", "DEFAULT_UNIT_SIZES",
           "StepFailed", "train", "run_size_only", "run_job", "training_job", "attach_links",
           "size_only_job", "MAX_SIZE_ONLY_RANKS", "MAX_TRAINING_RANKS", "MAX_TRAINING_STEPS", "SIZE_ONLY_MAX_UNITS",
           "TRAINING_STATE_BUDGET", "TRAINING_WORK_BUDGET", "TRAINING_LINK_BUDGET",
           "MAX_MICRO_BATCH", "MAX_WIDTH", "training_bytes"]

RANK_FUNCTIONS = {"dp": dp.run_rank, "zero1": zero1.run_rank, "zero2": zero2.run_rank, "zero3": zero3.run_rank,
                  "hsdp": hsdp.run_rank, "zeropp": zeropp.run_rank, "offload": offload.run_rank}
_BY_CLASS = tuple(RANK_FUNCTIONS[s] for s in STAGES)  # stages whose ranks differ only by their ChunkLayout(S, N) shard
MESH_STAGES = ("hsdp", "zeropp")  # stages that need ranks_per_node (a node group and a cross-node group)
DEFAULT_UNIT_SIZES = (272, 272, 272, 100)  # three dense 16→16 layers and one tied layer: 916 parameters
MAX_SIZE_ONLY_RANKS = 1024  # each distinct collective walks its N·(N−1)-transfer table once; the lesson's largest N
MAX_TRAINING_RANKS = 1024  # a greenlet (or process) per rank, each with its own model states; the lesson's largest N
MAX_TRAINING_STEPS = 100_000  # steps of one training run
# Work bounds, checked before anything is allocated (ringemu.checks.check_budget):
# units of a size-only run: counting costs about 0.3 ms per unit whatever N (identical calls are counted once per
# schedule and rank class), measured: 20,000 units took 5.7 s at N = 8 and 11 s at N = 1,024 (227 MB) on a loaded
# 2-core machine
SIZE_ONLY_MAX_UNITS = 2 ** 15
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
            algorithm: str = DEFAULT_ALGORITHM, faults=None, ranks_per_node: int | None = None,
          options=None) -> StageReport:
    """Run ``stage`` (a name in STAGES, or a per-rank function ``fn(comm, job)``) for ``job``.

    The ranks run in ``EmulatedWorld(n, comm_ledger, mode, algorithm=algorithm)`` (``algorithm``: a name of
    :func:`ringemu.worlds.communicator_algorithms`; every stage's reduce-scatter adds in the order of the same
    algorithm's all-reduce, so parity with DP holds for each), or in ``world_factory(n, comm_ledger)``: any world
    whose ``run(fn, job)`` calls ``fn(comm, job)`` once per rank with a Communicator and returns the results in
    rank order (e.g. ``ringemu.worlds.torch_launch.TorchWorld``, one torch.distributed process per rank).
    A size-only job without a ``world_factory`` runs in a :class:`~ringemu.worlds.SizeOnlyWorld` (ranks one
    after another, no threads); for a built-in stage, one rank per class of ranks with equal shard sizes
    (:mod:`zero_stages.rank_classes`, tested equal to running every rank).

    ``faults`` (emulator only; :mod:`ringemu.faults.plan`): a step that meets one is rolled back on every rank
    (:mod:`zero_stages.step_guard`) and :class:`~zero_stages.step_guard.StepFailed` is raised — or, with a
    ``FaultPlan(retry=True)``, the step runs again. A fault that never fires is a ValueError.
    """
    fn, name = _rank_function(stage)
    comm = CommLedger()
    n = job.flat.n_ranks
    job = _stage_job(name, job)
    plan = as_plan(faults)
    if plan is not None and (world_factory is not None or job.size_only):
        raise ValueError("faults need the emulator backend and a training job (real numbers)")
    if world_factory is not None:
        results = world_factory(n, comm).run(fn, job)
    elif job.size_only:
        world = SizeOnlyWorld(n, comm, algorithm=algorithm)
        results = run_by_class(fn, job, world) if fn in _BY_CLASS else world.run(fn, job)
    else:
        try:
            results = EmulatedWorld(n, comm, mode=mode, algorithm=algorithm, faults=plan).run(fn, job)
        except RankFailure as exc:
            if isinstance(exc.__cause__, CollectiveFault) and exc.__cause__.states:
                raise StepFailed(exc.__cause__) from exc.__cause__
            raise
        if plan is not None and plan.unfired():
            raise ValueError(f"fault {plan.unfired()[0]} never fired: {name} made no matching collective call "
                             f"(labels seen: {', '.join(plan.labels_seen())})")
    report = build_report(name, job.flat, job.wire, dtype_name(job.wire), job.steps, job.size_only, results,
                          job.memory, comm)
    return attach_links(report, job)


def _stage_job(name: str, job: Job) -> Job:
    """``job`` with what stage ``name`` needs: K for the mesh stages, a ZeroPPConfig, the offload hosts."""
    if name in MESH_STAGES and job.ranks_per_node is None:
        raise ValueError(f"stage {name!r} needs ranks_per_node (K ranks per node, dividing n_ranks = "
                         f"{job.flat.n_ranks})")
    if name == "zeropp" and not isinstance(job.options, ZeroPPConfig):
        return dataclasses.replace(job, options=ZeroPPConfig())
    if name == "offload" and not isinstance(job.options, OffloadHost):
        return dataclasses.replace(job, options=OffloadHost.for_ranks(job.flat.n_ranks))
    return job


def attach_links(report: StageReport, job: Job) -> StageReport:
    """Add the bytes per link class per rank (NVLink inside a node, InfiniBand across, PCIe to the host) and
    the host's model states (offload) to ``report``; K = ``job.ranks_per_node``, or one node of N ranks."""
    n = job.flat.n_ranks
    k = job.ranks_per_node or n
    per_class = sent_per_class(report.comm, Topology(n, k), [lab for lab in report.comm.labels()
                                                             if lab != "overflow_check"])
    host = job.options if isinstance(job.options, OffloadHost) else None
    pcie = host.link.per_rank() if host is not None else [0] * n
    report.ranks_per_node = job.ranks_per_node
    report.link_bytes_per_rank = [{**c, PCIE_CLASS: p} for c, p in zip(per_class, pcie)]
    if host is not None:
        report.host_model_state_bytes_per_rank = [host.memory.model_states(r) for r in range(n)]
    if isinstance(job.options, ZeroPPConfig):
        report.options = job.options.name()
    return report


def _activation_layers(activation_bytes, activations) -> tuple[int, ...]:
    if activations is not None:
        if activation_bytes:
            raise ValueError("give activation_bytes or activations (an ActivationShape), not both")
        if not isinstance(activations, ActivationShape):
            raise TypeError(f"activations must be a zero_stages.ActivationShape; got {type(activations).__name__}")
        return activations.layer_bytes()
    act = check_int(activation_bytes, "activation_bytes", minimum=0, maximum=MAX_NUMEL)
    return (act,) if act else ()


def size_only_job(n_ranks, psi=None, unit_sizes=None, wire_dtype="bf16", activation_bytes=0,
                  loss_scaling: LossScaling | None = None, activations: ActivationShape | None = None,
                  ranks_per_node: int | None = None, options=None) -> Job:
    """The :class:`Job` of :func:`run_size_only` (one step on size-only buffers)."""
    n = check_n_ranks(n_ranks)
    if n > MAX_SIZE_ONLY_RANKS:
        raise ValueError(f"n_ranks must be at most {MAX_SIZE_ONLY_RANKS} for size-only runs (every distinct collective "
                         f"is counted by walking its N·(N-1) transfers); got {n}")
    if (psi is None) == (unit_sizes is None):
        raise ValueError("give exactly one of psi (a parameter count) and unit_sizes (a list of unit sizes)")
    units = (check_psi(psi),) if unit_sizes is None else check_unit_sizes(unit_sizes)
    check_budget(len(units), SIZE_ONLY_MAX_UNITS, "the number of units of a size-only run",
                 "counting takes about 0.3 ms per unit")
    wire = check_wire_dtype(wire_dtype)
    layers = _activation_layers(activation_bytes, activations)
    return Job(FlatParams(units, n), wire, 1, SizeOnlyWorkload(units, layers), AdamConfig(),
               loss_scaling or default_loss_scaling(wire), MemoryLedger(n), size_only=True, record_history=False,
               ranks_per_node=_ranks_per_node(ranks_per_node, n), options=options)


def _ranks_per_node(k, n: int) -> int | None:
    """K ranks per node: None, or an int in [1, N] that divides N."""
    if k is None:
        return None
    k = check_int(k, "ranks_per_node", minimum=1, maximum=n)
    if n % k:
        raise ValueError(f"ranks_per_node must divide n_ranks; got {k} for {n} ranks")
    return k


def run_size_only(stage, n_ranks, psi=None, unit_sizes=None, wire_dtype="bf16", activation_bytes=0,
                  loss_scaling: LossScaling | None = None, activations: ActivationShape | None = None,
                  algorithm: str = DEFAULT_ALGORITHM, ranks_per_node: int | None = None,
                  options=None) -> StageReport:
    """One training step of ``stage`` on size-only buffers: the ledgers count, nothing is computed.

    Give exactly one of ``psi`` (the model as one unit of Ψ parameters) or ``unit_sizes``. Activations are
    recorded layer by layer from ``activations`` (an :class:`~zero_stages.memory.activations.ActivationShape`,
    Korthikanti et al. 2022), or as one block of ``activation_bytes`` per rank. bf16 runs without loss scaling;
    fp16 adds the one-element ``overflow_check`` all-reduce (not part of ``traffic_sent_*``). The collectives run
    ``algorithm`` (:func:`run_job`).
    """
    _rank_function(stage)
    return run_job(stage, size_only_job(n_ranks, psi, unit_sizes, wire_dtype, activation_bytes, loss_scaling,
                                        activations, ranks_per_node, options), algorithm=algorithm)


def training_job(n_ranks, steps, wire_dtype="bf16", seed=0, grads="model", unit_sizes=None, *,
                 micro_batch: int = 4, width: int | None = None, adam: AdamConfig | None = None,
                 loss_scaling: LossScaling | None = None, record_history: bool = True,
                 ranks_per_node: int | None = None, options=None) -> Job:
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
               size_only=False, record_history=record_history, ranks_per_node=_ranks_per_node(ranks_per_node, n),
               options=options)


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
          algorithm: str = DEFAULT_ALGORITHM, faults=None, ranks_per_node: int | None = None,
          options=None) -> StageReport:
    """Train with real numbers for ``steps`` steps on ``n_ranks`` emulated ranks; keep every rank's final state
    (and, with ``record_history``, its state after every step) so that parity with DP can be checked.

    ``grads="model"`` trains :class:`~zero_stages.model.MLP` (``unit_sizes`` default ``DEFAULT_UNIT_SIZES``,
    ``width`` default :func:`~zero_stages.model.default_width`); ``grads="blocks"`` feeds fixed-seed integer
    blocks as the 16-bit gradients. fp16 defaults to dynamic loss scaling, bf16 to none. The collectives run
    ``algorithm`` (a name of :func:`ringemu.worlds.communicator_algorithms`, default the ring). ``faults``: see
    :func:`run_job`.
    """
    _rank_function(stage)
    job = training_job(n_ranks, steps, wire_dtype, seed, grads, unit_sizes, micro_batch=micro_batch, width=width,
                       adam=adam, loss_scaling=loss_scaling, record_history=record_history,
                       ranks_per_node=ranks_per_node, options=options)
    return run_job(stage, job, mode, algorithm=algorithm, faults=faults)


def training_bytes(stage, n_ranks, steps, unit_sizes=None, wire_dtype="bf16", record_history: bool = True) -> int:
    """Estimated bytes of :func:`train` with real numbers, from the stage's own size-only run: every rank's peak
    (model states and transient buffers, as its MemoryLedger records them), the padded world of the largest
    collective in 4-byte elements, and, with ``record_history``, each step's copies of what a rank holds (its
    model states, its fp32 averaged gradient and its whole 16-bit gradients). An upper-bound sum, for refusing runs
    that cannot fit (:func:`ringemu.memory_guard.check_fits`), not an exact figure."""
    units = DEFAULT_UNIT_SIZES if unit_sizes is None else check_unit_sizes(unit_sizes)
    report = run_size_only(stage, n_ranks, unit_sizes=units, wire_dtype=wire_dtype)
    n = report.n_ranks
    peaks = sum(report.peak_bytes_per_rank)
    world = n * n * -(-max(units) // n) * 4  # (N, N·ceil(S/N)) padded world of the largest unit
    per_step = sum(report.model_state_bytes_per_rank) + n * (2 * report.psi + 4 * -(-report.psi // n))
    objects = FIXED_BYTES + RANK_BYTES * n * len(units) * (steps + 1)  # Python objects: records, pieces, ledgers
    return peaks + world + (steps + 1) * per_step * record_history + objects
