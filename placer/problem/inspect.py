"""Per-layer memory report and the per-device view of the published packing arithmetic."""

from __future__ import annotations

from placer.problem import memory
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["inspect_model"]


def inspect_model(model: LayerGraph, wl: Workload, fleet: Fleet | None = None) -> dict:
    """The ``placer inspect --json`` document (field names fixed by the design doc)."""
    rows = []
    for x in model.layers:
        rows.append(dict(
            index=x.index, name=x.name, kind=x.kind, mixer=x.mixer, ffn=x.ffn, params=x.params,
            params_mixer=x.params_mixer, params_ffn=x.params_ffn, params_other=x.params_other,
            weight_bytes=memory.weight_bytes(x, wl), kv_bytes_per_token=memory.kv_bytes_per_token(x, wl),
            kv_bytes_per_request=memory.kv_bytes_per_request(x, wl),
            state_bytes_per_request=memory.state_bytes_per_request(x, wl),
            activation_bytes_per_token=memory.activation_bytes_per_token(x, wl),
            weight_groups=_groups(x, wl)))
    totals = dict(
        layers=len(rows), params=sum(r["params"] for r in rows),
        weight_bytes=sum(r["weight_bytes"] for r in rows),
        kv_bytes_per_token=sum(r["kv_bytes_per_token"] for r in rows),
        kv_bytes_per_request=sum(r["kv_bytes_per_request"] for r in rows),
        state_bytes_per_request=sum(r["state_bytes_per_request"] for r in rows),
        by_kind=model.count_by_kind())
    doc = dict(model=model.name, workload=wl.to_dict(), layers=rows, totals=totals,
               precision=_precision(rows), notes=list(model.notes))
    if model.published_total_params:
        doc["published_total_params"] = model.published_total_params
    if fleet is not None:
        doc["device"] = _device_view(model, wl, fleet)
    return doc


def _groups(layer, wl: Workload) -> list[dict]:
    """The layer's tensor groups at the precision they are counted in: as stored, or --weight-bits."""
    if layer.weight_groups and wl.weights_as_stored:
        return [dict(role=g.role, format=g.format, precision=g.label, params=g.params, bytes=g.bytes)
                for g in layer.weight_groups]
    if layer.weight_bytes_fixed is not None:
        return [dict(role="all", format="fixed", precision="fixed bytes", params=layer.params,
                     bytes=layer.weight_bytes_fixed)]
    return [dict(role="all", format=f"{wl.weight_bits}-bit", precision=f"{wl.weight_bits}-bit (workload)",
                 params=layer.params, bytes=memory.weight_bytes(layer, wl))]


def _precision(rows: list[dict]) -> list[dict]:
    """Parameters and bytes per (tensor role, precision) over the whole model."""
    acc: dict[tuple[str, str], dict] = {}
    for r in rows:
        for g in r["weight_groups"]:
            e = acc.setdefault((g["role"], g["precision"]), dict(role=g["role"], precision=g["precision"],
                                                                 params=0, bytes=0))
            e["params"] += g["params"]
            e["bytes"] += g["bytes"]
    return list(acc.values())


def _device_view(model: LayerGraph, wl: Workload, fleet: Fleet) -> dict:
    """The published rule on the fleet's largest device: dense layers alone, the rest packed."""
    dev = max(fleet.available, key=lambda d: d.memory_bytes)
    mem = dev.memory_bytes
    per_kind: dict[str, int] = {}
    weight_per_kind: dict[str, int] = {}
    for x in model.layers:
        w = memory.weight_bytes(x, wl)
        weight_per_kind[x.kind] = max(weight_per_kind.get(x.kind, 0), w)
    for kind in weight_per_kind:
        # layers of this kind that fit together with the reserve the workload's concurrency needs
        worst = max((x for x in model.layers if x.kind == kind),
                    key=lambda x: memory.layer_demand_bytes(x, wl))
        need = memory.layer_demand_bytes(worst, wl)
        per_kind[kind] = mem // need if need else 0
    dense = [x for x in model.layers if x.has_kv]
    view = dict(name=dev.type.name, device_id=dev.id, memory_bytes=mem, weight_bytes_per_layer=weight_per_kind,
                layers_per_device=per_kind, kv_reserve_bytes=None, kv_bytes_per_request_per_layer=None,
                concurrency_ceiling=None, context_tokens=wl.context_tokens)
    if dense:
        # ties (gpt-oss: sliding and full layers weigh the same) go to the layer whose KV per
        # request is largest, the one that caps concurrency
        heaviest = max(dense, key=lambda x: (memory.weight_bytes(x, wl), memory.kv_bytes_per_request(x, wl)))
        reserve = mem - memory.weight_bytes(heaviest, wl)
        per_req = memory.kv_bytes_per_request(heaviest, wl)
        view.update(kv_reserve_bytes=reserve, kv_bytes_per_request_per_layer=per_req,
                    concurrency_ceiling=(reserve // per_req) if reserve >= 0 and per_req else None)
    return view
