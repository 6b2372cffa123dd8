"""The validator's own rule for redundant experts (``parallel.redundant_experts``).

A mapping that states ``N`` redundant experts runs every MoE layer's ``E`` routed experts as
``E + N`` physical experts spread whole over each stage's ``g`` ranks, the same number on every
rank (SGLang asserts ``(E + N) % ep_size == 0``, ``sglang/srt/eplb/expert_location.py``; vLLM's
EPLB places whole physical experts, an equal number a rank). Written apart from the solver's
(:mod:`placer.specs.experts` and :mod:`placer.problem.parallel` are never imported here): the
graph is read from the spec's MoE dimensions, and each rank's bytes follow from ``(E + N) / g``
experts in :mod:`placer.mapping.ranks` and :mod:`placer.mapping.dp_ranks`.

A count the stage degree does not divide, copies without experts spread whole (``ep`` 1), or
copies on a model without MoE layers, are refused (:func:`copies_refusal`); the copies' bytes then
count at whatever the validator's per-rank rules say, and a plan that left them out overflows.
"""

from __future__ import annotations

from dataclasses import replace

__all__ = ["with_copies", "copies_refusal"]


def _moe_dims(layer) -> dict | None:
    d = dict(layer.ffn_dims) if layer.ffn_dims else None
    return d if d is not None and d.get("type") == "moe" else None


def with_copies(graph, n: int):
    """``graph`` with ``n`` redundant experts on each MoE layer's dimensions (``n = 0``: ``graph``)."""
    if not n:
        return graph
    layers = []
    for x in graph.layers:
        d = _moe_dims(x)
        if d is not None:
            d["redundant_experts"] = n
            x = replace(x, ffn_dims=tuple(d.items()))
        layers.append(x)
    return replace(graph, layers=tuple(layers))


def copies_refusal(layers, n: int, g: int, spread: bool) -> str | None:
    """Why ``n`` redundant experts cannot run on stages of ``g`` ranks (``spread``: experts whole
    on each rank), or None."""
    if n == 0:
        return None
    if n < 0:
        return f"redundant experts {n} is negative"
    moe = [(x.name, d["num_experts"]) for x in layers for d in [_moe_dims(x)] if d is not None]
    if not moe:
        return f"{n} redundant experts, but no MoE layer states its experts"
    if not spread or g < 2:
        return f"{n} redundant experts need experts spread whole over a group of more than one rank"
    for name, e in moe:
        if (e + n) % g:
            return f"{name}: {e} experts and {n} copies, {e + n} physical experts, do not divide over {g} ranks"
    return None
