"""The validator's own per-rank rule for a layer known by its tensors' names and shapes.

A meta-device import (:mod:`placer.specs.hf.meta`) records each tensor's name and shape and the
layer's attention heads (query, KV). The validator splits them here, apart from the solver
(:mod:`placer.problem.named_shards` is never imported), by matching each tensor's dotted name
against an ordered table of rules, the first match winning, as the runtimes' model code lays out
its layers (vLLM's column-, row- and vocabulary-parallel layers, its fused MoE, its
``ReplicatedLinear`` indexers and compressors):

1. inside an indexer, a compressor, a router or a hyper-connection mixer, and every norm: whole;
2. ``embed_tokens`` / ``lm_head``: ``ceil(V / g)`` rows;
3. a stacked routed-expert tensor ``(E, out, in)``: ``ceil(E / g)`` experts under ``ep``, else the
   expert width cut (gate / up / gate-up on their rows, down on its columns);
4. ``k_proj`` / ``v_proj``: rows by KV head (one head a rank when ``g`` exceeds the KV heads);
5. column-parallel projections (q, fused qkv, ``q_b``, ``kv_b``, ``o_a`` / ``wo_a``, gate, up,
   gate-up, ``g_proj``, linear-attention input projections, short convolutions by channel) and
   per-head vectors (sinks, ``A_log``, ``D``, ``dt_bias``): rows ``1/g``;
6. row-parallel projections (o, out, down, ``o_b`` / ``wo_b``): columns ``1/g``, the bias whole;
7. anything else: whole;

looked at first, with the layer's other tensors: a q / k norm as wide as its projection follows it,
Mamba-2's gated norm (beside ``A_log``, as wide as ``out_proj``'s input) splits by channel, and
stacked expert biases follow their experts (a down projection's whole).

An uneven cut refuses the degree, naming the tensor.
"""

from __future__ import annotations

import re

from placer.specs.model import Layer

__all__ = ["named_rank_refusal", "named_rank_params", "named_rank_kv_elements", "named_dp_params"]


def _whole(shape, g, ep, kv):
    return shape, None


def _vocab(shape, g, ep, kv):
    return (-(-shape[0] // g),) + shape[1:], None


def _experts(shape, g, ep, kv, *, fused=False, down=False):
    if ep:
        return (-(-shape[0] // g),) + shape[1:], None
    axis = 2 if down else 1
    width = shape[axis] // 2 if fused else shape[axis]
    if width % g:
        return shape, f"expert width {width} is not a multiple of the degree {g}"
    out = list(shape)
    out[axis] = shape[axis] // g
    return tuple(out), None


def _kv_rows(shape, g, ep, kv):
    nkv = kv or 1
    if shape[0] % nkv:
        return shape, f"{shape[0]} rows do not hold whole KV heads of {nkv}"
    per_head = shape[0] // nkv
    return (per_head * (nkv // g if g <= nkv else 1),) + shape[1:], None


def _rows(shape, g, ep, kv):
    if shape[0] % g:
        return shape, f"{shape[0]} output rows are not a multiple of the degree {g}"
    return (shape[0] // g,) + shape[1:], None


def _cols(shape, g, ep, kv):
    if shape[-1] % g:
        return shape, f"{shape[-1]} input columns are not a multiple of the degree {g}"
    return shape[:-1] + (shape[-1] // g,), None


_COL = (r"(q_proj|qkv_proj|query_key_value|q_b_proj|kv_b_proj|wq_b|wkv_b|o_a_proj|wo_a|gate_proj|up_proj|gate_up_proj"
        r"|w1|w3|fc1|c_fc|g_proj|in_proj|in_proj_qkvz|in_proj_ba|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|conv1d|q_conv1d|k_conv1d|v_conv1d)")
_ROW = r"(o_proj|out_proj|down_proj|o_b_proj|wo_b|dense|w2|fc2|c_proj)"
# (pattern over the dotted name, needed dimensions or None, rule); the first match wins
_RULES = (
    (re.compile(r"(^|\.)(indexer|compressor|router|hc_head|attn_hc|ffn_hc|[a-z]+_hc)\.|norm[^.]*\.[^.]+$|norm$"), None, _whole),
    (re.compile(r"(^|\.)(embed_tokens|lm_head)\.weight$"), None, _vocab),
    (re.compile(r"(^|\.)experts\.gate_up_proj(\.weight)?$"), 3, lambda s, g, ep, kv: _experts(s, g, ep, kv, fused=True)),
    (re.compile(r"(^|\.)experts\.(gate_proj|up_proj|w1|w3)(\.weight)?$"), 3, _experts),
    (re.compile(r"(^|\.)experts\.(down_proj|w2)(\.weight)?$"), 3, lambda s, g, ep, kv: _experts(s, g, ep, kv, down=True)),
    (re.compile(r"(^|\.)(k_proj|v_proj)\.(weight|bias)$"), None, _kv_rows),
    (re.compile(r"(^|\.)" + _COL + r"\.(weight|bias)$"), None, _rows),
    (re.compile(r"(^|\.)(sinks|attn_sink|A_log|D|dt_bias)$"), 1, _rows),
    (re.compile(r"(^|\.)(sinks|attn_sink|A_log|D|dt_bias)$"), None, _whole),
    (re.compile(r"(^|\.)" + _ROW + r"\.weight$"), None, _cols),
)


_QK_NORM = re.compile(r"^(.*?)(q|k)_norm\.weight$")
_MAMBA_NORM = re.compile(r"^(.*?)norm\.weight$")
_EXPERT_BIAS = re.compile(r"(^|\.)experts\.(gate_up_proj|gate_proj|up_proj|w1|w3|down_proj|w2)(_bias|\.bias)$")


def _in_context(name: str, shape: tuple, tensors: dict, g: int, ep: bool, kv: int):
    """The rules that look at the layer's other tensors: a q / k norm as wide as its projection
    splits with it; a norm beside ``A_log`` as wide as ``out_proj``'s input (Mamba-2's gated norm)
    splits by channel; stacked expert biases ``(E, out)`` follow their experts. None: no such case."""
    m = _QK_NORM.match(name)
    if m and len(shape) == 1:
        proj = tensors.get(f"{m.group(1)}{m.group(2)}_proj.weight")
        if proj is not None and proj[0] == shape[0]:
            return (_rows if m.group(2) == "q" else _kv_rows)(shape, g, ep, kv)
    m = _MAMBA_NORM.match(name)
    if m and len(shape) == 1 and f"{m.group(1)}A_log" in tensors:
        out = tensors.get(f"{m.group(1)}out_proj.weight")
        if out is not None and out[-1] == shape[0]:
            return _rows(shape, g, ep, kv)
    m = _EXPERT_BIAS.search(name)
    if m and len(shape) == 2 and "shared_experts" not in name:
        if ep:
            return (-(-shape[0] // g), shape[1]), None
        if m.group(2) in ("down_proj", "w2"):
            return shape, None
        return (shape[0], shape[1] // g), None
    return None


def _rank_shape(name: str, shape: tuple, g: int, ep: bool, kv: int, tensors: dict) -> tuple[tuple, str | None]:
    found = _in_context(name, tuple(shape), tensors, g, ep, kv)
    if found is not None:
        return found
    for pattern, ndim, rule in _RULES:
        if pattern.search(name) and (ndim is None or len(shape) == ndim) and not (
                rule is _experts and "shared_experts" in name):
            return rule(tuple(shape), g, ep, kv)
    return tuple(shape), None


def named_rank_refusal(layer: Layer, g: int, ep: bool = False) -> str | None:
    if g == 1:
        return None
    if layer.heads:
        nq, nkv = layer.heads
        if nq % g:
            return f"query heads {nq} is not a multiple of the degree {g}"
        if (g <= nkv and nkv % g) or (g > nkv and g % nkv):
            return f"KV heads {nkv} and the degree {g}: neither divides the other"
    kv = layer.heads[1] if layer.heads else 1
    tensors = dict(layer.tensors)
    for name, shape in layer.tensors:
        _, why = _rank_shape(name, shape, g, ep, kv, tensors)
        if why:
            return f"{name}: {why}"
    return None


def named_rank_params(layer: Layer, g: int, ep: bool = False) -> int:
    kv = layer.heads[1] if layer.heads else 1
    tensors = dict(layer.tensors)
    total = 0
    for name, shape in layer.tensors:
        part, _ = _rank_shape(name, shape, g, ep, kv, tensors)
        n = 1
        for x in part:
            n *= x
        total += n
    return total


def named_rank_kv_elements(layer: Layer, g: int) -> int:
    """The KV heads' share of the cache (a latent cache, without KV heads, whole)."""
    if not layer.heads or g == 1:
        return layer.kv_elements_per_token
    nkv = layer.heads[1]
    return layer.kv_elements_per_token * (nkv // g if g <= nkv else 1) // nkv


_EXPERT_RULES = tuple(r for r in _RULES if r[1] == 3)


def named_dp_params(layer: Layer, g: int) -> int | None:
    """Under attention data parallelism: every tensor whole but the stacked routed experts (and their
    biases), of which ``ceil(E / g)``; None when the layer has no stacked experts."""
    total, found = 0, False
    for name, shape in layer.tensors:
        n = 1
        hit = "shared_experts" not in name and ((len(shape) == 3 and any(p.search(name) for p, _, _ in _EXPERT_RULES))
                                                or (len(shape) == 2 and _EXPERT_BIAS.search(name) is not None))
        for x in ((-(-shape[0] // g),) + tuple(shape[1:]) if hit else shape):
            n *= x
        total += n
        found |= hit
    return total if found else None
