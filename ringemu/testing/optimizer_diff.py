"""Diff a sharded optimizer's states against a data-parallel reference: the first step, state, shard and element.

``reference[t]`` is a dict of the full flat states after step t of the data-parallel run (``{"master": ...,
"m": ..., "v": ...}``, any names); ``sharded[t][r]`` the same dict of rank r's shards after step t of your sharded
run. ``bounds`` says which elements rank r holds: a :class:`~ringemu.layout.ChunkLayout`, a list of (start, stop)
per rank (``np.array_split``'s, an engine's partition), or None for ``ChunkLayout(S, N)``. States are compared bit
for bit (NaN payloads and signed zeros count), step by step, state by state in the reference's order, element by
element: :func:`first_difference` returns the first :class:`Difference`, or None; :func:`assert_sharded_matches`
raises ``AssertionError`` with its message.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..layout import ChunkLayout

__all__ = ["Difference", "first_difference", "assert_sharded_matches"]


@dataclass(frozen=True)
class Difference:
    """Where a sharded run first left its reference: ``element`` is the index in the full flat state, ``shard``
    the rank holding it and ``offset`` its index in that shard; ``expected``/``got`` the two values (None when the
    shard's length or a state's presence is what differs, said in ``why``)."""

    step: int
    state: str
    shard: int
    element: int | None
    offset: int | None
    expected: object = None
    got: object = None
    why: str = ""

    def message(self) -> str:
        where = f"step {self.step}, state {self.state!r}, shard {self.shard} (rank {self.shard})"
        if self.element is None:
            return f"{where}: {self.why}"
        return (f"{where}, element {self.element} (offset {self.offset} in the shard): the reference holds "
                f"{self.expected}, the sharded run {self.got}")


def _bounds(bounds, numel: int, n: int) -> list[tuple[int, int]]:
    if bounds is None:
        bounds = ChunkLayout(numel, n)
    if isinstance(bounds, ChunkLayout):
        return [(bounds.payload_slice(r).start, bounds.payload_slice(r).stop) for r in range(n)]
    out = [(int(a), int(b)) for a, b in bounds]
    if len(out) != n:
        raise ValueError(f"bounds lists {len(out)} shards for {n} ranks")
    return out


def _show(value: np.ndarray) -> str:
    bits = value.view(f"u{value.dtype.itemsize}")
    number = int(value) if value.dtype.kind in "iu" else float(value.astype(np.float64))
    return f"{number!r} (bits 0x{int(bits):0{2 * value.dtype.itemsize}x})"


def first_difference(reference: Sequence[Mapping[str, np.ndarray]], sharded: Sequence[Sequence[Mapping]],
                     bounds=None) -> Difference | None:
    """The first difference (module doc), or None when every state of every step equals its reference bits."""
    if len(reference) != len(sharded):
        raise ValueError(f"reference has {len(reference)} steps, sharded {len(sharded)}")
    for step, (full, ranks) in enumerate(zip(reference, sharded)):
        for state, want in full.items():
            want = np.ascontiguousarray(want).reshape(-1)
            cut = _bounds(bounds, want.shape[0], len(ranks))
            for rank, (start, stop) in sorted(enumerate(cut), key=lambda item: item[1]):
                if state not in ranks[rank]:
                    return Difference(step, state, rank, None, None, why="the shard has no such state")
                got = np.ascontiguousarray(ranks[rank][state]).reshape(-1)
                if got.shape[0] != stop - start or got.dtype != want.dtype:
                    return Difference(step, state, rank, None, None, why=(
                        f"the shard holds {got.shape[0]} {got.dtype} elements; elements [{start}, {stop}) of the "
                        f"reference are {stop - start} {want.dtype}"))
                part = want[start:stop]
                width = f"u{want.dtype.itemsize}"
                differ = np.flatnonzero(part.view(width) != got.view(width))
                if differ.size:
                    j = int(differ[0])
                    return Difference(step, state, rank, start + j, j, _show(part[j:j + 1][0:1].reshape(())),
                                      _show(got[j:j + 1].reshape(())))
    return None


def assert_sharded_matches(reference, sharded, bounds=None) -> None:
    """:func:`first_difference`, raising ``AssertionError`` with its message when there is one."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    found = first_difference(reference, sharded, bounds)
    if found is not None:
        raise AssertionError(found.message())
