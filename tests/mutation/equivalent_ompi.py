"""The surviving mutmut mutants of Open MPI's orders, reviewed and found equivalent.

Each was read and, where reading was not proof enough, compared with the original on a grid of inputs (the
reason says which); no input tells it from the original. ``equivalent.py`` merges these into EQUIVALENT."""
from __future__ import annotations

from equivalent_orders import NUMPY_INT  # this directory

__all__ = ["OMPI_ORDERS"]

OMPI_ORDERS = {
    # ringemu.algorithms.ompi_allgather
    **{f"ringemu.algorithms.ompi_allgather.x__blocks__mutmut_{k}": NUMPY_INT for k in (3, 5)},
    **{f"ringemu.algorithms.ompi_allgather.x__bruck__mutmut_{k}": NUMPY_INT for k in (3, 5)},
    **{f"ringemu.algorithms.ompi_allgather.x__neighbor_exchange__mutmut_{k}": NUMPY_INT for k in (11, 13)},
    **{f"ringemu.algorithms.ompi_allgather.x__recursive_doubling__mutmut_{k}": NUMPY_INT for k in (12, 14)},
    **{f"ringemu.algorithms.ompi_allgather.x__ring__mutmut_{k}": NUMPY_INT for k in (3, 5)},
    "ringemu.algorithms.ompi_allgather.x__bruck__mutmut_8":
        ("'while d <= n': the one extra iteration (d == n, N a power of two, or N = 1) has count = N - d = 0, so every"
         ' range is empty; _sized never builds on S = 0 (Ranges(numel or n)), so the empty ranges are dropped and no '
         'step is added'),
    "ringemu.algorithms.ompi_allgather.x__neighbor_exchange__mutmut_83":
        ('np.where(None, ranks, recv_from[0]) = recv_from[0] everywhere, and recv_from[0] = where(even, ranks, '
         'neighbor[0]) already equals ranks on even ranks: the same send_from'),
    "ringemu.algorithms.ompi_allgather.x__neighbor_exchange__mutmut_89":
        ('recv_from[1] instead of recv_from[0] for the first send_from: both are built by the same expression '
         'where(even, ranks, neighbor[0]) and neither has been updated yet'),
    "ringemu.algorithms.ompi_allgather.x__recursive_doubling__mutmut_3":
        ('n & (n - 2) instead of n & (n - 1): for N = 2^k (k >= 1) n - 2 has only bits below k, so 0 (recursive '
         'doubling) as before; odd N: both odd, nonzero; even non-power N = 2m: 2(m & (m - 1)) != 0; N = 1 goes to '
         'Bruck instead, but both add no step there (d = 1 is not < 1)'),
    "ringemu.algorithms.ompi_allgather.x__sized__mutmut_29":
        ('the cuts (shard bounds) add no bound: every all-gather order sends each block whole, so Ranges.schedule '
         "already cuts at every block's ends (one rank: [0, S] either way); schedules compared equal for every ompi "
         'all-gather, N 1..17, S 0..39, 97, 1000, 5000'),
    "ringemu.algorithms.ompi_allgather.x_ompi_ag_bruck__mutmut_1":
        "itemsize's default: an all-gather only copies, and no all-gather builder reads itemsize",
    "ringemu.algorithms.ompi_allgather.x_ompi_ag_neighbor_exchange__mutmut_1":
        "itemsize's default: an all-gather only copies, and no all-gather builder reads itemsize",
    "ringemu.algorithms.ompi_allgather.x_ompi_ag_recursive_doubling__mutmut_1":
        "itemsize's default: an all-gather only copies, and no all-gather builder reads itemsize",
    "ringemu.algorithms.ompi_allgather.x_ompi_ag_ring__mutmut_1":
        "itemsize's default: an all-gather only copies, and no all-gather builder reads itemsize",
    "ringemu.algorithms.ompi_allgather.x_ompi_ag_two_procs__mutmut_1":
        "itemsize's default: an all-gather only copies, and no all-gather builder reads itemsize",
    # ringemu.algorithms.ompi_allreduce
    **{f"ringemu.algorithms.ompi_allreduce.x__linear_bcast__mutmut_{k}": NUMPY_INT for k in (7, 10)},
    **{f"ringemu.algorithms.ompi_allreduce.x__recursive_doubling__mutmut_{k}": NUMPY_INT for k in (11, 15, 25, 27)},
    **{f"ringemu.algorithms.ompi_allreduce.x_ompi_rabenseifner__mutmut_{k}": NUMPY_INT for k in (32, 36, 55, 57)},
    **{f"ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_{k}": NUMPY_INT for k in (35, 37, 40, 42)},
    "ringemu.algorithms.ompi_allreduce.x__done__mutmut_10":
        ('cuts only passed by ompi_ring at n == 1, where block_bounds(S, 1) = [0, S]: Ranges.schedule cuts at 0 and S '
         'anyway (and uses (0, 0) for S = 0)'),
    "ringemu.algorithms.ompi_allreduce.x__linear_bcast__mutmut_1":
        'at n == 1 the bcast has np.arange(1, 1) = no destination: Ranges.step adds no step',
    "ringemu.algorithms.ompi_allreduce.x_ompi_basic_linear__mutmut_1": 'itemsize is unused by ompi_basic_linear',
    "ringemu.algorithms.ompi_allreduce.x_ompi_nonoverlapping__mutmut_6":
        ('only adds n == 1 with numel > 0: reduce_algorithm(1, ...) returns 1 without raising (alg 7 needs count >= '
         'pow2_below(1) = 1 >= 2), reduce_to_root and _linear_bcast add nothing for n < 2'),
    "ringemu.algorithms.ompi_allreduce.x_ompi_nonoverlapping__mutmut_7":
        'same as _6: n == 1 books nothing in either branch and reduce_algorithm(1, ...) does not raise',
    "ringemu.algorithms.ompi_allreduce.x_ompi_nonoverlapping__mutmut_26":
        'n == 1, numel 0: reduce_to_root(r, 1, 1) and _linear_bcast(r, 1) add no step',
    "ringemu.algorithms.ompi_allreduce.x_ompi_rabenseifner__mutmut_1":
        'itemsize is unused by ompi_rabenseifner (the basic-linear fallback is called without it)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_rabenseifner__mutmut_65":
        'at v == rem both branches give the same rank: 2·v = 2·rem = v + rem',
    "ringemu.algorithms.ompi_allreduce.x_ompi_rabenseifner__mutmut_82":
        'np.full(p, numel) with a Python-int numel is int64 without dtype',
    "ringemu.algorithms.ompi_allreduce.x_ompi_rabenseifner__mutmut_85":
        'np.full(p, numel) with a Python-int numel is int64 without dtype',
    "ringemu.algorithms.ompi_allreduce.x_ompi_rabenseifner__mutmut_91":
        'real is a permutation: real[v] != real[v ^ mask] (mask >= 1), so < and <= agree',
    "ringemu.algorithms.ompi_allreduce.x_ompi_recursive_doubling__mutmut_1":
        'itemsize is unused by ompi_recursive_doubling (no size-dependent choice)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_recursive_doubling__mutmut_6":
        '_recursive_doubling(r, 1): p = 1, extra = 0, the loop d < p never runs: no step added',
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_1":
        'itemsize is unused by ompi_ring (not even passed to the recursive-doubling fallback)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_26":
        'at n == 1 block_bounds(S, 1) = [0, S], cuts Ranges.schedule makes anyway (see _done_10)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_60": 'numpy 2.4 accepts reshape(-2) as reshape(-1)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_71": 'numpy 2.4 accepts reshape(-2) as reshape(-1)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_85": 'numpy 2.4 accepts reshape(-2) as reshape(-1)',
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_87":
        ('np.where(None, ...) takes the all-gather branch for every step: 1 - (s - m) = n - s = -s (mod n) since m = n'
         ' - 1, the reduce-scatter shift mod n, and the block is taken mod n'),
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_93":
        "at s = m the mutant's -m = 1 - n = 1 (mod n), the all-gather shift 1 - (s - m) = 1; blocks are taken mod n",
    "ringemu.algorithms.ompi_allreduce.x_ompi_ring__mutmut_104": 'numpy 2.4 accepts reshape(-2) as reshape(-1)',
    # ringemu.algorithms.ompi_common
    **{f"ringemu.algorithms.ompi_common.x_block_bounds__mutmut_{k}": NUMPY_INT for k in (8, 10)},
    **{f"ringemu.algorithms.ompi_common.x_mirror__mutmut_{k}": NUMPY_INT for k in (3,)},
    **{f"ringemu.algorithms.ompi_common.x_shard_bounds__mutmut_{k}": NUMPY_INT for k in (8, 10)},
    **{f"ringemu.algorithms.ompi_common.xǁRangesǁschedule__mutmut_{k}": NUMPY_INT for k in (67, 69)},
    "ringemu.algorithms.ompi_common.x__sorted_unique__mutmut_4":
        ("'if values.size or True': the only caller (Ranges.schedule) always passes [0, S, ...], at least 2 values, so"
         ' the empty branch is never taken'),
    "ringemu.algorithms.ompi_common.x_block_bounds__mutmut_19":
        ('b <= split instead of b < split: at b == split both branches give split*early = split*(late + 1) = '
         'split*late + split, so every bound is the same'),
    "ringemu.algorithms.ompi_common.x_mirror__mutmut_5":
        ('np.asarray(x) without dtype: every caller (ompi_rs_butterfly) passes an int64 array, and a Python int '
         'becomes int64 too: same bits'),
    "ringemu.algorithms.ompi_common.xǁRangesǁschedule__mutmut_17":
        ('S = 0 bounds np.zeros(2, dtype=None) (float 0.0s): only used as bounds.size - 1 = 1 chunk and tuple(int(b)) '
         '= (0, 0): the same schedule'),
    "ringemu.algorithms.ompi_common.xǁRangesǁschedule__mutmut_19":
        ('S = 0 bounds np.zeros(2) (float 0.0s): only used as bounds.size - 1 = 1 chunk and tuple(int(b)) = (0, 0): '
         'the same schedule'),
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_5":
        ('reshape(-2) instead of reshape(-1): numpy 2.4 treats any negative size as the one unknown dimension, so the '
         'same flat array'),
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_7":
        ('np.asarray(v, dtype=None) of the int / int64 fields every builder passes is int64 already (an empty src list'
         ' is only reached through np.broadcast_arrays with int64 arrays, and no row is kept from it)'),
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_9":
        ('np.asarray(v) without dtype: the fields every builder passes are ints or int64 arrays, already int64; empty '
         'float fields carry no row (keep is empty) and are never appended'),
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_20":
        ('fields[1].size instead of fields[0].size: the fields come from np.broadcast_arrays, so every one has the '
         'same size'),
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_24":
        ("'if cols[1]' instead of 'if cols[0]': the five column lists are appended together, so they are empty or non-"
         'empty together'),
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_48":
        'np.full(size, self.n_steps, dtype=None) of a Python int fill is int64 already',
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_51":
        'np.full(size, self.n_steps) without dtype, Python int fill: int64 already',
    "ringemu.algorithms.ompi_common.xǁRangesǁstep__mutmut_52":
        ('joined[1].size instead of joined[0].size: the joined columns are concatenations of equally long kept fields,'
         ' so they have the same size'),
    # ringemu.algorithms.ompi_decision
    "ringemu.algorithms.ompi_decision.x__cost__mutmut_8":
        ('nbytes / n for nbytes // n: default_choice only compares it with integer bounds B, and floor(x) < B exactly '
         'when x < B'),
    "ringemu.algorithms.ompi_decision.x_default_choice__mutmut_14":
        ("message of an unreachable AssertionError: every table's last row has N bound None and every rule list ends "
         'with (None, id)'),
    "ringemu.algorithms.ompi_decision.x_default_choice__mutmut_15":
        'message of an unreachable AssertionError: every table and rule list ends with None',
    "ringemu.algorithms.ompi_decision.x_default_choice__mutmut_16":
        'message of an unreachable AssertionError: every table and rule list ends with None',
    "ringemu.algorithms.ompi_decision.x_default_choice__mutmut_17":
        'message of an unreachable AssertionError: every table and rule list ends with None',
    # ringemu.algorithms.ompi_reduce
    **{f"ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_{k}": NUMPY_INT for k in (79,)},
    "ringemu.algorithms.ompi_reduce.x__pick__mutmut_4":
        ('message of an unreachable AssertionError: every table reduce_algorithm passes ends with (None, id), so _pick'
         ' always returns'),
    "ringemu.algorithms.ompi_reduce.x__pick__mutmut_5":
        'message of an unreachable AssertionError: every table passed to _pick ends with (None, id)',
    "ringemu.algorithms.ompi_reduce.x__pick__mutmut_6":
        'message of an unreachable AssertionError: every table passed to _pick ends with (None, id)',
    "ringemu.algorithms.ompi_reduce.x__pick__mutmut_7":
        'message of an unreachable AssertionError: every table passed to _pick ends with (None, id)',
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_37":
        'height = [1] * n: every entry is overwritten by the loop over all ranks',
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_45":
        ('loop from n - 2: height[n - 1] keeps its initial 0, which is its value, as rank N-1 is a leaf in every tree '
         '(children have larger ranks)'),
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_47":
        'loop down to r = -1: recomputes height[-1] = height[N-1], a leaf, again 0',
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_52":
        ('height 2 + max(...): every height h becomes 2h + 1 (monotone), the h loop visits them in the same order and '
         'the extra h values have no node with children, so their steps are empty and Ranges.step drops them (for S = '
         '0 too: keep is empty)'),
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_57":
        ('default=+1: every height becomes h + 2 (monotone); h = 1, 2 hold leaves only, empty steps that Ranges.step '
         'drops'),
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_61":
        'h from 0: height 0 holds leaves only, an empty step that Ranges.step drops',
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_66":
        'h up to height[0] + 1: no node is that high, an empty step that Ranges.step drops',
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_75":
        ('np.asarray(srcs, dtype=None): a list of Python ints is int64; an empty list (float64) gives an empty step '
         'that Ranges.step drops, after converting to int64 itself'),
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_77":
        ('np.asarray(srcs): a list of Python ints is int64; an empty list (float64) gives an empty step that '
         'Ranges.step drops'),
    "ringemu.algorithms.ompi_reduce.x_reduce_to_root__mutmut_81":
        'np.asarray(dsts): a list of Python ints is int64; an empty list gives an empty step that Ranges.step drops',
    "ringemu.algorithms.ompi_reduce.x_tree_children__mutmut_24":
        ('children[s] = [...] instead of +=: each children[s] is still the empty list when the binary branch fills it,'
         ' once'),
    "ringemu.algorithms.ompi_reduce.x_tree_children__mutmut_37":
        ('m <= n instead of m < n: m == n only for N a power of two, and then v ^ m = v + N >= N is never appended; '
         'the loop stops at the next m'),
    "ringemu.algorithms.ompi_reduce.x_tree_children__mutmut_39": '(v ^ m) >= v instead of >: m >= 1, so v ^ m != v',
    # ringemu.algorithms.ompi_reduce_scatter
    **{f"ringemu.algorithms.ompi_reduce_scatter.x__fold__mutmut_{k}": NUMPY_INT for k in (9, 13, 24, 26)},
    **{f"ringemu.algorithms.ompi_reduce_scatter.x__rs_butterfly__mutmut_{k}": NUMPY_INT for k in (26, 28)},
    **{f"ringemu.algorithms.ompi_reduce_scatter.x__rs_nonoverlapping__mutmut_{k}": NUMPY_INT for k in (28, 31)},
    **{f"ringemu.algorithms.ompi_reduce_scatter.x__rs_recursive_halving__mutmut_{k}": NUMPY_INT 
       for k in (26, 28, 88, 92)},
    **{f"ringemu.algorithms.ompi_reduce_scatter.x__rs_ring__mutmut_{k}": NUMPY_INT for k in (12, 14)},
    **{f"ringemu.algorithms.ompi_reduce_scatter.x__vstart__mutmut_{k}": NUMPY_INT for k in (3, 5)},
    "ringemu.algorithms.ompi_reduce_scatter.x__done__mutmut_10":
        ('cuts (the shard bounds) dropped: every non-empty shard is sent as a whole range in every order (ring, the '
         "last halving step or the final COPY, the butterfly's last exchange, the scatter), and empty shards sit at S,"
         ' so each shard bound is already a range end; the same partition and table for every ompi reduce-scatter on N'
         ' = 1..17, S = 0..39, 97, 1000, 5000, 70000'),
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_butterfly__mutmut_10":
        ('n >= 1 for n > 1: on one rank the branch takes no step (p = 1, no rem, no mask); schedules compared equal, N'
         ' 1..17, S 0..39, 97, 1000, 5000'),
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_butterfly__mutmut_69":
        ("the message of an assertion that never fires (every virtual rank holds its mirrored block: the butterfly's "
         'invariant, checked on every N the tests build)'),
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_butterfly__mutmut_70":
        'the message of an assertion that never fires (see _69)',
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_butterfly__mutmut_71":
        'the message of an assertion that never fires (see _69)',
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_nonoverlapping__mutmut_10":
        ('n >= 1 for n > 1: on one rank there is nothing to reduce and no other rank to scatter to; schedules compared'
         ' equal, N 1..17, S 0..39, 97, 1000, 5000'),
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_recursive_halving__mutmut_10":
        ('n >= 1 for n > 1: on one rank the branch takes no step (p = 1, no rem, no mask); schedules compared equal, N'
         ' 1..17, S 0..39, 97, 1000, 5000'),
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_recursive_halving__mutmut_42":
        'np.full(p, p) with p a Python int is int64 without dtype',
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_recursive_halving__mutmut_45":
        'np.full(p, p) with p a Python int is int64 without dtype',
    "ringemu.algorithms.ompi_reduce_scatter.x__rs_recursive_halving__mutmut_52":
        'v <= v ^ mask for v < v ^ mask: mask >= 1, so v ^ mask is never v',
    "ringemu.algorithms.ompi_reduce_scatter.x__vstart__mutmut_14":
        'i <= rem instead of i < rem: at i == rem both give 2*rem = rem + rem',
    "ringemu.algorithms.ompi_reduce_scatter.x_ompi_rs_butterfly__mutmut_1":
        "itemsize's default: the butterfly reads no itemsize",
    "ringemu.algorithms.ompi_reduce_scatter.x_ompi_rs_butterfly__mutmut_5":
        'itemsize None reaches a builder that reads no itemsize',
    "ringemu.algorithms.ompi_reduce_scatter.x_ompi_rs_recursive_halving__mutmut_1":
        "itemsize's default: recursive halving reads no itemsize",
    "ringemu.algorithms.ompi_reduce_scatter.x_ompi_rs_recursive_halving__mutmut_5":
        'itemsize None reaches a builder that reads no itemsize',
    "ringemu.algorithms.ompi_reduce_scatter.x_ompi_rs_ring__mutmut_1":
        "itemsize's default: the ring reads no itemsize (its blocks are the shards)",
    "ringemu.algorithms.ompi_reduce_scatter.x_ompi_rs_ring__mutmut_5":
        "itemsize None reaches a builder that reads no itemsize (the ring's blocks are the shards)",
}
