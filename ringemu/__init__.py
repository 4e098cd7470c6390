"""ringemu: ring collectives on N virtual ranks, with every element that crosses a link counted exactly.

Public API (stable): the collectives, their schedules, the ledgers, size-only buffers and fixed-seed blocks.

The package's public face: it re-exports the stable names and sits above every module of ringemu, so any of
them may be re-exported here; no module of ringemu imports it except the entry points (``cli``, the pytest plugin).
The layers, bottom up: core (schedule, layout, kernels, wire, ledger, ...) < algorithms < faults < views <
collectives and trace < worlds < torch < testing < cli; ``tests/test_layering.py`` enforces them.
"""
from .blocks import check_integer_blocks, integer_blocks
from .collectives import all_gather, all_reduce, naive_all_reduce, reduce_scatter
from .dtypes import DTYPES, resolve_dtype
from .identify import identify, identify_dump
from .layout import ChunkLayout
from .ledger import CommLedger, RankTraffic, Traffic
from .memory import MemoryLedger
from .provenance import ProvenanceError, check_provenance
from .algorithms import schedule_for
from .algorithms.ring import naive_reduce_broadcast, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from .schedule import ADD, COPY, Schedule, Transfer
from .trace import trace_collective, trace_schedule
from .virtual import VirtualBuffer

__version__ = "0.1.0"

__all__ = [
    "reduce_scatter", "all_gather", "all_reduce", "naive_all_reduce",
    "Schedule", "Transfer", "COPY", "ADD", "ring_reduce_scatter", "ring_all_gather", "ring_all_reduce",
    "naive_reduce_broadcast", "schedule_for", "check_provenance", "ProvenanceError",
    "ChunkLayout", "CommLedger", "Traffic", "RankTraffic", "MemoryLedger", "VirtualBuffer",
    "integer_blocks", "check_integer_blocks", "trace_collective", "trace_schedule",
    "DTYPES", "resolve_dtype", "identify", "identify_dump", "__version__",
]
