"""An instance: a (possibly refined) layer graph, a fleet and a workload, in exact bytes.

Solvers read only this object. Per node it holds weight bytes and the bytes one live request
needs (KV cache + state); per available device its usable capacity (memory minus activation
buffers). Everything is an exact integer; ``placer.algorithms.quantize`` derives the conservative
integer view CP-SAT works in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import memory
from .errors import InvalidSpec
from .fleet import Device, Fleet
from .model import LayerGraph
from .refine import parse_granularity
from .workload import Workload

__all__ = ["Pin", "Instance", "make_instance", "parse_pin", "MODES", "REQUIREMENTS"]

MODES = ("contiguous", "free", "split")
# constraints a user may ask for on top of the mode's: "attention-per-stage" = every used device
# holds at least one full-attention layer (runtimes such as vLLM need one per pipeline rank on
# hybrid models, vllm-project/vllm#51752)
REQUIREMENTS = ("attention-per-stage",)


@dataclass(frozen=True)
class Pin:
    """User constraint: ``nodes`` on ``device`` (an id), or all on one device when ``device`` is None."""

    nodes: tuple[int, ...]
    device: str | None = None


@dataclass(frozen=True)
class Instance:
    model: LayerGraph
    fleet: Fleet
    workload: Workload
    mode: str = "contiguous"
    pins: tuple[Pin, ...] = ()
    base_model: LayerGraph | None = field(default=None, compare=False)
    require: tuple[str, ...] = ()

    def __post_init__(self):
        for r in self.require:
            if r not in REQUIREMENTS:
                raise InvalidSpec(None, "require", f"unknown requirement {r!r} (one of {', '.join(REQUIREMENTS)})")
        if self.mode not in MODES:
            raise InvalidSpec("--mode", "mode", f"must be one of {', '.join(MODES)}")
        ids = {d.id for d in self.devices}
        for pin in self.pins:
            if pin.device is not None and pin.device not in ids:
                what = "unavailable" if pin.device in self.fleet.by_id else "unknown"
                raise InvalidSpec("--pin", "device", f"{what} device {pin.device!r}")
            for n in pin.nodes:
                if not 0 <= n < self.n_nodes:
                    raise InvalidSpec("--pin", "layer", f"node {n} out of range 0..{self.n_nodes - 1}")

    # ------------------------------------------------------------------ nodes
    @property
    def nodes(self):
        return self.model.layers

    @property
    def n_nodes(self) -> int:
        return len(self.model.layers)

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        return self.model.edges

    @cached_property
    def weight_bytes(self) -> tuple[int, ...]:
        return tuple(memory.weight_bytes(x, self.workload) for x in self.nodes)

    @cached_property
    def request_bytes(self) -> tuple[int, ...]:
        """Per node: bytes one live request needs (KV cache for the context + state)."""
        return tuple(memory.request_bytes(x, self.workload) for x in self.nodes)

    @cached_property
    def kv_request_bytes(self) -> tuple[int, ...]:
        return tuple(memory.kv_bytes_per_request(x, self.workload) for x in self.nodes)

    @cached_property
    def state_request_bytes(self) -> tuple[int, ...]:
        return tuple(memory.state_bytes_per_request(x, self.workload) for x in self.nodes)

    @cached_property
    def attention_nodes(self) -> tuple[int, ...]:
        """Nodes that are (or hold the KV cache of) a full-attention layer."""
        return tuple(i for i, x in enumerate(self.nodes) if x.kind == "attention" and x.has_kv)

    @cached_property
    def demand_bytes(self) -> tuple[int, ...]:
        """Per node: weights + concurrency x request bytes."""
        c = self.workload.concurrency
        return tuple(w + c * r for w, r in zip(self.weight_bytes, self.request_bytes))

    @cached_property
    def activation_buffer_bytes(self) -> int:
        return memory.activation_buffer_bytes(self.nodes, self.workload)

    # ------------------------------------------------------------------ devices
    @cached_property
    def devices(self) -> tuple[Device, ...]:
        return self.fleet.available

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @cached_property
    def device_index(self) -> dict[str, int]:
        return {d.id: i for i, d in enumerate(self.devices)}

    @cached_property
    def capacity_bytes(self) -> tuple[int, ...]:
        """Per available device: memory minus activation buffers (may be negative on tiny devices)."""
        return tuple(d.memory_bytes - self.activation_buffer_bytes for d in self.devices)

    @cached_property
    def latency_us(self) -> np.ndarray:
        """Shortest-path latency (us) between available devices by index (inf when disconnected)."""
        return self.fleet.latency_matrix

    @cached_property
    def link_us(self) -> dict[tuple[int, int], float]:
        """Direct links between available devices, both directions, by device index."""
        g = self.fleet.graph
        idx = self.device_index
        out = {}
        for a, b, data in g.edges(data=True):
            if a in idx and b in idx:
                out[idx[a], idx[b]] = out[idx[b], idx[a]] = data["latency_us"]
        return out

    def hop_us(self, a: int, b: int) -> float:
        """Latency of a hop a -> b: the direct link when there is one, else the shortest path."""
        link = self.link_us.get((a, b))
        return link if link is not None else self.latency_us[a][b]

    # ------------------------------------------------------------------ helpers
    def max_concurrency(self, nodes, device: int) -> int | None:
        """Largest live-request count ``nodes`` hold together on ``device``; None = unbounded; -1 = weights alone overflow."""
        free = self.capacity_bytes[device] - sum(self.weight_bytes[i] for i in nodes)
        per = sum(self.request_bytes[i] for i in nodes)
        if free < 0:
            return -1
        if per == 0:
            return None
        return free // per

    def with_concurrency(self, concurrency: int) -> Instance:
        return Instance(self.model, self.fleet, self.workload.replace(concurrency=concurrency), self.mode,
                        self.pins, self.base_model, self.require)

    def with_fleet(self, fleet: Fleet) -> Instance:
        return Instance(self.model, fleet, self.workload, self.mode, self.pins, self.base_model, self.require)


def parse_pin(text: str, model: LayerGraph) -> Pin:
    """``"0=r0w1"`` / ``"layers.0=r0w1"`` (node on device) or ``"10-20"`` (layers on one device)."""
    names = {x.name: i for i, x in enumerate(model.layers)}
    by_index: dict[int, list[int]] = {}
    for i, x in enumerate(model.layers):
        key = x.index if x.index is not None else None
        if key is not None:
            by_index.setdefault(key, []).append(i)

    def nodes_of(token: str) -> list[int]:
        token = token.strip()
        if token in names:
            return [names[token]]
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", token)
        if not m:
            raise InvalidSpec("--pin", "layer", f"cannot read {token!r} (use N, N-M or a node name)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise InvalidSpec("--pin", "layer", f"empty range {token!r}")
        out = []
        for k in range(lo, hi + 1):
            if k not in by_index:
                raise InvalidSpec("--pin", "layer", f"no decoder layer {k} (model has {model.num_hidden_layers})")
            out.extend(by_index[k])
        return out

    if "=" in text:
        left, device = text.split("=", 1)
        return Pin(tuple(nodes_of(left)), device.strip())
    return Pin(tuple(nodes_of(text)), None)


def make_instance(model: LayerGraph, fleet: Fleet, workload: Workload, *, mode: str = "contiguous",
                  granularity: str = "layer", pins=(), expert_groups: int = 8, require=()) -> Instance:
    """An instance for ``mode``; ``split`` refines the model to ``granularity`` first; ``require``:
    names of :data:`REQUIREMENTS`."""
    try:
        kind, _ = parse_granularity(granularity)
    except ValueError as exc:
        raise InvalidSpec("--granularity", "granularity", str(exc)) from None
    refined = model
    if mode == "split":
        refined = model.refine(granularity, expert_groups=expert_groups)
    elif kind != "layer":
        raise InvalidSpec("--granularity", "granularity", "granularity applies to --mode split only")
    parsed = tuple(p if isinstance(p, Pin) else parse_pin(p, refined) for p in pins)
    return Instance(refined, fleet, workload, mode, parsed, base_model=model, require=tuple(require))
