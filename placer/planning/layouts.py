"""The device layouts a plan may use: tensor-parallel degrees and expert parallelism, each allowed
or refused with its reason. Every planner enumerates layouts here and nowhere else.

A layout ``(tp, ep)`` makes every stage a group of ``tp`` devices of one node, experts split by
tensor (``ep`` False) or spread whole (True); with experts spread, a ``tp`` above every node's
size makes groups of whole nodes (:mod:`placer.problem.reductions.wide_ep`). Wafers, and split mode, run one device per stage.
Degrees a user does not name default to the divisors of the largest node's size (of any node's
size with per-stage degrees) that the model's dimensions (and stored formats) allow.

An attention-data-parallel layout (:mod:`placer.problem.reductions.attention_dp`) makes every stage a group of ``tp``
devices that splits its requests over its ranks, experts spread whole; :attr:`Layouts.attention_dp`
lists its degrees (above 1) apart from the ``(tp, ep)`` layouts, refusals keyed ``(tp, "dp")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placer.problem.parallel import allowed_degrees
from placer.problem.reductions.tensor_parallel import candidate_degrees, has_gpus, node_sizes
from placer.problem.reductions.wide_ep import span_refusal
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.experts import redundant_refusal
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["Layouts", "device_layouts", "attention_dp_layouts", "has_gpus", "has_experts", "has_mla_experts",
           "candidate_degrees", "layout_label"]


def has_experts(model: LayerGraph) -> bool:
    """Whether ``model`` has MoE layers with the dimensions expert parallelism spreads."""
    return any(x.ffn == "moe" and x.ffn_dims for x in model.layers)


def layout_label(tp: int, ep: bool | str, attention_dp: bool = False) -> str:
    if ep == "dp" or attention_dp:
        return f"tp {tp} attention-dp"
    return f"tp {tp}" + (" ep" if ep else "")


def has_mla_experts(model: LayerGraph) -> bool:
    """Whether ``model`` has MLA attention and MoE layers: where attention data parallelism matters
    (tensor parallelism keeps the whole latent cache on every rank)."""
    return has_experts(model) and any(x.mixer == "mla" for x in model.layers)


@dataclass(frozen=True)
class Layouts:
    """The layouts to solve, in order, and the refused ones: ``refused[(tp, ep)]`` is the reason
    (``(0, True)``: expert parallelism itself, for a model without experts)."""

    allowed: tuple[tuple[int, bool], ...]
    refused: dict[tuple[int, bool], str] = field(default_factory=dict)
    # degrees of the attention-data-parallel layouts (experts spread whole), tried as
    # Placement.attention_dp says (placer.planning.solve.search_layouts)
    attention_dp: tuple[int, ...] = ()

    @property
    def degrees(self) -> list[int]:
        return sorted({tp for tp, _ in self.allowed})

    def every(self) -> list[tuple[int, bool, bool]]:
        """Every layout to solve as ``(tp, ep, attention_dp)``: the allowed ones, then the
        attention-data-parallel degrees (experts spread whole)."""
        return [(tp, ep, False) for tp, ep in self.allowed] + [(g, True, True) for g in self.attention_dp]

    def refused_by_label(self) -> dict[str, str]:
        """``{"tp 3": why, "tp 4 ep": why, "ep": why}``."""
        return {("ep" if tp == 0 else "attention-dp" if tp == -1 else layout_label(tp, ep)): why
                for (tp, ep), why in self.refused.items()}

    def refused_degrees(self, ep: bool = False) -> dict[int, str]:
        """``{degree: why}`` of the refusals at one expert setting."""
        return {tp: why for (tp, e), why in self.refused.items() if e == ep and tp > 0}

    def require_some(self, model: LayerGraph) -> Layouts:
        """``self``, or :class:`InvalidSpec` (field ``tp``) when no layout is allowed."""
        if not self.allowed and not self.attention_dp:
            why = "; ".join(f"{k}: {v}" for k, v in self.refused_by_label().items())
            raise InvalidSpec(ARGUMENT, "tp", f"{model.name} runs at none of the degrees asked for ({why})")
        return self


def device_layouts(model: LayerGraph, fleet: Fleet, *, degrees=None, ep: bool | None = False,
                   mode: str = "contiguous", workload: Workload | None = None,
                   per_stage: bool = False, attention_dp: bool | None = False) -> Layouts:
    """The layouts a plan of ``model`` on ``fleet`` tries, and the refused ones with reasons.

    ``degrees`` (default :func:`candidate_degrees`) are checked against the model's dimensions
    and, under ``workload``, its stored formats (:func:`placer.problem.parallel.allowed_degrees`), and
    against the fleet's nodes (a degree needs a node with that many available devices). ``ep``:
    False splits experts by tensor; True spreads them whole (tp 1 stays, unsplit); None tries,
    for a model with MoE layers, both at every degree above 1. Split mode and wafer fleets run at
    tp 1 only. ``attention_dp``: True gives the attention-data-parallel layouts alone (no ``(tp,
    ep)`` layout), None adds them for models with MLA attention and MoE layers
    (:func:`has_mla_experts`), False never (:func:`attention_dp_layouts`).
    """
    if attention_dp or (attention_dp is None and has_mla_experts(model)):
        dp = attention_dp_layouts(model, fleet, degrees=degrees, mode=mode, workload=workload)
        if attention_dp:
            return dp
        rest = device_layouts(model, fleet, degrees=degrees, ep=ep, mode=mode, workload=workload,
                              per_stage=per_stage)
        return Layouts(rest.allowed, {**rest.refused, **dp.refused}, dp.attention_dp)
    refused: dict[tuple[int, bool], str] = {}
    if mode == "split" or not has_gpus(fleet):
        why = "split mode runs at tp 1" if mode == "split" else f"{fleet.name} is no GPU fleet (a stage is one device)"
        refused.update({(g, False): why for g in sorted(set(degrees or ())) if g != 1})
        copies = redundant_refusal(model, 1, False)      # redundant experts need a group to spread over
        if copies is not None:
            return Layouts((), {**refused, (1, False): copies})
        # degrees named without 1: none of them runs (the caller says so); unnamed: one device per stage
        return Layouts(((1, False),) if degrees is None or 1 in degrees else (), refused)
    experts = has_experts(model)
    sizes = node_sizes(fleet)
    largest = max(sizes.values())
    asked = candidate_degrees(fleet, per_stage=per_stage) if degrees is None else sorted(set(degrees))
    out: list[tuple[int, bool]] = []
    for spread in ((False,) if ep is False or not experts else (True,) if ep else (False, True)):
        ok, bad = allowed_degrees(model, asked, spread, workload)
        refused.update({(g, spread): why for g, why in bad.items()})
        for g in ok:
            if spread and g == 1:            # experts spread over one device: tp 1 itself
                if ep:
                    out.append((1, False))
                continue
            if g > largest:                  # a group of whole nodes, experts spread (wide expert parallelism)
                why = span_refusal(fleet, g, spread and not per_stage)
                if why is not None:
                    refused[(g, spread)] = why
                    continue
            out.append((g, spread))
    if ep and not experts:
        refused[(0, True)] = f"{model.name} has no MoE layers to spread"
    return Layouts(tuple(sorted(set(out))), refused)


def attention_dp_layouts(model: LayerGraph, fleet: Fleet, *, degrees=None, mode: str = "contiguous",
                         workload: Workload | None = None) -> Layouts:
    """The attention-data-parallel layouts (:mod:`placer.problem.reductions.attention_dp`) of ``model`` on ``fleet``:
    ``degrees`` (default the divisors of the largest node's size) above 1 that a node of the fleet
    holds and the model allows; refusals keyed ``(tp, "dp")`` (``(-1, "dp")``: the layout itself)."""
    from placer.problem.reductions.attention_dp import dp_model_refusal

    refused: dict = {}
    if mode == "split" or not has_gpus(fleet):
        why = "split mode runs at tp 1" if mode == "split" else f"{fleet.name} is no GPU fleet (a stage is one device)"
        return Layouts((), {(-1, "dp"): why})
    largest = max(node_sizes(fleet).values())
    asked = candidate_degrees(fleet) if degrees is None else sorted(set(degrees))
    out = []
    for g in asked:
        if g == 1:
            continue
        why = dp_model_refusal(model, g, workload)
        if why is None and g > largest:
            why = span_refusal(fleet, g, True)       # a group of whole nodes (wide expert parallelism)
        if why is None:
            out.append(g)
        else:
            refused[(g, "dp")] = why
    if not out and not refused:
        refused[(-1, "dp")] = "attention data parallelism needs a group of more than one device (--tp 2 or more)"
    return Layouts((), refused, tuple(out))
