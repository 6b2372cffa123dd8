"""Independent check of a stage mapping against the specs it names.

Nothing here comes from the placement methods: every byte is recomputed from the model, hardware
and workload with :mod:`placer.problem.memory` (per device of a tensor-parallel group with the validator's
own per-tensor rules, :mod:`placer.mapping.ranks`, from the unsharded model; neither the
solver's :mod:`placer.problem.parallel` nor its derived instance is used; attention-data-parallel stages
with :mod:`placer.mapping.dp_ranks`), the runtime reserve from the
recorded ``--reserve`` or the device type's, links and paths are read from the fleet graph (a
group reaches another through its members' direct links, and its collectives run over the link
between its first two members), and every violation is reported (not just the first) as a
:class:`~placer.mapping.violations.Violation` with a ``kind`` from
:data:`~placer.mapping.violations.KINDS` and a message a user can act on.

:func:`validate_mapping` reads the mapping (:class:`~placer.mapping.view.MappingView`) into a
:class:`Reading` (the specs, the node graph at the recorded granularity, and what the stages say,
recomputed once), then runs each check of :data:`placer.mapping.checks.CHECKS` on it; a check
yields its violations and changes nothing. A two-pool mapping is validated pool by pool, then as
a pair (:mod:`placer.mapping.validate_pools`).
"""

from __future__ import annotations

import math
from collections import Counter
from functools import cached_property

import networkx as nx

from placer.mapping import dp_ranks, expert_ranks, ranks, specs_from_mapping
from placer.mapping.checks import CHECKS
from placer.mapping.tiers import check_sessions
from placer.mapping.view import FleetView, MappingStage, MappingView, PooledView, mapping_view
from placer.mapping.violations import Violation
from placer.problem import memory
from placer.problem.reductions.refine import parse_granularity, refine
from placer.specs.errors import InvalidSpec

__all__ = ["Reading", "validate_mapping", "validate_file"]


class _Links:
    """Latency between two devices as placer costs a hop: the direct link, else the shortest path."""

    def __init__(self, fleet):
        self.fleet = fleet
        self._paths: dict[tuple[str, str], float] = {}

    @property
    def graph(self):
        return self.fleet.graph

    def direct(self, a: str, b: str) -> float | None:
        """The direct link's latency, from the spec's links or its fabric's formula (no table)."""
        return self.fleet.link_latency_us(a, b)

    def group_direct(self, ga, gb) -> float | None:
        """Lowest latency of a direct link between a member of ``ga`` and one of ``gb``."""
        best = None
        for a in ga:
            for b in gb:
                d = self.direct(a, b)
                if d is not None and (best is None or d < best):
                    best = d
        return best

    def group_hop(self, ga, gb) -> float:
        d = self.group_direct(ga, gb)
        return float(d) if d is not None else self.hop(ga[0], gb[0])

    def hop(self, a: str, b: str) -> float:
        d = self.direct(a, b)
        if d is not None:
            return float(d)
        key = (a, b) if a <= b else (b, a)
        known = self.fleet.by_id
        if self.fleet.formula and a in known and b in known and known[a].available and known[b].available:
            return self.fleet.path_latency_us(a, b)     # the fabric's formula, exact (placer.specs.fabric)
        if key not in self._paths:
            try:
                self._paths[key] = float(nx.dijkstra_path_length(self.graph, a, b, weight="latency_us"))
            except (nx.NetworkXNoPath, nx.NodeNotFound):
                self._paths[key] = math.inf
        return self._paths[key]


def _graph_at(view: MappingView, base) -> tuple:
    """The node graph at the mapping's granularity, and the violations met building it."""
    mode, granularity = view.mode, view.model.granularity
    if base.granularity != "layer":
        return base, [Violation("granularity_mismatch", f"the model given is already refined to "
                                                        f"{base.granularity}; pass the unrefined model")]
    if mode != "split" and granularity != "layer":
        return base, [Violation("granularity_mismatch",
                                f"granularity {granularity!r} applies to split mode only, not {mode}")]
    try:
        parse_granularity(granularity)
        return refine(base, granularity, expert_groups=view.model.expert_groups), []
    except ValueError as exc:
        return base, [Violation("granularity_mismatch", str(exc))]


class Reading:
    """A mapping read against its specs: what every check looks at, each fact recomputed once."""

    def __init__(self, view: MappingView, base, fleet, workload, graph):
        self.view, self.base, self.fleet, self.wl, self.graph = view, base, fleet, workload, graph
        self.mode = view.mode
        self.nodes = graph.layers
        self.n = len(self.nodes)
        self.index_of = {x.name: i for i, x in enumerate(self.nodes)}
        self.stages = view.stages
        self.summary = view.summary
        self.by_id = fleet.by_id
        self.links = _Links(fleet)
        layout = view.parallel
        self.tp, self.ep_degree = layout.tp, layout.ep
        self.ep = self.ep_degree > 1
        # per-stage degrees: every stage's group states its own tp (and ep); tp and ep above are the largest
        self.per_stage = layout.per_stage
        # attention data parallelism: each stage's ranks split its requests (placer.mapping.dp_ranks)
        self.attention_dp = layout.attention_dp
        self.override = layout.reserve       # None: each device type's own
        self.degrees = sorted({self.degree_of(st) for st in self.stages}) if self.per_stage else [self.tp]
        self.act = memory.activation_buffer_bytes(self.nodes, workload)

    # ------------------------------------------------------------------ groups and degrees
    def degree_of(self, st: MappingStage) -> int:
        return st.tp if self.per_stage else self.tp

    @cached_property
    def refusals(self) -> dict[int, str | None]:
        """Per degree of the plan, why the model cannot run at it (None: it can)."""
        def refusal_at(g: int) -> str | None:
            copies = self.view.parallel.redundant_experts
            if copies:
                why = expert_ranks.copies_refusal(self.graph.layers, copies, g, self.ep or self.attention_dp)
                if why is not None:
                    return why
            if g == 1:
                return None
            if self.attention_dp:
                return dp_ranks.dp_rank_refusal(self.graph.layers, g, self.wl)
            for x in self.graph.layers:
                why = ranks.rank_refusal(x, self.graph.hidden_size, g, self.ep)
                if why is not None:
                    return f"{x.name}: {why}"
            return ranks.stored_formats_refusal(self.graph.layers, self.wl, self.graph.hidden_size, g, self.ep)

        return {g: refusal_at(g) for g in self.degrees}

    @cached_property
    def uses(self) -> Counter:
        """Stages using each device."""
        return Counter(m for st in self.stages for m in dict.fromkeys(st.devices))

    # ------------------------------------------------------------------ nodes
    @cached_property
    def holders(self) -> dict[int, list[int]]:
        """Per node index, the stages listing it."""
        out: dict[int, list[int]] = {}
        for k, st in enumerate(self.stages):
            for name in st.layers:
                i = self.index_of.get(name)
                if i is not None:
                    out.setdefault(i, []).append(k)
        return out

    @cached_property
    def stage_of(self) -> dict[int, int]:
        """Per node placed exactly once, its stage."""
        return {i: held[0] for i, held in self.holders.items() if len(held) == 1}

    def device_of(self, i: int) -> str:
        """The device of the stage holding node ``i`` (placed exactly once)."""
        return self.stages[self.stage_of[i]].device

    def nodes_of(self, st: MappingStage) -> list[int]:
        """Indices of the known nodes stage ``st`` lists, ascending."""
        return sorted({self.index_of[x] for x in st.layers if x in self.index_of})

    @cached_property
    def per_node(self) -> dict[int, tuple[int, int, int]]:
        """Per node, (weight bytes, KV bytes per request, state bytes per request) on one device of the
        group that holds it (a node on several stages is reported elsewhere)."""
        node_degree = {i: self.degree_of(self.stages[k]) for i, k in self.stage_of.items()}
        hidden, wl = self.graph.hidden_size, self.wl
        out = {}
        for i, x in enumerate(self.nodes):
            g = node_degree.get(i, self.tp)
            if g == 1 or self.refusals.get(g) is not None:
                out[i] = (memory.weight_bytes(x, wl), memory.kv_bytes_per_request(x, wl),
                          memory.state_bytes_per_request(x, wl))
            elif self.attention_dp:
                # each request whole on the rank that serves it
                out[i] = (dp_ranks.dp_rank_weight_bytes(x, hidden, wl, g), memory.kv_bytes_per_request(x, wl),
                          memory.state_bytes_per_request(x, wl))
            else:
                out[i] = (ranks.rank_weight_bytes(x, hidden, wl, g, self.ep),
                          ranks.rank_kv_bytes_per_request(x, hidden, wl, g),
                          ranks.rank_state_bytes_per_request(x, hidden, wl, g))
        return out

    def reserve_of(self, dev) -> int:
        return (self.override or dev.type.reserve).of(dev.memory_bytes)

    @property
    def rank_live(self) -> int:
        """Live requests the heaviest rank of a stage serves: all of them, or under attention data
        parallelism its ``ceil(c / tp)`` share."""
        c = self.wl.concurrency
        return dp_ranks.rank_requests(c, self.tp) if self.attention_dp else c

    def stage_holds(self, k: int) -> int | None:
        """Live requests stage ``k`` holds (None: no per-request memory; -1: weights alone overflow)."""
        st = self.stages[k]
        dev, mine = self.by_id[st.device], self.nodes_of(st)
        room = dev.memory_bytes - self.reserve_of(dev) - self.act - sum(self.per_node[i][0] for i in mine)
        per = sum(self.per_node[i][1] + self.per_node[i][2] for i in mine)
        held = -1 if room < 0 else (None if per == 0 else room // per)
        return dp_ranks.group_holds(held, self.tp) if self.attention_dp else held

    @cached_property
    def ceiling(self) -> int | None:
        """The smallest stage's ceiling over the stages on known devices (None: unbounded)."""
        finite = [h for k, st in enumerate(self.stages) if st.device in self.by_id
                  for h in [self.stage_holds(k)] if h is not None]
        return min(finite) if finite else None



def validate_mapping(doc, *, model=None, fleet=None, workload=None, source: str = "<mapping>") -> list:
    """Every violation of ``doc`` against its specs; an empty list means the mapping is valid.

    ``doc`` is a mapping document (JSON) or its :func:`~placer.mapping.view.mapping_view`.
    ``model`` / ``fleet`` (objects, catalog names or paths) and ``workload`` override what the
    mapping records. Raises :class:`InvalidSpec` when ``doc`` is not a schema-valid mapping or a
    spec it names cannot be loaded: those are unreadable inputs, not violations. A two-pool
    mapping is validated pool by pool (messages prefixed by the pool) and then as a pair
    (:func:`placer.mapping.validate_pools.pair_violations`); its pools name their own fleets and
    workloads, so ``fleet`` and ``workload`` are refused for it.
    """
    view = mapping_view(doc, source)
    if isinstance(view, FleetView):
        from placer.mapping.validate_fleet import fleet_violations

        if fleet is not None or workload is not None:
            raise InvalidSpec(source, "/models", "a fleet mapping's pipelines name their own hardware and "
                                                 "workloads: validate it without overrides")
        return [Violation(v.kind, f"{m.name} replica {r}: {v.message}") for m in view.models
                for r, sub in enumerate(m.pipelines)
                for v in validate_mapping(sub, source=source)] + fleet_violations(view)
    if isinstance(view, PooledView):
        from placer.mapping.validate_pools import pair_violations

        for name, given in (("fleet", fleet), ("workload", workload)):
            if given is not None:
                raise InvalidSpec(source, "/pools", f"a two-pool mapping's pools name their own "
                                                    f"{'hardware' if name == 'fleet' else name}: validate it without "
                                                    f"a {name} override, or validate one pool's document")
        return [Violation(v.kind, f"{pool} pool: {v.message}") for pool, sub in view.pools.items()
                for v in validate_mapping(sub, model=model, source=source)] + pair_violations(view, model=model)
    base, fl, wl = specs_from_mapping(view.doc, model=model, hardware=fleet, workload=workload)
    graph, found = _graph_at(view, base)
    graph = expert_ranks.with_copies(graph, view.parallel.redundant_experts)   # the stated copies, its own rule
    reading = Reading(view, base, fl, wl, graph)
    out = [*CHECKS[0](reading), *found]
    for check in CHECKS[1:]:
        out += check(reading)
    return out + list(check_sessions(reading, lambda at: Reading(view, base, fl, at, graph)))


def validate_file(path, *, model=None, fleet=None) -> list:
    """Read the mapping at ``path`` and validate it (see :func:`validate_mapping`)."""
    from placer.mapping import read_mapping

    doc = read_mapping(path)
    return validate_mapping(doc, model=model, fleet=fleet, source=str(path))
