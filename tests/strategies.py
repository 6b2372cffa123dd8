"""Hypothesis strategies for random small placement problems, shared by the property tests.

Models: explicit-form specs of 2-12 attention / linear-attention layers (weights 0.5-9 GB, KV
1-4,000 B per token, state 1-8 MB per request, activations 0, 1,024 or 8,192 elements per token).
Fleets: 1-3 racks of 1-4 devices, one device type or two (a second group of racks), full, ring or
line inter-rack topology. Workloads: 1k-32k tokens of context, 0-40 live requests.
"""

from __future__ import annotations

from hypothesis import strategies as st

from placer.specs.fleet import fleet_from_dict
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

__all__ = ["layers", "models", "fleets", "workloads"]

GB = 10**9


@st.composite
def layers(draw, min_size=2, max_size=12):
    out = []
    n = draw(st.integers(min_size, max_size))
    for _ in range(n):
        kind = draw(st.sampled_from(["attention", "linear_attention"]))
        entry = {"kind": kind, "weight_bytes": draw(st.integers(1, 18)) * GB // 2,
                 "activation_elements_per_token": draw(st.sampled_from([0, 1024, 8192]))}
        if kind == "attention":
            entry["kv_bytes_per_token"] = draw(st.integers(1, 4000))
        else:
            entry["state_bytes_per_request"] = draw(st.integers(1, 8)) * 10**6
        out.append(entry)
    return out


@st.composite
def models(draw, **kw):
    return model_from_dict({"name": "random", "layers": draw(layers(**kw))})


@st.composite
def fleets(draw, two_types=True, topologies=("full", "ring", "line")):
    mem_a = draw(st.sampled_from([10, 12, 16]))
    topology = draw(st.sampled_from(topologies))
    racks = draw(st.integers(1, 3))
    per_rack = draw(st.integers(1, 4))
    if two_types and racks > 1 and draw(st.booleans()):
        mem_b = draw(st.sampled_from([x for x in (8, 20, 24) if x != mem_a]))
        split = draw(st.integers(1, racks - 1))
        per_b = draw(st.integers(1, 4))
        spec = {"name": "random-hw",
                "device_types": {"a": {"memory": f"{mem_a} GB"}, "b": {"memory": f"{mem_b} GB"}},
                "fleet": {"groups": [{"device": "a", "racks": split, "per_rack": per_rack},
                                     {"device": "b", "racks": racks - split, "per_rack": per_b}],
                          "inter_rack_topology": topology, "intra_rack_latency_us": 2,
                          "inter_rack_latency_us": draw(st.sampled_from([3, 5]))}}
    else:
        spec = {"name": "random-hw", "device": {"memory": f"{mem_a} GB"},
                "fleet": {"racks": racks, "per_rack": per_rack, "inter_rack_topology": topology,
                          "intra_rack_latency_us": 2, "inter_rack_latency_us": draw(st.sampled_from([3, 5]))}}
    return fleet_from_dict(spec)


workloads = st.builds(Workload, context_tokens=st.sampled_from([1024, 4096, 32768]),
                      concurrency=st.integers(0, 40))
