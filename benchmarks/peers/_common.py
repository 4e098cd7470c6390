"""Shared by the peer scripts: arguments, the per-rank buffer sizes, and the JSON they print."""
from __future__ import annotations

import argparse
import json

import numpy as np

OPS = ("reduce-scatter", "all-gather", "all-reduce")


def parse(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--numel", type=int, default=2 ** 24, help="fp32 elements per rank (padded to a multiple of N)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--port", type=int, default=29533)
    return p.parse_args()


def sizes(n: int, numel: int) -> tuple[int, int]:
    """(chunk, padded): ringemu's layout, ceil(S/N) and N·ceil(S/N) elements."""
    chunk = -(-numel // n)
    return chunk, chunk * n


def summary(samples: list[float]) -> dict:
    return {"median_s": float(np.median(samples)), "min_s": min(samples), "max_s": max(samples),
            "samples_s": samples}


def emit(impl: str, n: int, numel: int, results: dict[str, list[float]], **extra) -> None:
    """Print the peer's JSON: one row per op with the timing summary of the slowest rank per run."""
    rows = [{"op": op, "impl": impl, **summary(samples)} for op, samples in results.items()]
    print(json.dumps({"impl": impl, "ranks": n, "numel": numel, "rows": rows, **extra}))
