"""``python -m ringemu``: the ``ringemu`` command line (:func:`ringemu.cli.main`)."""
import sys

from .cli import main

sys.exit(main())
