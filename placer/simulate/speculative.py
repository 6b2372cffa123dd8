"""Speculative decoding with a placement's multi-token-prediction (MTP) layers: the segments the
target's verify pass runs (the MTP nodes left out: they run only when drafting) and those the
draft passes run (the MTP nodes alone, on their devices, no hop after them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from placer.problem.instance import Instance
from placer.simulate.cost import Segment, group_collectives
from placer.specs.model import is_draft_node

__all__ = ["target_and_draft"]


def target_and_draft(instance: Instance, segs: Sequence[Segment]) -> tuple[list[Segment], list[Segment]]:
    """(target segments, draft segments) of the route ``segs``; no draft segment when the placement
    has no MTP nodes."""
    nodes = instance.nodes
    # MTP layers, a draft model's nodes and the drafter's embedding copy (placer.specs.model.is_draft_node)
    mtp = {i for i, x in enumerate(nodes) if is_draft_node(x)}
    if not mtp:
        return list(segs), []
    target = [_part(instance, s, [i for i in s.nodes if i not in mtp]) for s in segs]
    draft = [replace(_part(instance, s, ids), hop_us=0.0, out_activation_bytes=0)
             for s in segs if (ids := [i for i in s.nodes if i in mtp])]
    return target, draft


def _part(instance: Instance, seg: Segment, ids: Sequence[int]) -> Segment:
    """``seg`` restricted to the nodes ``ids``: their costs, the model layers they belong to
    (counted once), the routed-expert layers among them (each paying the per-MoE-layer cost) and
    the collectives they run in the device group."""
    if len(ids) == len(seg.nodes):
        return seg
    nodes, keep = instance.nodes, set(ids)
    kept = [(i, c) for i, c in zip(seg.nodes, seg.costs) if i in keep]
    costs = tuple(c for _i, c in kept)
    return replace(seg, nodes=tuple(ids), costs=costs, layers=len({nodes[i].parent or nodes[i].name for i in ids}),
                   moe_layers=len({nodes[i].parent or nodes[i].name for i, c in kept if c.num_experts}),
                   collectives=group_collectives(instance, seg.device, ids))
