"""Argument types and flag groups that the ``zero``, ``memory``, ``lesson`` and ``plot`` commands share.

Each ``type`` raises :class:`argparse.ArgumentTypeError`, so argparse names the flag and the CLI prints one line
and exits 2. Bounds are part of every message.
"""
from __future__ import annotations

import argparse
import math
from decimal import Decimal

from ringemu.algorithms import DEFAULT_ALGORITHM
from ringemu.checks import parse_number
from ringemu.worlds.base import communicator_algorithms

from ..flat import MAX_PSI
from ..memory.activations import RECOMPUTE, ActivationShape
from ..memory.anchor import ANCHOR_UNIT_SIZES

__all__ = ["integer", "positive", "unit_list", "card_gb", "algorithm_argument", "add_activation_arguments",
           "activation_shape", "model_size", "MAX_CARD_GB", "ranks_per_node_argument", "zeropp_cuts",
           "ZEROPP_CUTS"]

ZEROPP_CUTS = ("qwz", "hpz", "qgz")  # ZeRO++'s three cuts (Wang et al. 2023, §3.1–3.3)

MAX_CARD_GB = 10 ** 12  # GB: a thousand exabytes


def integer(minimum: int, maximum: int | None = None):
    """An argparse ``type``: an integer in [minimum, maximum]; argparse names the flag in the error."""
    allowed = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {allowed}; got {value}")
        return value

    return parse


def positive(what: str):
    """An argparse ``type``: a finite number > 0 (``what`` names it in the error: "number of seconds")."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be a finite {what} > 0; got {text!r}")
        return value

    return parse


def unit_list(text: str) -> list[int]:
    """An argparse ``type``: comma-separated integers >= 1 summing to at most MAX_PSI (2^61 - 1)."""
    allowed = "comma-separated integers >= 1"
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}") from None
    if any(x < 1 for x in sizes):
        raise argparse.ArgumentTypeError(f"must be {allowed}; got {text!r}")
    if sum(sizes) > MAX_PSI:
        raise argparse.ArgumentTypeError(f"must sum to at most {MAX_PSI:_} parameters; got {sum(sizes):_}")
    return sizes


def algorithm_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algorithm", choices=communicator_algorithms(), default=DEFAULT_ALGORITHM,
                   help=f"the collectives' algorithm, from the catalog (default {DEFAULT_ALGORITHM}; "
                        f"`ringemu compare` lists them)")


def card_gb(text: str) -> Decimal:
    """An argparse ``type``: card memory in GB, a decimal number in (0, MAX_CARD_GB] kept exact (``80``, ``40.5``,
    ``1e3``); the bounds are checked before any exact arithmetic (:func:`ringemu.checks.parse_number`)."""
    try:
        parse_number(text, "card memory", 0, MAX_CARD_GB, minimum_allowed=False, unit="GB")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("card memory ", "")) from None
    return Decimal(text.strip())


def add_activation_arguments(parser) -> None:
    """``--seq --batch --hidden --layers --heads --recompute`` (read back by :func:`activation_shape`)."""
    act = parser.add_argument_group("activations (Korthikanti et al. 2022, §4, Table 2); give --seq, --batch, --hidden "
                               "and --layers together")
    act.add_argument("--seq", type=integer(1), help="s, the sequence length in tokens")
    act.add_argument("--batch", type=integer(1), help="b, the micro-batch per rank")
    act.add_argument("--hidden", type=integer(1), help="h, the hidden size")
    act.add_argument("--layers", type=integer(1), help="L, the number of transformer layers")
    act.add_argument("--heads", type=integer(1), help="a, attention heads (needed with --recompute none)")
    act.add_argument("--recompute", choices=RECOMPUTE, default="selective",
                     help="none: s·b·h·(34 + 5·a·s/h) B per layer; selective: 34·s·b·h; full: 2·s·b·h (default "
                          "selective)")


def activation_shape(args) -> ActivationShape | None:
    """The :class:`ActivationShape` of the flags :func:`add_activation_arguments` added; None if none given."""
    given = {f: getattr(args, f) for f in ("seq", "batch", "hidden", "layers")}
    if all(v is None for v in given.values()):
        if args.heads is not None:
            raise ValueError("--heads needs --seq, --batch, --hidden and --layers")
        return None
    missing = [f"--{f}" for f, v in given.items() if v is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} must be given too: activations need --seq, --batch, --hidden and "
                         f"--layers together")
    if args.recompute == "none" and args.heads is None:
        raise ValueError("--heads must be given with --recompute none (s·b·h·(34 + 5·a·s/h) needs a)")
    return ActivationShape(args.seq, args.batch, args.hidden, args.layers, args.recompute, args.heads)


def model_size(args) -> tuple[list[int] | None, dict]:
    """(unit sizes or None, the size keyword of run_size_only) from ``--params`` / ``--units`` / ``--anchor``."""
    units = list(ANCHOR_UNIT_SIZES) if args.anchor else args.units
    return units, ({"unit_sizes": units} if units else {"psi": args.params})


def ranks_per_node_argument(p: argparse.ArgumentParser) -> None:
    """``--ranks-per-node K`` (the hsdp and zeropp stages' node size; every ledger's intra/inter-node split)."""
    p.add_argument("--ranks-per-node", metavar="K", type=integer(1), default=None,
                   help="K ranks per node (must divide --ranks): needed by hsdp and zeropp; splits every stage's "
                        "bytes into intra-node (NVLink) and inter-node (InfiniBand); default one node")


def zeropp_cuts(text: str) -> tuple[str, ...]:
    """An argparse ``type``: ZeRO++'s cuts to switch on, comma-separated from qwz, hpz, qgz, or ``none``."""
    if text.strip() == "none":
        return ()
    cuts = tuple(x.strip() for x in text.split(","))
    if not cuts or any(c not in ZEROPP_CUTS for c in cuts) or len(set(cuts)) != len(cuts):
        raise argparse.ArgumentTypeError(f"must be comma-separated names from {', '.join(ZEROPP_CUTS)} (each at most "
                                         f"once), or none; got {text!r}")
    return cuts
