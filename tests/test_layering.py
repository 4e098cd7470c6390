"""The package layering: ringemu is the bottom layer; the ZeRO stages and the proofs sit on top and plug their
commands into ``ringemu`` through an entry-point group, never the other way round."""
import subprocess
import sys
from pathlib import Path

from ringemu import cli

ROOT = Path(__file__).resolve().parent.parent


def test_command_groups_on_top_come_from_setup_cfg_in_a_source_tree():
    # expected: the [options.entry_points] ringemu.commands section of this tree's setup.cfg, read by hand
    assert dict(cli.plugin_modules()) == {"zero": "zero_stages.commands", "prove": "proofs.commands"}
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    assert {"demo", "run", "trace", "count", "bench", "zero", "memory", "prove"} <= set(commands)


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
