"""Rebuild a hand-edited stage mapping: every derived field recomputed from its stages.

A mapping's ``stages`` (each a device and the nodes it holds) say where everything is; ``route``,
the per-stage ``bytes``, ``rack``, ``max_concurrency``, ``next_hop_latency_us``, the stage order and
the ``summary`` follow from them. :func:`rebuild_mapping` reads only what matters (model, hardware,
workload, mode, and each stage's ``device`` and ``layers``), rebuilds the rest with the same code
``placer solve`` writes mappings with, and leaves checking to :func:`placer.mapping.validate.validate_mapping`,
which then reports only the real violations (capacity, links, contiguity, ...).

When the stages no longer match the placement a method produced, the method's claims (status,
proof, objective, bound, lower bound) are dropped: the summary says ``method: edited``,
``status: heuristic``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from placer.mapping import build_mapping, instance_from_mapping
from placer.mapping.violations import Violation
from placer.problem.placement import Status, evaluate
from placer.specs.errors import InvalidSpec
from placer.specs.spec_io import parse_json, read_text

__all__ = ["Rebuilt", "rebuild_mapping", "read_stages"]

# the summary fields that are a method's claims about its placement, not facts about the stages
CLAIMS = ("method", "status", "proven_optimal", "objective", "bound", "gap", "solve_seconds",
          "lower_bound_devices", "levels")


@dataclass(frozen=True)
class Rebuilt:
    """``mapping``: the rebuilt document (None when the stages cannot be read as a placement);
    ``problems``: why not (unknown nodes or devices, nodes on no stage or on two, a device used by
    two stages; a stage left empty is dropped, not a problem); ``placement_changed``: the stages differ from the placement the route recorded, so
    the method's claims were dropped."""

    mapping: dict | None
    problems: tuple[Violation, ...]
    placement_changed: bool


def read_stages(path: str | os.PathLike) -> dict:
    """The JSON document in ``path`` with what a rebuild needs: ``model`` (name), ``hardware``
    (name), ``workload``, ``mode`` and ``stages`` with a ``device`` and ``layers`` each; anything else
    may be missing or stale. Raises :class:`InvalidSpec` naming the file and the field otherwise."""
    text = read_text(path)
    src = str(path)
    doc = parse_json(text, src)
    if not isinstance(doc, dict):
        raise InvalidSpec(src, None, "expected a JSON object at the top level")
    for key in ("model", "hardware"):
        if not isinstance(doc.get(key), dict) or not isinstance(doc[key].get("name"), str):
            raise InvalidSpec(src, f"/{key}/name", "required: the name of the spec the mapping is for")
    if not isinstance(doc.get("workload"), dict):
        raise InvalidSpec(src, "/workload", "required: the workload the mapping holds")
    if not isinstance(doc.get("mode"), str):
        raise InvalidSpec(src, "/mode", "required: contiguous, free or split")
    stages = doc.get("stages")
    if not isinstance(stages, list) or not stages:
        raise InvalidSpec(src, "/stages", "required: a non-empty list of stages")
    for k, st in enumerate(stages):
        if not isinstance(st, dict) or not isinstance(st.get("device"), str):
            raise InvalidSpec(src, f"/stages/{k}/device", "required: a device id")
        if not isinstance(st.get("layers"), list) or not all(isinstance(x, str) for x in st["layers"]):
            raise InvalidSpec(src, f"/stages/{k}/layers", "required: a list of node names")
    return doc


def _assignment(doc: dict, inst) -> tuple[tuple[int, ...] | None, list[Violation]]:
    """Device index per node from the stages, or the problems that make that impossible."""
    problems: list[Violation] = []
    node_of = {x.name: i for i, x in enumerate(inst.nodes)}
    device_of = {d.id: j for j, d in enumerate(inst.devices)}
    fleet_ids = {d.id for d in inst.fleet.devices}
    # a stage emptied by moving its nodes away is simply dropped
    uses = Counter(st["device"] for st in doc["stages"] if st["layers"])
    for dev, count in uses.items():
        if count > 1:
            problems.append(Violation("device_reused", f"device {dev} is used by {count} stages: merge them "
                                                       f"into one stage or move one to another device"))
    assignment: dict[int, list[int]] = {}
    for k, st in enumerate(doc["stages"]):
        dev = st["device"]
        if dev not in device_of:
            kind = "unavailable_device" if dev in fleet_ids else "unknown_device"
            problems.append(Violation(kind, f"stage {k}: device {dev!r} is not an available device of "
                                            f"{inst.fleet.name}"))
        for name in st["layers"]:
            i = node_of.get(name)
            if i is None:
                problems.append(Violation("unknown_layer", f"stage {k} ({dev}): {name!r} is not a node of "
                                                           f"{inst.model.name} at granularity {inst.model.granularity}"))
            elif dev in device_of:
                assignment.setdefault(i, []).append(device_of[dev])
    for i, x in enumerate(inst.nodes):
        held = assignment.get(i, [])
        if not held and not any(v.kind in ("unknown_device", "unavailable_device") for v in problems):
            problems.append(Violation("layer_missing", f"{x.name} is on no stage"))
        elif len(held) > 1:
            problems.append(Violation("layer_duplicated", f"{x.name} is on {len(held)} stages"))
    if problems:
        return None, problems
    return tuple(assignment[i][0] for i in range(inst.n_nodes)), []


def rebuild_mapping(doc: dict, *, model=None, hardware=None) -> Rebuilt:
    """``doc`` (see :func:`read_stages`) with every derived field recomputed from its stages.

    ``model`` / ``hardware`` override the specs the mapping names. The method's claims are kept
    only when nothing was edited (the route records the stages' placement and every stage figure
    is what the rebuild computes), and dropped otherwise."""
    _, _, _, inst = instance_from_mapping(doc, model=model, hardware=hardware)
    assignment, problems = _assignment(doc, inst)
    if assignment is None:
        return Rebuilt(None, tuple(problems), True)
    device_of = {d.id: j for j, d in enumerate(inst.devices)}
    route = doc.get("route")
    recorded = tuple(device_of.get(r, -1) for r in route) if isinstance(route, list) and \
        all(isinstance(r, str) for r in route) else None
    old = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
    result = evaluate(inst, assignment, method="edited", status=Status.HEURISTIC)
    rebuilt = build_mapping(inst, result)
    if isinstance(doc.get("serving"), dict):
        rebuilt["serving"] = doc["serving"]      # how the plan is served (a speed floor's replicas): not derived
    if isinstance(doc.get("prefix_cache"), dict):
        rebuilt["prefix_cache"] = doc["prefix_cache"]
    # the claims hold only for the placement and figures they were made for: any edit drops them
    changed = recorded != assignment or doc["stages"] != rebuilt["stages"]
    if not changed and old:
        # the same placement: the method's claims about it still hold
        rebuilt["summary"].update({k: old[k] for k in CLAIMS if k in old})
        if "levels" not in old:
            # written before mappings stated levels: the device count, against the recorded bound
            from placer.problem.placement import levels_doc
            lb = old.get("lower_bound_devices")
            rebuilt["summary"]["levels"] = levels_doc(result.replace(devices_used=rebuilt["summary"]["devices_used"],
                                                                     lower_bound_devices=lb))
    return Rebuilt(rebuilt, (), changed)
