"""zero_stages: DP, ZeRO-1, ZeRO-2 and ZeRO-3 (Rajbhandari et al. 2019, §5, §7) driving sharded mixed-precision
Adam on a :class:`~ringemu.worlds.Communicator`, with memory and traffic read from the ledgers.

Its wings: :mod:`~zero_stages.stages` (dp, zero1-3), :mod:`~zero_stages.memory`, :mod:`~zero_stages.checkpoint`,
:mod:`~zero_stages.lesson`, :mod:`~zero_stages.torch`, :mod:`~zero_stages.cli`; the stage foundations (buffers,
job, optimizer, precision, Adam) at the root. May import all of ringemu; ringemu never imports it. The layers,
bottom up: foundations < stages < api and report < memory report and checkpoints < torch < argument types <
lesson and commands (``tests/test_layering.py``).
"""
from .memory.activations import RECOMPUTE, ActivationShape
from .adam import AdamConfig, adam_step
from .api import DEFAULT_UNIT_SIZES, RANK_FUNCTIONS, STAGES, run_job, run_size_only, size_only_job, train, training_job
from .memory.closed_forms import model_state_bytes_closed_form, shard_elements, traffic_elements_closed_form
from .precision import BYTES_PER_PARAMETER, K_BYTES, LossScaling
from .report import StageReport, parity_mismatches, parity_with_dp
from .step_guard import StepFailed

__all__ = ["STAGES", "RANK_FUNCTIONS", "DEFAULT_UNIT_SIZES", "train", "run_size_only", "run_job", "training_job",
           "size_only_job", "StageReport", "StepFailed",
           "parity_with_dp", "parity_mismatches", "model_state_bytes_closed_form", "traffic_elements_closed_form",
           "shard_elements", "ActivationShape", "RECOMPUTE", "AdamConfig", "adam_step", "LossScaling", "BYTES_PER_PARAMETER", "K_BYTES"]
