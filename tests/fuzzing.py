"""The fuzzing harness: every public entry point and every CLI subcommand, driven by hypothesis with malformed input.

An *entry point* is a library function with one valid call (``valid``); a fuzz example replaces one argument with
a malformed value and classifies what happens (:func:`call_library`). A *subcommand* is a valid ``ringemu`` argv;
an example replaces one flag's value with malformed text, drops a required flag or adds an unknown one
(:func:`call_cli`). Outcomes:

* ``refused``: the library raised ValueError/TypeError naming the argument; the CLI printed one line
  ``ringemu: error: ...`` and exited 2;
* ``ran``: the input was acceptable after all (exit status 0 or 1, or a normal return);
* anything else is a ``BAD:`` outcome: another exception, a message that does not name the argument, a traceback,
  several lines, a silent exit 2 — or an example that took longer than :data:`TIME_LIMIT_S`.

``tests/test_fuzz_entry_points.py`` asserts that no example is BAD; ``benchmarks/fuzz_summary.py`` counts the
inputs tried per entry point for docs/robustness.md.
"""
from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

__all__ = ["EntryPoint", "LIBRARY", "SUBCOMMANDS", "malformed_values", "malformed_text", "call_library", "call_cli",
           "library_examples", "cli_examples", "library_entry_points", "is_bad", "TIME_LIMIT_S"]

TIME_LIMIT_S = 60.0  # one example: refusals take milliseconds; the largest valid runs drawn (1,000 ranks) ~20 s

# Values no argument of any entry point accepts as such, and values only some accept (they may run).
_ALWAYS_WRONG = [None, "x", "", b"3", [], [1, "a"], {}, object(), float("nan"), float("inf"), -float("inf"),
                 1.5, -1, -10 ** 30, 10 ** 30, 2 ** 63, 2 ** 64, True, np.float32(2.0), complex(1, 1)]


def malformed_values():
    """A strategy of malformed Python values (wrong types, non-finite, negative, beyond every bound)."""
    return st.one_of(st.sampled_from(_ALWAYS_WRONG), st.integers(max_value=-1), st.integers(min_value=10 ** 12),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                     st.lists(st.integers(-3, 3), max_size=3))


_TEXT = ["", " ", "-1", "0", "-0", "nan", "NaN", "inf", "-inf", "1e999999999", "1e-999999999", "1e400", "1e-400",
         "10000000000000000000000000000000", "-10000000000000000000000000000000", "9223372036854775808", "2.5",
         "0x10", "1_000", "１２", "abc", "--", "1,2,,3", ",", "0,0", "-5,7", "3" * 400, "1e309", "4e-324", "٣"]


def malformed_text():
    """A strategy of malformed flag values as a person might type them."""
    return st.one_of(st.sampled_from(_TEXT), st.text(max_size=12),
                     st.integers(min_value=-10 ** 40, max_value=10 ** 40).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr))


@dataclass(frozen=True)
class EntryPoint:
    """A public function with one valid call; ``arrays`` names arguments that take arrays (fuzzed with
    malformed arrays too)."""

    name: str
    function: object
    valid: dict
    arrays: tuple[str, ...] = ()
    names: dict = field(default_factory=dict)  # argument -> the word its errors use, when not the argument's name


def _world(n=3, numel=6, dtype=np.int32):
    return np.arange(n * numel, dtype=dtype).reshape(n, numel) % 7


def _library() -> list[EntryPoint]:
    from ringemu import algorithms, blocks, collectives, layout, trace, units
    from ringemu.cli import collective_commands as commands
    from zero_stages import api, flat, precision
    points = [
        EntryPoint("collectives.all_reduce", collectives.all_reduce, {"world": _world(), "mode": "fused",
                                                                       "label": "x"}, arrays=("world",)),
        EntryPoint("collectives.reduce_scatter", collectives.reduce_scatter, {"world": _world(), "mode": "step"},
                   arrays=("world",)),
        EntryPoint("collectives.all_gather", collectives.all_gather,
                   {"shards": [np.arange(2, dtype=np.int32)] * 3, "mode": "reference"}, arrays=("shards",)),
        EntryPoint("algorithms.build", algorithms.build, {"collective": "all-reduce", "n_ranks": 4}),
        EntryPoint("algorithms.schedule_for", algorithms.schedule_for, {"op": "all-reduce", "n_ranks": 4}),
        EntryPoint("blocks.integer_blocks", blocks.integer_blocks, {"n_ranks": 3, "numel": 5, "seed": 0,
                                                                     "dtype": "int32"}),
        EntryPoint("blocks.value_bound", blocks.value_bound, {"n_ranks": 3, "dtype": "bf16"}),
        EntryPoint("layout.ChunkLayout", layout.ChunkLayout, {"numel": 10, "n_chunks": 3}),
        EntryPoint("trace.trace_collective", trace.trace_collective, {"op": "all-reduce", "n_ranks": 3, "numel": 4,
                                                                       "dtype": "int32", "seed": 0}),
        EntryPoint("commands.run_collective", commands.run_collective,
                   {"op": "all-reduce", "n_ranks": 3, "numel": 4, "dtype": "int32", "seed": 0, "mode": "fused"},
                   names={"n_ranks": "ranks"}),
        EntryPoint("commands.count_collective", commands.count_collective,
                   {"op": "all-reduce", "n_ranks": 3, "numel": 4, "dtype": "fp32"}, names={"n_ranks": "ranks"}),
        EntryPoint("units.format_gb", units.format_gb, {"nbytes": 250_000_000, "places": 1}),
        EntryPoint("zero_stages.train", api.train, {"stage": "zero3", "n_ranks": 2, "steps": 1, "wire_dtype": "bf16",
                                                    "seed": 0, "grads": "blocks", "unit_sizes": (5, 3)}),
        EntryPoint("zero_stages.run_size_only", api.run_size_only,
                   {"stage": "zero2", "n_ranks": 2, "unit_sizes": (5, 3), "wire_dtype": "fp16"}),
        EntryPoint("zero_stages.FlatParams", flat.FlatParams, {"unit_sizes": (5, 3), "n_ranks": 2}),
        EntryPoint("zero_stages.LossScaling", precision.LossScaling, {"kind": "dynamic", "init_scale": 8.0,
                                                                      "growth_interval": 3}),
    ]
    import tempfile

    from zero_stages.checkpoint import save_load as checkpoint
    empty = tempfile.mkdtemp(prefix="ringemu-fuzz-checkpoint-")
    return points + [
        EntryPoint("checkpoint.load_checkpoint", checkpoint.load_checkpoint, {"path": empty}),
        EntryPoint("checkpoint.run_training", _in_scratch_directory(checkpoint.run_training),
                   {"stage": "dp", "job": api.training_job(2, 1, grads="blocks", unit_sizes=(5,)),
                    "checkpoint_dir": empty, "save_every": 1}),
    ]


def _in_scratch_directory(function):
    """``function`` run with a fresh temporary working directory, so that fuzzed relative paths land there."""
    import functools
    import os
    import tempfile

    @functools.wraps(function)
    def wrapped(**kwargs):
        here = os.getcwd()
        with tempfile.TemporaryDirectory(prefix="ringemu-fuzz-") as scratch:
            os.chdir(scratch)
            try:
                return function(**kwargs)
            finally:
                os.chdir(here)

    return wrapped


LIBRARY: list[EntryPoint] = []  # filled on first use (imports numba-backed modules)


def library_entry_points() -> list[EntryPoint]:
    if not LIBRARY:
        LIBRARY.extend(_library())
    return LIBRARY


def _malformed_arrays():
    return st.sampled_from([np.zeros((0, 3)), np.zeros(4, dtype=np.int32), np.zeros((2, 2, 2)),
                            np.zeros((3, 4), dtype=complex), np.zeros((3, 4), dtype=object), [[1, 2], [3]],
                            np.full((2, 3), np.nan), "world", np.zeros((3, 4), dtype=bool),
                            [np.zeros(2), np.zeros(3, dtype=np.int64)]])


def library_examples(point: EntryPoint):
    """Strategy of (argument, malformed value) for ``point``."""
    scalar = st.tuples(st.sampled_from(sorted(point.valid)), malformed_values())
    if not point.arrays:
        return scalar
    return st.one_of(scalar, st.tuples(st.sampled_from(point.arrays), _malformed_arrays()))


def call_library(point: EntryPoint, arg: str, value) -> str:
    """Call ``point`` with ``arg`` replaced by ``value``; return the outcome (see the module docstring)."""
    kwargs = {**point.valid, arg: value}
    start = time.perf_counter()
    try:
        point.function(**kwargs)
        outcome = "ran"
    except (ValueError, TypeError) as exc:
        word = point.names.get(arg, arg)
        outcome = "refused" if word in str(exc) or arg in str(exc) else \
            f"BAD: {type(exc).__name__} not naming {arg}: {exc}"
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        outcome = f"BAD: {type(exc).__name__}: {exc}"
    if time.perf_counter() - start > TIME_LIMIT_S:
        outcome = f"BAD: took {time.perf_counter() - start:.0f} s"
    return outcome


# -- CLI ---------------------------------------------------------------------------------------------------------
SUBCOMMANDS = {  # a valid, quick argv per subcommand, as (flag, value) pairs; None: a switch
    "demo": [("--ranks", "3"), ("--numel", "3"), ("--seed", "0")],
    "run": [("--op", "all-reduce"), ("--ranks", "3"), ("--numel", "4"), ("--dtype", "int32"), ("--seed", "1"),
            ("--mode", "step")],
    "trace": [("--op", "reduce-scatter"), ("--ranks", "3"), ("--numel", "4"), ("--dtype", "int32")],
    "count": [("--op", "all-reduce"), ("--ranks", "8"), ("--numel", "1000"), ("--dtype", "bf16"),
              ("--bandwidth", "100"), ("--latency-us", "5")],
    "bench": [("--ranks", "2"), ("--log2-numel", "4"), ("--repeats", "1"), ("--dtype", "fp32")],
    "zero": [("--stage", "zero2"), ("--ranks", "2"), ("--steps", "1"), ("--grads", "blocks"), ("--units", "5,3"),
             ("--dtype", "bf16")],
    "memory": [("--params", "1000"), ("--ranks", "4"), ("--gpu-gb", "80"), ("--dtype", "fp16")],
    "prove": [("--id", "M1")],
}


def cli_examples(command: str):
    """Strategy of argv lists for ``command``: one flag's value malformed, a flag dropped, or an unknown flag."""
    pairs = SUBCOMMANDS[command]

    def argv(changed: dict, dropped: int | None, extra: list[str]) -> list[str]:
        out = [command]
        for i, (flag, value) in enumerate(pairs):
            if i == dropped:
                continue
            out += [flag, changed.get(flag, value)]
        return out + extra

    one_value = st.tuples(st.sampled_from([f for f, _ in pairs]), malformed_text()).map(
        lambda fv: argv({fv[0]: fv[1]}, None, []))
    drop = st.integers(0, len(pairs) - 1).map(lambda i: argv({}, i, []))
    unknown = st.sampled_from(["--nope", "--ranks", "-x", "--json=1", "extra"]).map(lambda e: argv({}, None, [e]))
    return st.one_of(one_value, one_value, one_value, drop, unknown)


def call_cli(argv: list[str]) -> str:
    """Run ``ringemu argv`` in this process; return the outcome (see the module docstring)."""
    from ringemu.cli import main
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # noqa: BLE001 - a traceback is the finding
            return f"BAD: traceback {type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - start
    text = err.getvalue()
    if elapsed > TIME_LIMIT_S:
        return f"BAD: took {elapsed:.0f} s"
    if "Traceback" in text:
        return "BAD: traceback on stderr"
    if code == 2:
        one_line = text.startswith("ringemu: error: ") and text.count("\n") == 1 and out.getvalue() == ""
        return "refused" if one_line else f"BAD: exit 2 with {text!r}"
    if code in (0, 1):
        return "ran"
    return f"BAD: exit status {code!r}"


def is_bad(outcome: str) -> bool:
    return outcome.startswith("BAD")
