"""Communicator implementations: the in-process emulator, and (optional) torch.distributed."""
from .base import Communicator, check_algorithm, communicator_algorithms
from .emulator import EmulatedWorld, EmulatorCommunicator, RankFailure

__all__ = ["Communicator", "EmulatedWorld", "EmulatorCommunicator", "RankFailure", "check_algorithm",
           "communicator_algorithms"]
