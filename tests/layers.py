"""The layer order of ringemu, zero_stages and proofs, and a scan of their imports (inside functions included).

A module may import modules of its own layer or of a layer below it, never above; and the imports among all
modules form no circle. :data:`LAYERS` lists the layers from the bottom up, each as module patterns (``pkg.*``:
every module below ``pkg``); every module of the three packages must match one. Written down in README's
*Architecture* section.
"""
from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

PACKAGES = ("ringemu", "zero_stages", "proofs")

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("ringemu core", tuple(f"ringemu.{m}" for m in (
        "_jit", "checks", "dtypes", "units", "progress", "schedule", "layout", "kernels", "wire", "reference",
        "virtual", "partition", "ledger_counts", "ledger", "memory", "provenance", "blocks", "execute", "direct.kernels",
        "direct.run", "direct", "topology", "link_bytes",
        "torch_tensors"))),
    ("ringemu algorithms", ("ringemu.algorithms", "ringemu.algorithms.*")),
    ("ringemu faults", ("ringemu.faults", "ringemu.faults.*")),
    ("ringemu views", ("ringemu.views", "ringemu.views.*")),  # read data modules only: producers show them
    ("ringemu collectives", ("ringemu.collectives", "ringemu.per_rank", "ringemu.trace", "ringemu.compare", "ringemu.memory_guard",
                             "ringemu.identify")),
    ("ringemu worlds", ("ringemu.worlds", "ringemu.worlds.*")),
    ("ringemu torch", ("ringemu.torch", "ringemu.torch.*")),
    ("ringemu testing", ("ringemu.testing", "ringemu.testing.*")),
    ("ringemu entry points", ("ringemu", "ringemu.__main__", "ringemu.pytest_plugin", "ringemu.cli",
                              "ringemu.cli.*")),
    ("zero_stages foundations", tuple(f"zero_stages.{m}" for m in (
        "_adam_kernel", "adam", "averaging", "buffers", "flat", "job", "model", "optimizer", "precision",
        "rank_classes", "step_guard", "workload", "quantize", "memory", "memory.activations", "memory.closed_forms",
        "memory.closed_forms_beyond",
        "memory.anchor"))),
    ("zero_stages stages", ("zero_stages.stages", "zero_stages.stages.*")),
    ("zero_stages api", ("zero_stages.api", "zero_stages.report")),
    ("zero_stages runs", ("zero_stages.memory.report", "zero_stages.checkpoint", "zero_stages.checkpoint.*")),
    ("zero_stages torch", ("zero_stages.torch", "zero_stages.torch.*")),
    ("zero_stages arguments", ("zero_stages.cli.arguments",)),
    ("zero_stages entry points", ("zero_stages", "zero_stages.lesson", "zero_stages.lesson.*", "zero_stages.cli",
                                  "zero_stages.cli.*")),
    ("proofs foundations", ("proofs.rounding", "proofs.exact", "proofs.ids", "proofs.claim")),
    ("proofs claims", ("proofs.runs", "proofs.claims_*")),
    ("proofs catalog", ("proofs.catalog", "proofs.report")),
    ("proofs entry points", ("proofs", "proofs.commands")),
]


def module_sources(root: Path) -> dict[str, tuple[str, bool]]:
    """module name -> (source, is a package's __init__) for every .py file of the three packages under root."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            found[name] = (path.read_text(encoding="utf-8"), is_package)
    return found


def import_edges(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the modules of ``sources`` it imports anywhere in its file. ``from P import m`` where P.m is a
    module counts as an import of P.m alone (P's __init__ is already loading when m imports it)."""
    edges: dict[str, set[str]] = {name: set() for name in sources}
    for name, (source, is_package) in sources.items():
        for node in ast.walk(ast.parse(source, name)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = name.split(".") if is_package else name.split(".")[:-1]
                if node.level:
                    base = base[:len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in sources]
                targets = subs if len(subs) == len(node.names) else [module, *subs]
            else:
                continue
            edges[name] |= {t for t in targets if t in sources and t != name}
    return edges


def layer_of(module: str) -> int | None:
    for index, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return index
    return None


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer to a higher one, as 'a (layer) imports b (layer)'."""
    found = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            low, high = layer_of(module), layer_of(target)
            if low is not None and high is not None and high > low:
                found.append(f"{module} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})")
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
