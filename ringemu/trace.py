"""Step-by-step trace of a schedule: who sends what, what every rank holds, whose contributions each chunk has.

The trace is the schedule's third consumer (DESIGN.md). It knows nothing of the ring: it reads the transfers of
each step from the :class:`~ringemu.schedule.Schedule`, executes that one step with the kernels
(:func:`ringemu.execute.run_schedule` on a one-step schedule), and takes each chunk's provenance — the set of
ranks whose input it holds — from the symbolic run of :func:`ringemu.provenance.run_provenance`. The text
rendering is the classic walk of ring all-reduce (as in baidu-allreduce's README): one grid of ranks × chunks
per step.

Traces are for teaching-sized runs; :data:`MAX_RANKS` and :data:`MAX_NUMEL` bound them (``ringemu count``
handles any size).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import integer_blocks, value_bound
from .dtypes import dtype_name, resolve_dtype
from .execute import run_schedule
from .faults.link import run_faulty_step
from .faults.spec import with_step
from .checks import check_n_ranks, check_numel
from .layout import ChunkLayout
from .partition import layout_for
from .provenance import initial_provenance, run_provenance
from .algorithms import algorithm as algorithm_entry, build, schedule_for
from .ledger import CommLedger
from .schedule import ADD, Schedule, Transfer
from .views.notebook import trace_html  # the view reads the trace's data and never imports this module

__all__ = ["MAX_RANKS", "MAX_NUMEL", "TraceStep", "Trace", "trace_schedule", "trace_collective", "trace_algorithm", "format_ranks"]

MAX_RANKS = 16  # ranks: a grid wider than this is not readable
MAX_NUMEL = 256  # elements per rank buffer
_VERBS = {"add": "adds", "copy": "copies"}


@dataclass(frozen=True, eq=False)
class TraceStep:
    """The state after one step (or, for ``step == -1``, before the first one)."""

    step: int
    phase: str  # what the step does, e.g. "reduce-scatter"; "initial" before step 0
    transfers: tuple[Transfer, ...]
    buffers: np.ndarray  # (N, padded numel): every rank's buffer after the step, padding included
    provenance: tuple[tuple[frozenset[int], ...], ...]  # [rank][chunk]: ranks whose input the chunk holds


@dataclass(frozen=True, eq=False)
class Trace:
    """The whole walk: the state before step 0 (``initial``) and after every step (``steps``)."""

    schedule: Schedule
    layout: ChunkLayout
    dtype: np.dtype
    initial: TraceStep
    steps: tuple[TraceStep, ...]

    @property
    def final(self) -> np.ndarray:
        """Every rank's padded buffer after the last step (in the schedule's chunk layout)."""
        return (self.steps[-1] if self.steps else self.initial).buffers

    @property
    def result(self) -> np.ndarray:
        """Every rank's (numel,) buffer after the last step, padding removed: what the collective returns for an
        all-reduce or all-gather, whatever the algorithm's chunking (``final[:, :numel]`` only for the plain
        layout)."""
        return self.layout.unpad(self.final)

    def as_dict(self) -> dict:
        """A JSON-ready dict (values as Python ints for whole numbers, floats otherwise)."""
        lay = self.layout
        return {
            "schedule": self.schedule.name,
            "n_ranks": self.schedule.n_ranks,
            "numel": lay.numel,
            "dtype": dtype_name(self.dtype),
            "n_chunks": lay.n_chunks,
            "chunk_size": lay.chunk_size,
            "padding": lay.padding,
            "n_steps": self.schedule.n_steps,
            "initial": _state_dict(self.initial, lay),
            "steps": [_state_dict(s, lay) for s in self.steps],
        }

    def _repr_html_(self) -> str:
        """Notebooks: the step-by-step stepper (:mod:`ringemu.views`) and a static SVG of the final state."""
        return trace_html(self)

    def render(self, wrong: dict[int, set[tuple[int, int]]] | None = None) -> str:
        """The walk as text: per step, the transfers and a ranks × chunks grid of values and provenance.

        A cell reads ``[values] {ranks}``: the chunk's payload and the ranks whose input it holds; ``*`` marks a
        chunk the rank received in this step; ``·`` a chunk that holds nothing yet; ``_`` a padding element;
        ``!`` a cell listed in ``wrong[step]`` (a faulty run's cells that differ from the fault-free run's).
        """
        wrong = wrong or {}
        sched, lay = self.schedule, self.layout
        head = (f"{sched.name}: {sched.n_ranks} ranks, {lay.numel} elements of {dtype_name(self.dtype)} per rank, "
                f"{lay.n_chunks} chunk{'s' if lay.n_chunks != 1 else ''} of {lay.chunk_size}"
                + (f" ({lay.padding} padding)" if lay.padding else "")
                + f", {sched.n_steps} step{'s' if sched.n_steps != 1 else ''}")
        lines = [head, "", "before step 1", *self._grid(self.initial, set(), wrong.get(-1, set()))]
        for s in self.steps:
            received = {(t.dst, t.chunk) for t in s.transfers}
            verbs = " or ".join(sorted({_VERBS[t.op] for t in s.transfers}))
            lines += ["", f"step {s.step + 1}/{sched.n_steps}, {s.phase} (the receiver {verbs}): "
                      + ", ".join(f"{t.src}->{t.dst} c{t.chunk}" for t in s.transfers)]
            lines += self._grid(s, received, wrong.get(s.step, set()))
        return "\n".join(lines)

    def _grid(self, state: TraceStep, received: set[tuple[int, int]], wrong: set[tuple[int, int]]) -> list[str]:
        lay, n = self.layout, self.schedule.n_ranks
        cells = [[_cell(state, lay, r, c, (r, c) in received) + ("!" if (r, c) in wrong else "")
                  for c in range(lay.n_chunks)] for r in range(n)]
        width = [max(len(f"chunk {c}"), *(len(row[c]) for row in cells)) for c in range(lay.n_chunks)]
        label = len(f"rank {n - 1}")
        lines = [" " * (label + 2) + "  ".join(f"chunk {c}".ljust(width[c]) for c in range(lay.n_chunks)).rstrip()]
        for r, row in enumerate(cells):
            lines.append(f"rank {r}".rjust(label) + "  " + "  ".join(x.ljust(w) for x, w in zip(row, width)).rstrip())
        return lines


def format_ranks(ranks: frozenset[int], n_ranks: int) -> str:
    """A set of ranks as ``{all}``, ``{}`` or ranges in ring order: ``{6-7,0-2}`` wraps from rank 7 to rank 0."""
    if len(ranks) == n_ranks and n_ranks > 1:
        return "{all}"
    parts: list[list[int]] = []
    for r in sorted(ranks):
        if parts and r == parts[-1][-1] + 1:
            parts[-1].append(r)
        else:
            parts.append([r])
    if len(parts) > 1 and parts[0][0] == 0 and parts[-1][-1] == n_ranks - 1:
        parts = [parts[-1]] + parts[:-1]  # a range that wraps around the ring is shown from its start
    return "{" + ",".join(str(p[0]) if len(p) == 1 else f"{p[0]}-{p[-1]}" for p in parts) + "}"


def trace_schedule(schedule: Schedule, world: np.ndarray, mode: str = "step", faults=None) -> Trace:
    """Run ``schedule`` one step at a time on a copy of ``world`` (N, S) and record every step.

    ``faults`` (message faults of :mod:`ringemu.faults.plan`) are applied at their steps with the link layer's checks
    off, so that the trace shows the wrong values travelling; provenance stays the fault-free schedule's.

    Rows are zero-padded to the schedule's chunk layout (``ChunkLayout(S, n_chunks, N)``). For a schedule whose
    initial condition is ``"own"`` (all-gather) only shard r of row r is input; the rest of each row is set to
    zero. ``mode`` is passed to
    :func:`ringemu.execute.run_schedule`; every mode gives the same bits.
    """
    if not isinstance(world, np.ndarray) or world.ndim != 2:
        raise TypeError(f"world must be a 2-D numpy array (n_ranks, numel); got {type(world).__name__}")
    n, numel = world.shape
    if n != schedule.n_ranks:
        raise ValueError(f"world has {n} rows but {schedule.name} runs on {schedule.n_ranks} ranks")
    _check_small(n, numel)
    layout = layout_for(schedule, numel)
    buffers = layout.pad(world, np.empty((n, layout.padded_numel), dtype=world.dtype))
    if schedule.initial == "own":
        own = np.zeros_like(buffers)
        for r in range(n):
            for c in schedule.chunks_of_shard(r):
                lo, hi = layout.start(c), layout.start(c + 1)
                own[r, lo:hi] = buffers[r, lo:hi]
        buffers = own
    _, history = run_provenance(schedule, record_steps=True)
    initial = TraceStep(-1, "initial", (), buffers.copy(), _frozen(initial_provenance(schedule)))
    steps = []
    bounds = schedule.step_bounds()
    readable = schedule.steps()
    for s in range(schedule.n_steps):
        rows = schedule.table[bounds[s]:bounds[s + 1]].copy()
        rows[:, 0] = 0
        one = schedule.with_rows(f"{schedule.name}[step {s}]", 1, rows)
        here = [with_step(f, 0) for f in (faults or ()) if f.step == s and f.kind != "stop"]
        if here:
            run_faulty_step(one, buffers, 0, here, schedule.name, checksums=False)
        else:
            run_schedule(one, buffers, mode)
        steps.append(TraceStep(s, _phase(schedule, rows), readable[s], buffers.copy(), _frozen(history[s])))
    return Trace(schedule, layout, world.dtype, initial, tuple(steps))


def trace_collective(op: str, n_ranks: int, numel: int, dtype: object = "int32", seed: int = 0,
                     max_abs: int | None = 9, algorithm: str | None = None, *,
                     ranks_per_node: int | None = None, faults=None) -> Trace:
    """Trace collective ``op`` (an op name of :func:`ringemu.algorithms.op_names`) by ``algorithm`` (default the
    ring; see :func:`ringemu.algorithms.resolve_op`) on :func:`~ringemu.blocks.integer_blocks` (values in
    [-max_abs, max_abs], single digits by default). ``faults``: see :func:`trace_schedule`."""
    n = check_n_ranks(n_ranks)
    _check_small(n, check_numel(numel))
    schedule = schedule_for(op, n, algorithm, ranks_per_node=ranks_per_node, numel=numel,
                            itemsize=resolve_dtype(dtype).itemsize)
    if max_abs is not None:
        max_abs = min(max_abs, value_bound(n, dtype))
    return trace_schedule(schedule, integer_blocks(n, numel, seed, dtype, max_abs=max_abs), faults=faults)


# -- internals -------------------------------------------------------------------------------------------------
def _check_small(n: int, numel: int) -> None:
    if n > MAX_RANKS or numel > MAX_NUMEL:
        raise ValueError(f"a trace is for small runs: n_ranks must be <= {MAX_RANKS} and numel <= {MAX_NUMEL}; "
                         f"got n_ranks={n}, numel={numel} (use `ringemu count` for large sizes)")


def _frozen(state: list[list[int]]) -> tuple[tuple[frozenset[int], ...], ...]:
    return tuple(tuple(frozenset(r for r in range(mask.bit_length()) if mask >> r & 1) for mask in row)
                 for row in state)


def _phase(schedule: Schedule, rows: np.ndarray) -> str:
    """Name a step from its data: additions into many chunks reduce-scatter, into one chunk reduce to a root;
    copies of many chunks all-gather, of one chunk broadcast."""
    adds = bool((rows[:, 4] == ADD).all())
    if schedule.n_chunks > 1:
        return "reduce-scatter" if adds else "all-gather"
    roots = sorted(set((rows[:, 2] if adds else rows[:, 1]).tolist()))
    return (f"reduce to rank {roots[0]}" if adds else f"broadcast from rank {roots[0]}") if len(roots) == 1 \
        else ("reduce" if adds else "copy")


def _values(values: np.ndarray) -> list:
    if values.dtype.kind in "iu":
        return [int(v) for v in values.tolist()]
    wide = values.astype(np.float64)
    return [int(v) if np.isfinite(v) and v == int(v) else float(v) for v in wide.tolist()]


def _cell(state: TraceStep, lay: ChunkLayout, rank: int, chunk: int, received: bool) -> str:
    prov = state.provenance[rank][chunk]
    mark = "*" if received else ""
    if not prov:
        return "·" + mark
    lo = lay.start(chunk)
    payload = state.buffers[rank, lo:lo + lay.payload(chunk)]
    values = [str(v) if isinstance(v, int) else str(x) for v, x in zip(_values(payload), payload)]  # shortest repr
    values += ["_"] * (lay.chunk_size - lay.payload(chunk))
    return f"[{' '.join(values)}] {format_ranks(prov, len(state.provenance))}{mark}"


def _state_dict(state: TraceStep, lay: ChunkLayout) -> dict:
    return {
        "step": state.step,
        "phase": state.phase,
        "transfers": [t._asdict() for t in state.transfers],
        "buffers": [_values(row) for row in lay.unpad(state.buffers)],
        "provenance": [[sorted(p) for p in row] for row in state.provenance],
    }


def trace_algorithm(collective: str, algorithm_name: str, n_ranks: int, numel: int | None = None, seed: int = 0,
                    dtype: str = "int32", max_abs: int = 9) -> tuple[Trace, CommLedger, np.ndarray]:
    """Trace ``algorithm_name`` of ``collective`` on fixed-seed integer blocks (values in [-max_abs, max_abs],
    :func:`ringemu.trace.trace_collective`), and run the whole schedule once more on its own, recording it in a
    CommLedger. ``numel`` defaults to max(N, the schedule's chunks): one value per chunk where chunks are many.

    Returns (trace, ledger, inputs). The whole run's final buffers equal the trace's (checked).
    """
    if numel is None:
        entry = algorithm_entry(collective, algorithm_name)
        numel = n_ranks if entry.sized else max(n_ranks, build(collective, n_ranks, algorithm_name).n_chunks)
    trace = trace_collective(collective, n_ranks, numel, dtype, seed, max_abs, algorithm_name)
    inputs = integer_blocks(n_ranks, numel, seed, dtype, max_abs=min(max_abs, value_bound(n_ranks, dtype)))
    ledger = CommLedger()
    ledger.record(trace.schedule, trace.layout, trace.dtype, collective)
    whole = trace.initial.buffers.copy()
    run_schedule(trace.schedule, whole, "fused")
    if not np.array_equal(whole, trace.final):
        raise AssertionError(f"{trace.schedule.name}: the whole run and the step-by-step trace disagree")
    return trace, ledger, inputs
