"""Memory per rank: activations (Korthikanti et al. 2022, §4), the closed forms of the ZeRO paper (§5, Table 1),
the lesson's anchor model as its layers, and :mod:`~zero_stages.memory.report`, which runs the stages on
size-only buffers and reads their MemoryLedgers.

:mod:`~zero_stages.memory.activations`, :mod:`~zero_stages.memory.closed_forms` and
:mod:`~zero_stages.memory.anchor` are foundations (the stages' API reads them) and import nothing above zero_stages'
root; :mod:`~zero_stages.memory.report` sits above the API (it runs it) and below the lesson and the commands.
"""
__all__: list[str] = []
