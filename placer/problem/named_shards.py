"""Tensor parallelism for a layer known by its tensors' names and shapes (a meta-device import).

A family the interpreter does not list is read from transformers' module tree
(:mod:`placer.specs.hf.meta`), which records every tensor's name and shape and the attention heads
(query, KV) of the layer's projections. Each tensor splits by its role, told by its name as the
runtimes' model code names its layers (vLLM ``linear.py`` / ``vocab_parallel_embedding.py`` /
``fused_moe``, and the models that use them, e.g. ``deepseek_v4.py``, ``qwen3_vl_moe.py``):

* **vocabulary-parallel**: ``embed_tokens`` and ``lm_head`` weights, ``ceil(V / g)`` rows a rank;
* **column-parallel** (rows ``1/g``, and their bias): q, k, v, fused qkv, MLA / DeepSeek-V4 ``q_b``
  and ``kv_b``, DeepSeek-V4's grouped ``o_a`` (``wo_a``, by output group), MLP gate, up, fused
  gate-up, per-head gates (``g_proj``), Mamba and linear-attention input projections and their short
  convolutions (by channel);
* **KV heads**: k and v rows follow the KV heads, ``n_kv / g`` a rank, or one replicated head when
  ``g > n_kv`` (``g`` a multiple of ``n_kv``, as vLLM requires);
* **row-parallel** (columns ``1/g``, bias whole): o, out, down, DeepSeek-V4 ``o_b`` (``wo_b``);
* **per-head vectors** (``sinks``, ``attn_sink``, ``A_log``, ``D``, ``dt_bias``): ``1/g``;
* **routed experts**, stacked ``(E, out, in)``: gate / up / gate-up rows and down columns ``1/g``
  (each expert's width, which must divide), or with ``ep`` ``ceil(E / g)`` whole experts; their
  stacked biases ``(E, out)`` likewise (a down projection's bias whole on each rank);
* **full-width q / k norms** (as wide as their projection) follow its heads, and a Mamba-2
  gated norm over the inner width splits by channel;
* **replicated**: norms, routers (``mlp.gate``, ``router.*``), MLA / DeepSeek-V4 down-projections
  (``q_a``, ``kv_a``, ``kv_proj``), anything inside an ``indexer`` or a ``compressor`` (vLLM's and
  SGLang's DSA indexers and DeepSeek-V4's compressors are ``ReplicatedLinear``), hyper-connection
  mixers (``hc``), and any tensor whose role the names do not tell: whole on every rank, the
  heavier of the two readings, so a plan made with it fits.

The KV cache splits with the KV heads when the layer has them; a latent cache (MLA, DeepSeek-V4's
one shared KV head) is whole on every rank. A degree that cuts a head, an expert's width or a
column-parallel tensor's rows unevenly is refused with the tensor named (:func:`named_refusal`).
"""

from __future__ import annotations

from functools import lru_cache

from placer.specs.model import Layer

__all__ = ["heads_refusal", "named_refusal", "named_shapes", "named_params", "named_kv_elements", "stacked_experts"]

_VOCAB = ("embed_tokens", "lm_head")
_COLUMN = ("q_proj", "k_proj", "v_proj", "qkv_proj", "query_key_value", "q_b_proj", "kv_b_proj", "wq_b", "wkv_b",
           "o_a_proj", "wo_a", "gate_proj", "up_proj", "gate_up_proj", "w1", "w3", "fc1", "c_fc", "g_proj", "in_proj",
           "in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "q_conv1d",
           "k_conv1d", "v_conv1d")
_ROW = ("o_proj", "out_proj", "down_proj", "o_b_proj", "wo_b", "dense", "w2", "fc2", "c_proj")
_HEAD_VECTORS = ("sinks", "attn_sink", "A_log", "D", "dt_bias")
_EXPERT_MODULES = ("gate_up_proj", "gate_proj", "up_proj", "down_proj", "w1", "w2", "w3")
_WHOLE_INSIDE = ("indexer", "compressor", "router", "hc_head", "attn_hc", "ffn_hc")


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _role(name: str, shape: tuple[int, ...], tensors: dict) -> tuple[str, str]:
    """(role, the module's own name) of the tensor ``name`` among the layer's ``tensors``: vocab,
    column, kv, row, head, experts, expert_bias, whole."""
    parts = name.split(".")
    leaf, ndim = parts[-1], len(shape)
    linear = leaf in ("weight", "bias") and len(parts) > 1
    module = parts[-2] if linear else leaf
    if ndim == 1 and "norm" in module and not any(p in _WHOLE_INSIDE for p in parts[:-1]):
        return _norm_role(parts, module, shape[0], tensors), module
    if any(p in _WHOLE_INSIDE or p.endswith("_hc") for p in parts[:-1]) or "norm" in module:
        return "whole", module
    if module in _VOCAB and leaf == "weight":
        return "vocab", module
    routed = "experts" in parts and "shared_experts" not in parts
    if routed and ndim == 3 and module in _EXPERT_MODULES:
        return "experts", module
    base = module.removesuffix("_bias") if not linear else module
    if routed and ndim == 2 and base in _EXPERT_MODULES and (leaf == "bias" or module.endswith("_bias")):
        return "expert_bias", base
    if not linear:
        return ("head" if ndim == 1 and leaf in _HEAD_VECTORS else "whole"), module
    if module in ("k_proj", "v_proj"):
        return "kv", module
    if module in _COLUMN:
        return "column", module
    if module in _ROW:
        return ("whole" if leaf == "bias" else "row"), module
    return "whole", module


def _norm_role(parts: list[str], module: str, size: int, tensors: dict) -> str:
    """A norm's role: a full-width q / k norm (over every head, not one head's width) follows its
    projection's heads, as vLLM shards it (MiniMax-M2's); a Mamba-2 gated norm over the inner
    width (beside ``A_log`` and ``out_proj``) splits by channel (vLLM's Mixer2RMSNormGated);
    any other norm is whole."""
    parent = ".".join(parts[:-2] if parts[-1] in ("weight", "bias") else parts[:-1])
    sibling = (parent + "." if parent else "")
    if module in ("q_norm", "k_norm"):
        proj = tensors.get(f"{sibling}{module[0]}_proj.weight")
        if proj is not None and proj[0] == size:
            return "column" if module == "q_norm" else "kv"
    if module == "norm" and f"{sibling}A_log" in tensors:
        out = tensors.get(f"{sibling}out_proj.weight")
        if out is not None and out[-1] == size:
            return "column"
    return "whole"


@lru_cache(maxsize=256)
def _tensor_map(layer: Layer) -> dict:
    return dict(layer.tensors)


def _kv_held(layer: Layer, g: int) -> tuple[int, int]:
    """(KV heads a rank holds, KV heads) of the layer's projections."""
    nkv = layer.heads[1] if layer.heads else 1
    return (nkv // g if g <= nkv else 1), nkv


def _share(name: str, shape: tuple[int, ...], layer: Layer, g: int, ep: bool) -> tuple[tuple[int, ...], str | None]:
    """(the shape one rank holds of tensor ``name``, why the degree cuts it unevenly or None)."""
    role, module = _role(name, shape, _tensor_map(layer))
    s = list(shape)
    if role == "vocab":
        s[0] = _ceil(s[0], g)
    elif role == "expert_bias":
        if ep:
            s[0] = _ceil(s[0], g)
        elif module not in ("down_proj", "w2"):              # a down projection's bias: whole
            s[1] //= g
    elif role == "experts":
        if ep:
            s[0] = _ceil(s[0], g)
        else:
            axis = 2 if module in ("down_proj", "w2") else 1
            width = s[axis] // 2 if module == "gate_up_proj" else s[axis]
            if width % g:
                return shape, f"expert width {width} does not divide by tp {g} (--ep spreads whole experts instead)"
            s[axis] //= g
    elif role == "kv":
        held, nkv = _kv_held(layer, g)
        if s[0] % nkv:
            return shape, f"{s[0]} rows are not whole heads of {nkv} KV heads"
        s[0] = s[0] // nkv * held
    elif role in ("column", "head"):
        if s[0] % g:
            return shape, f"{s[0]} rows do not divide by tp {g}"
        s[0] //= g
    elif role == "row":
        if s[-1] % g:
            return shape, f"{s[-1]} input columns do not divide by tp {g}"
        s[-1] //= g
    return tuple(s), None


def heads_refusal(nq: int, nkv: int | None, g: int, what: str = "attention") -> str | None:
    """Why ``nq`` heads (``what``: attention, or a mixer's kind such as mla) cannot be split over
    ``g`` ranks, with ``nkv`` KV heads (None: the mixer has no KV heads of its own): the query heads
    must divide, and the KV heads divide or be replicated whole. Names the largest power-of-two
    degree below ``g`` that divides the heads (1 when none above it does)."""
    if nq % g:
        d = 1
        while d * 2 < g and nq % (d * 2) == 0:
            d *= 2
        return f"{nq} {what} heads do not divide by tp {g} (--tp {d} divides them)"
    if nkv is None:
        return None
    if g <= nkv and nkv % g:
        return f"{nkv} KV heads do not divide by tp {g}"
    if g > nkv and g % nkv:
        return f"tp {g} is not a multiple of the {nkv} KV heads (each rank must hold whole heads)"
    return None


def named_refusal(layer: Layer, g: int, ep: bool = False) -> str | None:
    """Why a layer known by its tensors cannot run at degree ``g`` (None: it can)."""
    if g == 1:
        return None
    why = heads_refusal(*layer.heads, g) if layer.heads else None
    if why is not None:
        return why
    for name, shape in layer.tensors:
        _, why = _share(name, shape, layer, g, ep)
        if why is not None:
            return f"{name}: {why}"
    return None


def named_shapes(layer: Layer, g: int, ep: bool = False) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(name, whole shape, the heaviest rank's shape) of every tensor of ``layer`` at degree ``g``."""
    return [(name, shape, _share(name, shape, layer, g, ep)[0]) for name, shape in layer.tensors]


def named_params(layer: Layer, g: int, ep: bool = False) -> int:
    """Parameters the heaviest rank holds of a layer known by its tensors."""
    return sum(named_numel(part) for _, _, part in named_shapes(layer, g, ep))


def named_kv_elements(layer: Layer, g: int) -> int:
    """KV elements per token one rank holds: split with the KV heads, or whole (a latent cache)."""
    if not layer.heads or g == 1:
        return layer.kv_elements_per_token
    held, nkv = _kv_held(layer, g)
    return layer.kv_elements_per_token // nkv * held


def stacked_experts(layer: Layer) -> tuple[int, int] | None:
    """(routed experts, parameters of one) of a layer known by its tensors, from its stacked expert
    tensors ``(E, out, in)`` and their biases ``(E, out)``; None when it has none."""
    count, one = 0, 0
    for name, shape in layer.tensors:
        if _role(name, shape, _tensor_map(layer))[0] in ("experts", "expert_bias"):
            if count and shape[0] != count:
                return None
            count = shape[0]
            one += named_numel(shape[1:])
    return (count, one) if count else None


def named_numel(shape) -> int:
    n = 1
    for x in shape:
        n *= x
    return n
