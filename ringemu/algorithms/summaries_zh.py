"""The catalog's one-line summaries in Chinese, for the lesson page's Chinese view (the English is each
algorithm's own ``summary``). Kept beside the registry, the one home of algorithm names; a test checks that every
all-reduce algorithm has its line."""
from __future__ import annotations

__all__ = ["SUMMARIES_ZH"]

SUMMARIES_ZH = {

    "ring": "环形 reduce-scatter 再环形 all-gather：共 2(N-1) 步",
    "naive": "每张卡把整个缓冲发给 0 号卡，0 号卡求和后再发回去",
    "bidirectional-ring": "双向 reduce-scatter 再 all-gather：共 2(N-1) 步，每条链路的字节是单向环的一半",
    "halving-doubling": "Rabenseifner 算法：递归减半做 reduce-scatter，再递归加倍做 all-gather",
    "recursive-doubling": "距离 1、2、…、N/2 的两张卡互换整个缓冲并各自相加：共 log2(N) 步",
    "tree": "二叉树先归约再广播，切成 N 段流水进行",
    "double-binary-tree": "两棵流水二叉树，各管每个分片的一半；在一棵树里是内部节点的卡，在另一棵里是叶子",
    "hierarchical-ring": "节点内 reduce-scatter，节点间对分片做 all-reduce，再节点内 all-gather",
    "gloo": "环形 all-reduce（gloo 的实现）",
}
