"""What the torch backend supports, as tables: the calls, the dtypes, and the reduce ops by dtype.

The tables are the backend's own: :data:`CALLS` names the :class:`~ringemu.torch.RingemuProcessGroup` method
each torch.distributed call reaches (a test checks every one exists and that every public collective method of
the group is listed), the dtypes are :data:`ringemu.torch_tensors.NUMPY_OF` and
:data:`~ringemu.torch_tensors.EXACT_NUMPY_OF`, and the ops :data:`ringemu.torch.reduce_ops.OPS`.
:func:`markdown` renders them; ``python benchmarks/torch_surface_table.py`` writes them into docs/torch.md.
"""
from __future__ import annotations

from ..torch_tensors import EXACT_NUMPY_OF, NUMPY_OF
from .reduce_ops import OPS

__all__ = ["CALLS", "markdown"]

CALLS = (  # (torch.distributed calls, RingemuProcessGroup methods they reach, how data moves, how bytes are counted)
    (("all_reduce",), ("allreduce", "allreduce_coalesced"), "reduce op (below); SUM in the algorithm's order",
     "the algorithm's all-reduce"),
    (("reduce_scatter_tensor", "reduce_scatter"),
     ("reduce_scatter_single", "reduce_scatter", "reduce_scatter_single_coalesced"),
     "reduce op (below); shard r of the all-reduce's bits", "the algorithm's reduce-scatter"),
    (("all_gather_into_tensor", "all_gather"),
     ("all_gather_single", "allgather", "all_gather_single_coalesced", "allgather_coalesced"),
     "the algorithm's copies", "the algorithm's all-gather"),
    (("broadcast",), ("broadcast",), "copies from the root", "NCCL's chain from the root"),
    (("scatter", "gather"), ("scatter", "gather"), "copies to / from the root", "one direct message per rank"),
    (("all_to_all", "all_to_all_single"), ("alltoall", "all_to_all_single"),
     "copies; split sizes as lists or tensors, unequal splits", "N-1 pairwise steps (equal pieces), else one "
     "message per pair"),
    (("send", "recv"), ("send", "recv"), "copied into a mailbox at send", "one message"),
    (("barrier",), ("barrier",), "nothing", "as NCCL sends it: a one-element fp32 all-reduce by the algorithm"),
    (("broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"), (),
     "torch pickles to uint8 tensors and calls the rows above", "those calls' bytes (uint8, 1 B each)"),
)


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def markdown() -> str:
    """The three tables as Markdown (calls; dtypes; reduce ops by kind of dtype)."""
    lines = ["| torch.distributed call | how the data moves | counted in the ledger as |", "|---|---|---|"]
    lines += [f"| {', '.join(f'`{c}`' for c in calls)} | {moves} | {counted} |" for calls, _, moves, counted in CALLS]
    kernels = ", ".join(_name(d) for d in NUMPY_OF)
    exact = ", ".join(_name(d) for d in EXACT_NUMPY_OF)
    lines += ["", "| dtypes | how they are reduced |", "|---|---|",
              f"| {kernels} | ringemu's kernels (16-bit floats added in fp32, rounded per hop) |",
              f"| {exact} | exactly, in any order (integer sums wrap modulo 2^bits; bool SUM is logical or) |"]
    kinds = ("floating", "integer", "bool")
    lines += ["", "| reduce op | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    lines += [f"| {op} | " + " | ".join("yes" if k in accepted else "no (TypeError)" for k in kinds) + " |"
              for op, accepted in OPS.items()]
    return "\n".join(lines) + "\n"
