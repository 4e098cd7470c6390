"""A checkpoint root's writer lock and the swap that puts a step directory in place without losing the old one.

Lock: a writer creates ``ROOT/.lock`` with ``O_CREAT | O_EXCL`` (atomic on POSIX) holding its host name and pid,
and removes it when it is done. A second writer finds the file and is refused with a CheckpointError naming the
lock file, the host and the pid; a lock left by a process of this host that no longer exists (a run that was
killed) is taken over.

Swap: a new step directory is assembled as ``.step-K.partial``; if ``step-K`` already exists (the same step saved
again), it is first renamed to ``.step-K.old``, then the new one is renamed to ``step-K``, ``latest`` is rewritten,
and only then is the old one removed. Killed between the two renames, the root has no ``step-K`` but a complete
``.step-K.old``; :func:`resolve_step` loads that one (the old step survives until the new one is complete), and
the next writer on the root renames it back before it saves.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path

from .format import LATEST, CheckpointError, atomic_write, fsync_dir

__all__ = ["LOCK", "STEP_NAME", "RootLock", "swap_into_place", "resolve_step", "recover_root"]

LOCK = ".lock"
STEP_NAME = re.compile(r"step-[0-9]{6,}")  # step_dir_name(k): "step-" and at least six digits, nothing else


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RootLock:
    """The one-writer lock of a checkpoint root (``ROOT/.lock``: "host pid")."""

    def __init__(self, root: Path):
        self.path = Path(root) / LOCK
        self.held = False
        me = f"{socket.gethostname()} {os.getpid()}\n"
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale():
                    self.path.unlink(missing_ok=True)
                    continue
                raise CheckpointError(f"{self.path}: checkpoint root {self.path.parent} is being written by "
                                      f"{self._owner()}; one writer per root (remove the lock file only if that "
                                      f"process is gone)") from None
            with os.fdopen(fd, "w") as fh:
                fh.write(me)
            self.held = True
            return
        raise CheckpointError(f"{self.path}: could not take the lock (another writer keeps taking it)")

    def _read(self) -> tuple[str, int] | None:
        try:
            host, pid = self.path.read_text().split()
            return host, int(pid)
        except (OSError, ValueError):
            return None

    def _owner(self) -> str:
        got = self._read()
        return "an unknown process (unreadable lock file)" if got is None else f"pid {got[1]} on host {got[0]}"

    def _stale(self) -> bool:
        got = self._read()
        return got is not None and got[0] == socket.gethostname() and got[1] != os.getpid() and not _alive(got[1])

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def _old(root: Path, name: str) -> Path:
    return root / f".{name}.old"


def recover_root(root: Path) -> None:
    """Rename back every ``.step-K.old`` whose ``step-K`` is missing (a swap killed between its two renames) and
    remove the ones whose swap completed."""
    for old in root.glob(".step-*.old"):
        final = root / old.name[1:-len(".old")]
        if final.exists():
            shutil.rmtree(old)
        else:
            os.replace(old, final)
    fsync_dir(root)


def swap_into_place(root: Path, staging: Path, name: str) -> Path:
    """Move the complete ``staging`` directory to ``root/name`` and point ``latest`` at it; an existing
    ``root/name`` is kept aside until the new one is in place (see the module doc)."""
    final, old = root / name, _old(root, name)
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
        fsync_dir(root)
    os.replace(staging, final)
    fsync_dir(root)
    atomic_write(root / LATEST, (name + "\n").encode())
    if old.exists():
        shutil.rmtree(old)
    return final


def resolve_step(root: Path) -> Path:
    """The step directory ``root/latest`` names: a plain step name, one line; if that directory is missing but
    its ``.old`` twin survives an interrupted swap, that one."""
    pointer = root / LATEST
    try:
        text = pointer.read_bytes().decode("ascii")
    except (OSError, UnicodeDecodeError):
        raise CheckpointError(f"{pointer}: unreadable or not ASCII; it must hold one step name") from None
    name = text[:-1] if text.endswith("\n") else text
    if not STEP_NAME.fullmatch(name):
        raise CheckpointError(f"{pointer}: holds {text[:40]!r}; it must hold one step name such as 'step-000006' "
                              f"and a newline")
    if not (root / name).is_dir() and _old(root, name).is_dir():
        return _old(root, name)
    if not (root / name).is_dir():
        raise CheckpointError(f"{pointer}: names {name}, which is not a directory of {root}")
    return root / name
