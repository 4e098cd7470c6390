"""Communicator implementations: the in-process emulator, the size-only world, and (optional) torch.distributed."""
from .base import Communicator, RankFailure, check_algorithm, communicator_algorithms
from .emulator import EmulatedWorld, EmulatorCommunicator
from .size_only import SizeOnlyCommunicator, SizeOnlyWorld

__all__ = ["Communicator", "EmulatedWorld", "EmulatorCommunicator", "RankFailure", "SizeOnlyWorld",
           "SizeOnlyCommunicator", "check_algorithm", "communicator_algorithms"]
