"""Exact bytes per rank of a layer run by a group of ``tp`` devices (tensor / expert parallelism).

A stage of degree ``tp`` runs its layers on ``tp`` devices of one node; every rank holds a share
of each layer. The rules below are vLLM's (``vllm/model_executor/layers/linear.py``,
``vocab_parallel_embedding.py``, ``fused_moe``, ``mamba/mamba_utils.py``), written per tensor; the
heaviest rank is what must fit, so every function returns the largest rank's share, an exact
integer. ``tp = 1`` gives exactly what :mod:`placer.problem.memory` gives for the whole layer.

Rules (``h`` hidden size, ``g`` the degree):

* **Column- and row-parallel projections** split 1/g along their head or width dimension: q, k,
  v, o; MLP gate, up, down; MLA q_b, kv_b, o; linear-attention q, k, v, gates and out.
* **Attention heads must divide by g**; a degree that does not divide is refused with the reason
  (:func:`refusal`).
* **GQA KV heads** split ``n_kv / g`` per rank (``n_kv`` must divide by g); when ``g > n_kv`` each
  rank holds one KV head (replicated, ``g`` must be a multiple of ``n_kv``), as vLLM does. The k/v
  projections follow their heads; so does the KV cache.
* **MLA latent cache is not split**: every rank holds the whole ``kv_lora_rank + qk_rope_head_dim``
  per token (vLLM keeps the latent whole on every TP rank), so TP does not raise MLA concurrency.
  The replicated down-projections (q_a, kv_a) and their norms stay whole as well.
* **A DSA / NSA indexer** (DeepSeek-V3.2, GLM-5) is replicated: its ``wq_b``, ``wk`` and
  ``weights_proj`` are ``ReplicatedLinear`` and its key norm whole on every rank (vLLM's and
  SGLang's ``Indexer`` in ``deepseek_v2.py`` / ``nsa_indexer.py``), and its key cache
  (``index_head_dim`` per token) is whole on every rank beside the MLA latent.
* **Linear-attention and Mamba states split by heads** (KDA, Gated DeltaNet and lightning heads,
  Mamba-1 channels, Mamba-2 heads; Mamba-2 groups split when they divide, else one per rank).
* **Output gates** (a gated attention's ``g_proj``, KDA's full-rank gate) are column-parallel, by head.
* **Norms, routers, output biases, per-head-dim norms and the shared-expert gate are replicated**;
  full-width q/k norms (``qk_norm: full``) follow their heads.
* **A latent MoE's down and up projections** (hidden to latent width and back) and the latent norm
  are replicated, and its experts run at the latent width (vLLM's ``ReplicatedLinear``
  ``fc1_latent_proj`` / ``fc2_latent_proj`` in ``nemotron_h.py``).
* **Embedding and LM head are vocabulary-parallel**: a rank holds ``ceil(V / g)`` rows (vLLM pads
  V to a multiple of 64 first; equal whenever V is a multiple of 64 x g, as for every catalog
  model); the final norm is replicated.
* **Experts** are tensor-split by default (each expert's intermediate dimension 1/g, so it must
  divide by g); with ``ep`` they are spread whole across the ranks, ``ceil(E / g)`` on the
  heaviest rank (vLLM's ``--enable-expert-parallel``: the first ``E mod g`` ranks take one more).
  Shared experts are tensor-split in both cases.
* **A vision / audio tower** (known by its parameter count) is whole on every rank of its group:
  each rank encodes its share of the images with its own copy, vLLM's ``--mm-encoder-tp-mode data``
  and SGLang's ``--mm-enable-dp-encoder``, which the exports set; by default the runtimes shard the
  encoders they know by heads, fewer bytes than planned, so a plan fits either way. ``--text-only``
  drops the tower.
* A decoder layer with one sub-block (a Nemotron-H FFN-only or MoE-only layer, a NAS-pruned
  layer without attention, a Mamba layer alone) splits the one it has.
* **A layer known by its tensors' names and shapes** (a meta-device import of a family the
  interpreter does not list) splits each tensor by the role its name tells
  (:mod:`placer.problem.named_shards`).
* A layer whose spec gives its size as a total (``params``, ``weight_bytes`` or element overrides)
  has no tensors to split: it only runs at degree 1.
* **Weights kept in the checkpoint's stored formats** (:mod:`placer.problem.slices`) (MXFP4 experts beside bf16 attention, NVFP4
  with bf16 exceptions, fp8 blocks, int4 groups) split tensor by tensor with the rules above, each
  rank holding its slice of the packed weights *and of their scales*: a rank's bytes are the stored
  bytes of its slice (:func:`placer.specs.precision.tensor_bytes` of the sliced shape), per-tensor scales
  (NVFP4's global and input scales, per-tensor fp8 scales) whole on every rank, per-row scales of a
  row-parallel slice whole. As vLLM's quantized linear layers require (``validate_fp8_block_shape``
  for fp8 blocks; the input width of NVFP4 / MXFP4 / int4 groups), a slice must cut at a scale
  boundary: a column-parallel slice's rows a multiple of the block's rows, a row-parallel slice's
  columns a multiple of the group size or of the block's columns; a degree that cuts through a
  group or a block is refused with the tensor named (:func:`stored_refusal`).
"""

from __future__ import annotations

from dataclasses import replace

from placer.problem.memory import bits_to_bytes, kv_bytes_per_token, state_bytes_per_request, weight_bytes
from placer.problem.named_shards import heads_refusal, named_kv_elements, named_params, named_refusal
from placer.problem.slices import (
    cut_hint,
    kv_heads_per_rank,
    stored_bytes_per_rank,
    stored_slices,
    with_inner,
)
from placer.specs.experts import redundant_refusal
from placer.specs.model import Layer, LayerGraph
from placer.specs.workload import Workload

__all__ = [
    "refusal",
    "model_refusal",
    "stored_refusal",
    "allowed_degrees",
    "params_per_rank",
    "kv_elements_per_rank",
    "state_elements_per_rank",
    "weight_bytes_per_rank",
    "kv_bytes_per_token_per_rank",
    "kv_bytes_per_request_per_rank",
    "state_bytes_per_request_per_rank",
    "experts_per_rank",
    "physical_experts_per_rank",
    "shard_layer",
    "shard_model",
]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _attention_heads(d: dict) -> tuple[int, int, int]:
    nq = d["num_heads"]
    nkv = d.get("num_kv_heads") or nq
    return nq, nkv, d.get("head_dim") or 0


def _mixer_refusal(d: dict, g: int) -> str | None:
    t = d["type"]
    if t in ("mha", "gqa", "sliding"):
        nq, nkv, _ = _attention_heads(d)
        return heads_refusal(nq, nkv, g)
    if t in ("mla", "kda", "lightning"):
        return heads_refusal(d["num_heads"], None, g, t)
    if t == "gated_deltanet":
        for key in ("num_k_heads", "num_v_heads"):
            if d[key] % g:
                return f"{d[key]} Gated DeltaNet {key.split('_')[1]} heads do not divide by tp {g}"
        return None
    if t == "mamba":
        di = d["d_inner"]
        return None if di % g == 0 else f"Mamba inner width {di} does not divide by tp {g}"
    if t == "mamba2":
        nh, di, ng = d["num_heads"], d["d_inner"], d.get("n_groups", 1)
        if nh % g:
            return f"{nh} Mamba-2 heads do not divide by tp {g}"
        if di % g:
            return f"Mamba-2 inner width {di} does not divide by tp {g}"
        if ng % g and ng != 1:
            return f"{ng} Mamba-2 groups neither divide by tp {g} nor are a single replicated group"
        return None
    return f"mixer {t!r} has no tensor-parallel rule"


def _ffn_refusal(d: dict, g: int, ep: bool) -> str | None:
    if d["type"] == "dense":
        i = d["intermediate_size"]
        return None if i % g == 0 else f"MLP width {i} does not divide by tp {g}"
    shared = d.get("num_shared_experts", 0) * (d.get("shared_intermediate_size") or d["moe_intermediate_size"])
    if shared % g:
        return f"shared-expert width {shared} does not divide by tp {g}"
    i = d["moe_intermediate_size"]
    if not ep and i % g:
        return f"expert width {i} does not divide by tp {g} (--ep spreads whole experts instead)"
    return None


def refusal(layer: Layer, hidden: int, tp: int, ep: bool = False) -> str | None:
    """Why ``layer`` cannot run at degree ``tp`` (``ep``: experts spread whole), or None when it can."""
    if tp < 1:
        return f"tp {tp} is not a positive degree"
    if tp == 1:
        return None
    where = f"{layer.name}: "
    if layer.tensors and layer.part is None and layer.weight_bytes_fixed is None:
        why = named_refusal(layer, tp, ep)                   # a layer known by its tensors' names
        return None if why is None else where + why
    if layer.kind in ("embedding", "lm_head"):
        if layer.weight_bytes_fixed is not None or not layer.vocab_size:
            return where + "the spec gives no vocabulary size to split"
        return None
    if layer.kind == "vision":
        return None                                          # replicated on every rank: see params_per_rank
    if layer.part is not None:
        return where + "a refined node (split mode) has no tensor-parallel rule; use --mode contiguous or free"
    fixed = (layer.weight_bytes_fixed, layer.kv_bytes_per_token_fixed, layer.state_bytes_per_request_fixed)
    if any(x is not None for x in fixed) or not (layer.mixer_dims or layer.ffn_dims) \
            or (layer.params_mixer and not layer.mixer_dims) or (layer.params_ffn and not layer.ffn_dims):
        return where + "the spec gives its size as a total, not the head and width dimensions tensor parallelism splits"
    why = _mixer_refusal(with_inner(dict(layer.mixer_dims), hidden), tp) if layer.mixer_dims else None
    if why is None and layer.ffn_dims:
        why = _ffn_refusal(dict(layer.ffn_dims), tp, ep)
    return None if why is None else where + why


def model_refusal(model: LayerGraph, tp: int, ep: bool = False) -> str | None:
    """The first reason any layer of ``model`` cannot run at degree ``tp``, or None."""
    why = redundant_refusal(model, tp, ep)
    if why is not None:
        return why
    seen: set = set()
    for layer in model.layers:
        key = (layer.kind, layer.mixer_dims, layer.ffn_dims, layer.vocab_size, layer.part,
               layer.weight_bytes_fixed is None, bool(layer.params_ffn), layer.tensors, layer.heads)
        if key in seen:
            continue
        seen.add(key)
        why = refusal(layer, model.hidden_size, tp, ep)
        if why is not None:
            return why
    return None


def stored_refusal(model: LayerGraph, workload: Workload | None, tp: int = 2, ep: bool = False) -> str | None:
    """Why ``model``'s weights, kept in the checkpoint's stored formats under ``workload``, cannot be
    sliced at degree ``tp``: the first tensor whose slice would cut through a scale group or block
    (None when every slice is aligned, the weights are not kept as stored, or no workload is given)."""
    if workload is None or tp == 1 or not workload.weights_as_stored:
        return None
    seen: set = set()
    for layer in model.layers:
        if not layer.weight_groups or not (layer.mixer_dims or layer.ffn_dims):
            continue
        key = (layer.mixer_dims, layer.ffn_dims, tuple((g.format, g.tensors) for g in layer.weight_groups))
        if key in seen or refusal(layer, model.hidden_size, tp, ep) is not None:
            continue
        seen.add(key)
        for name, _full, _shard, why in stored_slices(layer, model.hidden_size, tp, ep):
            if why is not None:
                return f"{layer.name}: {name}: {cut_hint(name, why, ep)}"
    return None


def allowed_degrees(model: LayerGraph, candidates, ep: bool = False,
                    workload: Workload | None = None) -> tuple[list[int], dict[int, str]]:
    """(the degrees of ``candidates`` every layer allows, {refused degree: reason}); with
    ``workload``, a degree is also refused when :func:`stored_refusal` says so."""
    ok, refused = [], {}
    for g in sorted(set(candidates)):
        why = model_refusal(model, g, ep) or stored_refusal(model, workload, g, ep)
        if why is None:
            ok.append(g)
        else:
            refused[g] = why
    return ok, refused


# ----------------------------------------------------------------------------- parameters
def _mixer_params(d: dict, h: int, g: int) -> int:
    t = d["type"]
    if t in ("mha", "gqa", "sliding"):
        nq, nkv, d_head = _attention_heads(d)
        d_head = d_head or h // nq
        qr, kvr = nq // g, kv_heads_per_rank(nkv, g)
        p = h * qr * d_head * (2 if d.get("gated") else 1)   # q (and its output gate): column
        p += 2 * h * kvr * d_head                            # k, v: column, by KV head
        p += qr * d_head * h                                 # o: row
        if d.get("qkv_bias"):
            p += qr * d_head + 2 * kvr * d_head
        if d.get("o_bias"):
            p += h                                           # row-parallel bias: whole on each rank
        if d.get("output_gate"):
            p += h * qr * d_head                             # g_proj: column, by head
        if d.get("qk_norm") == "full":
            p += qr * d_head + kvr * d_head                  # full-width norms: by head
        elif d.get("qk_norm"):
            p += 2 * d_head                                  # per-head-dim norms: replicated
        if d.get("sinks"):
            p += qr                                          # one sink per local head
        return p
    if t == "mla":
        nr = d["num_heads"] // g
        qlr, kvr = d.get("q_lora_rank"), d["kv_lora_rank"]
        dn, dr, dv = d["qk_nope_head_dim"], d["qk_rope_head_dim"], d["v_head_dim"]
        if qlr:
            p = h * qlr + qlr * nr * (dn + dr) + qlr         # q_a, q_a norm replicated; q_b column
        else:
            p = h * nr * (dn + dr)                           # q_proj column
        p += h * (kvr + dr) + kvr                            # kv_a (with the rope key) and its norm: replicated
        p += kvr * nr * (dn + dv) + nr * dv * h              # kv_b column, o row
        if d.get("output_gate"):
            p += h * nr * dv                                 # g_proj: column, by head
        ih, nih = d.get("index_head_dim") or 0, d.get("index_num_heads") or 0
        if ih:
            # the DSA indexer: wq_b, wk, weights_proj and the key norm (weight and bias) replicated
            p += (qlr or h) * nih * ih + h * ih + 2 * ih + h * nih
        return p
    if t == "kda":
        nr, dh, k = d["num_heads"] // g, d["head_dim"], d.get("conv_kernel", 4)
        proj = nr * dh
        p = 3 * h * proj                                     # q, k, v: column
        p += h * dh + dh * proj                              # decay: f_a replicated, f_b column
        if d.get("full_rank_gate"):
            p += h * proj                                    # output gate g_proj: column
        else:
            p += h * dh + dh * proj                          # output gate: g_a replicated, g_b column
        p += h * nr                                          # beta: column
        p += 3 * proj * k                                    # short convs: by channel
        p += nr + proj                                       # A_log, dt_bias: by head
        p += dh                                              # output norm over head_dim: replicated
        p += proj * h                                        # o: row
        return p
    if t == "gated_deltanet":
        nkr, nvr = d["num_k_heads"] // g, d["num_v_heads"] // g
        dk, dv, k = d["head_k_dim"], d["head_v_dim"], d.get("conv_kernel", 4)
        key, value = nkr * dk, nvr * dv
        conv = 2 * key + value
        p = h * (2 * key + 2 * value) + h * 2 * nvr         # in_proj_qkvz, in_proj_ba: column
        p += conv * k                                        # conv1d: by channel
        p += 2 * nvr                                         # dt_bias, A_log: by head
        p += dv                                              # gated norm over head_v_dim: replicated
        p += value * h                                       # out_proj: row
        return p
    if t == "lightning":
        inner = d["num_heads"] // g * d["head_dim"]
        return h * 3 * inner + h * inner + inner * h + inner  # qkv, gate column; out row; norm by channel
    if t == "mamba":
        di = d["d_inner"] // g
        ds, dc = d["d_state"], d.get("d_conv", 4)
        dtr = d.get("dt_rank") or _ceil(h, 16)
        return (h * 2 * di + di * dc + di + di * (dtr + 2 * ds) + dtr * di + di + di * ds + di + di * h)
    if t == "mamba2":
        nh, di = d["num_heads"], d["d_inner"]
        ng = d.get("n_groups", 1)
        nhr, dir_, ngr = nh // g, di // g, (ng // g if ng % g == 0 else 1)
        ds, dc = d["d_state"], d.get("d_conv", 4)
        conv = dir_ + 2 * ngr * ds
        width = 2 * dir_ + 2 * ngr * ds + nhr
        p = h * width + conv * dc + 3 * nhr + dir_ + dir_ * h
        if d.get("conv_bias", True):
            p += conv                                        # conv bias, by channel
        if d.get("proj_bias"):
            p += width + h                                   # in_proj bias by channel; out_proj's whole
        return p
    raise ValueError(f"mixer {t!r} has no tensor-parallel rule")


def _expert_params(h: int, i: int, gated: bool, bias: bool) -> int:
    """One (Swi)GLU MLP of width ``i`` on an input of ``h``: gate (when gated), up, down (+ biases)."""
    m = 3 if gated else 2
    return m * h * i + ((m - 1) * i + h if bias else 0)


def _ffn_params(d: dict, h: int, g: int, ep: bool) -> int:
    gated = d.get("gated", True)
    if d["type"] == "dense":
        return _expert_params(h, d["intermediate_size"] // g, gated, bool(d.get("bias")))
    e, i = d["num_experts"], d["moe_intermediate_size"]
    latent = d.get("latent_size")
    width = latent or h                                      # a latent MoE's experts run at the latent width
    bias = bool(d.get("expert_bias"))
    if ep:
        experts = physical_experts_per_rank(d, g) * _expert_params(width, i, gated, bias)   # whole experts
    else:
        experts = e * _expert_params(width, i // g, gated, bias)          # every expert, 1/g of each
    shared = 0
    n_shared = d.get("num_shared_experts", 0)
    if n_shared:
        wide = n_shared * (d.get("shared_intermediate_size") or i)
        shared = _expert_params(h, wide // g, d.get("shared_gated", gated), False)
    if d.get("shared_expert_gate"):
        shared += h
    router = e * h + (e if d.get("router_bias") else 0)
    if latent:
        router += 2 * h * latent + (latent if d.get("latent_norm") else 0)   # replicated projections and norm
    return experts + shared + router


def params_per_rank(layer: Layer, hidden: int, tp: int, ep: bool = False) -> int:
    """Parameters the heaviest rank of a degree-``tp`` group holds of ``layer``.

    ``tp = 1`` is the whole layer. Raises ``ValueError`` with the reason when the degree is refused.
    """
    if tp == 1:
        return layer.params
    why = refusal(layer, hidden, tp, ep)
    if why is not None:
        raise ValueError(why)
    if layer.tensors:
        return named_params(layer, tp, ep)
    if layer.kind == "vision":
        return layer.params                                  # the tower whole on every rank (data-parallel encoder)
    if layer.kind == "embedding":
        return _ceil(layer.vocab_size, tp) * hidden
    if layer.kind == "lm_head":
        head = layer.params_other - hidden                   # 0 when tied to the embedding
        rows = _ceil(layer.vocab_size, tp) * hidden if head else 0
        return rows + hidden                                 # the final norm: replicated
    p = _mixer_params(with_inner(dict(layer.mixer_dims), hidden), hidden, tp) if layer.mixer_dims else 0
    if layer.ffn_dims:
        p += _ffn_params(dict(layer.ffn_dims), hidden, tp, ep)
    return p + layer.params_other                            # the layer's norms: replicated


# ----------------------------------------------------------------------------- caches and states
def kv_elements_per_rank(layer: Layer, hidden: int, tp: int) -> int:
    """KV-cache elements per token one rank holds: GQA ``2 * max(1, n_kv / g) * head_dim``; the MLA
    latent whole."""
    if tp == 1 or not layer.kv_elements_per_token:
        return layer.kv_elements_per_token
    if layer.tensors:
        return named_kv_elements(layer, tp)
    d = dict(layer.mixer_dims)
    if d["type"] == "mla":
        return layer.kv_elements_per_token
    nq, nkv, d_head = _attention_heads(d)
    return 2 * kv_heads_per_rank(nkv, tp) * (d_head or hidden // nq)


def state_elements_per_rank(layer: Layer, hidden: int, tp: int) -> tuple[int, int]:
    """(recurrent, short-conv) state elements per request one rank holds: split by heads."""
    if tp == 1 or not (layer.state_elements_per_request or layer.conv_state_elements_per_request):
        return layer.state_elements_per_request, layer.conv_state_elements_per_request
    d = with_inner(dict(layer.mixer_dims), hidden)
    t, g = d["type"], tp
    if t == "kda":
        nr, dh, k = d["num_heads"] // g, d["head_dim"], d.get("conv_kernel", 4)
        return nr * dh * dh, (k - 1) * 3 * nr * dh
    if t == "gated_deltanet":
        nkr, nvr = d["num_k_heads"] // g, d["num_v_heads"] // g
        dk, dv, k = d["head_k_dim"], d["head_v_dim"], d.get("conv_kernel", 4)
        return nvr * dv * dk, (k - 1) * (2 * nkr * dk + nvr * dv)
    if t == "lightning":
        return d["num_heads"] // g * d["head_dim"] ** 2, 0
    if t == "mamba":
        di = d["d_inner"] // g
        return di * d["d_state"], di * (d.get("d_conv", 4) - 1)
    if t == "mamba2":
        nh, di, ng = d["num_heads"], d["d_inner"], d.get("n_groups", 1)
        ngr = ng // g if ng % g == 0 else 1
        conv = di // g + 2 * ngr * d["d_state"]
        return nh // g * (di // nh) * d["d_state"], conv * (d.get("d_conv", 4) - 1)
    raise ValueError(f"{layer.name}: mixer {t!r} keeps no recurrent state")


# ----------------------------------------------------------------------------- bytes
def weight_bytes_per_rank(layer: Layer, hidden: int, wl: Workload, tp: int, ep: bool = False) -> int:
    """Weight bytes of the heaviest rank: its slices in their stored formats (scales included) when
    the layer keeps them and ``wl.weights_as_stored``; else at ``wl.weight_bits`` (plus group scales).
    A vision / audio tower is whole on every rank."""
    if tp == 1 or layer.kind == "vision":
        return weight_bytes(layer, wl)
    if layer.weight_groups and wl.weights_as_stored and layer.weight_bytes_fixed is None:
        why = refusal(layer, hidden, tp, ep)
        if why is not None:
            raise ValueError(why)
        return stored_bytes_per_rank(layer, hidden, tp, ep)
    p = params_per_rank(layer, hidden, tp, ep)
    b = bits_to_bytes(p, wl.weight_bits)
    if wl.weight_group_size > 0:
        b += bits_to_bytes(_ceil(p, wl.weight_group_size), wl.weight_scale_bits)
    return b


def kv_bytes_per_token_per_rank(layer: Layer, hidden: int, wl: Workload, tp: int) -> int:
    if tp == 1:
        return kv_bytes_per_token(layer, wl)
    return bits_to_bytes(kv_elements_per_rank(layer, hidden, tp), wl.kv_bits)


def kv_bytes_per_request_per_rank(layer: Layer, hidden: int, wl: Workload, tp: int) -> int:
    """KV bytes one request of ``wl.context_tokens`` holds on one rank (a sliding window bounds it)."""
    tokens = wl.context_tokens if layer.kv_window is None else min(wl.context_tokens, layer.kv_window)
    return kv_bytes_per_token_per_rank(layer, hidden, wl, tp) * tokens


def state_bytes_per_request_per_rank(layer: Layer, hidden: int, wl: Workload, tp: int) -> int:
    if tp == 1:
        return state_bytes_per_request(layer, wl)
    rec, conv = state_elements_per_rank(layer, hidden, tp)
    return bits_to_bytes(rec, wl.state_bits) + bits_to_bytes(conv, wl.conv_state_bits)


# ----------------------------------------------------------------------------- expert-parallel groups
def physical_experts_per_rank(ffn: dict, g: int) -> int:
    """Routed experts the heaviest of ``g`` expert-parallel ranks holds whole: ``ceil(E / g)``
    without redundant experts (vLLM's linear placement: the first ``E mod g`` ranks take one
    more), ``(E + N) / g`` with ``N`` (:mod:`placer.specs.experts`: the runtimes place an equal
    number of physical experts a rank, refused where ``E + N`` does not divide)."""
    return _ceil(ffn["num_experts"] + ffn.get("redundant_experts", 0), g)


# ----------------------------------------------------------------------------- the reduction's model
def experts_per_rank(layer: Layer, hidden: int, tp: int, ep: bool = False) -> tuple[int, int, int]:
    """(routed experts on the heaviest rank, parameters of one of them there, experts a token uses
    there) of an MoE layer: tensor-split, every expert at 1/g of its width and all k per token;
    with ``ep``, ``ceil(E / g)`` whole experts and ``k / g`` per token on average (at least 1)."""
    d = dict(layer.ffn_dims)
    e, k, i = d["num_experts"], d["experts_per_token"], d["moe_intermediate_size"]
    width, gated, bias = d.get("latent_size") or hidden, d.get("gated", True), bool(d.get("expert_bias"))
    if ep:
        return physical_experts_per_rank(d, tp), _expert_params(width, i, gated, bias), max(1, round(k / tp))
    return e, _expert_params(width, i // tp, gated, bias), k


def shard_layer(layer: Layer, hidden: int, wl: Workload, tp: int, ep: bool = False) -> Layer:
    """``layer`` as one rank of a degree-``tp`` group holds it: its per-rank bytes as fixed sizes.

    ``tp = 1`` returns ``layer`` itself. Parameters, cache and state elements become the rank's
    share; ``active_params`` what a token reads on the rank (MoE: the rank's always-resident part
    plus its experts per token, :func:`experts_per_rank`), for the simulator's cost model.
    """
    if tp == 1:
        return layer
    params = params_per_rank(layer, hidden, tp, ep)
    state, conv = state_elements_per_rank(layer, hidden, tp)
    extra: dict = {}
    if layer.kind == "embedding":
        active = layer.active_params                         # one row per token
    elif layer.ffn_dims and dict(layer.ffn_dims)["type"] == "moe":
        n, one, k = experts_per_rank(layer, hidden, tp, ep)
        active = params - n * one + k * one
        extra = dict(num_experts=n, expert_params=one, shared_params=params - n * one)
    else:
        active = params
    return replace(
        layer, params_mixer=0, params_ffn=0, params_other=params, active_params=active,
        weight_bytes_fixed=weight_bytes_per_rank(layer, hidden, wl, tp, ep),
        kv_elements_per_token=kv_elements_per_rank(layer, hidden, tp),
        kv_bytes_per_token_fixed=kv_bytes_per_token_per_rank(layer, hidden, wl, tp),
        state_elements_per_request=state, conv_state_elements_per_request=conv,
        state_bytes_per_request_fixed=state_bytes_per_request_per_rank(layer, hidden, wl, tp), **extra)


def shard_model(model: LayerGraph, wl: Workload, tp: int, ep: bool = False) -> LayerGraph:
    """``model`` with every layer as one rank of a degree-``tp`` group holds it (``tp = 1``: itself)."""
    if tp == 1:
        return model
    why = model_refusal(model, tp, ep) or stored_refusal(model, wl, tp, ep)
    if why is not None:
        raise ValueError(why)
    layers = tuple(shard_layer(x, model.hidden_size, wl, tp, ep) for x in model.layers)
    return replace(model, layers=layers)
