"""The recipes of docs/testing.md (from section 3 on) and of docs/torch.md's "Testing your own torch code" run
verbatim, from the repository root, each in a fresh namespace; where a ```text block follows a recipe, it must be
exactly what the recipe prints (so every output shown in those pages comes from this run).

``python tests/test_docs_recipes.py --write`` runs the recipes and rewrites those output blocks.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"testing.md": "## 3. Your whole communicator", "torch.md": "## Testing your own torch code"}
BLOCK = re.compile(r"```python\n(.*?)\n```(\n\n```text\n(.*?)```)?", re.S)


def recipes() -> list[tuple[str, int, str, str | None, re.Match]]:
    """(page, index, code, shown output or None, match) for every recipe of the pages' sections."""
    out = []
    for page, heading in PAGES.items():
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        start = text.index(heading)
        for i, m in enumerate(BLOCK.finditer(text, start)):
            out.append((page, i, m.group(1) + "\n", m.group(3) if m.group(2) else None, m))
    return out


def run_recipe(code: str) -> str:
    """What ``code`` prints, run as a script from the repository root."""
    out = io.StringIO()
    cwd, path = os.getcwd(), list(sys.path)
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's deprecation notices are not part of a recipe's output
            exec(compile(code, "<recipe>", "exec"), {"__name__": "__recipe__"})
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    return out.getvalue()


@pytest.mark.parametrize("page, index", [(p, i) for p, i, *_ in recipes()])
def test_recipe_runs_and_prints_what_the_page_shows(page, index):
    _, _, code, shown, _ = next(r for r in recipes() if r[:2] == (page, index))
    if "torch" in code:
        from torch_support import require_torch
        require_torch()
    printed = run_recipe(code)
    if shown is not None:
        assert printed == shown, f"docs/{page} recipe {index} printed:\n{printed}\nthe page shows:\n{shown}"


def write() -> None:
    for page in PAGES:
        path = ROOT / "docs" / page
        text = path.read_text(encoding="utf-8")
        for p, i, code, shown, m in reversed([r for r in recipes() if r[0] == page]):
            if shown is None:
                continue
            printed = run_recipe(code)
            text = text[:m.start(3)] + printed + text[m.end(3):]
            print(f"docs/{page} recipe {i}: {len(printed.splitlines())} lines")
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_docs_recipes.py --write")
    sys.path.insert(0, str(ROOT))
    write()
