"""The ``ringemu`` command line: one dispatcher; each subcommand lives beside the code it drives.

Every subcommand takes ``--json``. Bad input prints one line ``ringemu: error: ...`` and exits 2.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from .backends.emulator import RankFailure

__all__ = ["main", "build_parser", "COMMAND_MODULES"]

# module that defines register(subparsers) for each group of subcommands (imported lazily at parse time)
COMMAND_MODULES = (
    "ringemu.commands",      # demo, run, trace, count
    "ringemu.bench_command",  # bench
    "zero_stages.commands",  # zero, memory
    "proofs.commands",       # prove
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, no usage dump
        self.exit(2, f"ringemu: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ringemu", description="Ring collectives and ZeRO on N virtual ranks, counted exactly.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # that group is not built yet
        module.register(sub)
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
    except (RankFailure, MemoryError) as exc:  # a run that failed: one line, exit 1
        print(f"ringemu: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
