"""ringemu as a torch.distributed backend: N thread-ranks in one process, ringemu's schedules and ledger.

``spawn(fn, world_size, algorithm="ring")`` runs unmodified PyTorch code (DDP, FSDP2's ``fully_shard``,
``ZeroRedundancyOptimizer``, your own) on thread-ranks whose process group is ``"ringemu"``: results are the bits
the chosen algorithm gives (16-bit tensors rounded per hop), and every byte each rank sends is in the returned
:class:`~ringemu.ledger.CommLedger`, per collective call, per link, per step. Needs the ``torch`` extra.

The opposite direction of :mod:`ringemu.worlds.torch_processes` (ringemu's ranks on torch.distributed). May
import ringemu's core, the algorithm registry and the collectives; never the worlds, testing or the CLI.
"""
from .launcher import BACKEND, RankError, SpawnResult, register_backend, spawn
from .meeting import CollectiveMismatch, CollectiveTimeout, PeerFailure
from .process_group import RingemuProcessGroup

__all__ = ["spawn", "SpawnResult", "RankError", "BACKEND", "register_backend", "RingemuProcessGroup",
           "CollectiveMismatch", "CollectiveTimeout", "PeerFailure"]
