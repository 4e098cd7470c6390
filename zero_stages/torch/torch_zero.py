"""The project's ZeRO stage modules on torch.distributed, cross-checked against the emulator.

:func:`run_zero_on_torch` runs each stage's own per-rank function (``zero_stages.RANK_FUNCTIONS``, the code the
emulator runs) in N processes through :class:`~ringemu.worlds.torch_launch.TorchWorld`, builds the same
:class:`~zero_stages.report.StageReport` from the ranks' results and ledgers, and compares it bit for bit with
DP on the same engine (``parity_with_dp``, lesson claim M11) and with the same stage on the emulator
(``parity_with_emulator``: final and per-step 16-bit weights, fp32 master, m, v and averaged gradient).

What to expect (``docs/real_engine.md``): with integer-block gradients (``grads="blocks"``) every sum is exact
in any order, so both algorithms agree with the emulator bit for bit. With model gradients the engine's own
collectives (``algorithm="native"``) add floats in gloo's order, not the ring's, and may differ; a registry
schedule over point-to-point messages (``algorithm="ring"`` or any other name of
:func:`ringemu.worlds.communicator_algorithms`) adds in the emulator's order for that algorithm and agrees.

Traffic in the result is the ledger's: modelled from the algorithm's schedules (``traffic_source``); for bytes observed
on the wire see :mod:`zero_stages.torch.wire_bytes`.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.worlds.base import NATIVE
from ringemu.worlds.torch_launch import TorchWorld
from ringemu.checks import check_timeout
from ringemu.dtypes import dtype_name
from ringemu.ledger import CommLedger
from .. import api
from ..memory.closed_forms import STAGES, check_stage
from ..job import Job
from ..report import build_report, parity_mismatches, stage_json

__all__ = ["run_zero_on_torch", "torch_steps", "stage_on_torch", "RankRows", "digest", "TRAFFIC_SOURCE", "COMPARED"]

TRAFFIC_SOURCE = "modelled: the algorithm's schedules in the CommLedger (not bytes observed on the wire)"
COMPARED = "final and per-step 16-bit weights, fp32 master, m, v and averaged gradients, bit for bit"


class RankRows:
    """The memory view a StageReport reads, with rank r's row taken from rank r's own MemoryLedger (each rank
    process wrote only its own row of its copy)."""

    def __init__(self, ledgers):
        self.ledgers, self.n_ranks = ledgers, len(ledgers)

    def model_states(self, rank: int) -> int:
        return self.ledgers[rank].model_states(rank)

    def peak(self, rank: int, category: str | None = None) -> int:
        return self.ledgers[rank].peak(rank, category)

    def current(self, rank: int, category: str | None = None) -> int:
        return self.ledgers[rank].current(rank, category)

    def by_category(self, rank: int) -> dict:
        return self.ledgers[rank].by_category(rank)


def _stage_rank(comm, stage: str, job: Job):
    """Per-rank body in each process: the stage's own run_rank, plus this process's copy of the memory ledger."""
    result = api.RANK_FUNCTIONS[stage](comm, job)
    return result, job.memory


def stage_on_torch(stage: str, job: Job, backend: str = "gloo", algorithm: str = NATIVE,
                   timeout: float = 300.0, faults=None):
    """Run one stage for ``job`` on N torch processes; return its StageReport (ledgers from the ranks)."""
    name = check_stage(stage)
    comm = CommLedger()
    world = TorchWorld(job.flat.n_ranks, ledger=comm, backend=backend, algorithm=algorithm, timeout=timeout,
                       faults=faults)
    outputs = world.run(_stage_rank, name, job)
    results = [r for r, _ in outputs]
    memory = RankRows([m for _, m in outputs])
    return build_report(name, job.flat, job.wire, dtype_name(job.wire), job.steps, False, results, memory, comm)


def torch_steps(stages="all", compare_emulator: bool = True) -> int:
    """How many runs :func:`run_zero_on_torch` makes: DP and every stage on torch, each stage on the emulator."""
    wanted = STAGES if stages == "all" else (stages,) if isinstance(stages, str) else tuple(stages)
    return len({"dp", *wanted}) + (len(wanted) if compare_emulator else 0)


def _advance(bar, what: str, before: bool = False) -> None:
    if bar is None:
        return
    if before:
        bar.set_postfix_str(what)
    else:
        bar.update()


def digest(array) -> str | None:
    return None if array is None else hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


def run_zero_on_torch(stages="all", n_ranks: int = 4, steps: int = 2, wire_dtype: str = "bf16", seed: int = 0,
                      grads: str = "blocks", timeout: float = 300.0, *, unit_sizes=None, loss_scaling=None,
                      backend: str = "gloo", algorithm: str = NATIVE, compare_emulator: bool = True,
                      faults=None, bar=None) -> dict:
    """Train ``stages`` (``"all"``, a name, or a list) on ``n_ranks`` torch processes; JSON-ready dict.

    Each entry of ``stages`` has the fields of ``ringemu zero --json`` (``name``, ``parity_with_dp``,
    ``traffic_sent_bytes_per_rank``, ``model_state_bytes_per_rank``, ``peak_bytes_per_rank``, ...) plus
    ``parity_with_emulator`` (None when ``compare_emulator`` is false) and short sha256 digests of the final
    16-bit weights, master, m and v. The top level says what was compared (``compared``), in which order each side
    adds (``emulator_order``, ``engine_order``) and whether emulator parity is expected
    (``emulator_parity_expected``: with a registry schedule over send/recv, or with integer-block gradients,
    exact in any order). DP always runs, as the reference of ``parity_with_dp``. ``timeout`` bounds each stage's
    run in seconds; a failed or hung run raises ``RankFailure`` after its processes are killed.
    ``loss_scaling`` (a ``zero_stages.LossScaling``) defaults as in ``zero_stages.train``. ``faults`` (spec
    strings of :mod:`ringemu.faults.plan`, a registry algorithm only) are injected into the run of the first stage of
    ``stages``, which runs before DP's. ``bar`` (a progress bar of :func:`torch_steps` steps,
    :func:`ringemu.progress.progress_bar`) advances after each run.
    """
    timeout = check_timeout(timeout)

    def job():  # a fresh Job (and MemoryLedger) per run; api.training_job checks every argument
        return api.training_job(n_ranks, steps, wire_dtype, seed, grads, unit_sizes, loss_scaling=loss_scaling)

    job()  # bad arguments fail here, before any process starts

    wanted = STAGES if stages == "all" else (stages,) if isinstance(stages, str) else tuple(stages)
    wanted = tuple(check_stage(s) for s in wanted)
    emulated = DEFAULT_ALGORITHM if algorithm == NATIVE else algorithm  # the emulator runs the modelled schedule
    run = ("dp",) + tuple(s for s in wanted if s != "dp")
    if faults:  # the faulty stage first: its failure stops the command before any other run
        run = (wanted[0],) + tuple(s for s in run if s != wanted[0])
    reports = {}
    for s in run:
        _advance(bar, f"{s} on torch", before=True)
        reports[s] = stage_on_torch(s, job(), backend, algorithm, timeout, faults if s == wanted[0] else None)
        _advance(bar, f"{s} on torch")
    dp = reports["dp"]
    # the emulator adds in the schedule's order; gloo's own collectives add floats in gloo's order, so only exact
    # sums (integer blocks) or a registry schedule over send/recv on torch can equal it bit for bit
    expected = algorithm != NATIVE or grads == "blocks"
    out = {"backend": "torch", "torch_backend": backend, "algorithm": algorithm, "ranks": dp.n_ranks,
           "steps": dp.steps, "dtype": dp.wire_dtype, "seed": seed, "grads": grads,
           "unit_sizes": list(dp.unit_sizes), "psi": dp.psi, "traffic_source": TRAFFIC_SOURCE,
           "compared": COMPARED, "emulator_order": emulated,
           "engine_order": backend if algorithm == NATIVE else algorithm,
           "emulator_parity_expected": expected, "stages": []}
    for s in wanted:
        rep = reports[s]
        entry = stage_json(rep, dp)
        entry["parity_with_emulator"], entry["emulator_mismatches"] = None, None
        entry["digests"] = {k: digest(getattr(rep, k)) for k in ("weights16", "master", "m", "v")}
        if compare_emulator:
            _advance(bar, f"{s} on the emulator", before=True)
            emu = api.run_job(s, job(), algorithm=emulated)
            _advance(bar, f"{s} on the emulator")
            diff = parity_mismatches(rep, emu)
            same_counts = all(getattr(rep, k) == getattr(emu, k) for k in (
                "model_state_bytes_per_rank", "peak_bytes_per_rank", "traffic_sent_bytes_per_rank"))
            if not same_counts:
                diff.append("memory or modelled traffic counts")
            entry["parity_with_emulator"], entry["emulator_mismatches"] = not diff, diff
        out["stages"].append(entry)
    return out

