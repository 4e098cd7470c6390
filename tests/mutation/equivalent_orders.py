"""The surviving mutmut mutants of NCCL's, MPICH's, gloo's and XLA's orders, reviewed and found equivalent.

Each was read and, where reading was not proof enough, compared with the original on a grid of inputs (the
reason says which); no input tells it from the original. ``equivalent.py`` merges these into EQUIVALENT."""
from __future__ import annotations

__all__ = ["NUMPY_INT", "ORDERS"]

NUMPY_INT = "numpy's default integer is int64 on 64-bit Linux (numpy 2): the dtype argument changes nothing"

ORDERS = {
    # ringemu.algorithms._mpich
    **{f"ringemu.algorithms._mpich.x_block_bounds__mutmut_{k}": NUMPY_INT for k in (13, 15)},
    **{f"ringemu.algorithms._mpich.x_spread_bounds__mutmut_{k}": NUMPY_INT for k in (3, 5)},
    "ringemu.algorithms._mpich.x__is_exchange__mutmut_5":
        ('step / (n*nc) instead of step * (n*nc): keys of one step still differ by the exact integer rank*nc+chunk, '
         'and keys of steps s1 != s2 could only meet if (s2-s1)/(n*nc) were an integer, but every partitioned schedule'
         ' has fewer than n*n_chunks steps (at most n-1 or 2*log2(p)+2, n_chunks >= 2 for n >= 2); float rounding '
         'cannot merge keys 1/(n*nc) >= 2**-24 apart of magnitude <= 2**24 (build caps N at 4096); checked: survives '
         'the new oracle test'),
    "ringemu.algorithms._mpich.x__is_exchange__mutmut_11":
        ('max(n_chunks, 2): the step multiplier n*max(nc, 2) >= n*nc still exceeds every rank*nc + chunk, so the '
         '(step, rank, chunk) key stays injective: same answer'),
    "ringemu.algorithms._mpich.x_partitioned__mutmut_5":
        ("the plain schedule's name is discarded: partitioned reads only plain.n_steps and plain.table (Schedule "
         'validates nothing else when partition is None)'),
    "ringemu.algorithms._mpich.x_partitioned__mutmut_6":
        ("the plain schedule's n_ranks is discarded: only plain.n_steps and plain.table are read; Steps.schedule does "
         'not use it'),
    "ringemu.algorithms._mpich.x_partitioned__mutmut_7":
        ("the plain schedule's n_chunks is discarded: only plain.n_steps and plain.table are read; Steps.schedule does"
         ' not use it'),
    "ringemu.algorithms._mpich.x_partitioned__mutmut_8":
        "the plain schedule's initial is discarded: the returned Schedule is built from the argument initial",
    "ringemu.algorithms._mpich.x_partitioned__mutmut_9":
        "the plain schedule's final is discarded: the returned Schedule is built from the argument final",
    # ringemu.algorithms.gloo
    **{f"ringemu.algorithms.gloo.x_gloo_all_gather__mutmut_{k}": NUMPY_INT for k in (15, 17, 49, 51, 58, 60)},
    **{f"ringemu.algorithms.gloo.x_gloo_all_reduce__mutmut_{k}": NUMPY_INT for k in (42, 44, 50, 52, 58, 60)},
    "ringemu.algorithms.gloo.x__with_partition__mutmut_3":
        ("steps.schedule's n_ranks only goes into a throwaway Schedule (no check reads it: __post_init__ checks only a"
         ' partition, None there); _with_partition rebuilds the Schedule with the real n'),
    "ringemu.algorithms.gloo.x__with_partition__mutmut_5":
        ('initial passed as None to the throwaway Schedule only; the returned Schedule gets initial from the argument,'
         ' unchecked there'),
    "ringemu.algorithms.gloo.x__with_partition__mutmut_6":
        ('final passed as None to the throwaway Schedule only; the returned Schedule gets final from the argument, '
         'unchecked there'),
    "ringemu.algorithms.gloo.x_gloo_all_gather__mutmut_99":
        'np.full(k, COPY) with COPY the Python int 0 is int64; add_columns casts to int64 anyway',
    "ringemu.algorithms.gloo.x_gloo_all_gather__mutmut_102":
        'np.full(k, COPY) with COPY the Python int 0 is int64; add_columns casts to int64 anyway',
    "ringemu.algorithms.gloo.x_gloo_all_reduce__mutmut_47":
        ('segment_bytes is a multiple of itemsize, so / is exact; float bounds equal the int ones below 2^53 and '
         'tuple(int(b)) restores ints; bounds past 2^53 need > 2^33 segments (segments >= numel*itemsize/max(1 MiB, '
         'itemsize)), a table no build can allocate'),
    "ringemu.algorithms.gloo.x_gloo_all_reduce__mutmut_96":
        'np.full(k, op) with op a Python int (ADD = 1, COPY = 0) is int64; add_columns casts to int64 anyway',
    "ringemu.algorithms.gloo.x_gloo_all_reduce__mutmut_99":
        'np.full(k, op) with op a Python int (ADD = 1, COPY = 0) is int64; add_columns casts to int64 anyway',
    # ringemu.algorithms.mpich_allgather
    **{f"ringemu.algorithms.mpich_allgather.x_mpich_brucks_all_gather__mutmut_{k}": NUMPY_INT for k in (5, 7, 14, 16)},
    **{f"ringemu.algorithms.mpich_allgather.x_mpich_recursive_doubling_all_gather__mutmut_{k}": NUMPY_INT 
       for k in (17, 19, 31, 33)},
    "ringemu.algorithms.mpich_allgather.x_mpich_brucks_all_gather__mutmut_11":
        ('d <= n adds an iteration only at d == n (N a power of two or 1): min(d, n-d) = 0 offsets, an empty step that'
         ' Steps.add_step drops; tables equal for N < 70'),
    # ringemu.algorithms.mpich_allreduce
    **{f"ringemu.algorithms.mpich_allreduce.x__span__mutmut_{k}": NUMPY_INT for k in (3, 6)},
    **{f"ringemu.algorithms.mpich_allreduce.x_mpich_rsag_all_reduce__mutmut_{k}": NUMPY_INT for k in (15, 19, 26, 28)},
    "ringemu.algorithms.mpich_allreduce.x_mpich_rsag_all_reduce__mutmut_42":
        ('(hi - lo) / 2 instead of // 2: a halved range has power-of-two length >= 2, so the float is an exact '
         'integer, and the bounds only feed np.arange(..., dtype=int64) and min/max: same rows (checked N < 70)'),
    "ringemu.algorithms.mpich_allreduce.x_mpich_rsag_all_reduce__mutmut_48":
        ('(hi - lo) / 2 in the upper half: the same exact integer-valued float as mutant 42, same np.arange rows '
         '(checked N < 70)'),
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_8":
        "done's initial values are never read: reduce() sets done[child] before reading it and visits every node",
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_10":
        ("t starting at 1 shifts every addition time by exactly +1 (t' = t + 1 by induction over the tree); the empty "
         'step 0 is dropped by Steps.add_step: same table (checked N < 70)'),
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_24":
        ('leaves get done = 1: every done and t shift by +1 uniformly; the empty step 0 is dropped: same table '
         '(checked N < 70)'),
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_26":
        ("t + 2 doubles every time (t' = 2t, done' = 2 done by induction); the odd steps are empty and dropped, rows "
         'keep their order: same table (checked N < 70)'),
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_27":
        'leaves get done = 1: the same uniform +1 shift as mutant 24 (checked N < 70)',
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_35":
        ('adds.get(t, None) is never defaulted: done[node] = 1 + max child done, so the tallest path has an addition '
         'at every t < done[0] (checked N < 70)'),
    "ringemu.algorithms.mpich_allreduce.x_mpich_tree_all_reduce__mutmut_37":
        'adds.get(t) defaults to None, never used for the same reason as mutant 35',
    # ringemu.algorithms.mpich_decision
    "ringemu.algorithms.mpich_decision.x_mpich_default_all_gather__mutmut_15":
        ('itemsize is read by mpich_recursive_doubling_all_gather only for N not a power of two, but the default calls'
         ' it only when all_gather_rule chose recursive doubling, which requires N a power of two'),
    "ringemu.algorithms.mpich_decision.x_mpich_default_reduce_scatter__mutmut_7":
        'reduce_scatter_rule ignores its n argument, so n=None gives the same choice',
    # ringemu.algorithms.mpich_reduce_scatter
    **{f"ringemu.algorithms.mpich_reduce_scatter.x_mpich_noncommutative_reduce_scatter__mutmut_{k}": NUMPY_INT 
       for k in (17, 19)},
    **{f"ringemu.algorithms.mpich_reduce_scatter.x_mpich_pairwise_reduce_scatter__mutmut_{k}": NUMPY_INT 
       for k in (5, 7)},
    **{f"ringemu.algorithms.mpich_reduce_scatter.x_mpich_recursive_doubling_reduce_scatter__mutmut_{k}": NUMPY_INT 
       for k in (5, 7)},
    **{f"ringemu.algorithms.mpich_reduce_scatter.x_mpich_recursive_halving_reduce_scatter__mutmut_{k}": NUMPY_INT 
       for k in (7, 9, 22, 26, 37)},
    "ringemu.algorithms.mpich_reduce_scatter.x__forwarded_origins__mutmut_18":
        ("'>=' adds only dst_root + mask == n, where the partner's subtree is the topmost full one: holders = mask, "
         'my_root = n - 2*mask, so root + holders >= n - mask > every dst = r ^ tmp_mask of my subtree and no forward '
         'is added; origins compared equal for N < 40'),
    "ringemu.algorithms.mpich_reduce_scatter.x__forwarded_origins__mutmut_27":
        'dst = r ^ tmp_mask with tmp_mask >= 1 is never equal to r, so dst >= r is dst > r',
    "ringemu.algorithms.mpich_reduce_scatter.x_mpich_noncommutative_reduce_scatter__mutmut_9":
        'reduce_scatter_rule ignores its n argument (total bytes only), so n=None gives the same choice',
    "ringemu.algorithms.mpich_reduce_scatter.x_mpich_noncommutative_reduce_scatter__mutmut_29":
        ("low = 2^(k+1)-1: 'bits 0..k of block and r equal' is the same condition as the original 'bits 0..k-1 equal' "
         "AND the second factor 'bit k of block^r is 0'; tables compared equal for N < 70"),
    "ringemu.algorithms.mpich_reduce_scatter.x_mpich_recursive_doubling_reduce_scatter__mutmut_12":
        ('mask <= n adds an iteration only at mask == n (N a power of two): no r < n has r ^ n < n and no rank '
         'forwards (holders = 0, r < root impossible), so the step is empty and Steps.add_step drops it; tables equal '
         'for N < 70'),
    "ringemu.algorithms.mpich_reduce_scatter.x_mpich_recursive_halving_reduce_scatter__mutmut_35":
        'np.arange(n, dtype=None) is int64 already (and Steps.add_step casts to int64)',
    # ringemu.algorithms.nccl_ring
    **{f"ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_{k}": NUMPY_INT 
       for k in (49, 51, 54, 56, 59, 61, 93, 95)},
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_51":
        ('lo = cells only for n_channels == 1; there min(cells, ceil(per_channel / cell_traffic)) is cells too: '
         'per_channel >= traffic >= S*tpb and cell_traffic = cell*tpb, so the ceil is >= ceil(S / cell) = cells (and '
         'for S*tpb < 32 KiB cells <= 1 <= the ceil); brute-force grid identical'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_68":
        ('cells_per_channel == 0 only when cells == 0 or per_channel == 0, and then lo = hi = 0: mid = 1 fails the '
         "overflow test (n_channels < 1 is false for n_channels >= 1) and 'hi == 0 and mid != 0' resets hi = 0, mid = "
         '0, the original state'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_73":
        ('lo == cells_per_channel always in this one-collective port (n_channels > 1: the same min(); n_channels == 1:'
         ' both are cells), so (cells + lo) % cpc == (cells - lo) % cpc == cells % cpc'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_79":
        ('differs only when lo == 0, i.e. cells == 0 or per_channel == 0, where mid = hi = 0: the test becomes '
         'n_channels < 1 instead of < 0, false for every n_channels >= 1 (0 divides by zero before)'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_81":
        'differs only when lo == 0, where mid = hi = 0: n_channels < 1 instead of < 0, false for n_channels >= 1',
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_110":
        ("channel is 0 when the 'lo == 0' branch runs (set just above, not changed since), so channel = 1 == channel "
         '+= 1'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_113":
        ('lo == 0 only when cells == 0 or per_channel == 0, and then cpc = 0, so mid = 0 and hi = 0 on reaching the '
         'branch: the mutant takes the else (lo, mid = cpc = 0, -1) and counts are [0] + [] + [] == the original [0]'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_114":
        "as _113: in the 'lo == 0' branch mid is always 0 (and cpc 0), so the else gives lo = 0, mid = -1: counts [0]",
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_117":
        ("dead code: the else of 'if mid == 0' inside 'if lo == 0' is unreachable (lo == 0 implies cpc == 0 and mid =="
         ' 0, see _113)'),
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_118": 'dead code: unreachable else branch (see _117)',
    "ringemu.algorithms.nccl_ring.x_nccl_channel_parts__mutmut_119": 'dead code: unreachable else branch (see _117)',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_67":
        ('the two branches of the np.where are equal mod n: (p - (k - (n-1))) % n == (p - 1 - k + n) % n == (p - 1 - '
         'k) % n, so whichever branch np.where(None, ...) picks, offset is the same'),
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_73":
        'the np.where branches are equal mod n (see _67): the condition does not matter',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_74":
        'the np.where branches are equal mod n (see _67): the condition does not matter',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_75":
        'the np.where branches are equal mod n (see _67): the condition does not matter',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_139":
        ('only s.name, s.n_chunks, s.n_steps and s.table of the intermediate Steps.schedule result are used; the '
         'returned Schedule passes n itself, and Schedule.__post_init__ does not check n_ranks'),
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_141":
        'intermediate s.initial is discarded: the returned Schedule passes "all" itself',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_142":
        'intermediate s.final is discarded: the returned Schedule passes "reduced-all" itself',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_152": 'intermediate s.initial is discarded (see _141)',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_153": 'intermediate s.initial is discarded (see _141)',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_154": 'intermediate s.final is discarded (see _142)',
    "ringemu.algorithms.nccl_ring.x_nccl_ring_all_reduce__mutmut_155": 'intermediate s.final is discarded (see _142)',
    # ringemu.algorithms.nccl_tree
    **{f"ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_{k}": NUMPY_INT 
       for k in (49, 51, 53, 55, 103, 105)},
    "ringemu.algorithms.nccl_tree.x_nccl_btree__mutmut_67":
        ('rank == up never happens for rank > 0 (rank 0 returns earlier): up is rank ^ bit (or that | 2·bit) with bit '
         'set in rank, so bit is clear in up; rank <= up equals rank < up'),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_46":
        ('the appended chunk is reached only for numel == 0 (channel counts sum to numel), and then it is empty: '
         "'b[1:] > b[:-1]' drops it from both trees, so its tree does not matter"),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_60":
        ('n == 1 (check_n_ranks rejects n < 1): nccl_trees(1) is two trees of one root with no children, which add no '
         'row, as the empty list does'),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_62":
        'n >= 1 vs n > 1 differs only at n == 1, which adds no row either way (see _60)',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_70":
        ('b[1:] > b[:1] (> 0) differs from b[1:] > b[:-1] only for an empty chunk at a bound > 0; tree chunks come '
         'from range(0, count, chunk) (never empty) and the appended one exists only for numel == 0 (bound 0)'),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_77":
        ('heights shift by +1 uniformly (leaves 1); h is used only as the key of reduce_rows, whose levels are added '
         'in sorted order and renumbered by Steps, so the steps are the same'),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_80":
        'heights become 2h, a strictly increasing map of the keys: same grouping and order of reduce steps',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_88":
        'depths shift by +1 uniformly: same grouping and order of broadcast steps',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_94":
        'depths become 2d, strictly increasing: same grouping and order of broadcast steps',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_96":
        ("'or' only adds entries for a leaf or for a tree without chunks, and those are empty arrays (tile of [] or of"
         ' 0 copies): they add no row and Steps.add_step drops a step with none'),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_116":
        'reduce level keys shift by +2 uniformly: same order of steps (see _77)',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_118":
        'reduce level keys shift by -1 uniformly: same order of steps (see _77)',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_142":
        ('only s.name, s.n_chunks, s.n_steps, s.table of the intermediate Steps.schedule result are used; the returned'
         ' Schedule passes n itself'),
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_144":
        'intermediate s.initial is discarded: the returned Schedule passes "all" itself',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_145":
        'intermediate s.final is discarded: the returned Schedule passes "reduced-all" itself',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_155": 'intermediate s.initial is discarded (see _144)',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_156": 'intermediate s.initial is discarded (see _144)',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_157": 'intermediate s.final is discarded (see _145)',
    "ringemu.algorithms.nccl_tree.x_nccl_tree_all_reduce__mutmut_158": 'intermediate s.final is discarded (see _145)',
    "ringemu.algorithms.nccl_tree.x_nccl_trees__mutmut_6":
        'the initial up[] value is overwritten: up[r] is assigned for every r in range(n)',
    "ringemu.algorithms.nccl_tree.x_nccl_trees__mutmut_7":
        'the initial up[] value is overwritten: up[r] is assigned for every r in range(n)',
    # ringemu.algorithms.xla_cpu
    **{f"ringemu.algorithms.xla_cpu.x__bounds__mutmut_{k}": NUMPY_INT for k in (7, 9)},
    **{f"ringemu.algorithms.xla_cpu.x_xla_all_reduce__mutmut_{k}": NUMPY_INT for k in (16, 19)},
    **{f"ringemu.algorithms.xla_cpu.x_xla_reduce_scatter__mutmut_{k}": NUMPY_INT for k in (40, 42)},
    "ringemu.algorithms.xla_cpu.x__schedule__mutmut_3":
        ('n_ranks only goes into the throwaway Schedule of steps.schedule (unchecked); _schedule rebuilds it with the '
         'real n'),
    "ringemu.algorithms.xla_cpu.x__schedule__mutmut_5":
        'initial None only in the throwaway Schedule (unchecked); the returned one takes the argument',
    "ringemu.algorithms.xla_cpu.x__schedule__mutmut_6":
        'final None only in the throwaway Schedule (unchecked); the returned one takes the argument',
    "ringemu.algorithms.xla_cpu.x_xla_all_gather__mutmut_9":
        ('reshape(None) keeps the 2-D grids; src[keep] etc. (boolean masks) flatten in C order, the same rows as '
         'reshape(-1)'),
    "ringemu.algorithms.xla_cpu.x_xla_all_gather__mutmut_11": 'numpy 2.4 accepts reshape(-2) as reshape(-1)',
    "ringemu.algorithms.xla_cpu.x_xla_all_gather__mutmut_17":
        ("meshgrid's indexing only orders the rows of the one copy step (sender by sender or receiver by receiver): a "
         "step's transfers happen at once, and the kernel, the ledger and provenance read them as a set; bits, bytes "
         'and provenance are the same'),
    "ringemu.algorithms.xla_cpu.x_xla_all_reduce__mutmut_22":
        ('ndarray.reshape(None) returns the 2-D grid unchanged; Steps.add_step broadcasts and flattens each field with'
         ' reshape(-1) in C order, the same rows in the same order'),
    "ringemu.algorithms.xla_cpu.x_xla_all_reduce__mutmut_24":
        'numpy 2.4 accepts reshape(-2) as the unknown dimension, same as reshape(-1)',
}
