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
    "gloo:ring": "torch 2.13 的 gloo：反向环形 all-reduce，按不超过 1 MiB 的分段流水进行（与引擎逐位一致）",
    "xla-cpu:in-process": "XLA CPU（JAX 主机设备）：按卡号顺序从 +0 开始求和，再复制给每张卡（与引擎逐位一致）",
    "nccl:ring": "NCCL 的环形 all-reduce，按通道、块和片切分（依据 NCCL 源码建模，未在 GPU 上运行）",
    "nccl:tree": "NCCL 的双二叉树（中序树，根只有一个孩子；依据 NCCL 源码建模，未在 GPU 上运行）",
    "ompi:ring": "Open MPI 的环：前 S mod N 块各多一个元素，第 b 块从 b 号卡开始累加、在 b-1 号卡完成；S < N 时改用递归加倍",
    "ompi:segmented-ring": "Open MPI 的分段环，默认段长 0：只有一段，即 Open MPI 的环（任何段长下比特都相同）",
    "ompi:recursive-doubling": "距离 1、2、4…的两张卡互换整个向量；N 非 2 的幂时偶数卡先并入奇数卡：与 recursive-doubling 逐位相同",
    "ompi:rabenseifner": "递归减半（较低的卡保留 floor(w/2) 个元素）再递归加倍；S 小于 2^floor(log2 N) 时改用线性",
    "ompi:basic-linear": "线性归约到 0 号卡（自己的值最后加），再线性广播；N >= 3 时由 N-1 号卡替 0 号卡累加",
    "ompi:nonoverlapping": "tuned 自己的 reduce（按 N 和字节数选二叉树、二项树、链或线性）到 0 号卡，再广播",
    "ompi:default": "Open MPI 不强制算法时的选择：按 N 和向量字节数，再走所选算法的回退",
    "mpich:ring": "MPICH 的环：ceil(S/N) 的块（最后几块较短或为空），不发送填充；比特与 ring 相同",
    "mpich:recursive-doubling": "MPICH 的递归加倍：低位的卡两两合并，互换整个缓冲；调度与 recursive-doubling 完全相同",
    "mpich:reduce-scatter-allgather": "MPICH 的 Rabenseifner：从距离 1 开始减半；S < pof2(N) 时改用递归加倍",
    "mpich:tree": "MPICH 的 k 叉树（k = 2，最大的子树在先）归约到 0 号卡，再广播；整个缓冲",
    "mpich:default": "MPICH 不强制算法时的选择：8 B 以下或少于 pof2(N) 个元素用递归加倍，否则用 reduce-scatter-allgather",
}
