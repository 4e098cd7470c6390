"""The lesson's anchor model and the ZeRO paper's example, as inputs to size-only runs.

* Ψ = 27,781,427,952 parameters (the lesson's anchor). The lesson does not print its configuration; as layer
  sizes we take what it does print: the largest layer (full attention + FFN) has about 372,000,000 parameters
  (lesson, FSDP paragraph; claim M10) and the activations are those of L = 64 layers of hidden size h = 5,120
  (the values that reproduce its 45.6 GB and 2.7 GB, claim M9). So: 64 layers of 372,000,000 parameters, and
  the remaining 3,973,427,952 split evenly between the input embedding and the output head. This split is an
  assumption, stated wherever it is used.
* Activations at s = 4,096, b = 1 (lesson), h = 5,120, L = 64 (assumed as above).
* The ZeRO paper's Figure 1: Ψ = 7.5B on N = 64 (Rajbhandari et al. 2019).
"""
from __future__ import annotations

from .activations import ActivationShape

__all__ = ["ANCHOR_PSI", "ANCHOR_LAYERS", "ANCHOR_LAYER_PARAMS", "ANCHOR_UNIT_SIZES", "ANCHOR_UNITS_ASSUMPTION",
           "anchor_activations", "ZERO_PAPER_PSI", "ZERO_PAPER_RANKS", "ANCHOR_RANKS"]

ANCHOR_PSI = 27_781_427_952  # parameters (lesson, summary)
ANCHOR_RANKS = 8  # the lesson's data-parallel degree
ANCHOR_LAYERS = 64  # L, assumed (reproduces claim M9's 45.6 GB / 2.7 GB)
ANCHOR_LAYER_PARAMS = 372_000_000  # the largest layer, "约 3.72 亿个参数" (lesson, FSDP paragraph)
_REST = ANCHOR_PSI - ANCHOR_LAYERS * ANCHOR_LAYER_PARAMS  # embedding + output head
ANCHOR_UNIT_SIZES = (_REST // 2, *([ANCHOR_LAYER_PARAMS] * ANCHOR_LAYERS), _REST - _REST // 2)
ANCHOR_UNITS_ASSUMPTION = (
    f"the anchor as {len(ANCHOR_UNIT_SIZES)} units: input embedding {ANCHOR_UNIT_SIZES[0]:,}, "
    f"{ANCHOR_LAYERS} layers of {ANCHOR_LAYER_PARAMS:,} (the lesson's largest layer, as printed), output head "
    f"{ANCHOR_UNIT_SIZES[-1]:,}; the lesson does not print the configuration, so this split is assumed")

ZERO_PAPER_PSI = 7_500_000_000  # Rajbhandari et al. 2019, Figure 1
ZERO_PAPER_RANKS = 64


def anchor_activations(recompute: str = "selective") -> ActivationShape:
    """s = 4,096, b = 1 (lesson); h = 5,120, L = 64 (assumed, claim M9); a = 40 (h/128, assumed; used only
    without recomputation)."""
    return ActivationShape(seq=4096, batch=1, hidden=5120, layers=ANCHOR_LAYERS, recompute=recompute, heads=40)
