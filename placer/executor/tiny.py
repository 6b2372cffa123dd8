"""A scaled-down numeric twin of a mapped model: same node sequence, tiny dimensions, numpy.

:func:`tiny_spec` reads a mapping's node list (the instance's, possibly refined, layers) and its
route, and describes a tiny model with the same kinds, mixers, FFNs, order and stage boundaries:
hidden size 32, vocabulary 97, a few heads and experts (:data:`TINY_MIXERS`, :data:`TINY_FFNS`).
Weights are seeded random numbers, generated per layer from ``(seed, layer position)`` so every
stage worker can build the slices it owns without receiving weights over the wire.

Each mixer keeps its real per-request memory: a KV cache sized for the whole context (the MLA
latent for ``mla``, K and V of the KV heads for ``gqa``/``mha``, a ring of ``window`` slots for
``sliding``), or a fixed recurrent state plus short-conv state for linear mixers (gated delta rule
with channel-wise decay for ``kda``, scalar decay for ``gated_deltanet``, fixed decay for
``lightning``, selective scan for ``mamba``/``mamba2``). Caches are numpy arrays at the precision
the spec asks for (16, 32 or 64 bits), so their ``nbytes`` can be checked against
:mod:`placer.problem.memory` applied to :func:`tiny_layer_graph`.

A node of the mapping runs a *program* of pieces (:func:`node_program`):

* a whole layer: mixer core, output projection, FFN (dense, or router + shared + experts);
* ``mixer`` / ``ffn`` / ``experts i/G`` nodes (``block`` refinement): their part; expert groups
  hold the same contiguous expert ranges as :mod:`placer.problem.reductions.refine`, the first also the router;
* ``shard s/N`` nodes: the layer's pieces in execution order (mixer core, output projection in
  N row slices, FFN in N slices) cut into N contiguous runs by count; the core and its KV cache or
  state stay on shard 0, as :mod:`placer.problem.reductions.refine` accounts them. Embedding and head shards split
  the vocabulary.

Partial results travel with the activation (``carry``), so a partitioned layer computes exactly
what the whole layer computes, up to floating-point summation order.
:class:`placer.executor.reference.ReferenceModel` runs the same model unpartitioned, one request at
a time, written independently of the piece programs, as the oracle; the seeded requests are
:func:`placer.executor.reference.make_requests`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from placer.executor.tiny_numerics import (
    DTYPE_BITS,
    TINY_FFNS,
    TINY_HIDDEN,
    TINY_MIN_EXPERTS,
    TINY_MIXERS,
    TINY_TOP_K,
    TINY_VOCAB,
    _mixer_width,
    _split,
    _swiglu,
    alloc_cache,
    layer_weights,
    mixer_core,
    rmsnorm,
    route_topk,
)
from placer.problem import memory
from placer.specs.layers import ATTENTION_MIXERS
from placer.specs.model import Layer, LayerGraph, model_from_dict
from placer.specs.workload import Workload

__all__ = ["LayerDesc", "NodeDesc", "TinySpec", "tiny_spec", "tiny_layer_graph", "accounting_layers",
           "expected_request_bytes", "node_program", "NodeRunner", "Batch"]

# ----------------------------------------------------------------------------- descriptions
@dataclass(frozen=True)
class LayerDesc:
    """One tiny base layer: ``pos`` is its place among base layers (embedding and head included)."""

    pos: int
    name: str
    kind: str                      # embedding | attention | linear_attention | lm_head
    index: int | None = None       # decoder index
    mixer: str | None = None       # key of TINY_MIXERS
    ffn: str | None = None         # dense | moe | None
    num_experts: int = 0
    shared_expert: bool = False


@dataclass(frozen=True)
class NodeDesc:
    """One node of the tiny pipeline: a part of base layer ``layer`` (a LayerDesc.pos) on ``device``."""

    name: str
    layer: int
    part: str = "whole"            # whole | mixer | ffn | experts | shard
    group: int = 0                 # expert group or shard number
    groups: int = 1                # expert groups or shards in the layer
    device: str = ""
    added: bool = False            # embedding / head added to a folded-embedding model

    @property
    def owns_cache(self) -> bool:
        return self.part in ("whole", "mixer") or (self.part == "shard" and self.group == 0)


@dataclass(frozen=True)
class TinySpec:
    """Everything a worker needs to build its nodes: picklable, no arrays."""

    layers: tuple[LayerDesc, ...]
    nodes: tuple[NodeDesc, ...]
    seed: int = 0
    context_tokens: int = 16       # KV-cache slots reserved per request (longest prompt + output)
    kv_bits: int = 64
    state_bits: int = 64
    conv_state_bits: int = 64
    hidden: int = TINY_HIDDEN
    vocab: int = TINY_VOCAB
    model_name: str = "tiny"

    def __post_init__(self):
        for name in ("kv_bits", "state_bits", "conv_state_bits"):
            if getattr(self, name) not in DTYPE_BITS:
                raise ValueError(f"{name} must be 16, 32 or 64 for the numeric executor")

    @property
    def devices(self) -> tuple[str, ...]:
        """Devices in order of first visit (the mapping's stage order)."""
        seen: list[str] = []
        for n in self.nodes:
            if n.device not in seen:
                seen.append(n.device)
        return tuple(seen)

    @property
    def workload(self) -> Workload:
        return Workload(context_tokens=self.context_tokens, kv_bits=self.kv_bits, state_bits=self.state_bits,
                        conv_state_bits=self.conv_state_bits)

    def replace(self, **changes) -> TinySpec:
        return replace(self, **changes)


_PART = re.compile(r"^(?:(mixer)|(ffn)|experts (\d+)/(\d+)|shard(\d+)/(\d+))$")


def _parse_part(part: str | None) -> tuple[str, int, int]:
    if part is None:
        return "whole", 0, 1
    m = _PART.match(part)
    if not m:
        raise ValueError(f"unknown node part {part!r}")
    if m.group(1):
        return "mixer", 0, 1
    if m.group(2):
        return "ffn", 0, 1
    if m.group(3) is not None:
        return "experts", int(m.group(3)), int(m.group(4))
    return "shard", int(m.group(5)), int(m.group(6))


def _tiny_mixer(layer: Layer) -> str:
    if layer.kind == "attention":
        if layer.mixer == "sliding" or layer.kv_window is not None:
            return "sliding"
        return layer.mixer if layer.mixer in ATTENTION_MIXERS else "gqa"
    return layer.mixer if layer.mixer in TINY_MIXERS else "kda"


def tiny_spec(nodes: Sequence[Layer], route: Sequence[str], *, seed: int = 0, context_tokens: int = 16,
              kv_bits: int = 64, state_bits: int = 64, conv_state_bits: int = 64,
              model_name: str = "tiny", base: LayerGraph | None = None) -> TinySpec:
    """The tiny twin of a pipeline whose node ``i`` is ``nodes[i]`` placed on device ``route[i]``.

    A model without embedding or head nodes (``fold_embeddings``) gets them added on the first and
    last node's device, since a numeric run needs token ids in and logits out. ``base``, the
    unrefined model, supplies each layer's FFN facts (expert count, shared expert) that shard
    nodes do not carry, so every granularity of one model gets the same tiny twin.
    """
    hidden_size = base.hidden_size if base is not None else 0
    base_by_index = {x.index: x for x in base.layers if x.index is not None} if base is not None else {}
    if len(nodes) != len(route):
        raise ValueError(f"{len(nodes)} nodes but a route of {len(route)} devices")
    if not nodes:
        raise ValueError("an empty pipeline")
    layer_facts: dict[tuple, dict] = {}    # key -> LayerDesc fields (filled from any node of the layer)
    order: list[tuple] = []
    parsed = []
    for node in nodes:
        part, group, groups = _parse_part(node.part)
        key = ("decoder", node.index) if node.index is not None else (node.kind, node.parent or node.name)
        if key not in layer_facts:
            layer_facts[key] = dict(name=node.parent or node.name, kind=node.kind, index=node.index,
                                    mixer=None, ffn=None, groups=1, num_experts=0, shared_params=0)
            order.append(key)
        b = layer_facts[key]
        if node.kind in ("attention", "linear_attention"):
            b["kind"] = node.kind
            b["mixer"] = _tiny_mixer(node)
        if part in ("whole", "shard"):
            b["ffn"] = node.ffn
        elif part in ("ffn", "experts"):
            b["ffn"] = node.ffn or ("moe" if part == "experts" else "dense")
        if part == "experts":
            b["groups"] = max(b["groups"], groups)
            b["num_experts"] += node.num_experts
        elif part in ("whole", "ffn"):
            b["num_experts"] = max(b["num_experts"], node.num_experts)
        b["shared_params"] = max(b["shared_params"], node.shared_params)
        parsed.append((key, part, group, groups))
    for key in order:
        b = layer_facts[key]
        whole = base_by_index.get(b["index"]) if b["index"] is not None else None
        if whole is not None and whole.part is None:
            b["ffn"], b["num_experts"], b["shared_params"] = whole.ffn, whole.num_experts, whole.shared_params
        if b["kind"] == "ffn":
            raise ValueError(f"layer {b['name']}: FFN parts without their mixer part")
        # a shared expert: the always-resident part weighs more than the router (experts x (hidden + 1))
        e = b["num_experts"]
        b["shared"] = bool(hidden_size and e and b["shared_params"] > e * (hidden_size + 1))
    first_embed = any(layer_facts[k]["kind"] == "embedding" for k in order)
    last_head = any(layer_facts[k]["kind"] == "lm_head" for k in order)
    descs: list[LayerDesc] = []
    pos_of: dict[tuple, int] = {}
    if not first_embed:
        descs.append(LayerDesc(pos=0, name="embedding", kind="embedding"))
    for key in order:
        b = layer_facts[key]
        experts = 0
        if b["ffn"] == "moe":
            experts = max(TINY_MIN_EXPERTS, b["groups"])
        pos_of[key] = len(descs)
        descs.append(LayerDesc(pos=len(descs), name=b["name"], kind=b["kind"], index=b["index"],
                               mixer=b["mixer"], ffn=b["ffn"], num_experts=experts,
                               shared_expert=b["shared"] and experts > 0))
    if not last_head:
        descs.append(LayerDesc(pos=len(descs), name="lm_head", kind="lm_head"))
    out: list[NodeDesc] = []
    if not first_embed:
        out.append(NodeDesc(name="embedding", layer=0, device=str(route[0]), added=True))
    for node, dev, (key, part, group, groups) in zip(nodes, route, parsed):
        out.append(NodeDesc(name=node.name, layer=pos_of[key], part=part, group=group, groups=groups,
                            device=str(dev)))
    if not last_head:
        out.append(NodeDesc(name="lm_head", layer=len(descs) - 1, device=str(route[-1]), added=True))
    _check_order(descs, out)
    return TinySpec(layers=tuple(descs), nodes=tuple(out), seed=seed, context_tokens=context_tokens,
                    kv_bits=kv_bits, state_bits=state_bits, conv_state_bits=conv_state_bits,
                    model_name=model_name)


def _check_order(descs: Sequence[LayerDesc], nodes: Sequence[NodeDesc]) -> None:
    """Nodes of a layer are consecutive and in part order; layers appear in model order."""
    last = -1
    for n in nodes:
        if n.layer < last:
            raise ValueError(f"node {n.name} comes after a later layer's node")
        last = n.layer
    if descs[0].kind != "embedding" or descs[-1].kind != "lm_head":
        raise ValueError("the pipeline must start with the embedding and end with the head")


# ----------------------------------------------------------------------------- accounting view
def tiny_layer_graph(spec: TinySpec) -> LayerGraph:
    """The tiny model as a placer :class:`LayerGraph` (compact form), counted by placer.specs.layers."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    types: dict[tuple, str] = {}
    mixers: dict[str, dict] = {}
    ffns: dict[str, dict] = {}
    layer_types: dict[str, dict] = {}
    pattern: list[str] = []
    for d in spec.layers:
        if d.index is None:
            continue
        key = (d.mixer, d.ffn, d.num_experts, d.shared_expert)
        if key not in types:
            if len(types) == len(letters):
                raise ValueError("more than 52 distinct layer types")
            letter = letters[len(types)]
            types[key] = letter
            mixers[d.mixer] = TINY_MIXERS[d.mixer]
            entry = {"mixer": d.mixer}
            if d.ffn == "dense":
                ffns["dense"] = {"type": "dense", **TINY_FFNS["dense"]}
                entry["ffn"] = "dense"
            elif d.ffn == "moe":
                fname = f"moe{d.num_experts}{'s' if d.shared_expert else ''}"
                ffns[fname] = {"type": "moe", "num_experts": d.num_experts, "experts_per_token": TINY_TOP_K,
                               "moe_intermediate_size": TINY_FFNS["moe"]["moe_intermediate_size"],
                               "num_shared_experts": 1 if d.shared_expert else 0,
                               "shared_intermediate_size": TINY_FFNS["moe"]["shared"]}
                entry["ffn"] = fname
            layer_types[letter] = entry
        pattern.append(types[key])
    doc = {"name": f"{spec.model_name}-tiny", "hidden_size": spec.hidden, "vocab_size": spec.vocab,
           "pattern": " ".join(pattern), "mixers": mixers, "ffns": ffns, "layer_types": layer_types}
    return model_from_dict(doc, source=f"<tiny twin of {spec.model_name}>")


def accounting_layers(spec: TinySpec) -> list[Layer]:
    """Per tiny node, the Layer whose KV/state the node holds (placer.problem.reductions.refine's rule: KV and state
    go with the whole layer, its mixer part or shard 0; other parts hold none)."""
    graph = tiny_layer_graph(spec)
    by_index = {x.index: x for x in graph.layers if x.index is not None}
    out = []
    for n in spec.nodes:
        d = spec.layers[n.layer]
        if d.index is None:
            layer = next(x for x in graph.layers if x.kind == d.kind)
        else:
            layer = by_index[d.index]
        if not n.owns_cache:
            layer = replace(layer, kv_elements_per_token=0, kv_bytes_per_token_fixed=None,
                            state_elements_per_request=0, conv_state_elements_per_request=0,
                            state_bytes_per_request_fixed=None)
        out.append(layer)
    return out


def expected_request_bytes(spec: TinySpec) -> dict[str, int]:
    """Per device: KV + state bytes one live request holds there, by placer.problem.memory."""
    wl = spec.workload
    out = {d: 0 for d in spec.devices}
    for n, layer in zip(spec.nodes, accounting_layers(spec)):
        out[n.device] += memory.request_bytes(layer, wl)
    return out


# ----------------------------------------------------------------------------- node programs
def node_program(spec: TinySpec, node: NodeDesc) -> list[tuple]:
    """The pieces node ``node`` computes, in order: tuples ``(op, *args)``.

    Ops: ``embed (lo, hi)`` vocabulary rows; ``core`` mixer (norm, core, owns the cache);
    ``oproj (lo, hi)`` output-projection rows; ``norm2``; ``dense (lo, hi)`` FFN columns;
    ``router``; ``shared``; ``experts (lo, hi)``; ``head (lo, hi, last)`` vocabulary columns.
    """
    d = spec.layers[node.layer]
    if d.kind == "embedding":
        rng = _split(spec.vocab, node.groups)[node.group] if node.part == "shard" else (0, spec.vocab)
        return [("embed", *rng)]
    if d.kind == "lm_head":
        if node.part == "shard":
            lo, hi = _split(spec.vocab, node.groups)[node.group]
            return [("head", lo, hi, node.group == 0, node.group == node.groups - 1)]
        return [("head", 0, spec.vocab, True, True)]
    width = _mixer_width(d.mixer)
    mixer_ops = [("core",), ("oproj", 0, width)]
    ffn_ops = _ffn_ops(d, 1)
    if node.part == "whole":
        return mixer_ops + ffn_ops
    if node.part == "mixer":
        return mixer_ops
    if node.part == "ffn":
        return ffn_ops
    if node.part == "experts":
        lo, hi = _split(d.num_experts, node.groups)[node.group]
        ops = [("norm2",), ("router",)] + ([("shared",)] if d.shared_expert else []) if node.group == 0 else []
        return ops + [("experts", lo, hi)]
    # shard: the layer's pieces in execution order, cut into N contiguous runs by count
    n = node.groups
    pieces: list[list[tuple]] = [[("core",)]]
    pieces += [[("oproj", lo, hi)] for lo, hi in _split(width, n)]
    fpieces = _ffn_pieces(d, n)
    if fpieces:
        fpieces[0] = [("norm2",)] + fpieces[0]
    pieces += fpieces
    cuts = _split(len(pieces), n)
    lo, hi = cuts[node.group]
    return [op for piece in pieces[lo:hi] for op in piece]


def _ffn_pieces(d: LayerDesc, n: int) -> list[list[tuple]]:
    if d.ffn == "dense":
        return [[("dense", lo, hi)] for lo, hi in _split(TINY_FFNS["dense"]["intermediate_size"], n)]
    if d.ffn == "moe":
        head = [("router",)] + ([("shared",)] if d.shared_expert else [])
        return [head] + [[("experts", lo, hi)] for lo, hi in _split(d.num_experts, n)]
    return []


def _ffn_ops(d: LayerDesc, n: int) -> list[tuple]:
    pieces = _ffn_pieces(d, n)
    return [("norm2",)] + [op for p in pieces for op in p] if pieces else []


def _slice_weights(spec: TinySpec, d: LayerDesc, w: dict, ops: list[tuple]) -> dict:
    """Only the weights ``ops`` touch (slices copied, so the full layer can be dropped)."""
    out: dict[str, np.ndarray] = {}
    for op in ops:
        name = op[0]
        if name == "embed":
            out["embed"] = w["embed"][op[1]:op[2]].copy()
        elif name == "head":
            out["head"] = w["head"][:, op[1]:op[2]].copy()
            if op[3]:
                out["norm"] = w["norm"]
        elif name == "core":
            for key, val in w.items():
                if key not in ("wo", "norm2", "w1", "w2", "w3", "router", "e1", "e2", "e3", "s1", "s2", "s3"):
                    out[key] = val
        elif name == "oproj":
            out[f"wo:{op[1]}"] = w["wo"][op[1]:op[2]].copy()
        elif name == "norm2":
            out["norm2"] = w["norm2"]
        elif name == "dense":
            lo, hi = op[1], op[2]
            out[f"w1:{lo}"] = w["w1"][:, lo:hi].copy()
            out[f"w3:{lo}"] = w["w3"][:, lo:hi].copy()
            out[f"w2:{lo}"] = w["w2"][lo:hi].copy()
        elif name == "router":
            out["router"] = w["router"]
        elif name == "shared":
            out["s1"], out["s3"], out["s2"] = w["s1"], w["s3"], w["s2"]
        elif name == "experts":
            for e in range(op[1], op[2]):
                out[f"e1:{e}"], out[f"e3:{e}"], out[f"e2:{e}"] = w["e1"][e], w["e3"][e], w["e2"][e]
    return out


@dataclass
class Batch:
    """A micro-batch on its way through the pipeline (picklable: it crosses Ray actors)."""

    mb: int
    req_ids: list[int]
    positions: np.ndarray
    tokens: np.ndarray
    node: int = 0
    h: np.ndarray | None = None
    carry: dict = field(default_factory=dict)
    logits: np.ndarray | None = None
    out_tokens: np.ndarray | None = None


class NodeRunner:
    """One node's program with only the weights it owns, and its per-request caches."""

    def __init__(self, spec: TinySpec, index: int):
        self.spec = spec
        self.index = index
        self.node = spec.nodes[index]
        self.desc = spec.layers[self.node.layer]
        self.ops = node_program(spec, self.node)
        self.w = _slice_weights(spec, self.desc, layer_weights(spec, self.desc), self.ops)
        self.owns_cache = any(op[0] == "core" for op in self.ops)
        self.caches: dict[int, dict[str, np.ndarray]] = {}
        self.layer_done = _layer_done(spec, index)
        self._bytes = 0

    @property
    def weight_bytes(self) -> int:
        return sum(a.nbytes for a in self.w.values())

    def cache_bytes(self) -> int:
        """Bytes of the live requests' cache and state arrays (``nbytes``, counted on allocation)."""
        return self._bytes

    def reserve(self, req_id: int) -> None:
        """Allocate request ``req_id``'s cache or state (for its whole context) if not yet held."""
        if self.owns_cache and req_id not in self.caches:
            self.caches[req_id] = alloc_cache(self.spec, self.desc.mixer)
            self._bytes += sum(a.nbytes for a in self.caches[req_id].values())

    def free(self, req_ids) -> None:
        for r in req_ids:
            c = self.caches.pop(r, None)
            if c is not None:
                self._bytes -= sum(a.nbytes for a in c.values())

    def run(self, batch: Batch) -> None:
        w, d = self.w, self.desc
        for op in self.ops:
            name = op[0]
            if name == "embed":
                lo, hi = op[1], op[2]
                if batch.h is None:
                    batch.h = np.zeros((len(batch.req_ids), self.spec.hidden))
                inside = (batch.tokens >= lo) & (batch.tokens < hi)
                batch.h[inside] += w["embed"][batch.tokens[inside] - lo]
            elif name == "core":
                for r in batch.req_ids:
                    self.reserve(r)
                caches = [self.caches[r] for r in batch.req_ids]
                x = rmsnorm(batch.h, w["norm1"])
                batch.carry["o"] = mixer_core(d.mixer, w, x, caches, batch.positions)
            elif name == "oproj":
                lo, hi = op[1], op[2]
                batch.h = batch.h + batch.carry["o"][:, lo:hi] @ w[f"wo:{lo}"]
                if hi == _mixer_width(d.mixer):
                    batch.carry.pop("o")
            elif name == "norm2":
                batch.carry["x2"] = rmsnorm(batch.h, w["norm2"])
            elif name == "dense":
                lo = op[1]
                batch.h = batch.h + _swiglu(batch.carry["x2"], w[f"w1:{lo}"], w[f"w3:{lo}"], w[f"w2:{lo}"])
            elif name == "router":
                idx, wts = route_topk(batch.carry["x2"] @ w["router"], min(TINY_TOP_K, d.num_experts))
                batch.carry["topk"], batch.carry["topw"] = idx, wts
            elif name == "shared":
                batch.h = batch.h + _swiglu(batch.carry["x2"], w["s1"], w["s3"], w["s2"])
            elif name == "experts":
                x2, idx, wts = batch.carry["x2"], batch.carry["topk"], batch.carry["topw"]
                for e in range(op[1], op[2]):
                    rows, slots = np.nonzero(idx == e)
                    if rows.size:
                        y = _swiglu(x2[rows], w[f"e1:{e}"], w[f"e3:{e}"], w[f"e2:{e}"])
                        batch.h[rows] += wts[rows, slots][:, None] * y
            elif name == "head":
                lo, hi, first, last = op[1], op[2], op[3], op[4]
                if first:
                    batch.carry["xf"] = rmsnorm(batch.h, w["norm"])
                    batch.logits = np.zeros((len(batch.req_ids), self.spec.vocab))
                batch.logits[:, lo:hi] = batch.carry["xf"] @ w["head"]
                if last:
                    batch.carry.clear()
                    batch.out_tokens = np.argmax(batch.logits, axis=-1)
            else:  # pragma: no cover
                raise ValueError(name)
        if self.layer_done:
            batch.carry.clear()     # partials never cross a layer boundary


def _layer_done(spec: TinySpec, index: int) -> bool:
    nodes = spec.nodes
    return index == len(nodes) - 1 or nodes[index + 1].layer != nodes[index].layer
