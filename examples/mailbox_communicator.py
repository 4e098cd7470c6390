"""A Communicator written from scratch, as a user would: ranks are threads that exchange numpy arrays through
mailboxes, and the collectives are the textbook ring (Patarasuk & Yuan 2009, §3). ``bug`` plants one of two
classic mistakes, for the conformance suite to catch (``docs/testing.md``):

* ``"missing-1/N"`` — each reduce-scatter step sends the whole buffer instead of one chunk (1/N of it): the sums
  are right, the bytes are N times what a ring sends;
* ``"off-by-one-shard"`` — the shard size is ``S // N`` instead of ``ceil(S/N)``, so a rank's reduce-scatter
  shard is cut one element short whenever N does not divide S.

It reports ``bytes_sent()``, which the suite compares with ringemu's ledger. It sends padded chunks of
ceil(S/N) elements, so it is checked with ``count="padded"`` (``examples/ring_communicators.py`` is the unpadded
ring, as engines send it, for the default ``count="payload"``).
"""
from __future__ import annotations

import queue
import threading

import numpy as np

BUGS = (None, "missing-1/N", "off-by-one-shard")


class MailboxCommunicator:
    """One rank; ``boxes[(src, dst)]`` is the queue of arrays from src to dst."""

    def __init__(self, rank: int, n_ranks: int, boxes: dict, bug: str | None = None):
        self.rank, self.n_ranks, self.boxes, self.bug, self.ledger = rank, n_ranks, boxes, bug, None
        self._sent = 0

    def bytes_sent(self) -> int:
        return self._sent

    def _send(self, dst: int, data: np.ndarray) -> None:
        self._sent += data.nbytes
        self.boxes[(self.rank, dst)].put(data.copy())

    def _recv(self, src: int) -> np.ndarray:
        return self.boxes[(src, self.rank)].get(timeout=30)

    def _chunk(self, numel: int) -> int:
        if self.bug == "off-by-one-shard":
            return numel // self.n_ranks
        return -(-numel // self.n_ranks)

    def _ring(self, buffer: np.ndarray, reduce: bool, gather: bool) -> tuple[np.ndarray, int]:
        n, r, numel = self.n_ranks, self.rank, buffer.shape[0]
        c = -(-numel // n)
        buf = np.zeros(n * c, buffer.dtype)
        buf[:numel] = buffer
        nxt, prv = (r + 1) % n, (r - 1) % n
        wide = np.float64 if buffer.dtype == np.float64 else np.float32  # 16-bit types: add in fp32
        if reduce:
            for step in range(n - 1):
                k_out, k_in = (r - step - 1) % n, (r - step - 2) % n
                self._send(nxt, buf if self.bug == "missing-1/N" else buf[k_out * c:(k_out + 1) * c])
                data = self._recv(prv)
                if self.bug == "missing-1/N":
                    data = data[k_in * c:(k_in + 1) * c]
                part = buf[k_in * c:(k_in + 1) * c]
                if buffer.dtype.kind == "f":
                    part[...] = (part.astype(wide) + data.astype(wide)).astype(buffer.dtype)
                else:
                    part += data
        if gather:
            for step in range(n - 1):
                k_out, k_in = (r - step) % n, (r - step - 1) % n
                self._send(nxt, buf[k_out * c:(k_out + 1) * c])
                buf[k_in * c:(k_in + 1) * c] = self._recv(prv)
        return buf, c

    def reduce_scatter(self, buffer, label="reduce_scatter"):
        buf, c = self._ring(buffer, reduce=True, gather=False)
        shard = self._chunk(buffer.shape[0])
        start = self.rank * c
        return buf[start:min(start + shard, buffer.shape[0])].copy() if start < buffer.shape[0] else buf[:0].copy()

    def all_gather(self, shard, numel, label="all_gather"):
        c = -(-numel // self.n_ranks)
        full = np.zeros(numel, shard.dtype)
        start = min(self.rank * c, numel)
        full[start:start + shard.shape[0]] = shard
        buf, _ = self._ring(full, reduce=False, gather=True)
        return buf[:numel].copy()

    def all_reduce(self, buffer, label="all_reduce"):
        buf, _ = self._ring(buffer, reduce=True, gather=True)
        return buf[:buffer.shape[0]].copy()


class MailboxWorld:
    """N ranks as N threads, each with a :class:`MailboxCommunicator`; ``run(fn, *args)`` like ringemu's worlds."""

    def __init__(self, n_ranks: int, bug: str | None = None):
        if bug not in BUGS:
            raise ValueError(f"bug must be one of {BUGS}; got {bug!r}")
        self.n_ranks, self.bug = n_ranks, bug

    def run(self, fn, *args):
        n = self.n_ranks
        boxes = {(s, d): queue.Queue() for s in range(n) for d in range(n)}
        results, errors = [None] * n, []

        def body(rank):
            try:
                results[rank] = fn(MailboxCommunicator(rank, n, boxes, self.bug), *args)
            except BaseException as exc:
                errors.append((rank, exc))

        threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            rank, exc = min(errors, key=lambda e: e[0])
            raise RuntimeError(f"rank {rank}: {type(exc).__name__}: {exc}")
        return results


if __name__ == "__main__":
    import sys

    from ringemu.testing.conformance import check_communicator

    bug = sys.argv[1] if len(sys.argv) > 1 else None
    report = check_communicator(lambda n: MailboxWorld(n, bug), name=f"MailboxCommunicator(bug={bug!r})",
                                count="padded")
    print(report.text())
    sys.exit(0 if report.ok else 1)
