"""``torch.distributed.pipelining`` split points: one ``SplitPoint.BEGINNING`` per stage boundary.

``pipeline(module, mb_args, split_spec={"model.layers.23": SplitPoint.BEGINNING, ...})`` cuts the
module before each named submodule. Module names follow the Hugging Face layout
(``model.embed_tokens``, ``model.layers.N``, ``model.norm``, ``lm_head``); the embedding rides on
the first stage and the norm and head on the last. A stage holding only the head begins at ``lm_head``.
"""

from __future__ import annotations

from ..mapping import compact_json
from ..model import LayerGraph
from .stages import Export, ExportRefused, runtime_stages

__all__ = ["module_order", "split_points", "parse_split_spec", "export_torch"]


def module_order(num_hidden_layers: int) -> list[str]:
    """Top-level pipeline modules in execution order."""
    return ["model.embed_tokens", *(f"model.layers.{i}" for i in range(num_hidden_layers)), "model.norm", "lm_head"]


def split_points(ranks) -> dict[str, str]:
    spec = {}
    for r in ranks[1:]:
        if r.count:
            spec[f"model.layers.{r.decoder[0]}"] = "BEGINNING"
        elif r.head:
            spec["lm_head"] = "BEGINNING"
        else:
            raise ValueError(f"stage {r.index} holds neither a decoder layer nor the head")
    return spec


def parse_split_spec(spec: dict[str, str], num_hidden_layers: int) -> list[int]:
    """Decoder layers per stage that ``pipeline(split_spec=spec)`` builds; ``ValueError`` on a bad spec."""
    order = module_order(num_hidden_layers)
    position = {name: i for i, name in enumerate(order)}
    cuts = []
    for name, point in spec.items():
        if name not in position:
            raise ValueError(f"no submodule {name!r}")
        if point != "BEGINNING":
            raise ValueError(f"{name}: expected SplitPoint.BEGINNING, got {point!r}")
        if position[name] == 0:
            raise ValueError(f"a split at the beginning of {name} leaves the first stage empty")
        cuts.append(position[name])
    if cuts != sorted(set(cuts)):
        raise ValueError("split points must be distinct and in module order")
    bounds = [0, *cuts, len(order)]
    return [sum(1 for m in order[a:b] if m.startswith("model.layers.")) for a, b in zip(bounds, bounds[1:])]


def export_torch(doc: dict, graph: LayerGraph, source: str = "<mapping>") -> Export:
    """JSON: ``split_spec`` (module FQN -> ``"BEGINNING"``), the stage count, each stage's decoder range.

    ``layer_range`` is ``[start, end)`` over decoder indices (``null`` for a stage of only the head).
    """
    ranks = runtime_stages(doc, graph, "torch.distributed.pipelining", source)
    try:
        spec = split_points(ranks)
        counts = parse_split_spec(spec, graph.num_hidden_layers)
    except ValueError as exc:
        raise ExportRefused(source, "/stages", f"torch.distributed.pipelining cannot express this mapping: {exc}") \
            from None
    want = [r.count for r in ranks]
    if counts != want or len(counts) != len(ranks):
        raise ExportRefused(source, "/stages", f"split points read back as {counts}, expected {want}")
    out = {
        "num_stages": len(ranks),
        "split_spec": spec,
        "stages": [{"index": r.index, "device": r.device,
                    "layer_range": [r.decoder[0], r.decoder[-1] + 1] if r.count else None,
                    "embedding": r.index == 0, "head": r.index == len(ranks) - 1} for r in ranks],
        "usage": "pipeline(model, mb_args, split_spec={k: SplitPoint.BEGINNING for k in split_spec})",
    }
    return Export(text=compact_json(out))
