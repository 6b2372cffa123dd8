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
:mod:`placer.memory` applied to :func:`tiny_layer_graph`.

A node of the mapping runs a *program* of pieces (:func:`node_program`):

* a whole layer: mixer core, output projection, FFN (dense, or router + shared + experts);
* ``mixer`` / ``ffn`` / ``experts i/G`` nodes (``block`` refinement): their part; expert groups
  hold the same contiguous expert ranges as :mod:`placer.refine`, the first also the router;
* ``shard s/N`` nodes: the layer's pieces in execution order (mixer core, output projection in
  N row slices, FFN in N slices) cut into N contiguous runs by count; the core and its KV cache or
  state stay on shard 0, as :mod:`placer.refine` accounts them. Embedding and head shards split
  the vocabulary.

Partial results travel with the activation (``carry``), so a partitioned layer computes exactly
what the whole layer computes, up to floating-point summation order.
:class:`ReferenceModel` runs the same model unpartitioned, one request at a time, written
independently of the piece programs, as the oracle.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .. import memory
from ..layers import ATTENTION_MIXERS
from ..model import Layer, LayerGraph, model_from_dict
from ..workload import Workload

__all__ = [
    "TINY_HIDDEN", "TINY_VOCAB", "TINY_MIXERS", "TINY_FFNS", "LayerDesc", "NodeDesc", "TinySpec",
    "tiny_spec", "tiny_layer_graph", "accounting_layers", "expected_request_bytes", "layer_weights",
    "node_program", "NodeRunner", "ReferenceModel", "Request", "make_requests", "DTYPE_BITS",
]

TINY_HIDDEN = 32
TINY_VOCAB = 97
TINY_WINDOW = 6          # sliding-window layers keep this many tokens (runs are longer, so it binds)
TINY_TOP_K = 2
TINY_MIN_EXPERTS = 8
ROPE_BASE = 10000.0

# Mixer dimensions in the spec language of placer.layers, so that mixer_counts() gives the exact
# KV / state elements of these very arrays.
TINY_MIXERS: dict[str, dict] = {
    "gqa": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 8},
    "mha": {"type": "mha", "num_heads": 4, "num_kv_heads": 4, "head_dim": 8},
    "sliding": {"type": "sliding", "num_heads": 4, "num_kv_heads": 2, "head_dim": 8,
                "sliding_window": TINY_WINDOW},
    "mla": {"type": "mla", "num_heads": 4, "q_lora_rank": 16, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
            "qk_rope_head_dim": 4, "v_head_dim": 8},
    "kda": {"type": "kda", "num_heads": 2, "head_dim": 8, "conv_kernel": 4},
    "gated_deltanet": {"type": "gated_deltanet", "num_k_heads": 2, "num_v_heads": 4, "head_k_dim": 8,
                       "head_v_dim": 8, "conv_kernel": 4},
    "lightning": {"type": "lightning", "num_heads": 2, "head_dim": 8},
    "mamba": {"type": "mamba", "d_inner": 64, "d_state": 4, "d_conv": 4, "dt_rank": 2},
    "mamba2": {"type": "mamba2", "d_inner": 64, "d_state": 4, "d_conv": 4, "num_heads": 4, "n_groups": 1},
}
TINY_FFNS = {"dense": {"intermediate_size": 64}, "moe": {"moe_intermediate_size": 16, "shared": 16}}

DTYPE_BITS = {16: np.float16, 32: np.float32, 64: np.float64}


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
    """The tiny model as a placer :class:`LayerGraph` (compact form), counted by placer.layers."""
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
    """Per tiny node, the Layer whose KV/state the node holds (placer.refine's rule: KV and state
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
    """Per device: KV + state bytes one live request holds there, by placer.memory."""
    wl = spec.workload
    out = {d: 0 for d in spec.devices}
    for n, layer in zip(spec.nodes, accounting_layers(spec)):
        out[n.device] += memory.request_bytes(layer, wl)
    return out


# ----------------------------------------------------------------------------- weights
def _rng(spec: TinySpec, desc: LayerDesc) -> np.random.Generator:
    return np.random.default_rng([spec.seed, desc.pos, zlib.crc32(desc.name.encode())])


def _mat(rng, rows, cols, scale=1.0):
    return rng.standard_normal((rows, cols)) * (scale / math.sqrt(rows))


def _norm_w(rng, n):
    return 1.0 + 0.1 * rng.standard_normal(n)


def _mixer_width(mixer: str) -> int:
    m = TINY_MIXERS[mixer]
    t = m["type"]
    if t in ("gqa", "mha", "sliding"):
        return m["num_heads"] * m["head_dim"]
    if t == "mla":
        return m["num_heads"] * m["v_head_dim"]
    if t in ("kda", "lightning"):
        return m["num_heads"] * m["head_dim"]
    if t == "gated_deltanet":
        return m["num_v_heads"] * m["head_v_dim"]
    return m["d_inner"]


def layer_weights(spec: TinySpec, desc: LayerDesc) -> dict[str, np.ndarray]:
    """All weights of one tiny base layer, deterministic in (seed, layer position, name)."""
    rng = _rng(spec, desc)
    H, V = spec.hidden, spec.vocab
    w: dict[str, np.ndarray] = {}
    if desc.kind == "embedding":
        w["embed"] = rng.standard_normal((V, H))
        return w
    if desc.kind == "lm_head":
        w["norm"] = _norm_w(rng, H)
        w["head"] = _mat(rng, H, V, 2.0)
        return w
    w["norm1"] = _norm_w(rng, H)
    m = TINY_MIXERS[desc.mixer]
    t = m["type"]
    if t in ("gqa", "mha", "sliding"):
        nq, nkv, d = m["num_heads"], m["num_kv_heads"], m["head_dim"]
        w["wq"], w["wk"], w["wv"] = _mat(rng, H, nq * d), _mat(rng, H, nkv * d), _mat(rng, H, nkv * d)
    elif t == "mla":
        n, qr, kvr = m["num_heads"], m["q_lora_rank"], m["kv_lora_rank"]
        dn, dr, dv = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
        w["wq_a"], w["wq_b"] = _mat(rng, H, qr), _mat(rng, qr, n * (dn + dr))
        w["wkv_a"], w["wkv_b"] = _mat(rng, H, kvr + dr), _mat(rng, kvr, n * (dn + dv))
    elif t == "kda":
        n, d, k = m["num_heads"], m["head_dim"], m["conv_kernel"]
        p = n * d
        w["wq"], w["wk"], w["wv"] = _mat(rng, H, p), _mat(rng, H, p), _mat(rng, H, p)
        w["conv_q"], w["conv_k"], w["conv_v"] = (rng.standard_normal((k, p)) * 0.5 for _ in range(3))
        w["wf_a"], w["wf_b"] = _mat(rng, H, d), _mat(rng, d, p)
        w["wg_a"], w["wg_b"] = _mat(rng, H, d), _mat(rng, d, p)
        w["wbeta"] = _mat(rng, H, n)
        w["A_log"] = rng.uniform(-1.0, 0.5, n)
        w["dt_bias"] = 0.1 * rng.standard_normal(p)
        w["onorm"] = _norm_w(rng, d)
    elif t == "gated_deltanet":
        nk, nv, dk, dv, k = m["num_k_heads"], m["num_v_heads"], m["head_k_dim"], m["head_v_dim"], m["conv_kernel"]
        conv_dim = 2 * nk * dk + nv * dv
        w["wqkvz"] = _mat(rng, H, 2 * nk * dk + 2 * nv * dv)
        w["wba"] = _mat(rng, H, 2 * nv)
        w["conv"] = rng.standard_normal((k, conv_dim)) * 0.5
        w["A_log"] = rng.uniform(-1.0, 0.5, nv)
        w["dt_bias"] = 0.1 * rng.standard_normal(nv)
        w["onorm"] = _norm_w(rng, dv)
    elif t == "lightning":
        n, d = m["num_heads"], m["head_dim"]
        w["wqkv"], w["wgate"] = _mat(rng, H, 3 * n * d), _mat(rng, H, n * d)
        w["onorm"] = _norm_w(rng, n * d)
    elif t == "mamba":
        di, ds, dc, dtr = m["d_inner"], m["d_state"], m["d_conv"], m["dt_rank"]
        w["win"] = _mat(rng, H, 2 * di)
        w["conv"], w["conv_b"] = rng.standard_normal((dc, di)) * 0.5, 0.1 * rng.standard_normal(di)
        w["wx"] = _mat(rng, di, dtr + 2 * ds)
        w["wdt"], w["dt_b"] = _mat(rng, dtr, di), rng.uniform(-3.0, -1.0, di)
        w["A_log"] = np.log(rng.uniform(1.0, 8.0, (di, ds)))
        w["D"] = rng.standard_normal(di) * 0.5
    elif t == "mamba2":
        di, ds, dc, nh, ng = m["d_inner"], m["d_state"], m["d_conv"], m["num_heads"], m["n_groups"]
        conv_dim = di + 2 * ng * ds
        w["win"] = _mat(rng, H, 2 * di + 2 * ng * ds + nh)
        w["conv"], w["conv_b"] = rng.standard_normal((dc, conv_dim)) * 0.5, 0.1 * rng.standard_normal(conv_dim)
        w["dt_bias"] = rng.uniform(-3.0, -1.0, nh)
        w["A_log"] = np.log(rng.uniform(1.0, 8.0, nh))
        w["D"] = rng.standard_normal(nh) * 0.5
        w["onorm"] = _norm_w(rng, di)
    else:  # pragma: no cover - TINY_MIXERS lists every type
        raise ValueError(t)
    w["wo"] = _mat(rng, _mixer_width(desc.mixer), H)
    if desc.ffn == "dense":
        inter = TINY_FFNS["dense"]["intermediate_size"]
        w["norm2"] = _norm_w(rng, H)
        w["w1"], w["w3"], w["w2"] = _mat(rng, H, inter), _mat(rng, H, inter), _mat(rng, inter, H)
    elif desc.ffn == "moe":
        e, inter = desc.num_experts, TINY_FFNS["moe"]["moe_intermediate_size"]
        w["norm2"] = _norm_w(rng, H)
        w["router"] = _mat(rng, H, e, 3.0)
        w["e1"] = np.stack([_mat(rng, H, inter) for _ in range(e)])
        w["e3"] = np.stack([_mat(rng, H, inter) for _ in range(e)])
        w["e2"] = np.stack([_mat(rng, inter, H) for _ in range(e)])
        if desc.shared_expert:
            s = TINY_FFNS["moe"]["shared"]
            w["s1"], w["s3"], w["s2"] = _mat(rng, H, s), _mat(rng, H, s), _mat(rng, s, H)
    return w


# ----------------------------------------------------------------------------- numerics
def rmsnorm(x: np.ndarray, w: np.ndarray | None = None, eps: float = 1e-6) -> np.ndarray:
    y = x / np.sqrt((x * x).sum(-1, keepdims=True) / x.shape[-1] + eps)
    return y if w is None else y * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def l2norm(x, eps=1e-6):
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)


def rope(x: np.ndarray, pos: int) -> np.ndarray:
    """Rotary embedding of the last axis (even length) at position ``pos`` (half-split pairs)."""
    d = x.shape[-1]
    half = d // 2
    inv = ROPE_BASE ** (-np.arange(half) / half)
    ang = pos * inv
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def softmax(x, axis=-1):
    z = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def alloc_cache(spec: TinySpec, mixer: str) -> dict[str, np.ndarray]:
    """Zeroed per-request KV cache or state of one tiny mixer, at the spec's precisions."""
    m = TINY_MIXERS[mixer]
    t = m["type"]
    kv, st, cv = DTYPE_BITS[spec.kv_bits], DTYPE_BITS[spec.state_bits], DTYPE_BITS[spec.conv_state_bits]
    ctx = spec.context_tokens
    if t in ("gqa", "mha", "sliding"):
        slots = min(ctx, m["sliding_window"]) if t == "sliding" else ctx
        shape = (slots, m["num_kv_heads"], m["head_dim"])
        return {"k": np.zeros(shape, kv), "v": np.zeros(shape, kv)}
    if t == "mla":
        return {"c": np.zeros((ctx, m["kv_lora_rank"]), kv), "kr": np.zeros((ctx, m["qk_rope_head_dim"]), kv)}
    if t == "kda":
        n, d, k = m["num_heads"], m["head_dim"], m["conv_kernel"]
        return {"S": np.zeros((n, d, d), st), "conv_q": np.zeros((k - 1, n * d), cv),
                "conv_k": np.zeros((k - 1, n * d), cv), "conv_v": np.zeros((k - 1, n * d), cv)}
    if t == "gated_deltanet":
        nk, nv, dk, dv, k = m["num_k_heads"], m["num_v_heads"], m["head_k_dim"], m["head_v_dim"], m["conv_kernel"]
        return {"S": np.zeros((nv, dk, dv), st), "conv": np.zeros((k - 1, 2 * nk * dk + nv * dv), cv)}
    if t == "lightning":
        n, d = m["num_heads"], m["head_dim"]
        return {"S": np.zeros((n, d, d), st)}
    if t == "mamba":
        return {"h": np.zeros((m["d_inner"], m["d_state"]), st),
                "conv": np.zeros((m["d_conv"] - 1, m["d_inner"]), cv)}
    if t == "mamba2":
        di, ds, nh = m["d_inner"], m["d_state"], m["num_heads"]
        conv_dim = di + 2 * m["n_groups"] * ds
        return {"h": np.zeros((nh, di // nh, ds), st), "conv": np.zeros((m["d_conv"] - 1, conv_dim), cv)}
    raise ValueError(t)  # pragma: no cover


def _short_conv(x: np.ndarray, caches: list[dict], key: str, weight: np.ndarray,
                bias: np.ndarray | None = None) -> np.ndarray:
    """Causal depthwise conv over the last ``kernel`` inputs; updates each request's conv state."""
    kernel = weight.shape[0]
    window = np.empty((len(caches), kernel, x.shape[1]))                    # (B, k, D)
    for b, c in enumerate(caches):
        window[b, :-1] = c[key]
    window[:, -1] = x
    out = np.einsum("bkd,kd->bd", window, weight)
    if bias is not None:
        out = out + bias
    for b, c in enumerate(caches):
        c[key][...] = window[b, 1:]
    return out


def _attention_core(m, w, x, caches, positions):
    t = m["type"]
    nq, nkv, d = m["num_heads"], m["num_kv_heads"], m["head_dim"]
    q = (x @ w["wq"]).reshape(-1, nq, d)
    k = (x @ w["wk"]).reshape(-1, nkv, d)
    v = (x @ w["wv"]).reshape(-1, nkv, d)
    out = np.empty((x.shape[0], nq * d))
    rep = nq // nkv
    for b, (c, pos) in enumerate(zip(caches, positions)):
        pos = int(pos)
        slots = c["k"].shape[0]
        if t != "sliding" and pos >= slots:
            raise IndexError(f"position {pos} beyond the {slots}-token KV reserve")
        slot = pos % slots
        c["k"][slot] = rope(k[b], pos)
        c["v"][slot] = v[b]
        n = min(pos + 1, slots)
        kk = c["k"][:n].astype(np.float64)                                 # (n, nkv, d)
        vv = c["v"][:n].astype(np.float64)
        qb = rope(q[b], pos).reshape(nkv, rep, d)
        scores = np.einsum("grd,ngd->grn", qb, kk) / math.sqrt(d)
        p = softmax(scores, axis=-1)
        out[b] = np.einsum("grn,ngd->grd", p, vv).reshape(-1)
    return out


def _mla_core(m, w, x, caches, positions):
    n, kvr = m["num_heads"], m["kv_lora_rank"]
    dn, dr, dv = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
    q = (rmsnorm(x @ w["wq_a"]) @ w["wq_b"]).reshape(-1, n, dn + dr)
    kv = x @ w["wkv_a"]
    out = np.empty((x.shape[0], n * dv))
    for b, (c, pos) in enumerate(zip(caches, positions)):
        pos = int(pos)
        if pos >= c["c"].shape[0]:
            raise IndexError(f"position {pos} beyond the {c['c'].shape[0]}-token KV reserve")
        c["c"][pos] = rmsnorm(kv[b, :kvr])
        c["kr"][pos] = rope(kv[b, kvr:], pos)
        lat = c["c"][:pos + 1].astype(np.float64)
        kr = c["kr"][:pos + 1].astype(np.float64)
        kvb = (lat @ w["wkv_b"]).reshape(-1, n, dn + dv)
        k_nope, vals = kvb[..., :dn], kvb[..., dn:]
        q_nope, q_rope = q[b, :, :dn], rope(q[b, :, dn:], pos)
        scores = (np.einsum("hd,thd->ht", q_nope, k_nope) + q_rope @ kr.T) / math.sqrt(dn + dr)
        p = softmax(scores, axis=-1)
        out[b] = np.einsum("ht,thd->hd", p, vals).reshape(-1)
    return out


def _delta_rule(S, k, v, q, g, beta, decay_rows: bool):
    """Gated delta rule on stacked states ``S`` (B, heads, dk, dv); returns (S', o)."""
    S = S * (g[..., :, None] if decay_rows else g[..., None, None])
    pred = np.einsum("bhkv,bhk->bhv", S, k)
    S = S + beta[..., None, None] * k[..., :, None] * (v - pred)[..., None, :]
    o = np.einsum("bhkv,bhk->bhv", S, q) / math.sqrt(k.shape[-1])
    return S, o


def _kda_core(m, w, x, caches, positions):
    n, d = m["num_heads"], m["head_dim"]
    B = x.shape[0]
    q = silu(_short_conv(x @ w["wq"], caches, "conv_q", w["conv_q"]))
    k = silu(_short_conv(x @ w["wk"], caches, "conv_k", w["conv_k"]))
    v = silu(_short_conv(x @ w["wv"], caches, "conv_v", w["conv_v"]))
    q, k, v = (a.reshape(B, n, d) for a in (q, k, v))
    q, k = l2norm(q), l2norm(k)
    f = (x @ w["wf_a"]) @ w["wf_b"] + w["dt_bias"]
    g = np.exp(-np.exp(w["A_log"])[None, :, None] * softplus(f).reshape(B, n, d))
    beta = sigmoid(x @ w["wbeta"])
    S = np.stack([c["S"] for c in caches]).astype(np.float64)
    S, o = _delta_rule(S, k, v, q, g, beta, decay_rows=True)
    for b, c in enumerate(caches):
        c["S"][...] = S[b]
    gate = sigmoid((x @ w["wg_a"]) @ w["wg_b"]).reshape(B, n, d)
    return (rmsnorm(o, w["onorm"]) * gate).reshape(B, n * d)


def _gdn_core(m, w, x, caches, positions):
    nk, nv, dk, dv = m["num_k_heads"], m["num_v_heads"], m["head_k_dim"], m["head_v_dim"]
    B = x.shape[0]
    qkvz = x @ w["wqkvz"]
    conv_dim = 2 * nk * dk + nv * dv
    mixed = silu(_short_conv(qkvz[:, :conv_dim], caches, "conv", w["conv"]))
    z = qkvz[:, conv_dim:].reshape(B, nv, dv)
    q = l2norm(mixed[:, :nk * dk].reshape(B, nk, dk))
    k = l2norm(mixed[:, nk * dk:2 * nk * dk].reshape(B, nk, dk))
    v = mixed[:, 2 * nk * dk:].reshape(B, nv, dv)
    rep = nv // nk
    q, k = np.repeat(q, rep, axis=1), np.repeat(k, rep, axis=1)
    ba = x @ w["wba"]
    beta = sigmoid(ba[:, :nv])
    g = np.exp(-np.exp(w["A_log"]) * softplus(ba[:, nv:] + w["dt_bias"]))
    S = np.stack([c["S"] for c in caches]).astype(np.float64)
    S, o = _delta_rule(S, k, v, q, g, beta, decay_rows=False)
    for b, c in enumerate(caches):
        c["S"][...] = S[b]
    return (rmsnorm(o, w["onorm"]) * silu(z)).reshape(B, nv * dv)


# per-head decay of lightning attention: ALiBi-like slopes 2^(-8 (h+1) / heads)
_LIGHTNING_DECAY = {n: np.exp(-(2.0 ** (-8.0 * (np.arange(n) + 1) / n))) for n in (1, 2, 4, 8, 16)}


def _lightning_core(m, w, x, caches, positions):
    n, d = m["num_heads"], m["head_dim"]
    B = x.shape[0]
    qkv = silu(x @ w["wqkv"]).reshape(B, 3, n, d)
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    decay = _LIGHTNING_DECAY[n]
    S = np.stack([c["S"] for c in caches]).astype(np.float64)
    S = decay[None, :, None, None] * S + k[..., :, None] * v[..., None, :]
    o = np.einsum("bhkv,bhk->bhv", S, q) / math.sqrt(d)
    for b, c in enumerate(caches):
        c["S"][...] = S[b]
    return rmsnorm(o.reshape(B, n * d), w["onorm"]) * sigmoid(x @ w["wgate"])


def _mamba_core(m, w, x, caches, positions):
    di, ds, dtr = m["d_inner"], m["d_state"], m["dt_rank"]
    xz = x @ w["win"]
    xi, z = xz[:, :di], xz[:, di:]
    xc = silu(_short_conv(xi, caches, "conv", w["conv"], w["conv_b"]))
    dbl = xc @ w["wx"]
    dt = softplus(dbl[:, :dtr] @ w["wdt"] + w["dt_b"])                      # (B, di)
    Bm, Cm = dbl[:, dtr:dtr + ds], dbl[:, dtr + ds:]
    h = np.stack([c["h"] for c in caches]).astype(np.float64)              # (B, di, ds)
    dA = np.exp(dt[:, :, None] * -np.exp(w["A_log"])[None])
    h = dA * h + (dt * xc)[:, :, None] * Bm[:, None, :]
    for b, c in enumerate(caches):
        c["h"][...] = h[b]
    y = np.einsum("bds,bs->bd", h, Cm) + w["D"] * xc
    return y * silu(z)


def _mamba2_core(m, w, x, caches, positions):
    di, ds, nh, ng = m["d_inner"], m["d_state"], m["num_heads"], m["n_groups"]
    B = x.shape[0]
    hd = di // nh
    proj = x @ w["win"]
    z = proj[:, :di]
    conv_dim = di + 2 * ng * ds
    xbc = silu(_short_conv(proj[:, di:di + conv_dim], caches, "conv", w["conv"], w["conv_b"]))
    dt = softplus(proj[:, di + conv_dim:] + w["dt_bias"])                  # (B, nh)
    xs = xbc[:, :di].reshape(B, nh, hd)
    Bm, Cm = xbc[:, di:di + ds], xbc[:, di + ds:di + 2 * ds]               # one group
    h = np.stack([c["h"] for c in caches]).astype(np.float64)              # (B, nh, hd, ds)
    dA = np.exp(dt * -np.exp(w["A_log"]))
    h = dA[:, :, None, None] * h + (dt[:, :, None] * xs)[..., None] * Bm[:, None, None, :]
    for b, c in enumerate(caches):
        c["h"][...] = h[b]
    y = np.einsum("bhps,bs->bhp", h, Cm) + w["D"][None, :, None] * xs
    return rmsnorm(y.reshape(B, di) * silu(z), w["onorm"])


_CORES = {"gqa": _attention_core, "mha": _attention_core, "sliding": _attention_core, "mla": _mla_core,
          "kda": _kda_core, "gated_deltanet": _gdn_core, "lightning": _lightning_core,
          "mamba": _mamba_core, "mamba2": _mamba2_core}


def mixer_core(mixer: str, w: dict, x: np.ndarray, caches: list[dict], positions) -> np.ndarray:
    """One decode step of a mixer for a batch: ``x`` (B, hidden) normed input, one cache per row;
    returns the mixer output before its output projection, (B, width). Updates the caches."""
    m = TINY_MIXERS[mixer]
    return _CORES[m["type"]](m, w, x, caches, positions)


def _swiglu(x, w1, w3, w2):
    return (silu(x @ w1) * (x @ w3)) @ w2


def route_topk(router_logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k experts per row (stable order) and their renormalised softmax weights."""
    p = softmax(router_logits, axis=-1)
    idx = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    wts = p[np.arange(p.shape[0])[:, None], idx]
    return idx, wts / wts.sum(axis=-1, keepdims=True)


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges over ``range(n)`` (placer.refine's split rule: larger first)."""
    base, extra = divmod(n, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
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


# ----------------------------------------------------------------------------- reference
class ReferenceModel:
    """The unpartitioned tiny model, one request at a time: the oracle for the pipeline.

    Written from the layer definitions, not from the node programs: full output projection,
    full FFN (MoE as shared + sum of the top-k experts), full head.
    """

    def __init__(self, spec: TinySpec):
        self.spec = spec
        self.weights = [layer_weights(spec, d) for d in spec.layers]

    def generate(self, prompt: Sequence[int], max_new_tokens: int) -> tuple[list[int], np.ndarray]:
        """Greedy tokens and the logits that chose each of them, shape (max_new_tokens, vocab)."""
        spec = self.spec
        caches = {d.pos: alloc_cache(spec, d.mixer) for d in spec.layers if d.mixer}
        tokens: list[int] = []
        logits: list[np.ndarray] = []
        fed = list(prompt)
        pos = 0
        while len(tokens) < max_new_tokens:
            tok = fed[pos] if pos < len(fed) else tokens[-1]
            out = self._step(tok, pos, caches)
            if pos >= len(fed) - 1:
                tokens.append(int(np.argmax(out)))
                logits.append(out)
            pos += 1
        return tokens, np.array(logits)

    def _step(self, token: int, pos: int, caches) -> np.ndarray:
        h = None
        for d, w in zip(self.spec.layers, self.weights):
            if d.kind == "embedding":
                h = w["embed"][token][None, :].copy()
            elif d.kind == "lm_head":
                return (rmsnorm(h, w["norm"]) @ w["head"])[0]
            else:
                o = mixer_core(d.mixer, w, rmsnorm(h, w["norm1"]), [caches[d.pos]], [pos])
                h = h + o @ w["wo"]
                if d.ffn == "dense":
                    h = h + _swiglu(rmsnorm(h, w["norm2"]), w["w1"], w["w3"], w["w2"])
                elif d.ffn == "moe":
                    x2 = rmsnorm(h, w["norm2"])
                    idx, wts = route_topk(x2 @ w["router"], min(TINY_TOP_K, d.num_experts))
                    y = np.zeros_like(h)
                    if d.shared_expert:
                        y += _swiglu(x2, w["s1"], w["s3"], w["s2"])
                    for j in range(idx.shape[1]):
                        e = idx[0, j]
                        y += wts[0, j] * _swiglu(x2, w["e1"][e], w["e3"][e], w["e2"][e])
                    h = h + y
        raise ValueError("no lm_head")  # pragma: no cover


# ----------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class Request:
    id: int
    prompt: tuple[int, ...]
    max_new_tokens: int


def make_requests(n: int, tokens: int, *, vocab: int = TINY_VOCAB, seed: int = 0,
                  max_prompt: int = 4) -> list[Request]:
    """``n`` seeded requests: prompts of 1..``max_prompt`` tokens, outputs of ``tokens//2..tokens``
    tokens (different lengths, so requests finish at different steps and waiting ones move in)."""
    if n < 1 or tokens < 1:
        raise ValueError("need at least one request and one token")
    rng = np.random.default_rng([seed, 7919])
    out = []
    for i in range(n):
        plen = int(rng.integers(1, max_prompt + 1))
        prompt = tuple(int(t) for t in rng.integers(0, vocab, plen))
        out.append(Request(i, prompt, int(rng.integers(max(1, tokens // 2), tokens + 1))))
    return out


def context_for(requests: Sequence[Request]) -> int:
    """KV slots a request needs: its prompt plus all but its last output token are fed back."""
    return max(len(r.prompt) + r.max_new_tokens - 1 for r in requests)
