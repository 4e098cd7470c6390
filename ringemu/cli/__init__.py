"""The ``ringemu`` command line: the dispatcher (:mod:`~ringemu.cli.main`) and one module per command group —
``demo``/``run``/``trace``/``count`` (:mod:`~ringemu.cli.collective_commands`), ``bench``, ``compare``, ``audit``
and ``faults`` — with the argument checks they share in :mod:`ringemu.checks`.

The top of ringemu's layers: it may import any module of ringemu and nothing imports it back (the
``ringemu.commands`` entry-point group lets the packages built on ringemu add their commands without ringemu
importing them).
"""
from .main import ENTRY_POINT_GROUP, build_parser, main, plugin_modules

__all__ = ["main", "build_parser", "ENTRY_POINT_GROUP", "plugin_modules"]
