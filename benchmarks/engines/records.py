"""The engines' own bits, recorded: a digest of every rank's output for every case an engine ran, so that the
registry's engine orders are checked against what the engines computed on machines where they are not installed.

    python -m benchmarks.engines.records            # run every installed engine's quick and full matrices
    python -m benchmarks.engines.records --quick    # the quick slices only (what tests/test_engines.py runs)

A record names everything needed to run the case again without the engine — engine, collective, registry entry,
N, dtype, element count, seed and input kind (the inputs are ``_common.inputs``: ``default_rng(seed·1000 +
rank).standard_normal``) — and holds ``sha256``, the digest of the outputs *the engine returned* (never of
ringemu's), and for Open MPI the bytes each rank sent to each peer (its pml monitoring). Each engine module's
``replay(case)`` runs the registry entry on those inputs; ``tests/test_engine_records.py`` checks every record
against it, and ``tests/test_engines.py``, where the engines run (CI), checks the records against the live engine,
so a record cannot go stale unseen.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from pathlib import Path

import numpy as np

from ._common import ROOT

__all__ = ["RECORDS", "digest", "case_key", "load", "record", "main"]

RECORDS = ROOT / "benchmarks" / "results" / "engine_records.json"
_KEY_FIELDS = ("engine", "collective", "entry", "n", "dtype", "numel", "seed", "kind")


def digest(outputs) -> str:
    """sha256 over every rank's output in rank order: its shape, its item size and its raw bytes."""
    h = hashlib.sha256()
    for out in outputs:
        a = np.ascontiguousarray(np.asarray(out))
        h.update(f"{a.shape}|{a.dtype.itemsize}|".encode())
        h.update(a.view(np.uint8).tobytes() if a.size else b"")
    return h.hexdigest()


def case_key(case: dict) -> tuple:
    """What identifies a case: the inputs and the call, not the result."""
    return tuple(case.get(field) for field in _KEY_FIELDS)


def load(path: Path = RECORDS) -> dict:
    """The recorded file: ``{"engines": {name: version}, "cases": [record, ...]}``."""
    return json.loads(Path(path).read_text())


def record(names, quick_only: bool) -> dict:
    """Run each named engine's matrices (quick, and full unless ``quick_only``) and collect its records."""
    out = {"engines": {}, "cases": []}
    seen: set[tuple] = set()
    for name in names:
        module = importlib.import_module(f"benchmarks.engines.{name}")
        why = module.available()
        if why is not None:
            raise SystemExit(f"{name} is not installed: {why}")
        out["engines"][name] = module.version()
        for quick in ((True,) if quick_only else (True, False)):
            cases: list[dict] = []
            module.run(quick=quick, record=cases)
            for case in cases:
                if case_key(case) not in seen:
                    seen.add(case_key(case))
                    out["cases"].append(case)
            print(f"{name} {'quick' if quick else 'full'}: {len(cases)} cases", file=sys.stderr, flush=True)
    return out


def _dumps(recorded: dict) -> str:
    """One case per line, keys sorted: a re-recording's diff shows exactly the cases that changed."""
    compact = {"separators": (",", ":"), "sort_keys": True}
    cases = ",\n".join(json.dumps(c, **compact) for c in recorded["cases"])
    return f'{{"engines":{json.dumps(recorded["engines"], **compact)},\n"cases":[\n{cases}]}}\n'


def main(argv: list[str] | None = None) -> int:
    from . import ENGINES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the quick slices only")
    parser.add_argument("--engines", nargs="*", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--out", type=Path, default=RECORDS)
    args = parser.parse_args(argv)
    recorded = record(args.engines, args.quick)
    args.out.write_text(_dumps(recorded))
    print(f"{len(recorded['cases'])} cases written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
