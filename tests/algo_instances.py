"""Tiny instances with exact demands for the algorithm tests.

Every node is a linear-attention layer with fixed weight bytes and one byte of state per request;
at concurrency 0 a node's demand is exactly its weight, and with no hidden size there are no
activation buffers, so a device's capacity is exactly its memory.
"""

from __future__ import annotations

from itertools import combinations

from placer.problem.instance import make_instance
from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload


def chain_model(weights, *, kv=None, name="chain"):
    """Explicit model: node i weighs weights[i] bytes; kv[i] > 0 makes it dense attention with that
    many KV bytes per token."""
    layers = []
    for i, w in enumerate(weights):
        k = kv[i] if kv else 0
        if k:
            layers.append({"kind": "attention", "weight_bytes": int(w), "kv_bytes_per_token": int(k)})
        else:
            layers.append({"kind": "linear_attention", "weight_bytes": int(w), "state_bytes_per_request": 1})
    return model_from_dict({"name": name, "layers": layers})


def fleet(capacity, *, racks=1, per_rack=None, topology="full", intra=2, inter=3, unavailable=(),
          extra_links=(), groups=None):
    """One device type of ``capacity`` bytes in ``racks`` racks of ``per_rack`` (or typed ``groups``:
    [(memory, racks, per_rack), ...])."""
    spec = {"name": "t", "fleet": {"intra_rack_latency_us": intra, "inter_rack_latency_us": inter,
                                   "inter_rack_topology": topology, "unavailable": list(unavailable),
                                   "extra_links": [dict(a=a, b=b, latency_us=lat)
                                                   for a, b, lat in extra_links]}}
    if groups:
        spec["device_types"] = {f"t{k}": {"memory": int(m)} for k, (m, _, _) in enumerate(groups)}
        spec["fleet"]["groups"] = [{"device": f"t{k}", "racks": r, "per_rack": p}
                                   for k, (_, r, p) in enumerate(groups)]
    else:
        spec["device"] = {"memory": int(capacity)}
        spec["fleet"].update(racks=racks, per_rack=per_rack or 1)
    return fleet_from_dict(spec)


def instance(weights, capacity=None, *, mode="contiguous", concurrency=0, context=1, kv=None, pins=(),
             fleet_spec=None, **fleet_kw):
    """An instance of :func:`chain_model` on :func:`fleet` (default: one device per node, one rack)."""
    model = chain_model(weights, kv=kv)
    fl = fleet_spec if fleet_spec is not None else fleet(capacity, **({"per_rack": len(weights)} | fleet_kw))
    wl = Workload(concurrency=concurrency, context_tokens=context)
    return make_instance(model, fl, wl, mode=mode, pins=pins)


def brute_min_stages(weights, capacity) -> int | None:
    """Fewest contiguous stages (each sum <= capacity) over every set of cuts."""
    n = len(weights)
    best = None
    for k in range(n):
        for cuts in combinations(range(1, n), k):
            bounds = [0, *cuts, n]
            if all(sum(weights[a:b]) <= capacity for a, b in zip(bounds, bounds[1:])):
                best = k + 1
                return best
    return best


def brute_min_bottleneck(weights, capacity, stages) -> int:
    """Smallest largest-stage sum over every partition into exactly ``stages`` stages that fit."""
    n = len(weights)
    best = None
    for cuts in combinations(range(1, n), stages - 1):
        bounds = [0, *cuts, n]
        sums = [sum(weights[a:b]) for a, b in zip(bounds, bounds[1:])]
        if max(sums) <= capacity and (best is None or max(sums) < best):
            best = max(sums)
    return best


def brute_bin_packing(sizes, capacity) -> int:
    """Fewest bins of ``capacity`` holding ``sizes`` (exhaustive; a handful of items)."""
    n = len(sizes)
    best = n

    def go(i, loads):
        nonlocal best
        if len(loads) >= best:
            return
        if i == n:
            best = len(loads)
            return
        for k in range(len(loads)):
            if loads[k] + sizes[i] <= capacity:
                loads[k] += sizes[i]
                go(i + 1, loads)
                loads[k] -= sizes[i]
        loads.append(sizes[i])
        go(i + 1, loads)
        loads.pop()

    go(0, [])
    return best
