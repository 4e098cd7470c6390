"""The direct path: a collective run straight over every rank's own buffer, in one pass, with no world buffer.

:mod:`ringemu.direct.kernels` holds its numba kernels (a schedule's program, planned once, then run tile by tile
over buffers named by their addresses); :mod:`ringemu.direct.run` prepares and runs them. It sits in ringemu's core
layer: it imports the schedule, layout, ledger, wire and execute modules and nothing above them; the public
collectives (:mod:`ringemu.collectives`) and the per-rank entry points of backends (:mod:`ringemu.per_rank`) call
it in fused mode.
"""
from .run import Program, program, run_call, run_direct, shard_starts

__all__ = ["Program", "program", "run_direct", "run_call", "shard_starts"]
