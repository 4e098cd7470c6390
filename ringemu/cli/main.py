"""The ``ringemu`` command line: one dispatcher; each subcommand lives beside the code it drives.

Every subcommand takes ``--json``. Bad input prints one line ``ringemu: error: ...`` and exits 2.

Wiring. ``ringemu``'s own groups (``demo``, ``run``, ``trace``, ``count``; ``bench``; ``compare``) are plain imports below.
Packages built *on top of* ringemu (the ZeRO stages, the proofs) plug their commands in through the entry-point
group :data:`ENTRY_POINT_GROUP`, declared in ``setup.cfg`` under ``[options.entry_points]``; each entry names a
module that defines ``register(subparsers)``. ringemu itself never imports those packages (the arrow points from
them to ringemu). Installed, the group is read from the distribution's metadata
(:func:`importlib.metadata.entry_points`); run from a source tree without installing, it is read from the
``setup.cfg`` beside the ``ringemu`` package, so both ways see the same commands.
"""
from __future__ import annotations

import argparse
import configparser
import importlib
import os
import sys
from importlib import metadata
from pathlib import Path

from . import audit, bench, collective_commands, compare, faults, identify
from ..faults.spec import CollectiveFault
from ..worlds.base import RankFailure

__all__ = ["main", "build_parser", "ENTRY_POINT_GROUP", "plugin_modules"]

ENTRY_POINT_GROUP = "ringemu.commands"
# demo, run, trace, count; bench; compare; audit; faults; identify
_BUILT_IN = (collective_commands, bench, compare, audit, faults, identify)
_SOURCE_SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        self.exit(2, f"ringemu: error: {message}\n")


def _source_tree_entries(setup_cfg: Path) -> list[tuple[str, str]] | None:
    """(name, module) pairs of the group in a source tree's ``setup.cfg``; None if that file or section is absent."""
    if not setup_cfg.is_file():
        return None
    parser = configparser.ConfigParser()
    parser.read(setup_cfg, encoding="utf-8")
    if not parser.has_option("options.entry_points", ENTRY_POINT_GROUP):
        return None
    lines = parser.get("options.entry_points", ENTRY_POINT_GROUP).strip().splitlines()
    pairs = [tuple(part.strip() for part in line.split("=", 1)) for line in lines if line.strip()]
    return [(name, value) for name, value in pairs]


def plugin_modules(setup_cfg: Path | None = None) -> list[tuple[str, str]]:
    """(entry name, module name) of every command group plugged in through :data:`ENTRY_POINT_GROUP`, in declared
    order: from the source tree's ``setup.cfg`` when ringemu runs from one, else from the installed metadata."""
    from_source = _source_tree_entries(_SOURCE_SETUP_CFG if setup_cfg is None else setup_cfg)
    if from_source is not None:
        return from_source
    return [(ep.name, ep.value) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(prog="ringemu", description="Ring collectives and ZeRO on N virtual ranks, counted exactly.")
    parser.add_argument("--version", action="version", version=f"ringemu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    for module in _BUILT_IN:
        module.register(sub)
    for _name, module_name in plugin_modules():
        importlib.import_module(module_name.split(":")[0]).register(sub)
    return parser


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not raise on the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to redirect
        pass
    finally:
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `ringemu`: what there is to run
        parser.print_help()
        return 0
    try:
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return code
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly (before OSError, its base)
        _silence_stdout()
        return 0
    except (ValueError, TypeError, OSError) as exc:  # bad input, bad path: one line, exit 2
        print(f"ringemu: error: {exc}", file=sys.stderr)
        return 2
    except (RankFailure, CollectiveFault, MemoryError) as exc:  # a run that failed: one line, exit 1
        print(f"ringemu: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
