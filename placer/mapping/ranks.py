"""The validator's own per-rank bytes of a layer on a group of ``g`` devices.

:mod:`placer.mapping.validate` recomputes what each device of a tensor-parallel stage holds with these
rules, written apart from the solver's (:mod:`placer.problem.parallel` is never imported here) and in
another form: every stored tensor of a layer (:func:`placer.specs.layers.mixer_tensors` and
:func:`placer.specs.layers.ffn_tensors`, the spec's tensor list) gets a sharding rule by name, and a
rank holds that share of its elements. The rules are the runtime's (vLLM's column-, row- and
vocabulary-parallel layers, its fused MoE, its Mamba mixers), as issue 14 lists them:

* column-parallel projections (q, k, v, gates, MLP gate/up, MLA q_b / kv_b, linear-attention
  projections, convolutions and per-head vectors) and row-parallel ones (attention output, MLP
  down, linear-attention out) split ``1/g``; a row-parallel layer's bias is whole on each rank;
* GQA KV heads: ``n_kv / g`` per rank, one (replicated) when ``g > n_kv``: the k and v
  projections, their biases and full-width k norms follow their heads, and so does the KV cache;
* MLA: the latent cache is whole on every rank; the down-projections (q_a, kv_a) and their
  norms are replicated; a DSA indexer has no rule (refused above degree 1);
* linear-attention and Mamba states split by heads (Mamba-2 groups split when they divide,
  else the single group is replicated);
* norms, routers, per-head-dim norms, sinks' heads split, the shared-expert gate replicated;
* embedding and LM head: ``ceil(V / g)`` vocabulary rows per rank, the final norm whole;
* routed experts: tensor-split (each expert's width ``1/g``, a down bias whole) or, with
  ``ep``, ``ceil(E / g)`` whole experts on the heaviest rank (``(E + N) / g`` with ``N``
  redundant experts, :mod:`placer.mapping.expert_ranks`); shared experts split ``1/g``; a
  latent MoE's down and up projections and its norm are replicated (vLLM's ``nemotron_h``
  ``ReplicatedLinear`` latent projections), its experts split as any.

A degree that some split dimension does not divide is refused with the reason; so is a layer
given as totals (no tensors to split) and a refined node. Weights kept in a checkpoint's stored
formats are sliced with the same tensor rules, and a rank holds the stored bytes of its slices
(:func:`placer.specs.precision.tensor_bytes` of the sliced shape: packed weights with their share of the
group or block scales, per-tensor scales whole); a slice that cuts through a scale group or block
(vLLM refuses such a checkpoint at that degree) is refused by :func:`stored_formats_refusal`.
"""

from __future__ import annotations

from placer.problem.memory import bits_to_bytes, kv_bytes_per_token, state_bytes_per_request, weight_bytes
from placer.specs.layers import ffn_tensors, mixer_tensors
from placer.specs.model import Layer
from placer.specs.precision import tensor_bytes

__all__ = ["rank_refusal", "stored_formats_refusal", "rank_params", "rank_stored_weight_bytes", "rank_kv_elements", "rank_state_elements", "rank_weight_bytes",
           "rank_kv_bytes_per_request", "rank_state_bytes_per_request", "collective_link_latencies"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _mixer(layer: Layer, hidden: int) -> dict:
    d = dict(layer.mixer_dims)
    if d.get("type") in ("mamba", "mamba2") and not d.get("d_inner"):
        d["d_inner"] = d.get("expand", 2) * hidden
    return d


def _kv_share(nkv: int, g: int) -> tuple[int, int]:
    """(KV heads a rank holds, of n_kv)."""
    return (nkv // g if g <= nkv else 1), nkv


# ----------------------------------------------------------------------------- refusals
def _need(what: str, n: int, g: int) -> str | None:
    return None if n % g == 0 else f"{what} {n} is not a multiple of the degree {g}"


def _mixer_refusal(d: dict, g: int) -> str | None:
    t = d["type"]
    if t in ("mha", "gqa", "sliding"):
        nq = d["num_heads"]
        nkv = d.get("num_kv_heads") or nq
        if nq % g:
            return f"query heads {nq} is not a multiple of the degree {g}"
        if g <= nkv:
            return _need("KV heads", nkv, g)
        return None if g % nkv == 0 else f"degree {g} is not a multiple of the {nkv} KV heads"
    if t == "mla" and d.get("index_head_dim"):
        return "a DSA indexer has no per-rank rule"
    if t in ("mla", "kda", "lightning"):
        return _need(f"{t} heads", d["num_heads"], g)
    if t == "gated_deltanet":
        return _need("key heads", d["num_k_heads"], g) or _need("value heads", d["num_v_heads"], g)
    if t == "mamba":
        return _need("Mamba inner width", d["d_inner"], g)
    if t == "mamba2":
        ng = d.get("n_groups", 1)
        return (_need("Mamba-2 heads", d["num_heads"], g) or _need("Mamba-2 inner width", d["d_inner"], g)
                or (None if ng == 1 or ng % g == 0 else f"Mamba-2 groups {ng} neither split by {g} nor are one"))
    return f"mixer {t!r}: no per-rank rule"


def _ffn_refusal(d: dict, g: int, ep: bool) -> str | None:
    if d["type"] == "dense":
        return _need("MLP width", d["intermediate_size"], g)
    n_shared = d.get("num_shared_experts", 0)
    if n_shared:
        why = _need("shared-expert width", n_shared * (d.get("shared_intermediate_size") or d["moe_intermediate_size"]), g)
        if why:
            return why
    return None if ep else _need("expert width", d["moe_intermediate_size"], g)


def stored_formats_refusal(layers, wl, hidden: int = 0, g: int = 2, ep: bool = False) -> str | None:
    """Why a plan at degree ``g`` cannot keep ``layers``' weights in their stored formats: the first
    slice that cuts through a scale group or block, or None."""
    if not wl.weights_as_stored or g == 1:
        return None
    for x in layers:
        if not x.weight_groups or not x.mixer_dims or rank_refusal(x, hidden, g, ep) is not None:
            continue
        for name, shape, fmt in _stored_tensors(x, hidden):
            why = _cuts(fmt, shape, _tensor_shard(x, name, shape, hidden, g, ep), name.startswith("mlp.experts."))
            if why:
                return f"{x.name}: {name}: {why}"
    return None


def _cuts(fmt, whole: tuple, shard: tuple, stacked: bool) -> str | None:
    """Whether a shard of a tensor stored in ``fmt`` starts or ends inside one of its scale groups or blocks."""
    if stacked:
        whole, shard = whole[1:], shard[1:]
    if len(whole) < 2 or whole == shard:
        return None
    (r0, c0), (r, c) = whole[-2:], shard[-2:]
    if fmt.block:
        br, bc = fmt.block
        if (r != r0 and r % br) or (c != c0 and c % bc):
            return f"its {r} x {c} shard does not fall on the {br} x {bc} scale blocks"
    if fmt.group_size and fmt.flat_group and (r * c) % fmt.group_size:
        return f"its {r} x {c} shard does not hold whole flat groups of {fmt.group_size}"
    if fmt.group_size and c != c0 and c % fmt.group_size:
        return f"its {c} input columns per rank do not hold whole groups of {fmt.group_size}"
    return None


def rank_refusal(layer: Layer, hidden: int, g: int, ep: bool = False) -> str | None:
    """Why ``layer`` cannot run on a group of ``g`` devices, or None."""
    if g == 1:
        return None
    if layer.kind in ("embedding", "lm_head"):
        return None if layer.vocab_size and layer.weight_bytes_fixed is None else "no vocabulary size to split"
    if layer.part is not None:
        return "a refined node has no per-rank rule"
    if (layer.weight_bytes_fixed is not None or layer.kv_bytes_per_token_fixed is not None
            or layer.state_bytes_per_request_fixed is not None):
        return "sizes given as totals, not dimensions"
    if layer.params_mixer and not layer.mixer_dims or layer.params_ffn and not layer.ffn_dims:
        return "sizes given as totals, not dimensions"
    if not layer.mixer_dims:
        return "no token mixer dimensions"
    why = _mixer_refusal(_mixer(layer, hidden), g)
    if why is None and layer.ffn_dims:
        why = _ffn_refusal(dict(layer.ffn_dims), g, ep)
    return why


# ----------------------------------------------------------------------------- per-tensor shards
_ROW_PARALLEL = ("o_proj.weight", "out_proj.weight", "down_proj.weight", "x_proj.weight")


def _cut(shape: tuple, axis: int, keep: int, of: int) -> tuple:
    """``shape`` with dimension ``axis`` cut to ``keep / of`` of itself."""
    s = list(shape)
    s[axis] = s[axis] * keep // of
    return tuple(s)


def _mixer_shard(name: str, shape: tuple, d: dict, g: int) -> tuple:
    """The shape of the mixer tensor ``name`` one rank holds."""
    t = d["type"]
    leaf = name.split(".", 1)[1]
    if leaf.endswith(_ROW_PARALLEL):
        return _cut(shape, len(shape) - 1, 1, g)             # row-parallel: input columns
    if t in ("mha", "gqa", "sliding"):
        nq = d["num_heads"]
        held, nkv = _kv_share(d.get("num_kv_heads") or nq, g)
        if leaf.startswith(("k_proj.", "v_proj.")):
            return _cut(shape, 0, held, nkv)
        if leaf == "o_proj.bias":
            return shape
        if leaf in ("q_norm.weight", "k_norm.weight"):
            if d.get("qk_norm") != "full":
                return shape                                   # one head_dim vector, replicated
            return _cut(shape, 0, 1, g) if leaf == "q_norm.weight" else _cut(shape, 0, held, nkv)
        return _cut(shape, 0, 1, g)                            # q, output gate, sinks
    if t == "mla":
        if leaf.startswith(("q_a_", "kv_a_", "indexer.")):
            return shape
        return _cut(shape, 0, 1, g)                            # q_b (or q), kv_b, output gate
    if t == "kda":
        if leaf in ("f_a_proj.weight", "g_a_proj.weight", "o_norm.weight"):
            return shape
        return _cut(shape, 0, 1, g)
    if t == "gated_deltanet":
        return shape if leaf == "norm.weight" else _cut(shape, 0, 1, g)
    if t in ("lightning", "mamba"):
        return _cut(shape, 0, 1, g)
    if t == "mamba2":
        di, ds, nh = d["d_inner"], d["d_state"], d["num_heads"]
        ng = d.get("n_groups", 1)
        groups = ng // g if ng % g == 0 else 1
        rows = list(shape)
        if leaf.startswith("in_proj."):
            rows[0] = 2 * di // g + 2 * groups * ds + nh // g  # x and z, B and C per group, dt
            return tuple(rows)
        if leaf.startswith("conv1d."):
            rows[0] = di // g + 2 * groups * ds
            return tuple(rows)
        if leaf == "out_proj.bias":
            return shape
        return _cut(shape, 0, 1, g)                            # dt_bias, A_log, D, norm
    raise ValueError(f"mixer {t!r}: no per-rank rule")


def _ffn_shard(name: str, shape: tuple, d: dict, g: int, ep: bool) -> tuple:
    """The shape of the FFN tensor ``name`` one rank holds."""
    if d["type"] == "dense":
        if name == "mlp.down_proj.bias":
            return shape
        return _cut(shape, len(shape) - 1, 1, g) if name.endswith(_ROW_PARALLEL) else _cut(shape, 0, 1, g)
    if name.startswith(("mlp.gate.", "mlp.latent_")) or name == "mlp.shared_expert_gate.weight":
        return shape                                           # router, latent projections and norm, shared gate
    if name.startswith("mlp.experts."):
        e = d["num_experts"]
        if ep:                                                 # whole physical experts on the heaviest rank,
            copies = d.get("redundant_experts", 0)             # redundant copies among them (expert_ranks)
            return (_ceil(e + copies, g),) + tuple(shape[1:])
        if name == "mlp.experts.down_proj.bias":
            return shape
        return _cut(shape, len(shape) - 1, 1, g) if name.endswith(_ROW_PARALLEL) else _cut(shape, 1, 1, g)
    if name.startswith("mlp.shared_experts."):
        return _cut(shape, len(shape) - 1, 1, g) if name.endswith(_ROW_PARALLEL) else _cut(shape, 0, 1, g)
    raise ValueError(f"FFN tensor {name!r}: no per-rank rule")


def _tensor_shard(layer: Layer, name: str, shape: tuple, hidden: int, g: int, ep: bool) -> tuple:
    if name.startswith("mlp."):
        return _ffn_shard(name, shape, dict(layer.ffn_dims), g, ep)
    return _mixer_shard(name, shape, _mixer(layer, hidden), g)


def _stored_tensors(layer: Layer, hidden: int):
    """(name, shape, stored format) of every linear-layer tensor of a decoder layer kept as stored."""
    fmt = {}
    for grp in layer.weight_groups:
        fmt.update(dict.fromkeys(grp.tensors, grp.fmt))
    tensors = mixer_tensors(_mixer(layer, hidden), hidden) + (ffn_tensors(dict(layer.ffn_dims), hidden)
                                                              if layer.ffn_dims else [])
    return [(x.name, x.shape, fmt[x.name]) for x in tensors if x.numel]


def _numel(shape: tuple) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def rank_params(layer: Layer, hidden: int, g: int, ep: bool = False) -> int:
    """Parameters the heaviest rank holds of ``layer`` on a group of ``g`` (``g = 1``: all).
    Raises ``ValueError`` with the reason when the degree is refused."""
    if g == 1:
        return layer.params
    why = rank_refusal(layer, hidden, g, ep)
    if why is not None:
        raise ValueError(f"{layer.name}: {why}")
    if layer.kind == "embedding":
        return _ceil(layer.vocab_size, g) * hidden
    if layer.kind == "lm_head":
        untied = layer.params_other > hidden                   # vocabulary rows plus the final norm
        return (_ceil(layer.vocab_size, g) * hidden if untied else 0) + hidden
    d = _mixer(layer, hidden)
    tensors = mixer_tensors(d, hidden)
    if sum(x.numel for x in tensors) != layer.params_mixer:
        raise ValueError(f"{layer.name}: its mixer count is not that of its dimensions")
    p = sum(_numel(_mixer_shard(x.name, x.shape, d, g)) for x in tensors)
    if layer.ffn_dims:
        f = dict(layer.ffn_dims)
        ft = ffn_tensors(f, hidden)
        if sum(x.numel for x in ft) != layer.params_ffn:
            raise ValueError(f"{layer.name}: its FFN count is not that of its dimensions")
        p += sum(_numel(_ffn_shard(x.name, x.shape, f, g, ep)) for x in ft)
    return p + layer.params_other                              # the layer's own norms: replicated


def rank_stored_weight_bytes(layer: Layer, hidden: int, g: int, ep: bool = False) -> int:
    """Bytes the heaviest rank holds of ``layer``'s weights in their stored formats on a group of ``g``."""
    why = rank_refusal(layer, hidden, g, ep)
    if why is not None:
        raise ValueError(f"{layer.name}: {why}")
    if layer.kind in ("embedding", "lm_head"):
        rows = _ceil(layer.vocab_size, g)
        return sum(tensor_bytes((rows, hidden), grp.fmt) if grp.role in ("embedding", "lm_head") else grp.bytes
                   for grp in layer.weight_groups)
    total = 0
    for name, shape, fmt in _stored_tensors(layer, hidden):
        shard = _tensor_shard(layer, name, shape, hidden, g, ep)
        why = _cuts(fmt, shape, shard, name.startswith("mlp.experts."))
        if why:
            raise ValueError(f"{layer.name}: {name}: {why}")
        total += tensor_bytes(shard, fmt, stacked=name.startswith("mlp.experts."))
    # norms, and what a spec gives only as a count (an MTP block's own projection), stay whole
    return total + sum(grp.bytes for grp in layer.weight_groups if grp.role == "norm" or not grp.tensors)


def rank_kv_elements(layer: Layer, hidden: int, g: int) -> int:
    """KV-cache elements per token one rank holds (the MLA latent whole)."""
    if g == 1 or not layer.kv_elements_per_token:
        return layer.kv_elements_per_token
    d = _mixer(layer, hidden)
    if d["type"] == "mla":
        return layer.kv_elements_per_token
    held, nkv = _kv_share(d.get("num_kv_heads") or d["num_heads"], g)
    return layer.kv_elements_per_token * held // nkv


def rank_state_elements(layer: Layer, hidden: int, g: int) -> tuple[int, int]:
    """(recurrent, short-conv) state elements per request one rank holds."""
    rec, conv = layer.state_elements_per_request, layer.conv_state_elements_per_request
    if g == 1 or not (rec or conv):
        return rec, conv
    d = _mixer(layer, hidden)
    if d["type"] == "mamba2":
        di, ds, ng = d["d_inner"], d["d_state"], d.get("n_groups", 1)
        groups = ng // g if ng % g == 0 else 1
        return rec // g, conv // (di + 2 * ng * ds) * (di // g + 2 * groups * ds)
    # every other recurrent mixer's state is a sum over its heads (or channels)
    return rec // g, conv // g


def rank_weight_bytes(layer: Layer, hidden: int, wl, g: int, ep: bool = False) -> int:
    if g == 1:
        return weight_bytes(layer, wl)
    if layer.weight_groups and wl.weights_as_stored and layer.weight_bytes_fixed is None:
        return rank_stored_weight_bytes(layer, hidden, g, ep)
    p = rank_params(layer, hidden, g, ep)
    b = bits_to_bytes(p, wl.weight_bits)
    if wl.weight_group_size > 0:
        b += bits_to_bytes(_ceil(p, wl.weight_group_size), wl.weight_scale_bits)
    return b


def rank_kv_bytes_per_request(layer: Layer, hidden: int, wl, g: int) -> int:
    tokens = wl.context_tokens if layer.kv_window is None else min(wl.context_tokens, layer.kv_window)
    per_token = kv_bytes_per_token(layer, wl) if g == 1 else bits_to_bytes(rank_kv_elements(layer, hidden, g),
                                                                          wl.kv_bits)
    return per_token * tokens


def rank_state_bytes_per_request(layer: Layer, hidden: int, wl, g: int) -> int:
    if g == 1:
        return state_bytes_per_request(layer, wl)
    rec, conv = rank_state_elements(layer, hidden, g)
    return bits_to_bytes(rec, wl.state_bits) + bits_to_bytes(conv, wl.conv_state_bits)


def collective_link_latencies(layer: Layer, g: int, ep: bool = False) -> int:
    """Link latencies ``layer``'s collectives take per decode step on a group of ``g``: a ring
    all-reduce is ``2 (g - 1)`` steps, a pairwise all-to-all ``g - 1``; a decoder layer runs two
    all-reduces (attention out, FFN down), or under EP an MoE layer one all-reduce and a dispatch
    and a combine all-to-all; the embedding one all-reduce; other nodes none."""
    if g < 2:
        return 0
    if layer.kind == "embedding":
        return 2 * (g - 1)
    if layer.index is None:
        return 0
    if ep and layer.ffn == "moe" and layer.ffn_dims:
        return 2 * (g - 1) + 2 * (g - 1)
    return 4 * (g - 1)
