"""Attention data parallelism: a group of ``g`` devices that splits *requests*, not heads.

This is how MLA MoE models (DeepSeek-V3/R1, Kimi K2) are served at scale: SGLang's
``--tp-size g --attn-dp-size g`` (formerly ``--enable-dp-attention --dp-size g``) and vLLM's ``--data-parallel-size g
--enable-expert-parallel``. Under tensor parallelism every rank keeps the whole MLA latent cache
of every request (:mod:`placer.problem.parallel`), so TP never raises MLA concurrency; with attention
data parallelism each rank runs attention for its own share of the requests and keeps only their
KV cache, and the MoE layers spread their experts over the group (expert parallelism), tokens
travelling to the experts' ranks in a dispatch all-to-all and back in a combine.

What one rank holds (the rules :func:`dp_layer` writes, the heaviest rank's share):

* **the token mixer whole**: attention (MLA's q/kv projections, the latent norm, the output
  projection), and any linear-attention mixer, replicated on every rank (SGLang computes
  ``attn_tp_size = tp_size // dp_size``, 1 when ``dp_size = tp_size``:
  ``python/sglang/srt/layers/dp_attention.py::compute_dp_attention_world_info``; a vLLM
  data-parallel rank is an engine of tensor-parallel size 1);
* **its requests' KV cache and state whole**: the MLA latent (``kv_lora_rank +
  qk_rope_head_dim`` per token) or the GQA heads of each request it serves, all of them;
* **routed experts spread whole**: ``ceil(E / g)`` on the heaviest rank (the first ``E mod g``
  ranks take one more), as under ``--ep``; with ``N`` redundant experts
  (:mod:`placer.specs.experts`) ``(E + N) / g`` physical experts on every rank;
* **everything else replicated**: router, shared experts, dense MLPs (DeepSeek-V3's first three
  layers), norms, the embedding and the LM head. This is vLLM's layout (each data-parallel rank
  is a TP-1 engine; only the fused MoE's experts span the group). SGLang by default runs the
  dense MLPs and shared experts tensor-parallel over the group after gathering the tokens, and
  the LM head vocabulary-parallel; its ``--moe-dense-tp-size 1`` and ``--enable-dp-lm-head``
  select the replicated layout modelled here, and the export sets them so the bytes it runs are
  the bytes placed. Replication is the heavier of the two layouts, so a plan made with it fits
  either runtime.

**Concurrency, exactly.** A stage holding ``c`` live requests gives each of its ``g`` ranks at
most ``ceil(c / g)`` of them (runtimes balance requests over the data-parallel ranks; the
heaviest rank is what must fit). So the instance of an attention-DP layout is one rank's
instance: its nodes are :func:`dp_layer` shares, each holding the *whole* per-request KV and
state, and its workload's concurrency is ``ceil(c / g)``, the requests of the heaviest rank
(:func:`rank_requests`). Every byte the solvers compute (``weights + concurrency x request
bytes``) is then the heaviest rank's exact need, and a concurrency ceiling ``k`` of the rank's
instance is ``g k`` live requests of the group (``ceil(c / g) <= k`` exactly when ``c <= g k``),
which :func:`per_group` reports (:func:`placer.problem.reductions.tensor_parallel.per_device`
applies it). The reduction itself is :func:`apply` (the rank's model and workload).

A layer given as totals (no tensors), a refined node, and weights kept in a checkpoint's stored
formats have no rule and are refused (:func:`dp_refusal`); a model without MoE layers gains
nothing a replica would not give and is refused too.
"""

from __future__ import annotations

from dataclasses import replace

from placer.problem.memory import bits_to_bytes, weight_bytes
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.experts import redundant_refusal
from placer.specs.model import Layer, LayerGraph
from placer.specs.workload import Workload

__all__ = ["apply", "per_group", "dp_refusal", "dp_model_refusal", "dp_params_per_rank", "dp_weight_bytes_per_rank",
           "dp_experts_per_rank", "rank_requests", "dp_layer", "dp_model"]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _routed(layer: Layer, hidden: int) -> tuple[int, int, int] | None:
    """(experts, parameters of one routed expert, experts per token) of an MoE layer, else None."""
    if layer.ffn != "moe" or not layer.ffn_dims:
        return None
    d = dict(layer.ffn_dims)
    if d.get("type") != "moe":
        return None
    width, i = d.get("latent_size") or hidden, d["moe_intermediate_size"]
    m = 3 if d.get("gated", True) else 2
    one = m * width * i + ((m - 1) * i + width if d.get("expert_bias") else 0)
    return d["num_experts"], one, d["experts_per_token"]


def _redundant(layer: Layer) -> int:
    """Redundant experts of an MoE layer (:mod:`placer.specs.experts`): each rank holds
    ``(E + N) / g`` physical experts."""
    return dict(layer.ffn_dims).get("redundant_experts", 0)


def dp_refusal(layer: Layer, hidden: int, g: int) -> str | None:
    """Why ``layer`` cannot run attention-data-parallel on ``g`` devices, or None."""
    if g < 1:
        return f"degree {g} is not a positive degree"
    if g == 1:
        return None
    where = f"{layer.name}: "
    if layer.part is not None:
        return where + "a refined node (split mode) has no attention-data-parallel rule"
    if layer.ffn == "moe" and (layer.weight_bytes_fixed is not None or not layer.ffn_dims):
        return where + "the spec gives the MoE layer's size as a total, not the experts data parallelism spreads"
    return None


def dp_model_refusal(model: LayerGraph, g: int, workload: Workload | None = None) -> str | None:
    """The first reason ``model`` cannot run attention-data-parallel at degree ``g``, or None."""
    if g > 1 and not any(_routed(x, model.hidden_size) for x in model.layers):
        return "attention data parallelism spreads experts; the model has no MoE layers (use replicas)"
    why = redundant_refusal(model, g, True)
    if why is not None:
        return why
    for x in model.layers:
        why = dp_refusal(x, model.hidden_size, g)
        if why is not None:
            return why
    if g > 1 and workload is not None and workload.weights_as_stored and any(x.weight_groups for x in model.layers):
        return ("weights kept in the checkpoint's stored formats have no attention-data-parallel rule yet "
                "(--weight-bits N places every weight at N bits)")
    return None


def dp_experts_per_rank(layer: Layer, hidden: int, g: int) -> tuple[int, int, int]:
    """(routed experts on the heaviest rank, parameters of one, experts a token of this rank's
    requests uses on average among them) of an MoE layer: ``ceil(E / g)`` whole experts; the
    rank receives, from all ``g`` ranks, ``g b k / g = b k`` expert visits for ``b`` requests of
    its own, so per own token ``k``."""
    e, one, k = _routed(layer, hidden)
    return _ceil(e + _redundant(layer), g), one, k


def dp_params_per_rank(layer: Layer, hidden: int, g: int) -> int:
    """Parameters the heaviest rank holds of ``layer``: all of them but the routed experts, of
    which ``ceil(E / g)``."""
    routed = _routed(layer, hidden) if g > 1 else None
    if routed is None:
        return layer.params
    e, one, _ = routed
    return layer.params - e * one + _ceil(e + _redundant(layer), g) * one


def dp_weight_bytes_per_rank(layer: Layer, hidden: int, wl: Workload, g: int) -> int:
    """Weight bytes of the heaviest rank at ``wl.weight_bits`` (plus its group scales); a layer
    without routed experts is whole (:func:`placer.problem.memory.weight_bytes`)."""
    if g == 1 or _routed(layer, hidden) is None:
        return weight_bytes(layer, wl)
    p = dp_params_per_rank(layer, hidden, g)
    b = bits_to_bytes(p, wl.weight_bits)
    if wl.weight_group_size > 0:
        b += bits_to_bytes(_ceil(p, wl.weight_group_size), wl.weight_scale_bits)
    return b


def rank_requests(live_requests: int, g: int) -> int:
    """Live requests the heaviest of ``g`` data-parallel ranks serves: ``ceil(c / g)``."""
    return _ceil(live_requests, g)


def dp_layer(layer: Layer, hidden: int, wl: Workload, g: int) -> Layer:
    """``layer`` as one rank of an attention-data-parallel group of ``g`` holds it: per-rank weight
    bytes fixed, KV and state per request whole (the rank keeps all of each of its requests);
    ``active_params`` what a token of the rank's own requests costs it (all but the routed
    experts, plus ``k`` experts' worth, :func:`dp_experts_per_rank`). ``g = 1``: ``layer``."""
    routed = _routed(layer, hidden) if g > 1 else None
    if routed is None:
        return layer
    params = dp_params_per_rank(layer, hidden, g)
    n, one, k = dp_experts_per_rank(layer, hidden, g)
    return replace(layer, params_mixer=0, params_ffn=0, params_other=params,
                   active_params=params - n * one + k * one,
                   weight_bytes_fixed=dp_weight_bytes_per_rank(layer, hidden, wl, g),
                   num_experts=n, expert_params=one, shared_params=params - n * one)


def dp_model(model: LayerGraph, wl: Workload, g: int) -> LayerGraph:
    """``model`` with every layer as one rank of an attention-data-parallel group of ``g`` holds it."""
    if g == 1:
        return model
    why = dp_model_refusal(model, g, wl)
    if why is not None:
        raise ValueError(why)
    return replace(model, layers=tuple(dp_layer(x, model.hidden_size, wl, g) for x in model.layers))


def apply(model: LayerGraph, workload: Workload, g: int, mode: str) -> tuple[LayerGraph, Workload]:
    """(the heaviest rank's model, its workload: ``ceil(c / g)`` of the group's ``c`` live requests)
    of an attention-data-parallel group of ``g``: :class:`InvalidSpec` (field ``attention_dp``) in
    split mode or when the model has no rule at ``g`` (:func:`dp_model_refusal`)."""
    if mode == "split":
        raise InvalidSpec(ARGUMENT, "attention_dp", "split mode cuts layers itself; attention data parallelism "
                                                    "runs in contiguous or free mode")
    why = dp_model_refusal(model, g, workload)
    if why is not None:
        raise InvalidSpec(ARGUMENT, "attention_dp", f"{model.name} cannot run attention-data-parallel at "
                                                    f"tp {g}: {why}")
    return dp_model(model, workload, g), workload.replace(concurrency=rank_requests(workload.concurrency, g))


def per_group(result, instance):
    """The inverse of :func:`apply`: ``result`` of an attention-data-parallel instance with its
    concurrency figures (the ceiling, the largest feasible concurrency, the concurrency level) in
    live requests of a group: the rank's times the degree, exactly (a rank holding ``k`` requests
    lets the group hold ``g k``)."""
    up = instance.group_requests
    levels = tuple(replace(lv, value=up(lv.value), bound=up(lv.bound)) if lv.name == "concurrency" else lv
                   for lv in result.levels)
    return result.replace(levels=levels, concurrency_ceiling=up(result.concurrency_ceiling),
                          max_concurrency=up(result.max_concurrency))
