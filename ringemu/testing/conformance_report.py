"""What the conformance suite found: one :class:`CollectiveReport` per collective, a :class:`ConformanceReport`
for the run, and the :class:`Example` each verdict was reached on. ``print(report)`` is the readable table."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..blocks import integer_blocks
from ..dtypes import resolve_dtype

__all__ = ["Example", "CollectiveReport", "ConformanceReport", "PROPERTIES"]

PROPERTIES = ("values", "order", "bytes")  # in the order they are judged: bits before bytes


@dataclass(frozen=True, order=True)
class Example:
    """One drawn example: N ranks, S elements, the integer blocks' and the floats' dtype, one seed for both."""

    n_ranks: int
    numel: int
    int_dtype: str
    float_dtype: str
    seed: int

    def worlds(self) -> dict[str, np.ndarray]:
        rng = np.random.Generator(np.random.PCG64(self.seed))
        return {"integer": integer_blocks(self.n_ranks, self.numel, self.seed, self.int_dtype),
                "float": rng.standard_normal((self.n_ranks, self.numel)).astype(resolve_dtype(self.float_dtype))}

    def __str__(self) -> str:
        elements = "element" if self.numel == 1 else "elements"
        return (f"N = {self.n_ranks} ranks, S = {self.numel} {elements}, integer blocks {self.int_dtype}, "
                f"floats {self.float_dtype} (seed {self.seed})")


@dataclass
class CollectiveReport:
    """One collective's verdicts over every example: ``values``, ``order`` and ``bytes`` are "pass", "fail" or
    (``order``) "not checked" / (``bytes``) "not reported"; ``orders`` are the orders whose bits every example
    matched; ``failures`` maps a failing property to the message of its smallest failing example."""

    collective: str
    orders: list[str] = field(default_factory=list)
    known: tuple[str, ...] = ()  # every order this collective was judged against
    values: str = "pass"
    order: str = "pass"
    bytes: str = "not reported"
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def bits(self) -> str:
        if len(self.orders) > 1 and set(self.orders) == set(self.known):
            return f"all {len(self.orders)} orders (none told apart on these examples)"
        return ", ".join(self.orders) if self.orders else "none"

    @property
    def ok(self) -> bool:
        return self.values == "pass" and self.order != "fail" and self.bytes != "fail"


@dataclass
class ConformanceReport:
    """What :func:`~ringemu.testing.conformance.check_communicator` found. ``ok`` is True when no property
    failed; ``failing`` names each failing property (``"all-reduce bytes"``); ``text()`` (also ``str`` and
    ``print``) is the table, the summary line and every failing property's smallest example."""

    name: str
    collectives: dict[str, CollectiveReport]
    examples: int = 0
    count: str = "payload"
    order: str | None = None
    ranks: tuple[int, int] = (1, 1)
    world_failure: str | None = None  # the world raised or hung

    @property
    def failing(self) -> list[str]:
        out = ["world runs"] if self.world_failure else []
        for c in self.collectives.values():
            out += [f"{c.collective} {p}" for p in PROPERTIES if getattr(c, p) == "fail"]
        return out

    @property
    def ok(self) -> bool:
        return not self.failing

    @property
    def failure(self) -> str | None:
        """Every failing property's message (smallest example first line), or None."""
        parts = [self.world_failure] if self.world_failure else []
        for c in self.collectives.values():
            parts += [c.failures[p] for p in PROPERTIES if p in c.failures]
        return "\n".join(parts) if parts else None

    def text(self) -> str:
        wanted = {None: "a known order", "any": "any (not checked)"}.get(self.order, f"the {self.order} order")
        lines = [f"conformance of {self.name}: {self.examples} examples on {self.ranks[0]}-{self.ranks[1]} ranks; "
                 f"bytes counted as {self.count}; bits must follow {wanted}"]
        lines.append(f"  {'collective':<15} {'values':<7} {'bytes':<22} bits equal to")
        for c in self.collectives.values():
            values = "exact" if c.values == "pass" else "WRONG"
            nbytes = {"pass": "match the ledger", "not reported": "not reported"}.get(c.bytes, "WRONG")
            bits = c.bits + ("  <- WRONG" if c.order == "fail" else "")
            lines.append(f"  {c.collective:<15} {values:<7} {nbytes:<22} {bits}")
        if self.ranks[1] < 4:
            lines.append("  (below 4 ranks a ring and its mirror image add in the same order: draw max_ranks >= 4 "
                         "to tell them apart)")
        lines.append("OK" if self.ok else "FAILED: " + ", ".join(self.failing))
        if self.world_failure:
            lines.extend("  " + line for line in self.world_failure.splitlines())
        for c in self.collectives.values():
            for p in PROPERTIES:
                if p in c.failures:
                    lines.append(f"{c.collective} {p}, smallest failing example:")
                    lines.extend("  " + line for line in c.failures[p].splitlines())
        return "\n".join(lines)

    __str__ = text

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython
        printer.text(self.text())
