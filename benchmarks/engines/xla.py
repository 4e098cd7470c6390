"""XLA CPU (JAX host devices, from its own venv ``$RINGEMU_ENGINES/jax``) against ``xla-cpu:in-process``.

Each N runs as one subprocess of the JAX venv's Python (``python -m benchmarks.engines.xla N DIR CASES``, which
sets ``--xla_force_host_platform_device_count=N`` before importing jax): ``jax.shard_map`` over a 1-D mesh runs
``psum``, ``psum_scatter(tiled=True)`` and ``all_gather(tiled=True)`` on ``_common.inputs`` and saves every
device's output; the parent compares every element of every device, bit for bit, with ``ringemu``'s collectives
run with ``algorithm="xla-cpu:in-process"``. The ``negzero`` cases (every rank -0.0 on even elements) check that
the sum starts from +0; bf16 cases check the fp32 accumulation. XLA moves no bytes over a wire (the devices are
threads of one process) and exposes no counts: ``bytes_cases`` is 0.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks.engines._common import ROOT, engine_python, first_difference, inputs, same_bits, venv_version
from benchmarks.engines.records import digest

__all__ = ["available", "run", "cases", "replay", "version"]

_COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")


def _np_dtype(name: str):
    if name == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}[name])


def available() -> str | None:
    return None if engine_python("jax") else \
        "no JAX venv at $RINGEMU_ENGINES/jax (python3 -m venv $RINGEMU_ENGINES/jax && .../pip install jax jaxlib)"


def version() -> str:
    return f"jax {venv_version('jax', 'jax')}, jaxlib {venv_version('jax', 'jaxlib')}"


def cases(n: int, quick: bool) -> list[tuple[str, str, int, str]]:
    """(collective, dtype, numel per device's input, kind) for N devices; kind "rand" or "negzero"."""
    dtypes = ("fp32", "fp64", "bf16") if quick else ("fp32", "fp64", "fp16", "bf16")
    sizes = (1, max(1, n - 1), 97, 4099) if quick else (1, max(1, n - 1), 7, 97, 1009, 4099, 100003)
    shards = (1, 3, 37) if quick else (1, 2, 3, 37, 257, 4099)
    out = []
    for dt in dtypes:
        out += [("all-reduce", dt, s, "rand") for s in sizes] + [("all-reduce", dt, 64, "negzero")]
        out += [("reduce-scatter", dt, n * k, "rand") for k in shards] + [("reduce-scatter", dt, 8 * n, "negzero")]
        out += [("all-gather", dt, k, "rand") for k in shards]
    return out


def _inputs(n: int, numel: int, dt: str, kind: str, seed: int) -> np.ndarray:
    x = inputs(n, numel, _np_dtype(dt), seed)
    if kind == "negzero":  # -0.0 on every rank's even elements: a sum from +0 gives +0.0 there
        x[:, ::2] = -0.0
    return x


def _worker(n: int, outdir: str, todo: list) -> None:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec
    jax.config.update("jax_enable_x64", True)
    mesh = Mesh(np.array(jax.devices()[:n]), ("i",))

    def smap(f):
        return jax.jit(jax.shard_map(f, mesh=mesh, in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i")))

    fns = {"all-reduce": smap(lambda x: jax.lax.psum(x, "i")),
           "reduce-scatter": smap(lambda x: jax.lax.psum_scatter(x, "i", tiled=True)),
           "all-gather": smap(lambda x: jax.lax.all_gather(x, "i", tiled=True))}
    results = {}
    for k, (collective, dt, numel, kind) in enumerate(todo):
        x = _inputs(n, numel, dt, kind, seed=k)
        out = np.asarray(fns[collective](jnp.asarray(x.reshape(-1))))
        results[f"c{k}"] = out.reshape(n, -1).view(np.uint8)  # bytes: npz keeps no bf16
    np.savez(os.path.join(outdir, "devices.npz"), **results)


def _expected(collective: str, x: np.ndarray) -> list[np.ndarray]:
    from ringemu import collectives
    n = x.shape[0]
    if collective == "all-reduce":
        return list(collectives.all_reduce(x, algorithm="xla-cpu:in-process"))
    if collective == "reduce-scatter":
        return collectives.reduce_scatter(x, algorithm="xla-cpu:in-process")
    return list(collectives.all_gather([row.copy() for row in x], algorithm="xla-cpu:in-process"))


def replay(case: dict) -> list[np.ndarray]:
    """ringemu's ``xla-cpu:in-process`` on a recorded case's inputs (:mod:`benchmarks.engines.records`)."""
    return _expected(case["collective"], _inputs(case["n"], case["numel"], case["dtype"], case["kind"], case["seed"]))


def run(quick: bool, record: list | None = None) -> list[dict]:
    """One row per collective; ``record``: a list to which every case's record is appended (the engine's digest)."""
    ranks = (2, 5, 8, 16) if quick else (2, 3, 4, 5, 6, 7, 8, 9, 12, 16)
    rows = {c: dict(engine="XLA CPU (jax host devices)", entry="xla-cpu:in-process", collective=c, cases=0,
                    bits_equal=0, bytes_cases=0, bytes_equal=0, first_mismatch=None) for c in _COLLECTIVES}
    for n in ranks:
        todo = cases(n, quick)
        with tempfile.TemporaryDirectory() as outdir:
            subprocess.run([str(engine_python("jax")), "-m", "benchmarks.engines.xla", str(n), outdir,
                            json.dumps(todo)], cwd=ROOT, check=True, timeout=600,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
            got = np.load(os.path.join(outdir, "devices.npz"))
            for k, (collective, dt, numel, kind) in enumerate(todo):
                x = _inputs(n, numel, dt, kind, seed=k)
                want = _expected(collective, x)
                mine = list(got[f"c{k}"].view(x.dtype))
                if record is not None:
                    record.append({"engine": "xla", "collective": collective, "entry": "xla-cpu:in-process", "n": n,
                                   "dtype": dt, "numel": numel, "seed": k, "kind": kind, "sha256": digest(mine)})
                row = rows[collective]
                row["cases"] += 1
                if all(same_bits(a, b) for a, b in zip(mine, want)):
                    row["bits_equal"] += 1
                elif row["first_mismatch"] is None:
                    row["first_mismatch"] = f"N={n} {dt} {kind} numel={numel}: {first_difference(mine, want)}"
    return list(rows.values())


if __name__ == "__main__":  # one mesh: python -m benchmarks.engines.xla N OUTDIR CASES_JSON (in the JAX venv)
    _worker(int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]))
