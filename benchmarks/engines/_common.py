"""What the engine modules share: where an engine's Python is, fixed-seed inputs, and the bitwise comparison."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ENGINE_ROOT = Path(os.environ.get("RINGEMU_ENGINES", "/opt/engines"))  # one venv per engine: ompi, mpich, jax


def engine_python(name: str) -> Path | None:
    """The Python of the engine's own virtual environment (``$RINGEMU_ENGINES/NAME/bin/python``), or None."""
    path = DEFAULT_ENGINE_ROOT / name / "bin" / "python"
    return path if path.exists() else None


def engine_tool(name: str, tool: str) -> Path | None:
    """An executable of the engine's venv (``mpirun``, ``mpiexec``), or None."""
    path = DEFAULT_ENGINE_ROOT / name / "bin" / tool
    return path if path.exists() else (Path(shutil.which(tool)) if name == "" and shutil.which(tool) else None)


def venv_version(name: str, distribution: str) -> str:
    """The installed version of ``distribution`` in the engine's venv (``importlib.metadata``), e.g. '5.0.11'."""
    done = subprocess.run([str(engine_python(name)), "-c", "import importlib.metadata as m, sys; "
                           "print(m.version(sys.argv[1]))", distribution], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def inputs(n_ranks: int, numel: int, dtype, seed: int = 0) -> np.ndarray:
    """Rank r's input: standard normal values from ``default_rng(seed·1000 + r)``, cast to ``dtype``."""
    return np.stack([np.random.default_rng(seed * 1000 + r).standard_normal(numel).astype(dtype)
                     for r in range(n_ranks)]) if n_ranks else np.zeros((0, numel), dtype=dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes and every element's bits equal (NaN payloads and signed zeros included)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


def first_difference(got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    """'rank r, element j: engine X, entry Y' for the first differing element, or None."""
    for r, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"rank {r}: shape {g.shape} against {w.shape}"
        gb = np.ascontiguousarray(g).view(np.uint8).reshape(g.size, -1) if g.size else np.zeros((0, 1), np.uint8)
        wb = np.ascontiguousarray(w).view(np.uint8).reshape(w.size, -1) if w.size else np.zeros((0, 1), np.uint8)
        bad = np.flatnonzero(np.any(gb != wb, axis=1))
        if bad.size:
            j = int(bad[0])
            return f"rank {r}, element {j}: engine {g[j]!r}, entry {w[j]!r}"
    return None
