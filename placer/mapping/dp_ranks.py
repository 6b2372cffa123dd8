"""The validator's own per-rank bytes of a stage that runs attention data-parallel.

A mapping with ``parallel.attention_dp`` says every stage's ``tp`` ranks split its live requests
(SGLang ``--attn-dp-size``, vLLM ``--data-parallel-size`` with expert parallelism). The
rules, written here apart from the solver's (:mod:`placer.problem.reductions.attention_dp` and
:mod:`placer.problem.parallel` are never imported) and tensor by tensor over the spec's tensor list
(:func:`placer.specs.layers.ffn_tensors`):

* every tensor of a layer is whole on every rank (attention, router, shared experts, dense MLP,
  norms, embedding, LM head), except the routed experts' stacked tensors (``mlp.experts.*``),
  of which the heaviest rank holds ``ceil(E / g)`` experts' rows (``(E + N) / g`` with ``N``
  redundant experts, :mod:`placer.mapping.expert_ranks`);
* a request's KV cache and state are whole on the one rank that serves it, and the heaviest
  rank serves ``ceil(c / g)`` of the ``c`` live requests: a stage holds ``c`` requests exactly
  when ``g`` times the requests one rank holds is at least ``c``
  (:func:`rank_requests`, :func:`group_holds`);
* per decode step only an MoE layer communicates: a dispatch and a combine all-to-all, ``g - 1``
  link latencies each (:func:`dp_collective_link_latencies`).

A refined node, an MoE layer given as totals, a model without MoE layers and weights kept in a
checkpoint's stored formats have no rule
(:func:`dp_rank_refusal`).
"""

from __future__ import annotations

from placer.problem.memory import bits_to_bytes, weight_bytes
from placer.specs.layers import ffn_tensors
from placer.specs.model import Layer

__all__ = ["dp_rank_refusal", "dp_rank_params", "dp_rank_weight_bytes", "rank_requests", "group_holds",
           "dp_collective_link_latencies"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _moe(layer: Layer) -> dict | None:
    d = dict(layer.ffn_dims) if layer.ffn_dims else None
    return d if d is not None and d.get("type") == "moe" else None


def dp_rank_refusal(layers, g: int, wl=None) -> str | None:
    """Why ``layers`` (a model's nodes) cannot run attention-data-parallel on ``g`` devices under
    ``wl``, or None."""
    if g == 1:
        return None
    if wl is not None and wl.weights_as_stored and any(x.weight_groups for x in layers):
        return "weights kept in the checkpoint's stored formats have no attention-data-parallel rule"
    if not any(_moe(x) for x in layers):
        return "attention data parallelism spreads experts, and the model has no MoE layer"
    for x in layers:
        if x.part is not None:
            return f"{x.name}: a refined node has no attention-data-parallel rule"
        if x.ffn == "moe" and (_moe(x) is None or x.weight_bytes_fixed is not None):
            return f"{x.name}: an MoE layer given as totals has no experts to spread"
    return None


def dp_rank_params(layer: Layer, hidden: int, g: int) -> int:
    """Parameters the heaviest rank holds of ``layer``: everything, but ``ceil(E / g)`` of the routed experts."""
    d = _moe(layer)
    if g == 1 or d is None:
        return layer.params
    tensors = ffn_tensors(d, hidden)
    if sum(x.numel for x in tensors) != layer.params_ffn:
        raise ValueError(f"{layer.name}: its FFN count is not that of its dimensions")
    e, copies = d["num_experts"], d.get("redundant_experts", 0)     # copies: placer.mapping.expert_ranks
    held = sum(x.numel // e * _ceil(e + copies, g) if x.name.startswith("mlp.experts.") else x.numel for x in tensors)
    return layer.params - layer.params_ffn + held


def dp_rank_weight_bytes(layer: Layer, hidden: int, wl, g: int) -> int:
    """Weight bytes of the heaviest rank (a layer without routed experts: the whole layer)."""
    if g == 1 or _moe(layer) is None:
        return weight_bytes(layer, wl)
    p = dp_rank_params(layer, hidden, g)
    b = bits_to_bytes(p, wl.weight_bits)
    if wl.weight_group_size > 0:
        b += bits_to_bytes(_ceil(p, wl.weight_group_size), wl.weight_scale_bits)
    return b


def rank_requests(live: int, g: int) -> int:
    """Requests the heaviest of ``g`` ranks serves when the stage holds ``live``."""
    return _ceil(live, g)


def group_holds(rank_holds: int | None, g: int) -> int | None:
    """Live requests a stage holds when its heaviest rank holds ``rank_holds`` (None unbounded, -1 overflow)."""
    return rank_holds if rank_holds is None or rank_holds < 0 else g * rank_holds


def dp_collective_link_latencies(layer: Layer, g: int) -> int:
    """Link latencies of ``layer``'s collectives per decode step: ``2 (g - 1)`` for an MoE decoder layer
    (dispatch and combine), none for any other node."""
    if g < 2 or layer.index is None or _moe(layer) is None or layer.ffn != "moe":
        return 0
    return 2 * (g - 1)
