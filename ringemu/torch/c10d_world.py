"""One c10d world per thread, so that N thread-ranks of one process can each call ``init_process_group``.

torch.distributed keeps its process-group bookkeeping (default group, group names, ranks, tags) in one
module-level ``_World``. Ranks that are threads need one each. :func:`thread_local_c10d` swaps in a proxy whose
every field lives in thread-local storage for the duration of a ``with`` block, switches c10d's thread isolation
mode on (``_set_thread_isolation_mode``, which keys c10d's C++ registries by thread), and disables autograd's
multithreading, which would otherwise run backward passes of several ranks on one shared worker. Everything is
restored on exit. The technique is the one torch's own threaded test group uses (torch 2.13,
``torch/testing/_internal/distributed/multi_threaded_pg.py``); this is an independent implementation that
relies only on the documented-as-experimental ``_World`` field names.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator

import torch
import torch.distributed.distributed_c10d as c10d

__all__ = ["thread_local_c10d"]

_FIELDS = {  # _World property -> a fresh value for a new thread
    "default_pg": lambda: None, "pg_map": dict, "pg_names": dict, "pg_group_ranks": dict,
    "pg_backend_config": dict, "group_count": lambda: 0, "tags_to_pg": dict, "pg_to_tag": dict,
    "pg_coalesce_state": dict, "comms": list,
}


class _ThreadLocalWorld:
    """A stand-in for ``c10d._World`` whose state is per thread (one c10d world per thread-rank)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _state(self) -> dict[str, Any]:
        state = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = {name: make() for name, make in _FIELDS.items()}
        return state

    def __getattr__(self, name: str) -> Any:
        if name in _FIELDS:
            return self._state()[name]
        if name == "pg_config_info":  # computed by _World from the other fields
            return c10d._World.pg_config_info.fget(self)  # type: ignore[attr-defined]
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FIELDS:
            self._state()[name] = value
        else:
            object.__setattr__(self, name, value)


@contextlib.contextmanager
def thread_local_c10d() -> Iterator[None]:
    """Give every thread its own c10d world inside the block. Not reentrant across overlapping blocks."""
    if isinstance(c10d._world, _ThreadLocalWorld):
        raise RuntimeError("a ringemu.torch world is already running in this process; worlds run one at a time")
    saved, excepthook = c10d._world, sys.excepthook  # init_process_group prefixes the process's tracebacks
    c10d._world = _ThreadLocalWorld()
    torch._C._distributed_c10d._set_thread_isolation_mode(True)
    autograd = torch.autograd.set_multithreading_enabled(False)
    try:
        yield
    finally:
        autograd.__exit__(None, None, None)
        torch._C._distributed_c10d._set_thread_isolation_mode(False)
        c10d._world = saved
        sys.excepthook = excepthook
