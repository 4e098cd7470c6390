"""Surviving mutmut mutants reviewed and found equivalent: no input makes the mutated code behave differently.

Keys are mutmut 3.8.1's mutant names (stable for an unchanged source file: mutmut numbers the mutations of each
function in order); a name that no longer survives, or that no longer exists after an edit, is simply not
counted. ``mutmut_parts.py`` reports these apart from the true survivors; they still count as not killed in its
strict score. Review again when a file listed here changes.
"""
from __future__ import annotations

from equivalent_ompi import OMPI_ORDERS  # this directory: the engine orders' reviewed survivors
from equivalent_orders import NUMPY_INT as _NUMPY_INT, ORDERS

__all__ = ["EQUIVALENT"]

_ONLY_SPEED = ("transfers_of answers the same by a mask or by a by-chunk index: which one is used from which call on "
               "changes only its speed")
_FLOAT_MASK = "a float mask of 0s and 1s selects the same rows as a boolean one (flatnonzero of wanted[column])"

_MODES_AGREE = ("observe's fault-free steps in fused mode instead of the given mode: the modes give the same bits "
                "(tests/test_execute_modes.py), and the faulty steps do not depend on the mode")
_STOPS = ("FaultPlan.run raises RankStopped naming the stopped rank and its step for every stop a trial draws (each "
          "of the registry's orders, N = 5, every step and rank: tests/test_faults_report.py), and a fault without a "
          "label matches any call's label: the other outcomes are never reached")

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
    # size-only
    **{f"ringemu.ledger_counts.xǁScheduleCountsǁ{name}": _ONLY_SPEED for name in (
        "__init____mutmut_3", "transfers_of__mutmut_10", "transfers_of__mutmut_11", "transfers_of__mutmut_12",
        "transfers_of__mutmut_13", "transfers_of__mutmut_14")},
    "ringemu.ledger_counts.xǁScheduleCountsǁtransfers_of__mutmut_17": _FLOAT_MASK,
    "ringemu.ledger_counts.xǁScheduleCountsǁtransfers_of__mutmut_19": _FLOAT_MASK,
    **{f"ringemu.ledger_counts.xǁScheduleCountsǁtransfers_of__mutmut_{k}":
       "any sort kind: the indices are sorted again before they are returned" for k in (26, 28, 30)},
    "ringemu.ledger_counts.xǁScheduleCountsǁtransfers_of__mutmut_38":
        "one bound more than the n_chunks + 1 that bounds[c + 1] (c < n_chunks) ever reads",
    **{f"ringemu.ledger_counts.xǁLayoutCountsǁ__init____mutmut_{k}":
       "every layout class defines pads_on_wire (ChunkLayout True, Partition False): the default is never read"
       for k in (6, 9, 12)},
    "ringemu.worlds.size_only.x_count_collective__mutmut_11":
        "dtype names are case-insensitive: the ledger records resolve_dtype's name, 'fp32'",
    "ringemu.worlds.size_only.xǁSizeOnlyCommunicatorǁ_call__mutmut_8": "arrays=None and arrays=False: both false",
    **{f"ringemu.worlds.size_only.xǁSizeOnlyWorldǁ__init____mutmut_{k}":
       "ranks_per_node was checked the line before; check_algorithm would only check it again" for k in (19, 22)},
    # faults-detect
    "ringemu.faults.report.x__world__mutmut_24":
        "standard normals in float64 are rounded once to the world's dtype either way (astype or the padded copy)",
    "ringemu.faults.report.x__trials__mutmut_4":
        "break for continue: no order of the registry is unsupported at any N from 2 to 8, where the trials run",
    "ringemu.faults.report.x__trials__mutmut_74": _MODES_AGREE,
    "ringemu.faults.locate.x_explain__mutmut_11": _MODES_AGREE,
    "ringemu.faults.report.x_markdown__mutmut_31":
        "the per-algorithm table's third key is a constant: '' or 'XXXX' sorts and prints alike (it is not printed)",
    "ringemu.faults.report.x_bit_classes__mutmut_12": "width / 2 and width // 2 compare alike: widths are even",
    **{f"ringemu.faults.report.x__stop_trial__mutmut_{k}": _STOPS for k in (4, 10, 11, 13, 14, 20, 21)},
    **{f"ringemu.faults.report.x__count__mutmut_{k}":
       "the checksum/provenance/values counts of a stop cell are never read: its table row prints dashes there"
       for k in range(17, 26)},
    **{f"ringemu.faults.locate.x__mask_sums__mutmut_{k}":
       "a sum in the default int64, stored into the int32 world, wraps to the same value as the int32 sum"
       for k in (17, 19)},
    # rollback
    "zero_stages.step_guard.xǁStepGuardǁ__init____mutmut_17": "bool(None) and bool(False) are both False",
    "zero_stages.step_guard.xǁStepGuardǁattempts__mutmut_2": "_Attempt(None): guarded is only tested for truth",
    **{f"zero_stages.step_guard.xǁStepGuardǁstate__mutmut_{k}": "np.array copies by default: copy=True changes nothing"
       for k in (7, 14, 21, 28)},
    "zero_stages.job.xǁJobǁinit_unit__mutmut_8": "flags.writeable = None sets it False, as False does",
    # compare-topology (reviewed survivors of the first rerun)
    'ringemu.compare.x_compare__mutmut_39':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_40':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_41':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_42':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_43':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_44':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_45':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_46':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_47':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_48':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_49':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_50':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_compare__mutmut_51':
        'the fallback after the loop is unreachable: ring (the default algorithm) supports every N, so the loop always sets bus_factor',
    'ringemu.compare.x_sweep_sizes__mutmut_5':
        "check_numel's default name is 'numel', the value dropped",
    'ringemu.compare.x_sweep_sizes__mutmut_16':
        'max(top, 2).bit_length() differs only for top in {0, 1}, where the filter 1 << k <= top leaves the same list',
    'ringemu.compare.x_sweep_sizes__mutmut_17':
        '1 << k <= top holds for every k < top.bit_length() when top >= 1, and 1 >> 0 == 1 << 0',
    'ringemu.compare.x_sweep_sizes__mutmut_19':
        "a power-of-two top dropped by '<' is appended again, in the same last place, by the final 'top not in sizes'",
    'ringemu.compare.x_sweep_sizes__mutmut_26':
        "top = 1 is already in sizes ([1]): 'top > 1' and 'top > 0' append the same",
    'ringemu.compare.x_sweep__mutmut_47':
        "the throwaway ledger's label is never read (only records[0].layout and itemsize are)",
    'ringemu.topology.xǁTopologyǁ__post_init____mutmut_5':
        "check_n_ranks's default name is 'n_ranks', the value dropped",
    'ringemu.topology.xǁTopologyǁfrom_nodes__mutmut_5':
        "check_n_ranks's default name is 'n_ranks', the value dropped",
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_11':
        'per_node >= 1 (checked by Topology), and a // 1 != b // 1 is a != b',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_15':
        'per_node >= 1 (checked by Topology), and a // 1 != b // 1 is a != b',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_58':
        'per_node >= 1 (checked by Topology), and a // 1 != b // 1 is a != b',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_62':
        'per_node >= 1 (checked by Topology), and a // 1 != b // 1 is a != b',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_91':
        'link_chunks is already int64 (np.diff of int64 indices, or reduceat of int64 weights)',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_93':
        'link_chunks is already int64 (np.diff of int64 indices, or reduceat of int64 weights)',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_103':
        'with no links the rows are an empty array whatever its dtype or unique-axis: rows.tolist() is []',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_111':
        'with no links the rows are an empty array whatever its dtype or unique-axis: rows.tolist() is []',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_113':
        'with no links the rows are an empty array whatever its dtype or unique-axis: rows.tolist() is []',
    'ringemu.topology.xǁLinkProfileǁ__init____mutmut_115':
        'with no links the rows are an empty array whatever its dtype or unique-axis: rows.tolist() is []',
    'ringemu.topology.x__counts__mutmut_1':
        'a stable sort of sorted keys is the identity, and equal keys are merged by an order-free integer sum',
    'ringemu.topology.x__counts__mutmut_3':
        'a stable sort of sorted keys is the identity, and equal keys are merged by an order-free integer sum',
    'ringemu.topology.x__counts__mutmut_5':
        'a stable sort of sorted keys is the identity, and equal keys are merged by an order-free integer sum',
    'ringemu.topology.x__counts__mutmut_10':
        'a stable sort of sorted keys is the identity, and equal keys are merged by an order-free integer sum',
    'ringemu.topology.x__counts__mutmut_12':
        'a stable sort of sorted keys is the identity, and equal keys are merged by an order-free integer sum',
    'ringemu.topology.x__counts__mutmut_14':
        'a stable sort of sorted keys is the identity, and equal keys are merged by an order-free integer sum',
    'ringemu.topology.x_link_model__mutmut_21':
        'wire_elements() is already int64, and LinkProfile casts its weights to int64 itself',
    'ringemu.topology.x_link_model__mutmut_23':
        'wire_elements() is already int64, and LinkProfile casts its weights to int64 itself',
    # the engine orders (engine-orders, engine-orders-rest): their own files
    **ORDERS,
    **OMPI_ORDERS,
}
