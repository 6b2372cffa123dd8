"""The dispatch and combine all-to-alls of expert parallelism, priced at their message sizes over
the links they cross, from DeepEP's published kernel figures.

Per MoE layer every rank sends each of its ``b`` tokens to the ranks of its ``k`` experts
(dispatch) and receives the results back (combine). DeepEP dispatches FP8 (the hidden state at
one byte a value plus one 4-byte scale per 128 values) and combines BF16, so one rank's messages
are ``b k h (1 + 4/128)`` bytes out and ``2 b k h`` bytes back (:func:`message_bytes`).

DeepEP's kernels (``deepseek-ai/DeepEP`` @0297fc8, ``docs/legacy.md``: H800, CX-7 400 Gb/s
InfiniBand, hidden 7,168, top-8; the project's reference ``fleet_facts.md`` section 2d) move them
at these "logical" bandwidths (local traffic included), by expert-parallel size:

* **normal** (prefill; 4,096 tokens a batch): over NVLink inside one node 153 GB/s dispatch, 158
  combine (of H800's ~160 GB/s NVLink); over RDMA at EP 16 / 32 / 64: 43 / 58 / 51 GB/s
  dispatch, 43 / 57 / 50 combine (of CX-7's ~50 GB/s);
* **low latency** (decode; 128 tokens a batch, RDMA even inside a node): dispatch 98 / 63 / 48
  / 43 / 39 / 39 GB/s at EP 8 / 16 / 32 / 64 / 128 / 256, combine 127 / 74 / 53 / 46 / 39 / 40.

:func:`all_to_all_us` takes the figure at the group's size (the nearest measured size at or
below it, the smallest above it for fewer ranks), scales it by the ratio of the fleet's link to
the reference link (NVLink: the intra-node bandwidth over 160 GB/s, and no more than DeepEP V2's
726 / 740 GB/s on SM100's 900 GB/s NVLink scaled alike; RDMA: the inter-node bandwidth over
50 GB/s), divides the rank's bytes by it and adds the slowest link's latency it crosses once
(the kernels send to every rank at once). A group inside one NVLink domain
(one node, or one NVL72 rack) runs the normal NVLink kernels in both modes (DeepEP V2 measures
its NVLink path at 726 / 740 GB/s on SM100 at EP 8, inside the scaled NVLink figure's reach); a
group spanning nodes runs the RDMA kernels. The scaling and the choice of figure are this
module's assumptions (U); SGLang measured decode dispatch at ~0.17 ms per layer in
production-like runs against 0.06 ms in DeepEP's unit tests (V, its large-scale EP blog), so the
figures are a floor.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODES", "message_bytes", "deepep_bandwidth", "all_to_all_us", "AllToAll", "GroupLinks", "group_links",
           "moe_width", "rank_tokens", "layer_all_to_all"]

MODES = ("normal", "low_latency")

# GB/s by expert-parallel size: (dispatch, combine)
_NORMAL_NVLINK = (153.0, 158.0)
_NVLINK_SM100 = (726.0, 740.0)  # DeepEP V2 (NCCL Gin, README), SM100 NVLink, EP 8, 64 SMs: of 900 GB/s
_NORMAL_RDMA = {16: (43.0, 43.0), 32: (58.0, 57.0), 64: (51.0, 50.0)}
_LOW_LATENCY = {8: (98.0, 127.0), 16: (63.0, 74.0), 32: (48.0, 53.0), 64: (43.0, 46.0), 128: (39.0, 39.0),
                256: (39.0, 40.0)}
_REF_NVLINK = 160e9           # H800 NVLink, bytes/s per direction (DeepEP's reference point)
_REF_RDMA = 50e9              # CX-7 400 Gb/s InfiniBand, bytes/s


def message_bytes(tokens: int, hidden: int, experts_per_token: int) -> tuple[float, float]:
    """(dispatch, combine) bytes one rank sends for ``tokens`` of its own: FP8 with a 4-byte scale
    per 128 values out, BF16 back."""
    visits = tokens * experts_per_token
    return visits * hidden * (1 + 4 / 128), visits * hidden * 2.0


def _at(table: dict, ep: int) -> tuple[float, float]:
    below = [s for s in table if s <= ep]
    return table[max(below)] if below else table[min(table)]


def deepep_bandwidth(mode: str, ep: int, spans_nodes: bool, intra_bytes_per_s: float | None,
                     inter_bytes_per_s: float | None) -> tuple[float, float]:
    """(dispatch, combine) bytes/s of DeepEP's kernels on a group of ``ep`` ranks, scaled to the
    fleet's links (see the module docstring); a link the fleet does not give is the reference."""
    if mode not in MODES:
        raise ValueError(f"unknown all-to-all mode {mode!r} (one of {', '.join(MODES)})")
    if not spans_nodes:
        link = intra_bytes_per_s or _REF_NVLINK
        return tuple(min(h * link / _REF_NVLINK, b * link / 900e9) * 1e9 for h, b in zip(_NORMAL_NVLINK, _NVLINK_SM100))
    scale = (inter_bytes_per_s or _REF_RDMA) / _REF_RDMA
    table = _NORMAL_RDMA if mode == "normal" else _LOW_LATENCY
    return tuple(x * 1e9 * scale for x in _at(table, ep))


@dataclass(frozen=True)
class AllToAll:
    """One MoE layer's dispatch and combine on one rank: bytes sent and microseconds."""

    mode: str
    ep: int
    tokens: int
    dispatch_bytes: float
    combine_bytes: float
    dispatch_us: float
    combine_us: float

    @property
    def us(self) -> float:
        return self.dispatch_us + self.combine_us


def all_to_all_us(mode: str, ep: int, tokens: int, hidden: int, experts_per_token: int, spans_nodes: bool,
                  intra_bytes_per_s: float | None = None, inter_bytes_per_s: float | None = None,
                  latency_us: float = 0.0) -> AllToAll:
    """One MoE layer's dispatch and combine for a rank with ``tokens`` of its own on a group of
    ``ep`` ranks (none on a group of one), each paying ``latency_us`` once."""
    out, back = message_bytes(tokens, hidden, experts_per_token) if ep > 1 else (0.0, 0.0)
    if ep <= 1 or tokens == 0:
        return AllToAll(mode, ep, tokens, out, back, 0.0, 0.0)
    bw_out, bw_back = deepep_bandwidth(mode, ep, spans_nodes, intra_bytes_per_s, inter_bytes_per_s)
    return AllToAll(mode, ep, tokens, out, back, latency_us + out / bw_out * 1e6, latency_us + back / bw_back * 1e6)


@dataclass(frozen=True)
class GroupLinks:
    """The links a group's all-to-all crosses, read from its first member to the others (inside a
    node every pair is linked alike; a group of whole nodes reaches every other node alike):
    whether it spans nodes, the slowest intra- and inter-node bandwidth (None: none stated) and
    the slowest link's latency, which the kernels pay once."""

    spans: bool
    intra_bytes_per_s: float | None
    inter_bytes_per_s: float | None
    latency_us: float


def group_links(fleet, members) -> GroupLinks:
    """:class:`GroupLinks` of the group ``members`` (device ids of ``fleet``)."""
    by_id = fleet.by_id
    first = members[0]
    intra = inter = None
    latency = 0.0
    for b in members[1:]:
        lat = fleet.link_latency_us(first, b)
        bw = fleet.link_bandwidth(first, b)
        latency = max(latency, lat or 0.0)
        if bw and by_id[first].rack == by_id[b].rack:
            intra = bw if intra is None else min(intra, bw)
        elif bw:
            inter = bw if inter is None else min(inter, bw)
    return GroupLinks(len({by_id[m].rack for m in members}) > 1, intra, inter, latency)


def moe_width(layer, hidden: int) -> tuple[int, int] | None:
    """(width a token is dispatched at, experts per token) of an MoE decoder layer whose spec gives
    its experts (the latent width of a latent MoE, else the model's hidden size); None otherwise."""
    dims = dict(layer.ffn_dims or ())
    if layer.ffn != "moe" or layer.index is None or "experts_per_token" not in dims:
        return None
    return dims.get("latent_size") or hidden, dims["experts_per_token"]


def rank_tokens(instance) -> int:
    """Tokens of its own one rank of ``instance``'s group sends per decode step at the workload's
    concurrency: ``ceil(c / g)`` of the group's ``c`` live requests (under attention data
    parallelism the derived workload's concurrency is already the heaviest rank's)."""
    c = instance.workload.concurrency
    return max(1, c if instance.attention_dp else -(-c // instance.tp))


def layer_all_to_all(instance, device: int, tokens: int, mode: str) -> AllToAll | None:
    """The all-to-all of one MoE layer of ``instance`` on the group of device index ``device`` for
    ``tokens`` of each rank's own (its experts' width and top-k from the first MoE layer; None
    without MoE layers or experts spread). The cost model (:mod:`placer.simulate.cost`) may call it."""
    if not (instance.ep or instance.attention_dp):
        return None
    hidden = instance.model.hidden_size
    moe = next((w for w in (moe_width(x, hidden) for x in instance.nodes) if w is not None), None)
    if moe is None:
        return None
    members = instance.members(device)
    base = instance.layout.base_fleet if instance.layout is not None and instance.layout.base_fleet else instance.fleet
    links = group_links(base, members)
    return all_to_all_us(mode, len(members), tokens, moe[0], moe[1], links.spans, links.intra_bytes_per_s,
                         links.inter_bytes_per_s, links.latency_us)
