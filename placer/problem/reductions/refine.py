"""Finer layer graphs for ``split`` mode.

* ``layer``: unchanged.
* ``block``: a layer whose spec knows its parts becomes a mixer node (norms, KV cache and state
  go with it) followed by its FFN; an MoE FFN becomes ``expert_groups`` parallel nodes (the first
  also holds the router and shared experts), joined again before the next layer.
* ``shards:N``: every layer's weights are cut into N consecutive shards of (almost) equal size;
  KV cache and state stay with shard 0.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from placer.specs.errors import ARGUMENT, InvalidSpec

if TYPE_CHECKING:   # annotations only: refining works on the graph's own dataclasses (no import cycle)
    from placer.specs.model import Layer, LayerGraph, WeightGroup

__all__ = ["apply", "refine", "parse_granularity"]


def apply(model: LayerGraph, mode: str, granularity: str, expert_groups: int = 8) -> LayerGraph:
    """The graph an instance of ``mode`` places: ``model`` refined to ``granularity`` in split mode
    (:func:`refine`), ``model`` itself otherwise (where a granularity other than ``layer`` is an
    :class:`InvalidSpec`). A placement of the refined graph needs no inverse: every refined node keeps
    its layer's name as its ``parent``."""
    try:
        kind, _ = parse_granularity(granularity)
    except ValueError as exc:
        raise InvalidSpec(ARGUMENT, "granularity", str(exc)) from None
    if mode == "split":
        return refine(model, granularity, expert_groups=expert_groups)
    if kind != "layer":
        raise InvalidSpec(ARGUMENT, "granularity", "granularity applies to --mode split only")
    return model


def parse_granularity(text: str) -> tuple[str, int]:
    """``"layer"`` -> ("layer", 1); ``"block"`` -> ("block", 1); ``"shards:4"`` -> ("shards", 4)."""
    text = (text or "layer").strip()
    if text in ("layer", "block"):
        return text, 1
    if text.startswith("shards:"):
        try:
            n = int(text.split(":", 1)[1])
        except ValueError:
            n = 0
        if 1 <= n <= 1024:
            return "shards", n
    raise ValueError(f"granularity must be layer, block or shards:N (1 <= N <= 1024), got {text!r}")


def _split_int(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


_MIXER_ROLES = ("mixer", "norm")


def _split_groups(groups: tuple[WeightGroup, ...], n: int) -> list[tuple[WeightGroup, ...]]:
    """Stored weight groups cut into ``n`` consecutive shards, params and bytes alike."""
    cut = [(g, _split_int(g.params, n), _split_int(g.bytes, n)) for g in groups]
    return [tuple(replace(g, params=p[s], bytes=b[s]) for g, p, b in cut) for s in range(n)]


def _expert_groups(groups: tuple[WeightGroup, ...], counts: list[int], total: int, first: bool,
                   i: int) -> tuple[WeightGroup, ...]:
    """The stored groups of expert block ``i`` holding ``counts[i]`` of ``total`` experts (the first
    block also holds the router and shared experts)."""
    out = []
    for g in groups:
        if g.role == "experts":
            # experts are equal, so their params and bytes divide exactly by the expert count
            out.append(replace(g, params=g.params // total * counts[i], bytes=g.bytes // total * counts[i]))
        elif first and g.role not in _MIXER_ROLES:
            out.append(g)
    return tuple(out)


def _shard(layer: Layer, n: int) -> list[Layer]:
    if n == 1:
        return [layer]
    out = []
    fixed = _split_int(layer.weight_bytes_fixed, n) if layer.weight_bytes_fixed is not None else None
    pm, pf, po = (_split_int(layer.params_mixer, n), _split_int(layer.params_ffn, n),
                  _split_int(layer.params_other, n))
    act = _split_int(layer.active_params, n)
    wg = _split_groups(layer.weight_groups, n)
    for s in range(n):
        first = s == 0
        out.append(replace(
            layer, name=f"{layer.name}.shard{s}", part=f"shard{s}/{n}", parent=layer.name,
            params_mixer=pm[s], params_ffn=pf[s], params_other=po[s], active_params=act[s],
            weight_bytes_fixed=None if fixed is None else fixed[s],
            kv_elements_per_token=layer.kv_elements_per_token if first else 0,
            kv_bytes_per_token_fixed=layer.kv_bytes_per_token_fixed if first else None,
            state_elements_per_request=layer.state_elements_per_request if first else 0,
            conv_state_elements_per_request=layer.conv_state_elements_per_request if first else 0,
            state_bytes_per_request_fixed=layer.state_bytes_per_request_fixed if first else None,
            num_experts=0, expert_params=0, shared_params=0, weight_groups=wg[s]))
    return out


def _blocks(layer: Layer, expert_groups: int) -> list[list[Layer]]:
    """Stages of parallel nodes: [[mixer], [ffn]] or [[mixer], [experts.0, ..., experts.G-1]]."""
    if layer.params_ffn == 0 or layer.params_mixer == 0 or layer.weight_bytes_fixed is not None:
        return [[layer]]
    mixer = replace(layer, name=f"{layer.name}.mixer", part="mixer", parent=layer.name, ffn=None,
                    params_ffn=0, active_params=layer.active_params - _active_ffn(layer),
                    num_experts=0, expert_params=0, shared_params=0,
                    weight_groups=tuple(g for g in layer.weight_groups if g.role in _MIXER_ROLES))
    ffn_groups = tuple(g for g in layer.weight_groups if g.role not in _MIXER_ROLES)
    base = dict(kind="ffn", mixer=None, params_mixer=0, params_other=0, kv_elements_per_token=0,
                kv_bytes_per_token_fixed=None, kv_window=None, state_elements_per_request=0,
                conv_state_elements_per_request=0, state_bytes_per_request_fixed=None, parent=layer.name)
    if layer.num_experts > 1 and expert_groups > 1:
        g = min(expert_groups, layer.num_experts)
        counts = _split_int(layer.num_experts, g)
        groups = []
        for i, c in enumerate(counts):
            p = c * layer.expert_params + (layer.shared_params if i == 0 else 0)
            groups.append(replace(layer, name=f"{layer.name}.experts.{i}", part=f"experts {i}/{g}",
                                  params_ffn=p, active_params=p if i == 0 else 0,
                                  num_experts=c, expert_params=layer.expert_params,
                                  shared_params=layer.shared_params if i == 0 else 0,
                                  weight_groups=_expert_groups(layer.weight_groups, counts, layer.num_experts,
                                                               i == 0, i), **base))
        # MoE active parameters are spread: the router picks top-k experts over all groups.
        total_active = _active_ffn(layer)
        share = _split_int(total_active, g)
        groups = [replace(x, active_params=share[i]) for i, x in enumerate(groups)]
        return [[mixer], groups]
    ffn = replace(layer, name=f"{layer.name}.ffn", part="ffn", params_ffn=layer.params_ffn,
                  active_params=_active_ffn(layer), weight_groups=ffn_groups, **base)
    return [[mixer], [ffn]]


def _active_ffn(layer: Layer) -> int:
    return max(0, layer.active_params - layer.params_mixer - layer.params_other)


def refine(model: LayerGraph, granularity: str = "layer", *, expert_groups: int = 8) -> LayerGraph:
    """The refined graph; node order stays topological, edges point forward."""
    kind, n = parse_granularity(granularity)
    if kind == "layer":
        return model
    if not model.is_chain:
        raise ValueError("refining is defined for chain models")
    stages: list[list[Layer]] = []
    for layer in model.layers:
        if kind == "shards":
            stages.extend([[x] for x in _shard(layer, n)])
        else:
            stages.extend(_blocks(layer, expert_groups))
    nodes: list[Layer] = []
    edges: list[tuple[int, int]] = []
    prev: list[int] = []
    for group in stages:
        ids = list(range(len(nodes), len(nodes) + len(group)))
        nodes.extend(group)
        edges.extend((u, v) for u in prev for v in ids)
        prev = ids
    label = "block" if kind == "block" else f"shards:{n}"
    return replace(model, layers=tuple(nodes), edges=tuple(edges), granularity=label)
