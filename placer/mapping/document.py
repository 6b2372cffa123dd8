"""Build the stage-mapping document from a placement.

A mapping records what was placed (model and hardware by name, source and content hash, the
workload, the mode and granularity), where (stages in pipeline order with their exact byte
breakdown and the concurrency each holds, the route of every node) and how well (devices, hops,
hop latency, concurrency ceiling, lower bound, status and proof). The format is described in
``docs/mapping-format.md``; :func:`placer.mapping.schema.mapping_schema` is its JSON Schema.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from placer.mapping.schema import SCHEMA_VERSION
from placer.specs.catalog import hardware_dir, models_dir
from placer.specs.errors import InfeasiblePlacement
from placer.specs.experts import redundant_experts
from placer.specs.fleet import DEFAULT_POWER_BOUNDARY, Fleet
from placer.specs.model import DRAFT_EMBEDDING, LayerGraph

__all__ = ["build_mapping", "expert_groups_of", "load_options_of"]


# ----------------------------------------------------------------------------- building
def _finite(x):
    """``x`` as a JSON-safe number: ``None`` for None, inf and nan."""
    if x is None:
        return None
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _spec_ref(source: str, folder: Path) -> str:
    """The catalog name when ``source`` is a file of the catalog ``folder``, else ``source`` itself."""
    if not source:
        return source
    p = Path(source)
    try:
        if p.suffix in (".yaml", ".yml") and p.resolve().parent == folder.resolve():
            return p.stem
    except OSError:
        pass
    return source


def _power_doc(fleet: Fleet) -> dict:
    """The power boundary the fleet counts at, when it is not the default (system): recorded so a
    simulation of the mapping counts power where the plan did."""
    if fleet.power_boundary == DEFAULT_POWER_BOUNDARY:
        return {}
    return {"power_boundary": fleet.power_boundary, **({"pue": fleet.pue} if fleet.pue is not None else {})}


def _racks(fleet: Fleet) -> int:
    return len({d.rack for d in fleet.devices})


def expert_groups_of(model: LayerGraph) -> int | None:
    """Expert groups per MoE layer in a ``block``-refined graph (None when it has none)."""
    groups = Counter(x.parent for x in model.layers if x.part and x.part.startswith("experts "))
    return max(groups.values()) if groups else None


def build_mapping(instance, result) -> dict:
    """The stage-mapping document of ``result`` (a placement of ``instance``), in the format of ``docs/mapping-format.md``.

    Stages are the used devices in order of first visit (pipeline order for contiguous and split
    placements); each names its group when ``tp`` > 1 (the ``tp`` devices of one node that run it,
    the first being the stage's ``device``, and the expert-parallel degree ``ep``: ``tp`` when
    experts are spread whole, else 1; without a
    group the stage runs on its ``device`` alone) and states the exact bytes
    of each rank under the instance's workload: weights, KV reserve (concurrency x KV bytes per
    request), recurrent state (concurrency x state bytes per request), activation buffers, the
    runtime reserve and what is left free. ``max_concurrency`` is the largest number of live
    requests the stage holds (``null``: unbounded, the stage keeps no per-request memory; ``-1``:
    its weights alone overflow). Under attention data parallelism (``parallel.attention_dp``) each
    rank serves ``ceil(c / tp)`` of the ``c`` live requests: a stage's bytes are its heaviest
    rank's at that count, its ``max_concurrency`` the group's (``tp`` times a rank's), and the
    workload is the user's. Raises :class:`InfeasiblePlacement` when ``result`` has no placement.
    """
    from placer.problem.placement import levels_doc  # not at import: the validator reads mappings without it

    if result.assignment is None:
        raise InfeasiblePlacement(result.message or f"no placement to write (status {result.status})",
                                  max_concurrency=result.max_concurrency)
    assignment = tuple(int(a) for a in result.assignment)
    if len(assignment) != instance.n_nodes:
        raise ValueError(f"assignment has {len(assignment)} entries for {instance.n_nodes} nodes")
    model, base, fleet = instance.model, instance.base_model or instance.model, instance.fleet
    devices = instance.devices
    order: list[int] = []
    held: dict[int, list[int]] = {}
    for i, d in enumerate(assignment):
        if d not in held:
            held[d] = []
            order.append(d)
        held[d].append(i)
    stages = [_stage_doc(instance, k, order, held[d]) for k, d in enumerate(order)]

    # Counted from the assignment when the method left a figure out.
    hops, lat = instance.hops(assignment)
    # the groups' collectives, when the method costed them (placer.problem.reductions.tensor_parallel.per_device records them)
    intra = result.stats.get("group_latency_us") if result.stats else None
    lat += intra or 0.0
    finite = [s["max_concurrency"] for s in stages if s["max_concurrency"] is not None]
    ceiling = result.concurrency_ceiling if result.concurrency_ceiling is not None else (
        min(finite) if finite else None)

    def pick(value, fallback):
        return fallback if value is None else value

    model_doc = dict(name=base.name, sha256=base.sha256, source=_spec_ref(base.source, models_dir()),
                     granularity=model.granularity)
    groups = expert_groups_of(model)
    if groups is not None:
        model_doc["expert_groups"] = groups
    model_doc.update(load_options_of(base))
    if any(x.name == DRAFT_EMBEDDING for x in base.layers):
        model_doc["draft_embedding"] = True
    doc = {
        "schema_version": SCHEMA_VERSION,
        "model": model_doc,
        "hardware": dict(name=fleet.name, sha256=fleet.sha256, source=_spec_ref(fleet.source, hardware_dir()),
                         racks=_racks(instance.layout.base_fleet if instance.layout is not None
                                      and instance.layout.base_fleet is not None else fleet),
                         **_power_doc(fleet)),
        "workload": instance.served_workload.to_dict(),
        "mode": instance.mode,
        "parallel": _parallel_doc(instance),
        "stages": stages,
        "route": [devices[d].id for d in assignment],
        "summary": dict(
            devices_used=sum(len(instance.members(d)) for d in order),   # every device of every group
            hops=pick(result.hops, hops),
            hop_latency_us=_finite(pick(result.hop_latency_us, lat)),
            **({"group_latency_us": _finite(intra)} if intra is not None else {}),
            concurrency_ceiling=ceiling,
            lower_bound_devices=result.lower_bound_devices,
            method=result.method,
            status=str(result.status),
            proven_optimal=bool(result.proven_optimal),
            objective=_finite(result.objective),
            bound=_finite(result.bound),
            gap=_finite(result.gap),
            solve_seconds=_finite(float(result.seconds)) or 0.0,
            levels=levels_doc(result)),
    }
    return _with_optional_sections(doc, instance, model)


def _stage_doc(instance, k: int, order: list[int], nodes: list[int]) -> dict:
    """Stage ``k`` (device ``order[k]``, holding ``nodes``) as the document states it."""
    d, dev, c = order[k], instance.devices[order[k]], instance.workload.concurrency
    weights = sum(instance.weight_bytes[i] for i in nodes)
    kv = c * sum(instance.kv_request_bytes[i] for i in nodes)
    state = c * sum(instance.state_request_bytes[i] for i in nodes)
    act, reserve = instance.activation_buffer_bytes, instance.reserve_bytes[d]
    nxt = instance.hop_us(d, order[k + 1]) if k + 1 < len(order) else None
    stage = dict(index=k, device=dev.id, rack=dev.rack, layers=[instance.model.layers[i].name for i in nodes])
    if instance.tp > 1 or instance.ep:
        # a group of one (the stage's device alone) is left implicit; per-stage plans give
        # every stage its own degree (the size of its group)
        members = instance.members(d)
        stage["group"] = dict(devices=list(members), tp=len(members), ep=len(members) if instance.ep else 1)
        base = instance.layout.base_fleet if instance.layout is not None else None
        racks = list(dict.fromkeys(base.by_id[m].rack for m in members)) if base is not None else []
        if len(racks) > 1:
            stage["group"]["racks"] = racks     # a wide expert-parallel group spans nodes (reductions.wide_ep)
    stage.update(
        bytes=dict(weights=weights, kv_reserve=kv, state=state, activations=act, reserve=reserve,
                   free=dev.memory_bytes - weights - kv - state - act - reserve),
        max_concurrency=instance.group_requests(instance.max_concurrency(nodes, d)),
        next_hop_latency_us=_finite(nxt))
    return stage


def _with_optional_sections(doc: dict, instance, model) -> dict:
    """``doc`` with the sections only some plans have: speculation, a prefix cache, requirements, pins."""
    speculation = getattr(instance, "speculation", None)
    if speculation is not None:
        doc["speculative"] = speculation.to_dict()
    if instance.cached_prompt_tokens:
        doc["prefix_cache"] = {"cached_prompt_tokens": int(instance.cached_prompt_tokens)}
    traffic = getattr(instance, "traffic", None)
    if traffic is not None:
        doc["traffic"] = traffic.record() if hasattr(traffic, "record") else dict(traffic)
    if instance.require:
        doc["require"] = list(instance.require)
    if instance.pins:
        doc["pins"] = [dict(layers=[model.layers[i].name for i in p.nodes], device=p.device)
                       for p in instance.pins]
    return doc


def load_options_of(model: LayerGraph) -> dict:
    """The mapping's record of how ``model`` was loaded from its spec: ``dropped`` (the spec's nodes
    left out, ``vision_tower`` under ``--text-only``) and ``mtp`` (its multi-token-prediction layers
    added); empty when the spec was loaded as it is. :func:`placer.mapping.io.specs_from_mapping`
    reads it back."""
    doc: dict = {}
    if model.dropped:
        doc["dropped"] = list(model.dropped)
    if model.mtp_included:
        doc["mtp"] = True
    return doc


def _parallel_doc(instance) -> dict:
    lay = instance.layout
    doc = dict(tp=instance.tp, ep=instance.tp if instance.ep else 1,
               reserve=None if lay is None or lay.reserve is None else lay.reserve.to_dict())
    if lay is not None and lay.per_stage:
        doc["per_stage"] = True      # tp and ep are the largest stage's; each stage's group has its own
    if instance.attention_dp:
        doc["attention_dp"] = True   # each group's ranks split its requests (placer.problem.reductions.attention_dp)
    copies = redundant_experts(instance.base_model or instance.model)
    if copies:
        doc["redundant_experts"] = copies   # extra expert copies per MoE layer (placer.specs.experts)
    return doc


