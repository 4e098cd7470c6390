"""Link classes and the α-β time of a schedule on them: N ranks as nodes × ranks per node.

A :class:`Topology` puts rank ``r`` on node ``r // ranks_per_node``. A transfer between two ranks of one node uses
the ``intra`` link class, one between nodes the ``inter`` class; each class has a bandwidth (bytes per second, per
direction) and a latency α (seconds per message). The defaults are the lesson's: NVLink 160 GB/s inside a node and
InfiniBand 50 GB/s between nodes (zero-lesson §"EP", from the DeepSeek-V3 report §3.1–3.2; GB = 10^9 B). The lesson
gives no latencies; the defaults are NCCL's own estimates (NVIDIA/nccl ``src/graph/tuning.cc``, v2.30.7 at
commit 5067397c, ``ncclTunerConstantsDefaults``): per hop ``hwLatencies`` of its ring with the Simple protocol,
3.4 µs over NVLink and 14.0 µs over the network, and once per collective ``baseLatencies`` 8.4 µs (ring and tree,
Simple) as :attr:`Topology.launch` (0 unless given: the textbook formulas have none). The values differ between NCCL
versions (commit 01afd20 had 9.6 µs over the network).

The model (Hockney's α-β model, as Thakur, Rabenseifner & Gropp 2005 §3 use it) is read from the schedule table:

* a *message* is everything one rank sends to one peer in one step (all its chunks together);
* steps run one after another; a step lasts as long as its slowest resource, and a resource of class c carrying
  m messages and b bytes in the step takes m·α_c + b / bandwidth_c (one message at a time: the one-port model of
  Thakur, Rabenseifner & Gropp 2005 §3, so the naive all-reduce's rank 0 pays α for each of its N − 1 messages);
* the resources are the ranks' *ports* (``contention="port"``, the default: each rank has one port per link class
  and direction, shared by everything it sends, or receives, in the step — a switched fabric such as NVSwitch
  inside a node and one NIC per GPU across nodes) or the directed *links* (``contention="link"``: every ordered
  pair of ranks has its own link). The two agree whenever a rank talks to at most one peer per direction and class
  in a step (ring, recursive halving and doubling); they differ for a rank that receives from many at once (the
  naive all-reduce's rank 0: N-1 buffers through one port, or N-1 links in parallel).

All results are exact: ints for bytes and counts, ``fractions.Fraction`` for seconds.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .checks import check_n_ranks, is_integer
from .ledger import CollectiveRecord, CommLedger
from .schedule import Schedule
from .units import GB

__all__ = ["LinkClass", "Topology", "NVLINK", "INFINIBAND", "NCCL_BASE_LATENCY", "PCIE", "CONTENTIONS", "LinkProfile", "parse_decimal",
           "LinkModel", "link_model", "bytes_per_class", "messages", "modelled_time"]

CONTENTIONS = ("port", "link")
_DECIMAL = re.compile(r"[+]?(\d{1,40}(\.\d{0,40})?|\.\d{1,40})([eE]([+-]?\d{1,3}))?")
_BINCOUNT_LIMIT = 1 << 23  # keys below this are counted with one bincount (64 MiB of int64 at most)
_MAX_EXPONENT = 30  # decimal strings are read exactly; 1e999999999 would be a billion-digit integer


def parse_decimal(value: object, name: str) -> Fraction:
    """An exact rational from an int, a Fraction or a decimal string (``"50"``, ``"9.6e-6"``).

    Floats are refused (0.1 is not 1/10 in binary); strings must be plain decimals with at most 40 digits on each
    side of the point and an exponent within ±30, so that no input can make the exact arithmetic run away.
    """
    if not (is_integer(value) or isinstance(value, (Fraction, str))):
        raise TypeError(f"{name} must be an int, a fractions.Fraction or a decimal string such as '50' or "
                        f"'9.6e-6' (floats are not exact); got {value!r} ({type(value).__name__})")
    if isinstance(value, str):
        match = _DECIMAL.fullmatch(value.strip())
        if match is None or (match.group(4) and abs(int(match.group(4))) > _MAX_EXPONENT):
            raise ValueError(f"{name} must be a non-negative decimal number with an exponent within "
                             f"±{_MAX_EXPONENT} (such as 50, 1.5 or 9.6e-6); got {value!r}")
        return Fraction(value.strip())
    return Fraction(operator.index(value) if is_integer(value) else value)


@dataclass(frozen=True)
class LinkClass:
    """One kind of link: ``bandwidth`` in bytes per second per direction (β = 1/bandwidth seconds per byte) and
    ``latency`` α in seconds per message. Both are exact (see :func:`parse_decimal` for what is accepted)."""

    name: str
    bandwidth: Fraction
    latency: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"link class name must be a non-empty str; got {self.name!r}")
        bandwidth = parse_decimal(self.bandwidth, f"{self.name} bandwidth")
        latency = parse_decimal(self.latency, f"{self.name} latency")
        if bandwidth <= 0:
            raise ValueError(f"{self.name} bandwidth must be > 0 bytes/s; got {bandwidth}")
        if latency < 0:
            raise ValueError(f"{self.name} latency must be >= 0 s; got {latency}")
        object.__setattr__(self, "bandwidth", bandwidth)
        object.__setattr__(self, "latency", latency)

    def seconds(self, nbytes: int) -> Fraction:
        """α + nbytes / bandwidth: one message of ``nbytes`` on this class."""
        return self.latency + Fraction(nbytes) / self.bandwidth


_US = Fraction(1, 10 ** 6)  # seconds per µs
# bandwidths: the lesson; α: NCCL hwLatencies[NVLINK|NET][Ring][Simple], src/graph/tuning.cc (v2.30.7, 5067397c)
NVLINK = LinkClass("NVLink", 160 * GB, Fraction("3.4") * _US)
INFINIBAND = LinkClass("InfiniBand", 50 * GB, Fraction("14.0") * _US)
NCCL_BASE_LATENCY = Fraction("8.4") * _US  # baseLatencies[Ring|Tree][Simple], the same file: once per collective
# PCIe 4.0 ×16 between a GPU and its host, per direction: 16 GT/s per lane × 16 lanes × 128/130 (128b/130b line
# code) / 8 bits = 31.5 GB/s (PCI-SIG, PCIe Base Specification 4.0, §4.2); the lesson gives no PCIe figure.
# Latency 0: ZeRO-Offload moves one large copy per bucket each way (Ren et al. 2021, §4.2).
PCIE = LinkClass("PCIe", Fraction(16 * 10 ** 9 * 16 * 128, 130 * 8))


@dataclass(frozen=True)
class Topology:
    """``n_ranks`` ranks on ``n_ranks // ranks_per_node`` nodes; rank r lives on node r // ranks_per_node."""

    n_ranks: int
    ranks_per_node: int
    intra: LinkClass = NVLINK
    inter: LinkClass = INFINIBAND
    contention: str = "port"
    launch: Fraction = Fraction(0)  # seconds once per collective call (NCCL's baseLatencies; 0: the textbook's)

    def __post_init__(self) -> None:
        n = check_n_ranks(self.n_ranks, "n_ranks")
        per_node = check_n_ranks(self.ranks_per_node, "ranks_per_node")
        if n % per_node:
            raise ValueError(f"ranks_per_node must divide n_ranks; got {per_node} and {n}")
        for name in ("intra", "inter"):
            if not isinstance(getattr(self, name), LinkClass):
                raise TypeError(f"{name} must be a LinkClass; got {getattr(self, name)!r}")
        if self.contention not in CONTENTIONS:
            raise ValueError(f"contention must be one of {', '.join(CONTENTIONS)}; got {self.contention!r}")
        launch = parse_decimal(self.launch, "launch latency")
        if launch < 0:
            raise ValueError(f"launch latency must be >= 0 s; got {launch}")
        object.__setattr__(self, "launch", launch)
        object.__setattr__(self, "n_ranks", n)
        object.__setattr__(self, "ranks_per_node", per_node)

    @classmethod
    def from_nodes(cls, n_ranks: int, n_nodes: int, **links) -> "Topology":
        """``n_ranks`` ranks spread evenly over ``n_nodes`` nodes (``n_nodes`` must divide ``n_ranks``)."""
        n = check_n_ranks(n_ranks, "n_ranks")
        nodes = check_n_ranks(n_nodes, "n_nodes")
        if n % nodes:
            raise ValueError(f"n_nodes must divide n_ranks; got {nodes} nodes for {n} ranks")
        return cls(n, n // nodes, **links)

    @classmethod
    def uniform(cls, n_ranks: int, link: LinkClass, contention: str = "port") -> "Topology":
        """Every pair of ranks joined by one class ``link`` (one rank per node): the textbook's setting."""
        return cls(n_ranks, 1, link, link, contention)

    @property
    def n_nodes(self) -> int:
        return self.n_ranks // self.ranks_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.ranks_per_node

    def link_class(self, src: int, dst: int) -> LinkClass:
        """The class of the link from ``src`` to ``dst``."""
        return self.intra if self.node_of(src) == self.node_of(dst) else self.inter

    def classes(self) -> tuple[LinkClass, ...]:
        """The classes this topology uses (intra only with several ranks per node, inter only with several
        nodes), without repeats."""
        used = ([self.intra] if self.ranks_per_node > 1 else []) + ([self.inter] if self.n_nodes > 1 else [])
        return tuple(dict.fromkeys(used))

    def slowest(self) -> LinkClass | None:
        """The used class of least bandwidth (the larger latency breaks ties); None for a single rank."""
        used = self.classes()
        return min(used, key=lambda c: (c.bandwidth, -c.latency)) if used else None


class LinkProfile:
    """What the α-β model needs from one schedule on one topology, independent of the buffer size.

    Built once from the schedule table; :meth:`seconds` and :meth:`class_bytes` then take the bytes of one unit,
    so a sweep over sizes walks the table once per algorithm. A unit is a chunk (every transfer carries one whole
    chunk: the textbook layouts), or, with ``weights`` (elements each transfer carries: an engine's partition,
    whose chunks differ in length), an element.
    """

    def __init__(self, schedule: Schedule, topology: Topology, weights: np.ndarray | None = None) -> None:
        if schedule.n_ranks != topology.n_ranks:
            raise ValueError(f"topology has {topology.n_ranks} ranks but schedule {schedule.name} runs on "
                             f"{schedule.n_ranks}")
        self.topology = topology
        table, n, steps, per_node = schedule.table, schedule.n_ranks, schedule.n_steps, topology.ranks_per_node
        step, src, dst = table[:, 0], table[:, 1], table[:, 2]
        inter = (src // per_node != dst // per_node) if per_node > 1 else (src != dst)  # class: 0 intra, 1 inter
        w = None if weights is None else np.asarray(weights, dtype=np.int64)
        if w is None:
            n_inter = int(np.count_nonzero(inter))
            self.chunks_per_class = [table.shape[0] - n_inter, n_inter]  # chunk transfers on [intra, inter] links
        else:
            n_inter = int(w[inter].sum())
            self.chunks_per_class = [int(w.sum()) - n_inter, n_inter]  # elements on [intra, inter] links
        links, link_chunks = _counts((step * n + src) * n + dst, w)  # a message: one (step, src, dst)
        self.messages = int(links.size)
        link_step, link_src, link_dst = links // (n * n), (links // n) % n, links % n
        link_inter = ((link_src // per_node != link_dst // per_node) if per_node > 1
                      else (link_src != link_dst)).astype(np.int64)
        step_class = link_step * 2 + link_inter
        if topology.contention == "link":  # every link its own resource: one message, its units
            triples = [np.stack([step_class, np.ones_like(link_chunks), link_chunks], axis=1)]
        else:  # ports (step, class, rank), once for what ranks send and once for what they receive
            triples = []
            for rank in (link_src, link_dst):
                key = step_class * n + rank
                ports, port_messages = _counts(key)
                _, port_units = _counts(key, np.asarray(link_chunks, dtype=np.int64))
                triples.append(np.stack([ports // n, port_messages, port_units], axis=1))
        rows = np.unique(np.concatenate(triples), axis=0) if links.size else np.zeros((0, 3), dtype=np.int64)
        # per step, its resources as (class, messages, units); identical steps are priced once, times their count
        per_step: dict[int, list[tuple[int, int, int]]] = {}
        for sc, m, u in rows.tolist():
            per_step.setdefault(sc // 2, []).append((sc % 2, m, u))
        shapes: dict[tuple, int] = {}
        for resources in per_step.values():
            key = tuple(resources)
            shapes[key] = shapes.get(key, 0) + 1
        self.step_shapes = list(shapes.items())  # [(((class, messages, units), ...), steps of that shape)]

    def seconds(self, chunk_bytes: int) -> Fraction:
        """Σ over steps of the max over used resources of messages·α_c + bytes / bandwidth_c, exact. A resource
        pays α once per message (one-port model, Thakur, Rabenseifner & Gropp 2005 §3): a port that takes N − 1
        messages in a step (the naive all-reduce's rank 0) pays (N − 1)·α."""
        classes = (self.topology.intra, self.topology.inter)
        total = Fraction(0)
        for resources, count in self.step_shapes:
            total += count * max(classes[c].latency * m + Fraction(u * chunk_bytes) / classes[c].bandwidth
                                 for c, m, u in resources)
        return total

    def class_bytes(self, chunk_bytes: int) -> dict[str, int]:
        """Bytes sent over each link class (summed when both classes share a name)."""
        out: dict[str, int] = {}
        for link, chunks in zip((self.topology.intra, self.topology.inter), self.chunks_per_class):
            out[link.name] = out.get(link.name, 0) + chunks * chunk_bytes
        return out


def _counts(key: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys in increasing order, multiplicity — or the sum of ``weights`` per key, int64). The schedules'
    keys are step-major and mostly in order within a step, so a stable sort (timsort: linear on a few sorted runs)
    is cheap; sorted keys skip it."""
    if key.size and not np.all(key[1:] >= key[:-1]):
        order = np.argsort(key, kind="stable")
        key = key[order]
        weights = None if weights is None else weights[order]
    if key.size == 0:
        return key, key
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    if weights is None:
        return key[starts], np.diff(np.append(starts, key.size))
    return key[starts], np.add.reduceat(weights, starts)


def _records(ledger: CommLedger, topology: Topology, label) -> list[CollectiveRecord]:
    if not isinstance(ledger, CommLedger):
        raise TypeError(f"ledger must be a CommLedger; got {type(ledger).__name__}")
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a Topology; got {type(topology).__name__}")
    if ledger.records and ledger.n_ranks != topology.n_ranks:
        raise ValueError(f"topology has {topology.n_ranks} ranks but the ledger counts {ledger.n_ranks}")
    return ledger.select(label)


@dataclass(frozen=True)
class LinkModel:
    """A ledger's selected records on a topology: messages, bytes per link class and modelled seconds."""

    messages: int
    bytes_per_class: dict[str, int]
    seconds: Fraction


def link_model(ledger: CommLedger, topology: Topology, label=None) -> LinkModel:
    """Walk each selected record's schedule once (:class:`LinkProfile`) and price it at the record's chunk size;
    records run one after another, so messages, bytes and seconds add up."""
    records = _records(ledger, topology, label)  # the type checks come before any attribute is read
    count, per_class, seconds = 0, {c.name: 0 for c in (topology.intra, topology.inter)}, Fraction(0)
    for rec in records:
        if rec.layout.pads_on_wire:
            profile, chunk_bytes = LinkProfile(rec.schedule, topology), rec.layout.chunk_size * rec.itemsize
        else:  # an engine's partition: each transfer carries its chunk's own length
            weights = np.asarray(rec.layout.wire_elements(), dtype=np.int64)[rec.schedule.table[:, 3]]
            profile, chunk_bytes = LinkProfile(rec.schedule, topology, weights), rec.itemsize
        count += profile.messages
        for name, nbytes in profile.class_bytes(chunk_bytes).items():
            per_class[name] += nbytes
        seconds += profile.seconds(chunk_bytes) + (topology.launch if profile.messages else 0)  # no message, no launch
    return LinkModel(count, per_class, seconds)


def bytes_per_class(ledger: CommLedger, topology: Topology, label=None) -> dict[str, int]:
    """Bytes (padding included, as the ledger counts them) sent over each link class of ``topology``, summed
    over the selected records; the values add up to ``ledger.total(label).bytes``."""
    return link_model(ledger, topology, label).bytes_per_class


def messages(ledger: CommLedger, topology: Topology, label=None) -> int:
    """Messages of the selected records: one per (step, sender, receiver) that carries anything."""
    return link_model(ledger, topology, label).messages


def modelled_time(ledger: CommLedger, topology: Topology, label=None) -> Fraction:
    """Seconds under the α-β model of this module, summed over the selected records (run one after another)."""
    return link_model(ledger, topology, label).seconds
