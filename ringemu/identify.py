"""Which registry orders reproduce a collective's outputs, bit for bit: how to check an engine ringemu cannot run.

Given the inputs every rank fed a collective and the outputs every rank got back (captured from any engine:
NCCL on a GPU cluster, gloo, MPI, your own), :func:`identify` runs every order of the registry for that
collective on those inputs and names each one whose outputs equal the engine's on every element of every rank.
When none does, it says where the nearest order (the fewest differing elements) departs: the first differing
element, the rank, the chunk that holds it in that order, and the step at which that chunk was last written
there. Floating-point inputs make orders distinguishable (integer blocks sum exactly in any order, so every order
matches them); random normal fp32 inputs of a few thousand elements on N ≥ 4 ranks tell the registry's orders
apart.

A dump (``ringemu identify DUMP.npz``) holds ``collective`` ("all-reduce", "reduce-scatter" or "all-gather"),
``inputs`` (N, S) and ``outputs``: (N, S) for all-reduce and all-gather, and for reduce-scatter an (N, ceil(S/N))
array of each rank's shard padded with zeros, or ``output_0`` … ``output_{N-1}``; for all-gather, ``inputs``
holds the gathered buffer whose row r carries rank r's shard of ``ChunkLayout(S, N)``. bfloat16 has no numpy
type: store its bit patterns as uint16/int16 with ``dtype = "bf16"`` (``fp16``, ``fp32`` and ``fp64`` arrays
store as themselves). docs/engines.md shows a ten-line capture script for torch.distributed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import algorithms, collectives
from .dtypes import BFLOAT16, resolve_dtype
from .layout import ChunkLayout
from .partition import layout_for

__all__ = ["Identification", "Departure", "identify", "identify_dump", "load_dump"]


@dataclass(frozen=True)
class Departure:
    """Where an order's outputs first differ from the engine's."""

    algorithm: str
    differing: int  # elements (over all ranks) whose bits differ
    rank: int
    element: int  # index in the rank's output
    engine_value: float
    order_value: float
    chunk: int | None  # the chunk of the order's partition that holds the element
    step: int | None  # the last step that wrote that chunk on that rank

    def text(self) -> str:
        where = f"rank {self.rank}, element {self.element}"
        if self.chunk is not None:
            where += f" (chunk {self.chunk}" + ("" if self.step is None else f", last written at step {self.step}") + ")"
        return (f"{self.algorithm}: {self.differing} elements differ; first at {where}: engine "
                f"{self.engine_value!r}, {self.algorithm} {self.order_value!r}")


@dataclass(frozen=True)
class Identification:
    collective: str
    n_ranks: int
    numel: int
    dtype: str
    matches: tuple[str, ...]  # every registry order that reproduces the outputs bit for bit
    nearest: Departure | None = None  # when nothing matches: the order with the fewest differing elements
    refused: tuple[tuple[str, str], ...] = field(default=())  # (order, why it could not run here)

    def text(self) -> str:
        head = f"{self.collective} on {self.n_ranks} ranks, {self.numel:,} {self.dtype} elements per rank: "
        if self.matches:
            return head + "reproduced bit for bit by " + ", ".join(self.matches)
        return head + "no registry order reproduces it" + ("" if self.nearest is None else
                                                           "; nearest " + self.nearest.text())


def _outputs_of(collective: str, world: np.ndarray, name: str) -> list[np.ndarray]:
    n, numel = world.shape
    if collective == "all-reduce":
        return list(collectives.all_reduce(world, algorithm=name))
    if collective == "reduce-scatter":
        return [np.array(s) for s in collectives.reduce_scatter(world, algorithm=name)]
    shards = ChunkLayout(numel, n)
    gathered = collectives.all_gather([world[r, shards.payload_slice(r)].copy() for r in range(n)], algorithm=name)
    return list(gathered)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def _departure(name: str, collective: str, n: int, numel: int, itemsize: int, got, want) -> Departure:
    differing, first = 0, None
    for r, (g, w) in enumerate(zip(got, want)):
        bad = np.flatnonzero(_bits(g) != _bits(w))
        differing += int(bad.size)
        if first is None and bad.size:
            first = (r, int(bad[0]), g[int(bad[0])], w[int(bad[0])])
    r, j, engine_value, order_value = first
    schedule = algorithms.build(collective, n, name, numel=numel, itemsize=itemsize)
    layout = layout_for(schedule, numel)
    offset = ChunkLayout(numel, n).payload_slice(r).start if collective == "reduce-scatter" else 0
    chunk = next((c for c in range(layout.n_chunks) if layout.payload_slice(c).start <= j + offset
                  < layout.payload_slice(c).stop), None)
    step = None
    if chunk is not None:
        rows = schedule.table[(schedule.table[:, 2] == r) & (schedule.table[:, 3] == chunk)]
        step = int(rows[-1, 0]) if rows.shape[0] else None
    return Departure(name, differing, r, j, float(engine_value), float(order_value), chunk, step)


def identify(inputs, outputs, collective: str = "all-reduce", candidates=None) -> Identification:
    """Every registry order of ``collective`` (or of ``candidates``) that maps ``inputs`` (N, S) to ``outputs`` (one
    array per rank, as the collective returns them) bit for bit; the nearest departure when none does."""
    algorithms.algorithm(collective)  # a clear error for an unknown collective
    world = np.asarray(inputs)
    if world.ndim != 2 or world.shape[0] < 1:
        raise ValueError(f"inputs must be an (n_ranks, numel) array; got shape {world.shape}")
    dt = resolve_dtype(world.dtype)
    n, numel = world.shape
    outs = [np.asarray(o) for o in outputs]
    want_lengths = (ChunkLayout(numel, n).payloads().tolist() if collective == "reduce-scatter" else [numel] * n)
    if len(outs) != n or [o.shape for o in outs] != [(k,) for k in want_lengths] or any(o.dtype != dt for o in outs):
        raise ValueError(f"outputs must be {n} arrays of {dt} with lengths {want_lengths[:8]}"
                         f"{'...' if n > 8 else ''}; got {len(outs)} of lengths {[o.shape for o in outs][:8]}")
    names = algorithms.names(collective) if candidates is None else tuple(candidates)
    matches, refused, nearest = [], [], None
    for name in names:
        entry = algorithms.algorithm(collective, name)
        reason = entry.unsupported(n)
        if reason is not None:
            refused.append((name, reason))
            continue
        got = _outputs_of(collective, world, name)
        if all(np.array_equal(_bits(g), _bits(o)) for g, o in zip(got, outs)):
            matches.append(name)
        elif not matches:
            here = _departure(name, collective, n, numel, dt.itemsize, outs, got)
            if nearest is None or here.differing < nearest.differing:
                nearest = here
    return Identification(collective, n, numel, str(dt) if dt != BFLOAT16 else "bf16", tuple(matches),
                          None if matches else nearest, tuple(refused))


_DTYPES = {"bf16": BFLOAT16, "fp16": np.dtype(np.float16), "fp32": np.dtype(np.float32),
           "fp64": np.dtype(np.float64)}


def load_dump(path) -> tuple[str, np.ndarray, list[np.ndarray]]:
    """(collective, inputs, outputs per rank) from a dump file (module doc), with clear errors."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"dump {path} is not a file")
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"dump {path} is not an .npz file numpy can read ({exc})") from None
    keys = set(data.files)
    if "inputs" not in keys or "collective" not in keys:
        raise ValueError(f"dump {path} needs arrays 'inputs' and 'collective'; it has {sorted(keys)}")
    collective = str(data["collective"])
    algorithms.algorithm(collective)
    dtype = _DTYPES.get(str(data["dtype"])) if "dtype" in keys else None
    if "dtype" in keys and dtype is None:
        raise ValueError(f"dump dtype must be one of {', '.join(_DTYPES)}; got {str(data['dtype'])!r}")

    def as_dtype(a: np.ndarray) -> np.ndarray:
        if dtype is None or a.dtype == dtype:
            return a
        if a.dtype.itemsize != dtype.itemsize:
            raise ValueError(f"dump arrays of {a.dtype} cannot hold {str(data['dtype'])} bit patterns")
        return a.view(dtype)

    inputs = as_dtype(data["inputs"])
    if inputs.ndim != 2:
        raise ValueError(f"dump 'inputs' must be (n_ranks, numel); got shape {inputs.shape}")
    n, numel = inputs.shape
    if "outputs" in keys:
        outputs = [as_dtype(row) for row in data["outputs"]]
    else:
        missing = [f"output_{r}" for r in range(n) if f"output_{r}" not in keys]
        if missing:
            raise ValueError(f"dump {path} needs 'outputs' or output_0 ... output_{n - 1}; missing {missing[:4]}")
        outputs = [as_dtype(data[f"output_{r}"]) for r in range(n)]
    if collective == "reduce-scatter":
        lengths = ChunkLayout(numel, n).payloads().tolist()
        outputs = [o[:k] for o, k in zip(outputs, lengths)]
    return collective, inputs, [np.ascontiguousarray(o) for o in outputs]


def identify_dump(path, candidates=None) -> Identification:
    """:func:`identify` on a dump file."""
    collective, inputs, outputs = load_dump(path)
    return identify(inputs, outputs, collective, candidates)
