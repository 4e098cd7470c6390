"""Faults injected into collectives, and the detectors that find them.

* :mod:`~ringemu.faults.spec` — the vocabulary: :class:`Fault`, its spec grammar, the errors a faulty collective
  raises, the check of a fault against a schedule;
* :mod:`~ringemu.faults.link` — the link layer of a faulty step (messages with a CRC-32 header, checked by their
  receivers);
* :mod:`~ringemu.faults.plan` — a run's faults and how they fire during a collective;
* :mod:`~ringemu.faults.locate` — detectors (checksums, provenance, integer parity) and where they place a fault;
* :mod:`~ringemu.faults.report` — random trials over every algorithm and mode (``ringemu faults``);
* :mod:`~ringemu.faults.torch_faults` — the same faults on real torch.distributed messages (needs torch).

May import ringemu's core (schedule, execute, reference, provenance, blocks, layout, dtypes) and the algorithm
registry; never the collectives, the worlds, the views or the command line, which import it. This package's own
order: spec < link < plan < locate < report; torch_faults reads spec and link only.
"""
from .plan import FaultPlan, as_plan, sub_schedule
from .spec import (KINDS, MESSAGE_KINDS, CollectiveFault, Fault, MessageFault, RankStopped, check_fault,
                   parse_fault)

__all__ = ["Fault", "FaultPlan", "CollectiveFault", "MessageFault", "RankStopped", "KINDS", "MESSAGE_KINDS",
           "parse_fault", "as_plan", "check_fault", "sub_schedule"]
