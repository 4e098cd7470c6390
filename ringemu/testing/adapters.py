"""Worlds for the conformance suite around the three shapes a user's communicator comes in.

Each is a ``make_world(n_ranks)`` object whose ``run(fn, *args)`` calls ``fn(comm, *args)`` once per rank, each
rank in its own thread, and returns the results in rank order (what
:func:`~ringemu.testing.conformance.check_communicator` and :func:`~ringemu.testing.conformance.which_orders`
take). A rank that raises fails the run with a ``RuntimeError`` naming the lowest such rank; every wait is
bounded by ``timeout`` seconds, so a communicator that deadlocks fails instead of hanging.

* :class:`ThreadWorld` — **per-rank code**: ``make_comm(rank, n_ranks, links)`` builds your communicator for one
  rank; ``links`` (:class:`Links`) carries arrays between ranks (``links.send(src, dst, data, label=, step=)``,
  ``links.recv(src, dst)``) and records every send in a :class:`~ringemu.testing.recording.SendLog`, from which
  the communicator's ``bytes_sent()`` is read when it has none of its own;
* :class:`ListWorld` — **list-of-N code**: functions over a list of N per-rank arrays, ``reduce_scatter(buffers)
  -> N shards``, ``all_gather(shards, numel) -> N buffers``, ``all_reduce(buffers) -> N buffers``. Every rank's
  call meets the others' at a barrier, and the function runs once for all of them. A function with a ``log``
  parameter gets the world's SendLog (``log.send(src, dst, chunk)``) and the bytes it records are checked;
* :class:`TorchGroupWorld` — **torch process groups**: ``fn`` runs on N thread-ranks of ``ringemu.torch.spawn``
  with a :class:`TorchGroupCommunicator` over ``torch.distributed``'s default group (``reduce_scatter_tensor``,
  ``all_gather_into_tensor``, ``all_reduce``), padding to N·ceil(S/N) as torch requires. Needs the torch extra.
"""
from __future__ import annotations

import inspect
import queue
import threading
from typing import Callable

import numpy as np

from ..layout import ChunkLayout
from .recording import SendLog

__all__ = ["Links", "ThreadWorld", "ListWorld", "TorchGroupWorld", "TorchGroupCommunicator", "per_rank", "lists"]


class Links:
    """Point-to-point queues between N thread-ranks; every send is copied and recorded in ``log``."""

    def __init__(self, n_ranks: int, log: SendLog | None = None, timeout: float = 60.0):
        self.n_ranks, self.timeout = n_ranks, timeout
        self.log = SendLog(n_ranks) if log is None else log
        self._boxes = {(s, d): queue.Queue() for s in range(n_ranks) for d in range(n_ranks)}

    def send(self, src: int, dst: int, data, *, label: str = "", step: int | None = None) -> None:
        array = np.array(data, copy=True)
        self.log.send(src, dst, array, label=label, step=step)
        self._boxes[(src, dst)].put(array)

    def recv(self, src: int, dst: int) -> np.ndarray:
        try:
            return self._boxes[(src, dst)].get(timeout=self.timeout)
        except queue.Empty:
            raise TimeoutError(f"rank {dst} waited {self.timeout} s for a message from rank {src}") from None


class _Counted:
    """A rank's communicator with ``bytes_sent()`` read from the world's SendLog when it has none itself."""

    def __init__(self, comm, rank: int, log: SendLog):
        self._comm, self._rank, self._log = comm, rank, log

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def bytes_sent(self) -> int:
        return self._log.sent_bytes(self._rank)


def _run_threads(n: int, body: Callable[[int], object], timeout: float) -> list:
    results, errors = [None] * n, {}

    def target(rank: int) -> None:
        try:
            results[rank] = body(rank)
        except BaseException as exc:  # noqa: BLE001 - reported with the rank below
            errors[rank] = exc

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if any(t.is_alive() for t in threads):
        raise TimeoutError(f"ranks {[r for r, t in enumerate(threads) if t.is_alive()]} still running after "
                           f"{timeout} s (a deadlock, or ranks that made different calls)")
    if errors:
        rank = min(errors)
        raise RuntimeError(f"rank {rank}: {type(errors[rank]).__name__}: {errors[rank]}") from errors[rank]
    return results


class ThreadWorld:
    """N thread-ranks running per-rank code (module doc)."""

    def __init__(self, n_ranks: int, make_comm: Callable, *, timeout: float = 60.0, count_sends: bool = True):
        self.n_ranks, self.make_comm, self.timeout, self.count_sends = n_ranks, make_comm, timeout, count_sends
        self.log: SendLog | None = None  # the last run's sends

    def __repr__(self) -> str:
        return f"ThreadWorld({self.n_ranks}, {getattr(self.make_comm, '__name__', self.make_comm)!r})"

    def run(self, fn: Callable, *args) -> list:
        links = Links(self.n_ranks, timeout=self.timeout)
        self.log = links.log

        def body(rank: int):
            comm = self.make_comm(rank, self.n_ranks, links)
            if self.count_sends and not callable(getattr(comm, "bytes_sent", None)):
                comm = _Counted(comm, rank, links.log)
            return fn(comm, *args)

        return _run_threads(self.n_ranks, body, self.timeout)


class _ListComm:
    """One rank's view of list-of-N code: its calls meet the other ranks' at the world's barrier."""

    def __init__(self, world: "ListWorld", rank: int, meeting: "_Meeting"):
        self.rank, self.n_ranks, self._world, self._meeting = rank, world.n_ranks, world, meeting
        self.ledger = None
        if world.log_used:
            self.bytes_sent = lambda: world.log.sent_bytes(rank)

    def reduce_scatter(self, buffer, label="reduce_scatter"):
        return self._meeting.call(self.rank, "reduce_scatter", buffer, None, label)

    def all_gather(self, shard, numel, label="all_gather"):
        return self._meeting.call(self.rank, "all_gather", shard, int(numel), label)

    def all_reduce(self, buffer, label="all_reduce"):
        return self._meeting.call(self.rank, "all_reduce", buffer, None, label)

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)


class _Meeting:
    def __init__(self, world: "ListWorld"):
        self.world, n = world, world.n_ranks
        self.slots: list = [None] * n
        self.results: list = [None] * n
        self.error: BaseException | None = None
        self.arrive = threading.Barrier(n, action=self._act, timeout=world.timeout)
        self.leave = threading.Barrier(n, timeout=world.timeout)

    def _act(self) -> None:
        try:
            calls = {(name, numel) for name, _, numel, _ in self.slots}
            if len(calls) != 1:
                raise RuntimeError("ranks made different calls: " + ", ".join(
                    f"rank {r} {name}" for r, (name, _, _, _) in enumerate(self.slots)))
            name, _, numel, _ = self.slots[0]
            fn = self.world.functions.get(name)
            if fn is None:
                raise NotImplementedError(f"this ListWorld was given no {name} function")
            data = [s[1] for s in self.slots]
            kwargs = {"log": self.world.log} if self.world.wants_log(name) else {}
            out = fn(data, numel, **kwargs) if name == "all_gather" else fn(data, **kwargs)
            if len(out) != self.world.n_ranks:
                raise ValueError(f"{name} returned {len(out)} arrays for {self.world.n_ranks} ranks")
            self.results = list(out)
            self.error = None
        except BaseException as exc:  # noqa: BLE001 - raised on every rank below
            self.error = exc

    def call(self, rank: int, name: str, data, numel, label):
        self.slots[rank] = (name, np.array(data, copy=True), numel, label)
        self.arrive.wait()
        error, result = self.error, self.results[rank]
        self.leave.wait()
        if error is not None:
            raise error
        return np.asarray(result)


class ListWorld:
    """N thread-ranks whose collectives run your list-of-N functions (module doc)."""

    def __init__(self, n_ranks: int, *, reduce_scatter=None, all_gather=None, all_reduce=None,
                 timeout: float = 60.0):
        self.n_ranks, self.timeout = n_ranks, timeout
        self.functions = {k: v for k, v in (("reduce_scatter", reduce_scatter), ("all_gather", all_gather),
                                            ("all_reduce", all_reduce)) if v is not None}
        if not self.functions:
            raise ValueError("ListWorld needs at least one of reduce_scatter=, all_gather=, all_reduce=")
        self.log = SendLog(n_ranks)
        self.log_used = any(self.wants_log(k) for k in self.functions)

    def __repr__(self) -> str:
        return f"ListWorld({self.n_ranks}, {', '.join(self.functions)})"

    def wants_log(self, name: str) -> bool:
        try:
            return "log" in inspect.signature(self.functions[name]).parameters
        except (TypeError, ValueError):
            return False

    def run(self, fn: Callable, *args) -> list:
        meeting = _Meeting(self)
        return _run_threads(self.n_ranks, lambda rank: fn(_ListComm(self, rank, meeting), *args), self.timeout + 5)


def per_rank(make_comm: Callable, **options) -> Callable[[int], ThreadWorld]:
    """``make_world`` for per-rank code: ``lambda n: ThreadWorld(n, make_comm, **options)``."""
    return lambda n: ThreadWorld(n, make_comm, **options)


def lists(**functions) -> Callable[[int], ListWorld]:
    """``make_world`` for list-of-N code: ``lambda n: ListWorld(n, **functions)``."""
    return lambda n: ListWorld(n, **functions)


class TorchGroupCommunicator:
    """A Communicator over a torch.distributed process group (default: the default group) for one rank."""

    def __init__(self, group=None):
        import torch.distributed as dist

        self._dist, self.group = dist, group
        self.rank, self.n_ranks = dist.get_rank(group), dist.get_world_size(group)
        self.ledger = None

    def _padded(self, buffer: np.ndarray):
        from ..torch_tensors import to_torch
        c = -(-buffer.shape[0] // self.n_ranks)
        padded = np.zeros(c * self.n_ranks, buffer.dtype)
        padded[:buffer.shape[0]] = buffer
        return to_torch(padded), c

    def reduce_scatter(self, buffer, label="reduce_scatter"):
        from ..torch_tensors import to_numpy
        inp, c = self._padded(np.asarray(buffer))
        out = inp.new_zeros(c)
        self._dist.reduce_scatter_tensor(out, inp, group=self.group)
        return to_numpy(out)[:ChunkLayout(buffer.shape[0], self.n_ranks).payload(self.rank)].copy()

    def all_gather(self, shard, numel, label="all_gather"):
        from ..torch_tensors import to_numpy, to_torch
        c = -(-numel // self.n_ranks)
        mine = np.zeros(c, np.asarray(shard).dtype)
        mine[:len(shard)] = shard
        inp = to_torch(mine)
        out = inp.new_zeros(c * self.n_ranks)
        self._dist.all_gather_into_tensor(out, inp, group=self.group)
        return to_numpy(out)[:numel].copy()

    def all_reduce(self, buffer, label="all_reduce"):
        from ..torch_tensors import to_numpy, to_torch
        t = to_torch(np.array(buffer, copy=True))
        self._dist.all_reduce(t, group=self.group)
        return to_numpy(t).copy()

    def layout(self, numel: int) -> ChunkLayout:
        return ChunkLayout(numel, self.n_ranks)


class TorchGroupWorld:
    """N thread-ranks of ``ringemu.torch.spawn`` (module doc); ``algorithm`` is the ringemu backend's."""

    def __init__(self, n_ranks: int, *, algorithm: str = "ring", timeout: float = 60.0):
        self.n_ranks, self.algorithm, self.timeout = n_ranks, algorithm, timeout
        self.ledger = None  # the last run's CommLedger

    def __repr__(self) -> str:
        return f"TorchGroupWorld({self.n_ranks}, algorithm={self.algorithm!r})"

    def run(self, fn: Callable, *args) -> list:
        from ..torch import spawn

        result = spawn(lambda rank: fn(TorchGroupCommunicator(), *args), self.n_ranks, algorithm=self.algorithm,
                       timeout_s=self.timeout)
        self.ledger = result.ledger
        return list(result.results)
