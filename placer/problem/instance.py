"""An instance: a (possibly refined) layer graph, a fleet and a workload, in exact bytes.

Solvers read only this object. Per node it holds weight bytes and the bytes one live request
needs (KV cache + state); per available device its usable capacity (memory minus activation
buffers). Everything is an exact integer; ``placer.algorithms.quantize`` derives the conservative
integer view CP-SAT works in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from placer.problem import memory
from placer.problem.parallel import shard_layer
from placer.problem.reductions import attention_dp as attn_dp
from placer.problem.reductions import refine, tensor_parallel
from placer.problem.reductions.wide_ep import span_refusal
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Device, Fleet
from placer.specs.model import LayerGraph, is_draft_node
from placer.specs.reserve import Reserve
from placer.specs.units import plural
from placer.specs.workload import Workload

__all__ = ["Pin", "Layout", "Instance", "make_instance", "group_instance", "per_stage_instance", "parse_pin", "MODES",
           "REQUIREMENTS", "REQUIREMENT_HELP", "ORDERED_REQUIREMENTS", "check_requirements"]

MODES = ("contiguous", "free", "split")
# constraints a user may ask for on top of the mode's (a runtime's rules are a set of them,
# placer.problem.runtime_rules); each is honoured by every exact method and checked by the validator
REQUIREMENT_HELP = {
    # runtimes such as vLLM need one per pipeline rank on hybrid models (vllm-project/vllm#51752)
    "attention-per-stage": "every stage holds a full-attention layer",
    # vLLM and SGLang build no rank of only the embedding or only the LM head
    "decoder-per-stage": "every stage holds a decoder layer (or a part of one)",
    # pipeline runtimes build the embedding on the first rank and the LM head on the last
    "embedding-first-head-last": "the embedding (with what comes before it) is on the first stage, the LM "
                                 "head (with what comes after it) on the last",
    # runtimes take one --tensor-parallel-size for every pipeline rank
    "uniform-degree": "every stage runs at one tensor- and expert-parallel degree",
    # vLLM and SGLang build the drafter (MTP layers, an EAGLE head, a draft model) on the last
    # pipeline rank only (vllm/v1/worker/gpu_model_runner.py: ``if self.speculative_config and
    # get_pp_group().is_last_rank``; sglang/srt/speculative/eagle_worker_v2.py: ``_hosts_draft =
    # pp_group.is_last_rank``)
    "mtp-with-head": "the multi-token-prediction layers and draft-model nodes are on the stage of the LM head "
                     "(the last stage)",
}
REQUIREMENTS = tuple(REQUIREMENT_HELP)
# requirements that need a pipeline order (free placements have none)
ORDERED_REQUIREMENTS = ("embedding-first-head-last",)
# the requirements the per-stage solver (placer.planning.stage_degrees) models
PER_STAGE_REQUIREMENTS = ("attention-per-stage", "uniform-degree")


@dataclass(frozen=True)
class Pin:
    """User constraint: ``nodes`` on ``device`` (an id), or all on one device when ``device`` is None."""

    nodes: tuple[int, ...]
    device: str | None = None


@dataclass(frozen=True)
class Layout:
    """How an instance's devices and nodes relate to the specs (:mod:`placer.problem.reductions.tensor_parallel`).

    ``tp`` devices of one node form each device of the instance (``groups[k]``: the member ids of
    the instance's device ``k``, the first being the device's own id); the nodes are one rank's
    share of the model's layers (``ep``: experts spread whole). ``reserve`` overrides every device
    type's own reserve when given. With ``per_stage`` each group has its own size (its degree).
    """

    tp: int = 1
    ep: bool = False
    reserve: Reserve | None = None
    groups: tuple[tuple[str, ...], ...] = ()
    base_fleet: Fleet | None = None
    # the degree differs per stage (placer.planning.stage_degrees): ``groups[k]`` has its own size, ``tp`` is
    # the largest, and every node is one rank's share at the degree of the group that holds it
    per_stage: bool = False
    # attention data parallelism (placer.problem.reductions.attention_dp): each of a group's ``tp`` ranks serves its own
    # share of the requests; the instance is the heaviest rank's, its workload's concurrency that
    # rank's ``ceil(c / tp)`` requests, and ``live_requests`` the ``c`` the group holds
    attention_dp: bool = False
    live_requests: int | None = None


@dataclass(frozen=True)
class Instance:
    model: LayerGraph
    fleet: Fleet
    workload: Workload
    mode: str = "contiguous"
    pins: tuple[Pin, ...] = ()
    base_model: LayerGraph | None = field(default=None, compare=False)
    require: tuple[str, ...] = ()
    layout: Layout | None = field(default=None, compare=False)
    # speculative decoding the plan is made for (placer.specs.speculative.Speculation), stated in its mapping
    speculation: object = field(default=None, compare=False)
    # leading prompt tokens of every request found in the prefix cache (the simulator prefills the rest)
    cached_prompt_tokens: int = field(default=0, compare=False)
    # the traffic the plan is made for (placer.simulate.arguments.Traffic; None: the model spec's
    # default traffic, else the standard shape): what a simulation of the instance serves unless told
    traffic: object = field(default=None, compare=False)

    def __post_init__(self):
        if self.mode not in MODES:
            raise InvalidSpec(ARGUMENT, "mode", f"must be one of {', '.join(MODES)}")
        check_requirements(self.require, self.mode)
        ids = {d.id for d in self.devices}
        for pin in self.pins:
            if pin.device is not None and pin.device not in ids:
                what = "unavailable" if pin.device in self.fleet.by_id else "unknown"
                raise InvalidSpec(ARGUMENT, "pins", f"{what} device {pin.device!r}")
            for n in pin.nodes:
                if not 0 <= n < self.n_nodes:
                    raise InvalidSpec(ARGUMENT, "pins", f"node {n} out of range 0..{self.n_nodes - 1}")

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
    def decoder_nodes(self) -> tuple[int, ...]:
        """Nodes that are (or are a part of) a decoder layer."""
        return tuple(i for i, x in enumerate(self.nodes) if x.index is not None)

    @cached_property
    def cover_sets(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(requirement, nodes) for every requirement of the form "each used device holds one of
        these nodes": ``attention-per-stage`` (full-attention nodes), ``decoder-per-stage``."""
        out = []
        if "attention-per-stage" in self.require:
            out.append(("attention-per-stage", self.attention_nodes))
        if "decoder-per-stage" in self.require:
            out.append(("decoder-per-stage", self.decoder_nodes))
        return tuple(out)

    @cached_property
    def draft_nodes(self) -> tuple[int, ...]:
        """Nodes that are (or are a part of) a multi-token-prediction layer or a draft model's node
        (:func:`placer.specs.model.is_draft_node`)."""
        return tuple(i for i, x in enumerate(self.nodes) if is_draft_node(x))

    @cached_property
    def together_groups(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(requirement, nodes) for every node group a requirement puts on one device, groups of one
        node left out. ``embedding-first-head-last``: every source of the graph with the embedding
        (so its device is the first stage of every pipeline order), every sink with the LM head
        (the last stage); ``mtp-with-head``: the draft nodes (:attr:`draft_nodes`) with the LM
        head and the graph's sinks (the last stage of a pipeline order)."""
        n = self.n_nodes
        has_in, has_out = [False] * n, [False] * n
        for u, v in self.edges:
            has_out[u] = has_in[v] = True
        sources = [i for i in range(n) if not has_in[i]]
        sinks = [i for i in range(n) if not has_out[i]]
        head = [i for i, x in enumerate(self.nodes) if x.kind == "lm_head"]
        groups = []
        if "embedding-first-head-last" in self.require:
            for kind, ends in (("embedding", sources), ("lm_head", sinks)):
                marked = [i for i, x in enumerate(self.nodes) if x.kind == kind and not is_draft_node(x)]
                if marked:
                    groups.append(("embedding-first-head-last", tuple(sorted(set(marked) | set(ends)))))
        if "mtp-with-head" in self.require and self.draft_nodes:
            groups.append(("mtp-with-head", tuple(sorted(set(self.draft_nodes) | set(head) | set(sinks)))))
        return tuple((name, g) for name, g in groups if len(g) > 1)

    @cached_property
    def end_groups(self) -> tuple[tuple[int, ...], ...]:
        """The node groups of :attr:`together_groups`, without their requirements' names."""
        return tuple(g for _, g in self.together_groups)

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

    @property
    def tp(self) -> int:
        """Devices per stage (the tensor-parallel degree; 1 for pure pipelines and wafers)."""
        return self.layout.tp if self.layout is not None else 1

    @property
    def ep(self) -> bool:
        return self.layout.ep if self.layout is not None else False

    @property
    def attention_dp(self) -> bool:
        """Whether each group splits its requests over its ranks (:mod:`placer.problem.reductions.attention_dp`)."""
        return self.layout is not None and self.layout.attention_dp

    @property
    def requests_factor(self) -> int:
        """Live requests of a group per request of the instance's (heaviest) rank: the degree under
        attention data parallelism, else 1."""
        return self.tp if self.attention_dp else 1

    def group_requests(self, concurrency: int | None) -> int | None:
        """A concurrency of this instance (a ceiling; None unbounded, -1 weights overflow) in live
        requests of a group: ``tp`` times it under attention data parallelism."""
        if concurrency is None or concurrency < 0:
            return concurrency
        return concurrency * self.requests_factor

    @property
    def served_workload(self) -> Workload:
        """The workload as the user gave it: the group's live requests (under attention data
        parallelism the instance's own workload holds the heaviest rank's share)."""
        if not self.attention_dp:
            return self.workload
        return self.workload.replace(concurrency=self.layout.live_requests)

    def with_live_requests(self, live_requests: int) -> Instance:
        """The same instance holding ``live_requests`` live requests of a group (:meth:`with_concurrency`
        takes the instance's own, per-rank count)."""
        if not self.attention_dp:
            return self.with_concurrency(live_requests)
        inst = self.with_concurrency(attn_dp.rank_requests(live_requests, self.tp))
        return replace(inst, layout=replace(inst.layout, live_requests=live_requests))

    def count_words(self, n: int, bare: bool = False) -> str:
        """``n`` of this instance's devices in the fleet's own devices: ``"64 GPUs (32 groups of 2)"``
        at degree 2, ``"16 devices"`` (``"16"`` when ``bare``) at degree 1 (a degree's instance counts
        groups, users count GPUs)."""
        lay = self.layout
        if lay is None or (lay.tp == 1 and not lay.per_stage):
            return str(n) if bare else plural(n, "device")
        noun = "GPUs" if all(d.type.kind == "gpu" for d in self.devices) else "devices"   # every group's type
        if lay.per_stage:
            return f"{n} groups of up to {lay.tp} {noun}"
        return f"{n * lay.tp} {noun} ({n} groups of {lay.tp})"

    def members(self, device: int) -> tuple[str, ...]:
        """Ids of the fleet devices that device index ``device`` stands for (itself when tp = 1)."""
        if self.layout is not None and self.layout.groups:
            return self.layout.groups[device]
        return (self.devices[device].id,)

    @cached_property
    def reserve_bytes(self) -> tuple[int, ...]:
        """Per available device: bytes held back for the runtime (``--reserve``, else the device type's)."""
        override = self.layout.reserve if self.layout is not None else None
        return tuple((override or d.type.reserve).of(d.memory_bytes) for d in self.devices)

    @cached_property
    def capacity_bytes(self) -> tuple[int, ...]:
        """Per available device: memory minus the reserve and the activation buffers (may be
        negative on tiny devices)."""
        return tuple(d.memory_bytes - r - self.activation_buffer_bytes
                     for d, r in zip(self.devices, self.reserve_bytes))

    @cached_property
    def latency_us(self) -> np.ndarray:
        """Shortest-path latency (us) between available devices by index (inf when disconnected)."""
        return self.fleet.latency_matrix

    @cached_property
    def link_us(self) -> dict[tuple[int, int], float]:
        """Direct links between available devices, both directions, by device index."""
        idx = self.device_index
        out = {}
        for (a, b), (lat, _) in self.fleet.link_table.items():
            if a in idx and b in idx:
                out[idx[a], idx[b]] = out[idx[b], idx[a]] = lat
        return out

    def hop_us(self, a: int, b: int) -> float:
        """Latency of a hop a -> b: the direct link when there is one, else the shortest path."""
        link = self.link_us.get((a, b))
        return link if link is not None else self.latency_us[a][b]

    def hops(self, assignment) -> tuple[int, float]:
        """(hops, hop latency in us) of ``assignment``: model edges whose ends sit on different
        devices, each costing :meth:`hop_us`."""
        hops, lat = 0, 0.0
        for u, v in self.edges:
            a, b = assignment[u], assignment[v]
            if a != b:
                hops += 1
                lat += self.hop_us(a, b)
        return hops, lat

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
        """The same instance at ``concurrency`` of its own (per rank under attention data parallelism,
        where the group then holds ``tp`` times as many)."""
        layout = self.layout
        if self.attention_dp:
            layout = replace(layout, live_requests=concurrency * self.tp)
        return Instance(self.model, self.fleet, self.workload.replace(concurrency=concurrency), self.mode,
                        self.pins, self.base_model, self.require, layout, self.speculation,
                        self.cached_prompt_tokens, self.traffic)

    def with_fleet(self, fleet: Fleet) -> Instance:
        """The same instance on another fleet (of the specs' devices; groups are formed again)."""
        lay = self.layout
        if lay is not None and (lay.tp > 1 or lay.base_fleet is not None):
            grouped = group_instance(self.base_model or self.model, fleet, self.served_workload,
                                     Layout(lay.tp, lay.ep, lay.reserve, attention_dp=lay.attention_dp),
                                     mode=self.mode, pins=self.pins, refined=self.model, require=self.require)
            return replace(grouped, speculation=self.speculation, cached_prompt_tokens=self.cached_prompt_tokens,
                           traffic=self.traffic)
        return Instance(self.model, fleet, self.workload, self.mode, self.pins, self.base_model, self.require,
                        None if lay is None else Layout(lay.tp, lay.ep, lay.reserve), self.speculation,
                        self.cached_prompt_tokens, self.traffic)


def check_requirements(require, mode: str) -> None:
    """:class:`InvalidSpec` (field ``require``) for an unknown requirement or one the mode cannot
    have (a free placement has no first or last stage)."""
    for r in require:
        if r not in REQUIREMENTS:
            raise InvalidSpec(ARGUMENT, "require", f"unknown requirement {r!r} (one of {', '.join(REQUIREMENTS)})")
        if r in ORDERED_REQUIREMENTS and mode == "free":
            raise InvalidSpec(ARGUMENT, "require", f"{r} needs a pipeline order; a free placement has none "
                                                   "(use --mode contiguous)")


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
            raise InvalidSpec(ARGUMENT, "pins", f"cannot read {token!r} (use N, N-M or a node name)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo > hi:
            raise InvalidSpec(ARGUMENT, "pins", f"empty range {token!r}")
        out = []
        for k in range(lo, hi + 1):
            if k not in by_index:
                raise InvalidSpec(ARGUMENT, "pins", f"no decoder layer {k} (model has {model.num_hidden_layers})")
            out.extend(by_index[k])
        return out

    if "=" in text:
        left, device = text.split("=", 1)
        return Pin(tuple(nodes_of(left)), device.strip())
    return Pin(tuple(nodes_of(text)), None)


def make_instance(model: LayerGraph, fleet: Fleet, workload: Workload, layout: Layout = Layout(), *,
                  mode: str = "contiguous", granularity: str = "layer", pins=(), expert_groups: int = 8,
                  require=()) -> Instance:
    """An instance for ``mode`` at ``layout`` (its ``tp``, ``ep``, ``reserve`` and ``attention_dp``;
    the default: every stage one device); ``split`` refines the model to ``granularity`` first
    (:mod:`placer.problem.reductions.refine`); ``require``: names of :data:`REQUIREMENTS`.

    ``tp`` > 1 (or ``ep``) makes every stage a group of ``tp`` devices of one node
    (:func:`group_instance`); ``attention_dp`` splits each group's requests over its ranks, experts
    spread whole (:mod:`placer.problem.reductions.attention_dp`); ``reserve`` overrides the device
    types' reserves.
    """
    if layout.tp != 1 or layout.ep or layout.attention_dp:
        if granularity not in (None, "layer"):
            raise InvalidSpec(ARGUMENT, "granularity", "granularity applies to --mode split only; "
                                                              "split mode runs at --tp 1")
        return group_instance(model, fleet, workload, layout, mode=mode, pins=pins, require=require)
    refined = refine.apply(model, mode, granularity, expert_groups)
    parsed = tuple(p if isinstance(p, Pin) else parse_pin(p, refined) for p in pins)
    return Instance(refined, fleet, workload, mode, parsed, base_model=model, require=tuple(require),
                    layout=Layout(1, False, layout.reserve))


def group_instance(model: LayerGraph, fleet: Fleet, workload: Workload, layout: Layout, *, mode: str = "contiguous",
                   pins=(), refined: LayerGraph | None = None, require=()) -> Instance:
    """The instance whose devices are groups of ``layout.tp`` devices of one node of ``fleet`` and
    whose nodes are one rank's share of ``model``'s layers: the reductions of
    :mod:`placer.problem.reductions.tensor_parallel` (``ep``: experts spread whole) or, with
    ``layout.attention_dp``, :mod:`placer.problem.reductions.attention_dp` (the share an
    attention-data-parallel rank's, the workload's concurrency the heaviest rank's requests), each
    undone by :func:`placer.problem.reductions.tensor_parallel.per_device`. Pins name devices (and
    nodes, of ``refined`` when given) of the specs. Raises :class:`InvalidSpec` (field ``--tp``, or
    ``attention_dp``) when the model's dimensions refuse the degree, in split mode, or when no node
    has ``tp`` devices.
    """
    tp = layout.tp
    if tp < 1:
        raise InvalidSpec(ARGUMENT, "tp", f"a degree is a positive integer, got {tp}")
    if layout.attention_dp:
        sharded, served = attn_dp.apply(model, workload, tp, mode)
        layout = Layout(tp=tp, ep=True, reserve=layout.reserve, attention_dp=True,
                        live_requests=workload.concurrency)
    else:
        sharded, served = tensor_parallel.apply(model, workload, tp, layout.ep, mode), workload
        layout = Layout(tp=tp, ep=layout.ep, reserve=layout.reserve)
    if not layout.ep and fleet.available and tp > max(tensor_parallel.node_sizes(fleet).values()):
        # only experts spread whole span nodes (placer.problem.reductions.wide_ep)
        raise InvalidSpec(ARGUMENT, "tp", span_refusal(fleet, tp, False))
    derived, members = tensor_parallel.group_fleet(fleet, tp)
    translated = tensor_parallel.group_pins(
        pins, lambda p: p if isinstance(p, Pin) else parse_pin(p, refined or sharded), fleet, members, tp)
    return Instance(sharded, derived, served, mode, translated, base_model=model, require=tuple(require),
                    layout=replace(layout, groups=members, base_fleet=fleet))


def per_stage_instance(model: LayerGraph, fleet: Fleet, workload: Workload, groups, degree_of_node, *, ep: bool = False,
                  reserve: Reserve | None = None, require=()) -> Instance:
    """The instance of a per-stage plan: its devices are ``groups`` (device ids of ``fleet``), its
    nodes one rank's share of each layer at ``degree_of_node[i]`` (the degree of the group holding it)."""
    layers = tuple(shard_layer(x, model.hidden_size, workload, g, ep) for x, g in zip(model.layers, degree_of_node))
    sharded = replace(model, layers=layers)
    derived = tensor_parallel.fleet_of_groups(fleet, groups)
    tp = max(len(g) for g in groups)
    per_stage = len({len(g) for g in groups}) > 1
    unmodelled = [r for r in require if r not in PER_STAGE_REQUIREMENTS]
    if unmodelled:
        raise InvalidSpec(ARGUMENT, "require", f"per-stage degrees model {', '.join(PER_STAGE_REQUIREMENTS)} only, "
                                               f"not {', '.join(unmodelled)}; solve at one degree for it")
    if per_stage and "uniform-degree" in require:
        raise InvalidSpec(ARGUMENT, "require", f"uniform-degree asks for one degree on every stage; this plan's "
                                               f"stages run at {', '.join(map(str, sorted({len(g) for g in groups})))}")
    layout = Layout(tp=tp, ep=ep, reserve=reserve, groups=tuple(tuple(g) for g in groups), base_fleet=fleet,
                    per_stage=per_stage)
    return Instance(sharded, derived, workload, "contiguous", (), base_model=model, require=tuple(require),
                    layout=layout)
