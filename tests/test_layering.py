"""The package layering: ringemu is the bottom layer; the ZeRO stages and the proofs sit on top and plug their
commands into ``ringemu`` through an entry-point group, never the other way round."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ringemu import cli

from layers import LAYERS, PACKAGES, circles, import_edges, layer_of, module_sources, upward_imports

ROOT = Path(__file__).resolve().parent.parent
UPPER = ("zero_stages", "proofs")  # the packages built on top of ringemu
# a dotted module path into an upper package (also inside a longer string), or its bare name as a whole string
_DOTTED = re.compile(r"\b(?:%s)\.[A-Za-z_]" % "|".join(UPPER))


def upward_references(source: str, filename: str = "<source>") -> list[str]:
    """Every import of an upper package, and every string constant naming one as a module, in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.strip() in UPPER or _DOTTED.search(node.value):
                found.append(f"{filename}:{node.lineno}: string {node.value.strip()[:60]!r}")
            continue
        else:
            continue
        found += [f"{filename}:{node.lineno}: import {m}" for m in modules if m.split(".")[0] in UPPER]
    return found


def test_ringemu_never_imports_the_packages_above_it():
    files = sorted((ROOT / "ringemu").rglob("*.py"))
    assert len(files) > 20  # the scan really reads the package
    found = [hit for path in files
             for hit in upward_references(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert found == []


@pytest.mark.parametrize("source", [
    "import zero_stages",
    "import numpy, proofs.catalog as c",
    "from zero_stages.api import train",
    "def f():\n    from proofs import commands",
    "import importlib\nimportlib.import_module('zero_stages.cli.commands')",
    "MODULES = ('ringemu.commands', 'proofs.commands')",
    "__import__('proofs')",
])
def test_the_scan_catches_imports_and_module_names_in_strings(source):
    assert len(upward_references(source)) == 1


@pytest.mark.parametrize("source", [
    "from . import proofs_helper",  # a relative import inside ringemu
    "'''Files: zero_stages/_adam_kernel.py; the claims and their proofs.'''",  # prose and paths are not imports
    "import zero_stages_like",
])
def test_the_scan_ignores_what_is_not_an_upward_import(source):
    assert upward_references(source) == []


def test_command_groups_on_top_come_from_setup_cfg_in_a_source_tree():
    # expected: the [options.entry_points] ringemu.commands section of this tree's setup.cfg, read by hand
    assert dict(cli.plugin_modules()) == {"zero": "zero_stages.cli.commands", "lesson": "zero_stages.lesson.page",
                                          "plot": "zero_stages.lesson.plots", "prove": "proofs.commands"}
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    assert {"demo", "run", "trace", "count", "bench", "zero", "memory", "lesson", "plot", "prove"} <= set(commands)


def test_a_setup_cfg_without_the_group_falls_back_to_installed_metadata(tmp_path):
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = other\n")
    from importlib import metadata
    installed = [(ep.name, ep.value) for ep in metadata.entry_points(group=cli.ENTRY_POINT_GROUP)]
    assert cli.plugin_modules(tmp_path / "setup.cfg") == installed


def test_python_dash_m_ringemu_runs_the_command_line(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "ringemu", "prove", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage: ringemu prove")


# -- the layer order and no circles (tests/layers.py), on the real tree and on planted mistakes ------------------

@pytest.fixture(scope="module")
def tree():
    return module_sources(ROOT)


def test_every_module_has_a_layer(tree):
    assert len(tree) > 100  # the scan really reads the three packages
    assert [m for m in tree if layer_of(m) is None] == []


def test_no_module_imports_a_higher_layer(tree):
    assert upward_imports(import_edges(tree)) == []


def test_the_imports_form_no_circle(tree):
    assert circles(import_edges(tree)) == []


def _planted(tree, module, line):
    source, is_package = tree[module]
    return {**tree, module: (source + "\n" + line + "\n", is_package)}


@pytest.mark.parametrize("module, line, expected", [
    # the core importing the command line (top-level, then inside a function)
    ("ringemu.schedule", "from .cli import main", "ringemu.schedule (ringemu core) imports ringemu.cli.main"),
    ("ringemu.ledger", "def f():\n    from .worlds.emulator import EmulatedWorld",
     "ringemu.ledger (ringemu core) imports ringemu.worlds.emulator"),
    ("zero_stages.stages.dp", "import zero_stages.cli.commands",
     "zero_stages.stages.dp (zero_stages stages) imports zero_stages.cli.commands"),
])
def test_a_planted_upward_import_is_caught(tree, module, line, expected):
    found = upward_imports(import_edges(_planted(tree, module, line)))
    assert [hit for hit in found if hit.startswith(expected)] and len(found) == 1


@pytest.mark.parametrize("module, line, members", [
    ("ringemu.faults.spec", "from .link import crc", ["ringemu.faults.link", "ringemu.faults.spec"]),  # one layer
    ("ringemu.views.html", "def f():\n    from ..trace import Trace",  # trace shows itself through views
     ["ringemu.trace", "ringemu.views.html", "ringemu.views.notebook"]),
])
def test_a_planted_circle_is_caught(tree, module, line, members):
    found = circles(import_edges(_planted(tree, module, line)))
    assert len(found) == 1 and set(members) <= set(found[0])


def test_package_roots_stay_small(tree):
    def root_modules(package):
        return [m for m in tree if m.count(".") == 1 and m.startswith(package + ".") and not tree[m][1]]
    assert len(root_modules("ringemu")) <= 30
    assert len(root_modules("zero_stages")) <= 16


def test_every_package_says_what_lives_there(tree):
    undocumented = [m for m, (source, is_package) in tree.items() if is_package
                    and len((ast.get_docstring(ast.parse(source)) or "").split()) < 15]
    assert undocumented == []


def test_layers_name_only_the_three_packages():
    assert {p.split(".")[0].rstrip("*") for _, patterns in LAYERS for p in patterns} == set(PACKAGES)
