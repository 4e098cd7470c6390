"""Every place per-rank code can run: one :class:`Communicator` interface (:mod:`~ringemu.worlds.base`) and its
worlds — the in-process emulator of N thread-ranks (:mod:`~ringemu.worlds.emulator`, with the hand-off of
:mod:`~ringemu.worlds.scheduling`), the size-only world that counts without data (:mod:`~ringemu.worlds.size_only`),
and N torch.distributed processes (:mod:`~ringemu.worlds.torch_processes` per rank, launched by
:mod:`~ringemu.worlds.torch_launch`; needs the ``torch`` extra, imported only by those two modules).

May import ringemu's core, the algorithm registry, the faults and the collectives; the stages, the testing kit and
the command line import it, never the other way round.
"""
from .base import Communicator, RankFailure, check_algorithm, communicator_algorithms
from .emulator import EmulatedWorld, EmulatorCommunicator
from .size_only import SizeOnlyCommunicator, SizeOnlyWorld

__all__ = ["Communicator", "EmulatedWorld", "EmulatorCommunicator", "RankFailure", "SizeOnlyWorld",
           "SizeOnlyCommunicator", "check_algorithm", "communicator_algorithms"]
