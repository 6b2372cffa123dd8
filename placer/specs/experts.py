"""Redundant experts: extra copies of routed experts that an expert-parallel group places to
balance load (``--redundant-experts N``).

``N`` is per MoE layer, as the runtimes define it: SGLang's ``--ep-num-redundant-experts``
(``sglang/srt/arg_groups/fields/exec_.py``, int, default 0) and vLLM's EPLB
``num_redundant_experts`` (``--eplb-config``, ``vllm/config/parallel.py``, int >= 0, default 0;
non-zero only with ``--enable-eplb``). A layer of ``E`` routed experts then runs ``E + N``
*physical* experts, ``(E + N) / g`` on each of the ``g`` ranks of its expert-parallel group:
SGLang computes ``num_physical_experts = num_logical_experts + ep_num_redundant_experts`` and
asserts that it divides by ``ep_size`` (``sglang/srt/eplb/expert_location.py``), and the EPLB
algorithm both runtimes use (DeepSeek's, ``rebalance_experts``) places whole physical experts, an
equal number a rank. So ``N > 0`` needs experts spread whole over more than one rank and
``E + N`` a multiple of the degree (:func:`redundant_refusal` names the smallest ``N`` that is).

:func:`with_redundant_experts` records ``N`` in every MoE layer's ``ffn_dims``
(``redundant_experts``): a model as served with its copies. The solver's per-rank rules
(:mod:`placer.problem.parallel`, :mod:`placer.problem.reductions.attention_dp`) and the
validator's (:mod:`placer.mapping.ranks`, :mod:`placer.mapping.dp_ranks`) each read it there; a
mapping states it as ``parallel.redundant_experts`` and its readers apply it again when loading.
"""

from __future__ import annotations

from dataclasses import replace

from placer.specs.model import LayerGraph

__all__ = ["with_redundant_experts", "redundant_experts", "routed_experts", "redundant_refusal", "divisible_copies"]


def _moe(layer) -> dict | None:
    d = dict(layer.ffn_dims) if layer.ffn_dims else None
    return d if d is not None and d.get("type") == "moe" else None


def with_redundant_experts(model: LayerGraph, n: int) -> LayerGraph:
    """``model`` with ``n`` redundant experts recorded on every MoE layer (``n = 0``: ``model``).
    Raises ``ValueError`` for a negative ``n`` or a model without MoE layers given by dimensions."""
    if n < 0:
        raise ValueError(f"redundant experts: {n} is negative")
    if n == 0:
        return model
    if not any(_moe(x) for x in model.layers):
        raise ValueError(f"{model.name} has no MoE layers (by their dimensions) to copy experts of")
    layers = tuple(replace(x, ffn_dims=tuple((k, v) for k, v in x.ffn_dims if k != "redundant_experts")
                           + (("redundant_experts", n),)) if _moe(x) else x for x in model.layers)
    return replace(model, layers=layers)


def redundant_experts(model: LayerGraph) -> int:
    """The redundant experts per MoE layer recorded on ``model`` (0: none)."""
    return max((_moe(x).get("redundant_experts", 0) for x in model.layers if _moe(x)), default=0)


def routed_experts(model: LayerGraph) -> int | None:
    """The routed experts of ``model``'s MoE layers (the largest count; None without MoE layers)."""
    counts = [_moe(x)["num_experts"] for x in model.layers if _moe(x)]
    return max(counts) if counts else None


def divisible_copies(experts: int, n: int, g: int) -> int:
    """The smallest number of redundant experts, at least ``n``, that makes ``experts + copies`` a
    multiple of ``g``."""
    return n + (-(experts + n)) % g


def redundant_refusal(model: LayerGraph, g: int, spread: bool) -> str | None:
    """Why ``model``'s redundant experts cannot run on an expert-parallel group of ``g`` (``spread``:
    experts spread whole), or None (also when it records none)."""
    n = redundant_experts(model)
    if n == 0:
        return None
    if not spread or g < 2:
        return (f"{n} redundant experts need experts spread whole over more than one rank (--ep or "
                "--attention-dp at tp 2 or more)")
    for x in model.layers:
        d = _moe(x)
        if d is not None and (d["num_experts"] + n) % g:
            e = d["num_experts"]
            fix = divisible_copies(e, n, g)
            return (f"{x.name}: {e} experts + {n} redundant = {e + n} physical experts do not divide over "
                    f"{g} ranks (SGLang and vLLM's EPLB place an equal number a rank): --redundant-experts "
                    f"{fix} gives {(e + fix) // g} a rank")
    return None
