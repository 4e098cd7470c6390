"""The four stages, one file each, as per-rank code in the paper's order (Rajbhandari et al. 2019, §5):
:mod:`~zero_stages.stages.dp` (every rank holds everything), :mod:`~zero_stages.stages.zero1` (optimizer states
sharded), :mod:`~zero_stages.stages.zero2` (gradients too), :mod:`~zero_stages.stages.zero3` (parameters too,
gathered unit by unit, FSDP-style).

May import the stage foundations at zero_stages' root (buffers, job, optimizer, precision, step_guard) and
ringemu's Communicator interface; never the API, reports, memory reports, checkpoints, lesson or commands above it.
"""
__all__: list[str] = []
