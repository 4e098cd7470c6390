"""Start N torch.distributed processes on 127.0.0.1 and run one per-rank function in each.

:class:`TorchWorld` is the real-engine twin of :class:`~ringemu.worlds.EmulatedWorld`: ``run(fn, *args)``
calls ``fn(comm, *args)`` once per rank, here in N separate processes, each with its own
:class:`~ringemu.worlds.torch_processes.TorchCommunicator`, and returns the per-rank results in rank order.
The same per-rank stage function therefore runs unchanged on both.

Set-up is automatic: the parent process hosts the rendezvous store (a ``TCPStore`` on a free port of
127.0.0.1) and starts the ranks with the ``forkserver`` start method: a server process imports torch once, and
each rank is a fork of that single-threaded server, never of the caller (measured here: 8 ranks start in
0.3 s once the server runs, against 15-20 s with ``spawn``, where each rank imports torch itself; the server is
multiprocessing's own and ends with the caller). ``start_method="spawn"`` is accepted too. Each rank
initialises the process group (gloo; NCCL with one CUDA device per rank when ``backend="nccl"``), runs ``fn``,
and sends back its result and its ledger (plain Python / numpy objects).

Failure handling: a rank that raises sends its traceback and the others are stopped; a rank that dies without
a word (a crash, a kill) is reported with its exit code; if the ranks do not all finish within ``timeout``
seconds the world is declared hung. In every case each rank process still alive is killed and reaped before
:class:`~ringemu.worlds.RankFailure` is raised: no process is left running. Collectives inside the ranks
also time out (the process group is created with the same timeout), so a lost peer ends a blocked rank.

On a real cluster use ``torchrun`` instead, which starts the processes itself (``docs/real_engine.md``):
:func:`communicator_from_env` builds the communicator of a process started that way.
"""
from __future__ import annotations

import datetime
import multiprocessing
import os
import pickle
import queue as queue_module
import time
import traceback
from typing import Any, Callable

from ..checks import check_n_ranks, check_timeout
from ..faults.plan import as_plan
from ..faults.spec import MessageFault, RankStopped
from ..ledger import CommLedger
from .base import NATIVE
from .emulator import RankFailure

__all__ = ["TorchWorld", "communicator_from_env", "BACKENDS"]

BACKENDS = ("gloo", "nccl")
_PRELOAD = ("torch.distributed", "ringemu.worlds.torch_processes")  # imported once by the forkserver
_SILENT = "exited with code"  # how a rank that died without a report is described
_FAULTS = tuple(c.__name__ for c in (RankStopped, MessageFault))  # injected faults, the stopped rank first
_GRACE_S = 2.0  # seconds the other ranks get to report after the first failure, before they are killed


def communicator_from_env(backend: str | None = None, algorithm: str = NATIVE, ledger: CommLedger | None = None,
                          timeout: float = 600.0):
    """Initialise the default process group from torchrun's environment (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK``) and return this process's TorchCommunicator.

    ``backend`` defaults to NCCL when CUDA is available, else gloo.
    """
    import torch
    import torch.distributed as dist

    from .torch_processes import TorchCommunicator

    timeout = check_timeout(timeout)
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    return TorchCommunicator(ledger=ledger, algorithm=algorithm)


def _rank_main(rank: int, n_ranks: int, port: int, backend: str, algorithm: str, timeout: float,
               fn: Callable[..., Any], args: tuple, kwargs: dict, results, faults=None,
               fault_wait: float = 5.0) -> None:
    """Body of one rank process: join the group, run ``fn(comm, *args)``, report, leave.

    A failure is reported before the process group is torn down, so that the cause reaches the parent before
    the echoes of the other ranks (which see the connection close).
    """
    joined = False
    try:
        import torch
        import torch.distributed as dist

        from .torch_processes import TorchCommunicator

        torch.set_num_threads(1)  # N ranks share this machine's cores
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # all ranks are on this machine (this process only)
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        store = dist.TCPStore("127.0.0.1", port, n_ranks, is_master=False,
                              timeout=datetime.timedelta(seconds=timeout))
        dist.init_process_group(backend, store=store, rank=rank, world_size=n_ranks,
                                timeout=datetime.timedelta(seconds=timeout))
        joined = True
        ledger = CommLedger()
        comm = TorchCommunicator(ledger=ledger, algorithm=algorithm, faults=faults, fault_wait=fault_wait)
        result = fn(comm, *args, **kwargs)
        dist.barrier()  # no rank leaves while another may still read from it
        report = ("ok", rank, result, ledger)
        pickle.dumps(report)  # an unpicklable result fails here, reported, not silently in the queue's thread
    except BaseException as exc:  # reported to the parent, which stops the world
        report = ("error", rank, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", None)
    results.put(report)
    if report[0] == "error":  # into the pipe before the connections close: the cause arrives before its echoes
        results.close()
        results.join_thread()
    if joined:
        dist.destroy_process_group()


class TorchWorld:
    """N ranks as N processes on this machine, joined by torch.distributed (``backend`` gloo or nccl).

    ``ledger``, if given, receives rank 0's records after :meth:`run` (every rank records the same modelled
    traffic; the ranks' ledgers are checked to agree). ``algorithm`` (``"native"`` or a registry name) is
    passed to each TorchCommunicator.
    ``timeout`` bounds the whole run, start-up included, in seconds. ``faults`` (spec strings or Faults of
    :mod:`ringemu.faults.plan`; a registry algorithm only) are injected in every rank process, whose receivers wait
    ``fault_wait`` seconds for each message of a faulty step (:mod:`ringemu.faults.torch_faults`).
    """

    def __init__(self, n_ranks: int, ledger: CommLedger | None = None, backend: str = "gloo",
                 algorithm: str = NATIVE, timeout: float = 120.0, start_method: str | None = None,
                 faults=None, fault_wait: float = 5.0):
        self.n_ranks = check_n_ranks(n_ranks)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
        timeout = check_timeout(timeout)
        try:
            from .torch_processes import check_torch_algorithm
        except ModuleNotFoundError as exc:  # torch is the optional extra ringemu[torch]
            raise ValueError(f"the torch backend needs torch ({exc}); install it with pip install "
                             f"'ringemu[torch]'") from exc
        algorithm = check_torch_algorithm(algorithm, self.n_ranks)
        methods = multiprocessing.get_all_start_methods()
        start_method = start_method or ("forkserver" if "forkserver" in methods else "spawn")
        if start_method not in methods or start_method == "fork":
            allowed = ", ".join(m for m in methods if m != "fork")
            raise ValueError(f"start_method must be one of {allowed}; got {start_method!r}")
        self.ledger, self.backend, self.algorithm, self.timeout = ledger, backend, algorithm, float(timeout)
        self.start_method = start_method
        plan = as_plan(faults)  # checked here; each rank process builds its own plan from the specs
        self.faults = None if plan is None else tuple(f.spec() for f in plan.faults)
        if plan is not None and any(f.kind == "duplicate" for f in plan.faults):
            raise ValueError("duplicate faults run on the emulator only (on a real link the second copy is read by "
                             "nobody)")
        if self.faults and algorithm == NATIVE:
            raise ValueError("faults run on a registry algorithm's send/recv path (e.g. algorithm='ring'), not on "
                             "the engine's native collectives")
        self.fault_wait = check_timeout(fault_wait, "fault_wait")
        self.ledgers: list[CommLedger] = []  # every rank's ledger from the last run
        self.pids: list[int] = []  # process ids of the last run's ranks (all gone when run returns or raises)

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> list[Any]:
        """Call ``fn(comm, *args, **kwargs)`` in every rank process; return the results in rank order.

        ``fn``, its arguments and its result must be picklable (a module-level function; numpy arrays are fine).
        Raises :class:`RankFailure` naming the failed, silent or hung ranks; all rank processes are gone then.
        """
        import torch.distributed as dist

        n = self.n_ranks
        deadline = time.monotonic() + self.timeout
        store = dist.TCPStore("127.0.0.1", 0, n + 1, is_master=True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=self.timeout))
        ctx = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":  # the server imports torch once; each rank is a fork of it
            ctx.set_forkserver_preload(list(_PRELOAD))
        results = ctx.Queue()
        procs = [ctx.Process(target=_rank_main, name=f"ringemu-rank{r}", daemon=True,
                             args=(r, n, store.port, self.backend, self.algorithm, self.timeout, fn, args, kwargs,
                                   results, self.faults, self.fault_wait))
                 for r in range(n)]
        reports: dict[int, tuple] = {}
        try:
            for p in procs:
                p.start()
            self.pids = [p.pid for p in procs]
            failure = self._collect(procs, results, reports, deadline)
        finally:
            for p in procs:  # reap everything, killing what is still running
                if p.pid is None:
                    continue  # never started
                if p.is_alive():
                    p.kill()
                p.join(timeout=10)
            results.close()
            del store
        if failure:
            raise RankFailure(failure)
        self.ledgers = [reports[r][3] for r in range(n)]
        self._check_ledgers()
        return [reports[r][2] for r in range(n)]

    def _collect(self, procs, results, reports: dict, deadline: float) -> str | None:
        """Gather one report per rank; return a failure description, or None when every rank succeeded.

        Errors are kept in the order they arrived: the first is usually the cause, the rest its echoes.
        """
        n, errors, first_error_at = len(procs), {}, None
        while len(reports) + len(errors) < n:
            now = time.monotonic()
            if first_error_at is not None and now > first_error_at + _GRACE_S:
                break  # the remaining ranks are blocked on the failed one; they are killed by run()
            if now > deadline:
                pending = [r for r in range(n) if r not in reports and r not in errors]
                return (f"the world hung: ranks {pending} did not finish within {self.timeout:g} s "
                        f"(backend {self.backend}); killed" + self._describe(errors))
            try:
                status, rank, payload, ledger = results.get(timeout=0.2)
            except queue_module.Empty:
                silent = [r for r, p in enumerate(procs)  # exited, but no report read yet
                          if r not in reports and r not in errors and p.exitcode is not None]
                if not silent:
                    continue
                try:  # a report written just before exiting may still be in the pipe
                    status, rank, payload, ledger = results.get(timeout=1.0)
                except queue_module.Empty:
                    for r in silent:  # died without a report (a crash, a kill)
                        errors[r] = f"{_SILENT} {procs[r].exitcode} without a report"
                    first_error_at = first_error_at or time.monotonic()
                    continue
            if status == "ok":
                reports[rank] = (status, rank, payload, ledger)
            else:
                errors.pop(rank, None)  # a traceback beats "exited without a report"
                errors[rank] = payload
                first_error_at = first_error_at or time.monotonic()
        if errors:
            # an injected fault is the cause, else a rank that died silently: the others only saw a connection close
            ordered = dict(sorted(errors.items(), key=lambda e: next(
                (k for k, start in enumerate((*_FAULTS, _SILENT)) if e[1].startswith(start)), 3)))
            pending = [r for r in range(n) if r not in reports and r not in errors]
            killed = f"; ranks {pending} were stopped" if pending else ""
            return f"{len(errors)} of {n} ranks failed (first: rank {next(iter(ordered))}){killed}" + \
                self._describe(ordered)
        return None

    @staticmethod
    def _describe(errors: dict) -> str:
        return "".join(f"\n--- rank {r}: {msg}" for r, msg in errors.items())

    def _check_ledgers(self) -> None:
        """Every rank recorded the same collectives (label, schedule, size, dtype); copy rank 0's into ledger."""
        keys = [[(rec.label, rec.schedule.name, rec.layout, rec.dtype) for rec in led.records] for led in self.ledgers]
        for r, k in enumerate(keys):
            if k != keys[0]:
                raise RankFailure(f"rank {r} recorded different collectives than rank 0")
        if self.ledger is not None and self.ledgers:
            for rec in self.ledgers[0].records:
                self.ledger.record(rec.schedule, rec.layout, rec.dtype, rec.label, rec.size_only)
