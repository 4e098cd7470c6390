"""Surviving mutmut mutants reviewed and found equivalent: no input makes the mutated code behave differently.

Keys are mutmut 3.8.1's mutant names (stable for an unchanged source file: mutmut numbers the mutations of each
function in order); a name that no longer survives, or that no longer exists after an edit, is simply not
counted. ``mutmut_parts.py`` reports these apart from the true survivors; they still count as not killed in its
strict score. Review again when a file listed here changes.
"""
from __future__ import annotations

__all__ = ["EQUIVALENT"]

_NUMPY_INT = "numpy's default integer is int64 on 64-bit Linux (numpy 2): the dtype argument changes nothing"

EQUIVALENT = {
    # memory-guard
    "ringemu.memory_guard.x__sample__mutmut_1": "_sample's numel default is never used: both callers pass numel",
    "ringemu.memory_guard.x__sample__mutmut_2": "_sample's itemsize default is never used: both callers pass it",
    # checkpoint
    "zero_stages.checkpoint.root.xǁRootLockǁ__init____mutmut_4":
        "held is set True before the constructor returns; one that raises leaves no object",
    "zero_stages.checkpoint.root.xǁRootLockǁ__init____mutmut_5":
        "held is set True before the constructor returns; one that raises leaves no object",
    "zero_stages.checkpoint.root.xǁRootLockǁrelease__mutmut_3":
        "held = None instead of False: both are false, and only release() reads it",
    "zero_stages.checkpoint.root.x_resolve_step__mutmut_6": "codec names are case-insensitive: 'ASCII' is 'ascii'",
    "zero_stages.checkpoint.format.x_read_rank_file__mutmut_3":
        "np.load reads allow_pickle=None as false: the pickle is refused the same way",
    "zero_stages.checkpoint.format.x_read_rank_file__mutmut_5":
        "np.load's allow_pickle defaults to False (numpy >= 1.16.3): the pickle is refused the same way",
    # faults-spec
    **{f"ringemu.faults.spec.xǁFaultǁ__post_init____mutmut_{k}":
       "the src/dst exemption never decides: every message kind needs src and dst, so they never reach it"
       for k in (84, 85, 86, 87)},
    "ringemu.faults.plan.xǁFaultPlanǁrun__mutmut_32":
        "break -> return is unreachable: the first stop step is in the sorted cuts and raises before a later one",
    "ringemu.faults.plan.x_sub_schedule__mutmut_4": "the schedule table is int64 already; np.array keeps its dtype",
    "ringemu.faults.plan.x_sub_schedule__mutmut_6": "the schedule table is int64 already; np.array keeps its dtype",
    # core-layout
    "ringemu.layout.xǁChunkLayoutǁ_chunk_origin__mutmut_1":
        "split >= 1 for > 1: with split 1 a shard is one chunk and both branches give the same origin",
    "ringemu.layout.xǁChunkLayoutǁpayloads__mutmut_1":
        "split >= 1 for > 1: with split 1 a shard is one chunk and both branches give the same payloads",
    **{f"ringemu.layout.xǁChunkLayoutǁpayloads__mutmut_{k}": _NUMPY_INT for k in (6, 8, 21, 23, 37, 39)},
    "ringemu.layout.xǁChunkLayoutǁpayloads__mutmut_12":
        "the first clip's lower bound 0 dropped: the final clip to [0, chunk_size] gives the same payloads",
    "ringemu.layout.xǁChunkLayoutǁpayloads__mutmut_32": "reshape(-2): numpy 2.4 reads any negative size as -1",
    "ringemu.layout.xǁChunkLayoutǁwire_elements__mutmut_3": _NUMPY_INT,
    "ringemu.layout.xǁChunkLayoutǁwire_elements__mutmut_6": _NUMPY_INT,
    "ringemu.checks.x_parse_number__mutmut_24": "Decimal() strips surrounding whitespace itself",
    # proofs-core
    "proofs.claim.x_value_text__mutmut_18":
        "the denominator test is redundant: an integer's (or a half's) decimal text never ends in an ellipsis",
    "proofs.rounding.xǁExactlyǁrender__mutmut_4":
        "an integer through decimal_str prints the same digits and separators as f'{n:,}'",
    "proofs.rounding.xǁExactlyǁrender__mutmut_13":
        "reached only when 6 decimals terminate: 15 decimals print the same digits",
    "proofs.rounding.xǁExactlyǁrender__mutmut_14":
        "reached only when 6 decimals terminate: 7 decimals print the same digits",
    "proofs.rounding.xǁStatedǁrender__mutmut_8": "an empty set renders as {} either way",
}
