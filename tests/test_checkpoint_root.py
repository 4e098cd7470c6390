"""A checkpoint root's writer lock and step swap, on their own: the lock file's contents and mode, the liveness
probe that never disturbs the process it asks about, a takeover that races with another writer, a release that
never removes another writer's lock, and a swap that finds a leftover of an earlier one."""
import os
import socket
import subprocess
import sys

import pytest

from zero_stages.checkpoint import root as root_module
from zero_stages.checkpoint.format import CheckpointError
from zero_stages.checkpoint.root import LOCK, RootLock, resolve_step, swap_into_place

# a child that reports any catchable signal it receives (and exits 3), else says "done" when its stdin closes
_LISTENER = ("import signal, sys\n"
             "def got(n, f):\n"
             "    print('signal', n, flush=True); sys.exit(3)\n"
             "for s in signal.valid_signals():\n"
             "    try:\n"
             "        signal.signal(s, got)\n"
             "    except (OSError, ValueError, RuntimeError):\n"
             "        pass\n"
             "print('ready', flush=True); sys.stdin.read(); print('done', flush=True)\n")


def test_the_liveness_probe_delivers_no_signal(tmp_path):
    """kill(2) with signal 0 checks that a process exists and delivers nothing: the writer refused by a live
    process's lock must not have sent that process any signal (a SIGHUP would end most programs)."""
    child = subprocess.Popen([sys.executable, "-c", _LISTENER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        (tmp_path / LOCK).write_text(f"{socket.gethostname()} {child.pid}\n")
        with pytest.raises(CheckpointError, match=rf"being written by pid {child.pid} on host "):
            RootLock(tmp_path)
        out, _ = child.communicate("", timeout=60)
        assert (out, child.returncode) == ("done\n", 0)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_process_we_may_not_signal_is_alive(tmp_path, monkeypatch):
    """kill(2) fails with EPERM for another user's live process: that process exists, its lock is not stale."""
    def not_ours(pid, sig):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(root_module.os, "kill", not_ours)
    (tmp_path / LOCK).write_text(f"{socket.gethostname()} 999999\n")
    with pytest.raises(CheckpointError, match="being written by pid 999999"):
        RootLock(tmp_path)
    assert (tmp_path / LOCK).read_text() == f"{socket.gethostname()} 999999\n"


def test_the_lock_file_names_this_writer_and_is_not_executable(tmp_path):
    """The lock holds "host pid" and a newline, and is created rw-r--r-- (0o644 under the usual umask 022)."""
    old = os.umask(0o022)
    try:
        lock = RootLock(tmp_path)
    finally:
        os.umask(old)
    assert lock.path.read_text() == f"{socket.gethostname()} {os.getpid()}\n"
    assert os.stat(lock.path).st_mode & 0o777 == 0o644
    lock.release()


def test_an_unreadable_lock_is_refused_and_said_to_be(tmp_path):
    """A lock whose text is not "host pid" cannot be judged stale: refused, naming an unknown process."""
    (tmp_path / LOCK).write_text("garbage\n")
    with pytest.raises(CheckpointError, match=r"being written by an unknown process \(unreadable lock file\);"):
        RootLock(tmp_path)


def test_a_stale_lock_removed_meanwhile_is_still_taken_over(tmp_path, monkeypatch):
    """Another writer may remove a stale lock between this writer's look and its removal: no error, the lock is
    taken."""
    (tmp_path / LOCK).write_text("x 1\n")

    def stale_and_gone(self):
        self.path.unlink()
        return True
    monkeypatch.setattr(RootLock, "_stale", stale_and_gone)
    lock = RootLock(tmp_path)
    assert lock.held and lock.path.read_text().split()[1] == str(os.getpid())


def test_a_lock_that_keeps_coming_back_is_refused_after_one_takeover(tmp_path, monkeypatch):
    """One takeover per writer: a lock found again after taking over a stale one is another writer's race, and
    the writer refuses (it does not loop), saying so."""
    attempts = []
    real_open = root_module.os.open

    def always_there(path, flags, mode=0o777):
        if str(path).endswith(LOCK):
            attempts.append(path)
            raise FileExistsError(path)
        return real_open(path, flags, mode)
    monkeypatch.setattr(root_module.os, "open", always_there)
    monkeypatch.setattr(RootLock, "_stale", lambda self: True)
    with pytest.raises(CheckpointError, match=r"\.lock: could not take the lock \(another writer keeps taking it\)$"):
        RootLock(tmp_path)
    assert len(attempts) == 2


def test_releasing_twice_never_removes_another_writers_lock(tmp_path):
    """After its release a lock object holds nothing: releasing it again leaves the next writer's lock alone;
    a release after the file vanished is no error."""
    first = RootLock(tmp_path)
    first.release()
    assert not first.held and not first.path.exists()
    second = RootLock(tmp_path)
    first.release()
    assert second.path.exists()
    second.path.unlink()
    second.release()
    assert not second.held


def test_a_swap_removes_a_leftover_old_step_first(tmp_path):
    """A ``.step-K.old`` left beside ``step-K`` by an earlier swap is removed before the current step is moved
    aside: the new step ends in place, the previous one is gone, no ``.old`` remains."""
    for name, text in (("step-000001", "previous"), (".step-000001.old", "leftover"), (".partial", "new")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text(text)
    final = swap_into_place(tmp_path, tmp_path / ".partial", "step-000001")
    assert final == tmp_path / "step-000001" and (final / "f").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step-000001"]
    assert (tmp_path / "latest").read_text() == "step-000001\n"


def test_a_bad_pointer_is_quoted_up_to_40_characters(tmp_path):
    """The error shows the first 40 characters of a bad ``latest`` (never a whole large file)."""
    (tmp_path / "latest").write_text("x" * 100)
    with pytest.raises(CheckpointError, match=r"holds '" + "x" * 40 + r"'; it must hold one step name"):
        resolve_step(tmp_path)

