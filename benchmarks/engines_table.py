"""Write docs/engines.md: every real engine installed here, every algorithm ringemu names for it, run against the
registry entry bit for bit (``python benchmarks/engines_table.py``; ``--quick`` for CI's slice, ``--out -`` to
print). Engines that are not installed are listed with the reason; nothing in the table is typed in."""
from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.engines import ENGINES  # noqa: E402


CAPTURE = """## Checking an engine that does not run here (NCCL on your GPUs)

Capture what every rank fed the collective and got back, then ask `ringemu identify` which registry orders
reproduce it bit for bit (or where the nearest one departs: element, rank, chunk, step):

```python
import numpy as np, torch, torch.distributed as dist          # run under torchrun, any backend (nccl, gloo, ...)
dist.init_process_group()
rank, n, S = dist.get_rank(), dist.get_world_size(), 1 << 14
x = torch.randn(S, generator=torch.Generator().manual_seed(1000 + rank)).cuda()   # .float() / .half() / .bfloat16()
y = x.clone(); dist.all_reduce(y)
xs, ys = [torch.empty_like(x) for _ in range(n)], [torch.empty_like(y) for _ in range(n)]
dist.all_gather(xs, x); dist.all_gather(ys, y)
bits = (lambda t: t.view(torch.int16)) if x.dtype == torch.bfloat16 else (lambda t: t)
if rank == 0: np.savez("dump.npz", collective="all-reduce", dtype={torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[x.dtype], inputs=torch.stack([bits(t) for t in xs]).cpu().numpy(), outputs=torch.stack([bits(t) for t in ys]).cpu().numpy())
```

then `ringemu identify dump.npz` (exit 0 when some order reproduces it; `--json` for a machine-readable answer).
Use N >= 4 ranks and a few thousand random elements: integer-valued inputs sum exactly in any order, so every
order would match them.
"""


def modelled() -> str:
    """The registry's engine orders that are modelled from source, not run here, each with its source file."""
    from ringemu import algorithms
    out = ["## Modelled from source, not run here", "",
           "These entries carry `modelled`: no engine of theirs runs on these machines (NCCL needs a GPU per rank),",
           "so they follow the named source and wait for a capture from a real run (`ringemu identify`, below).", ""]
    for (collective, name), entry in algorithms.REGISTRY.items():
        if entry.modelled:
            out.append(f"- `{name}` {collective}: {entry.modelled}")
    return "\n".join(out) + "\n"


def records() -> str:
    """The engines' recorded bits (benchmarks/results/engine_records.json): how many cases of each engine."""
    from collections import Counter
    from benchmarks.engines.records import RECORDS, load
    recorded = load(RECORDS)
    per_engine = Counter(c["engine"] for c in recorded["cases"])
    out = ["## The engines' bits, recorded", "", textwrap.fill(
           f"`python -m benchmarks.engines.records` runs every engine's quick and full matrices and keeps, for each "
           f"case, the sha256 of every rank's output as the engine returned it (Open MPI's bytes per peer beside it) "
           f"in `{RECORDS.relative_to(RECORDS.parents[2])}`; `tests/test_engine_records.py` replays every case "
           "through the registry entry, so the engine orders are held to the engines' bits where no engine is "
           "installed, and `tests/test_engines.py` checks the records against the live engines where they are.",
           115), "",
           "| engine | version | cases recorded |", "|---|---|---:|"]
    for name, version in sorted(recorded["engines"].items()):
        out.append(f"| {name} | {version} | {per_engine[name]:,} |")
    out += ["", f"In all: {len(recorded['cases']):,} cases."]
    return "\n".join(out) + "\n"


def table(rows: list[dict], skipped: dict[str, str], seconds: float, quick: bool) -> str:
    out = ["# Engines as they really run", "",
           "Every row is a run of the engine on this machine against the ringemu registry entry named for it: the",
           "same fixed-seed inputs on every rank, every output element of every rank compared bit for bit, and the",
           "bytes per peer where the engine exposes them. Written by `python benchmarks/engines_table.py`"
           + (" --quick" if quick else "") + f" in {seconds:.0f} s.", "",
           "| engine | registry entry | collective | cases | bits equal | bytes checked | bytes equal |",
           "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['engine']} | `{r['entry']}` | {r['collective']} | {r['cases']} | {r['bits_equal']} | "
                   f"{r['bytes_cases']} | {r['bytes_equal']} |")
    total = sum(r["cases"] for r in rows)
    equal = sum(r["bits_equal"] for r in rows)
    out += ["", f"In all: {equal} of {total} cases bit for bit."]
    bad = [r for r in rows if r["bits_equal"] != r["cases"]]
    for r in bad:
        out.append(f"- `{r['entry']}` {r['collective']}: first departure {r['first_mismatch']}")
    if skipped:
        out += ["", "Not run here:"] + [f"- {name}: {why}" for name, why in skipped.items()]
    return "\n".join(out) + "\n\n" + records() + "\n" + modelled() + "\n" + CAPTURE


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the slice CI runs")
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "engines.md"))
    p.add_argument("--engines", default=",".join(ENGINES))
    args = p.parse_args(argv)
    rows, skipped = [], {}
    start = time.perf_counter()
    for name in filter(None, args.engines.split(",")):
        module = importlib.import_module(f"benchmarks.engines.{name}")
        why = module.available()
        if why is not None:
            skipped[name] = why
            continue
        rows += module.run(args.quick)
    text = table(rows, skipped, time.perf_counter() - start, args.quick)
    if args.out == "-":
        print(text, end="")
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}: {len(rows)} rows")
    return 0 if all(r["bits_equal"] == r["cases"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
