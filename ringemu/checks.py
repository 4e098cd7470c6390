"""Argument checks every module shares: integers, rank counts, element counts, seconds.

Each check returns the value normalised (a Python ``int`` or ``float``) or raises ``TypeError`` (wrong type) or
``ValueError`` (out of range) with a message that names the argument and says what is allowed, e.g.
``n_ranks must be an integer >= 1, got 0``. ``bool`` is never an integer here, and numpy integers are accepted
(and returned as Python ints, so that counts stay exact).
"""
from __future__ import annotations

import math
import operator

import numpy as np

__all__ = ["MAX_NUMEL", "is_integer", "check_int", "check_n_ranks", "check_numel", "check_timeout"]

MAX_NUMEL = 2 ** 63 - 1  # offsets and counts are aggregated in int64 arrays


def is_integer(value: object) -> bool:
    """True for Python and numpy integers, False for ``bool`` and everything else."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(value: object, name: str, minimum: int | None = None, maximum: int | None = None,
              why: str = "") -> int:
    """``value`` as an int, or a clear error unless it is an integer in [``minimum``, ``maximum``] (either bound
    may be None). ``why`` is said in parentheses after the range."""
    allowed = "an integer"
    if minimum is not None:
        allowed += f" >= {minimum}"
    if maximum is not None:
        allowed += f" and <= {maximum:_}" if minimum is not None else f" <= {maximum:_}"
    if why:
        allowed += f" ({why})"
    if not is_integer(value):
        raise TypeError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return operator.index(value)


def check_n_ranks(n_ranks: object, name: str = "n_ranks") -> int:
    """A rank count: an integer >= 1."""
    return check_int(n_ranks, name, minimum=1)


def check_numel(numel: object, name: str = "numel") -> int:
    """An element (or byte) count: an integer >= 0 and below 2**63."""
    n = check_int(numel, name, minimum=0)
    if n > MAX_NUMEL:
        raise ValueError(f"{name} must be below 2**63 (counts are aggregated in int64), got {n}")
    return n


def check_timeout(timeout: object, name: str = "timeout", allow_none: bool = False) -> float | None:
    """A finite number of seconds > 0 as a float (or None where ``allow_none``)."""
    if timeout is None and allow_none:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)) \
            or not math.isfinite(timeout) or not timeout > 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0{', or None' if allow_none else ''}; "
                         f"got {timeout!r}")
    return float(timeout)
