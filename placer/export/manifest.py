"""The runtime manifest placer's own pipeline executor reads (``placer export --format json``).

Every node of the (possibly refined) layer graph in pipeline order with its kind, mixer, FFN and
the stage and device that hold it; the graph's edges; every stage with its device, nodes and
exact bytes; the workload. Unlike the runtime partitions it expresses every mode, free and
split included: a token follows ``nodes`` in order and crosses to another device wherever the
``stage`` changes.
"""

from __future__ import annotations

from placer.export.stages import Export, ExportOptions
from placer.mapping import compact_json
from placer.mapping.view import MappingView
from placer.specs.model import LayerGraph

__all__ = ["MANIFEST_VERSION", "build_manifest", "export_manifest"]

MANIFEST_VERSION = 1


def build_manifest(view: MappingView, graph: LayerGraph) -> dict:
    """The manifest of ``view`` (a validated mapping of ``graph`` at the mapping's granularity); its
    model, hardware and workload sections are the mapping's, republished as they are."""
    stage_of = {name: st.index for st in view.stages for name in st.layers}
    device_of = {st.index: st.device for st in view.stages}
    nodes = []
    for x in graph.layers:
        k = stage_of[x.name]
        nodes.append(dict(name=x.name, kind=x.kind, index=x.index, mixer=x.mixer, ffn=x.ffn, part=x.part,
                          parent=x.parent, stage=k, device=device_of[k]))
    by_name = {x.name: x for x in graph.layers}
    stages = []
    for st in view.stages:
        kinds: dict[str, int] = {}
        for name in st.layers:
            kind = by_name[name].kind
            kinds[kind] = kinds.get(kind, 0) + 1
        stages.append(dict(index=st.index, device=st.device, rack=st.rack, nodes=list(st.layers),
                           kinds=kinds, bytes=st.bytes.to_dict(), max_concurrency=st.max_concurrency,
                           next_hop_latency_us=st.next_hop_latency_us))
    return {
        "manifest_version": MANIFEST_VERSION,
        "model": dict(view.section("model"), num_hidden_layers=graph.num_hidden_layers,
                      hidden_size=graph.hidden_size, num_nodes=len(graph.layers)),
        "hardware": view.section("hardware"),
        "workload": view.section("workload"),
        "mode": view.mode,
        "concurrency_ceiling": view.summary.concurrency_ceiling,
        "nodes": nodes,
        "edges": [list(e) for e in graph.edges],
        "stages": stages,
    }


def export_manifest(view: MappingView, graph: LayerGraph, source: str = "<mapping>",
                    options: ExportOptions = ExportOptions()) -> Export:
    return Export(text=compact_json(build_manifest(view, graph)))
