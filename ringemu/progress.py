"""Progress on stderr for the long commands (``zero --backend torch``, ``prove``, ``bench``): a tqdm bar when
stderr is a terminal, nothing otherwise — never on stdout, never in ``--json`` output, never in a pipe or a log.

tqdm is a dependency of ringemu; if it is missing all the same, the commands run silently as before.
"""
from __future__ import annotations

import sys

__all__ = ["progress_bar"]


class _Silent:
    """The part of tqdm's interface the commands use, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_bar(total: int, desc: str, *, enabled: bool = True, stream=None):
    """A bar of ``total`` steps named ``desc`` on ``stream`` (stderr), shown only when ``enabled`` and the
    stream is a terminal; otherwise an object with the same ``update`` / ``set_postfix_str`` / ``close`` that
    prints nothing. Use it as a context manager; the bar is removed when it closes (``leave=False``)."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if not enabled or not (callable(isatty) and isatty()):
        return _Silent()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Silent()
    return tqdm(total=total, desc=desc, file=stream, leave=False, dynamic_ncols=True)
