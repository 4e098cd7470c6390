"""The ZeRO stages on torch.distributed: the stage modules of :mod:`zero_stages` run through
:class:`ringemu.worlds.torch_processes.TorchCommunicator` (gloo or NCCL), with parity checks against DP and the
emulator, a ``torchrun`` entry point, bytes observed on the wire, and a comparison with torch's own
``ZeroRedundancyOptimizer``.

These modules sit above both :mod:`ringemu` and :mod:`zero_stages` (they import both; ``ringemu`` imports neither).
torch is an optional extra: nothing here imports it at package import time.
"""

__all__: list[str] = []
