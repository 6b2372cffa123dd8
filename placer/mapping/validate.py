"""Independent check of a stage mapping against the specs it names.

Nothing here comes from the placement methods: every byte is recomputed from the model, hardware
and workload with :mod:`placer.problem.memory` (per device of a tensor-parallel group with the validator's
own per-tensor rules, :mod:`placer.mapping.ranks`, from the unsharded model; neither the
solver's :mod:`placer.problem.parallel` nor its derived instance is used; attention-data-parallel stages
with :mod:`placer.mapping.dp_ranks`), the runtime reserve from the
recorded ``--reserve`` or the device type's, links and paths are read from the fleet graph (a
group reaches another through its members' direct links, and its collectives run over the link
between its first two members), and every violation is reported (not just the first) as a
:class:`Violation` with a ``kind`` from :data:`KINDS` and a message a user can act on.

:func:`validate_mapping` reads the mapping into a :class:`Reading` (the specs, the node graph at
the recorded granularity, and what the stages say, recomputed once), then runs each check of
:data:`CHECKS` on it; a check returns its violations and changes nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from functools import cached_property

import networkx as nx

from placer.mapping import check_mapping, dp_ranks, ranks, specs_from_mapping
from placer.problem import memory
from placer.problem.reductions.refine import parse_granularity, refine
from placer.specs.reserve import NO_RESERVE, Reserve
from placer.specs.units import format_bytes

__all__ = ["Violation", "KINDS", "CHECKS", "Reading", "validate_mapping", "validate_file"]

KINDS = {
    "spec_hash_mismatch": "the model or hardware file changed since the mapping was made (stale mapping)",
    "spec_name_mismatch": "the mapping names a different model or hardware than the spec loaded",
    "granularity_mismatch": "the granularity does not apply to the mode or cannot be built",
    "unknown_layer": "a stage names a node the model does not have",
    "layer_missing": "a node of the model is on no stage",
    "layer_duplicated": "a node is on more than one stage (or twice on one)",
    "empty_stage": "a stage holds no node",
    "unknown_device": "a stage names a device the fleet does not have",
    "unavailable_device": "a stage uses a device marked unavailable",
    "device_reused": "two stages use the same device",
    "over_capacity": "a device holds more bytes than its memory",
    "bytes_mismatch": "a stage states a byte figure that differs from the recomputation",
    "stage_mismatch": "a stage states the wrong rack or next-hop latency",
    "stage_order": "stages are not numbered 0..n-1 in pipeline (first-visit) order",
    "non_contiguous": "in contiguous or split mode a stage is not one run of the pipeline in stage order",
    "no_link": "consecutive stages have no direct link (contiguous, split) or no path at all (free)",
    "concurrency_overstated": "a stated max_concurrency or concurrency_ceiling exceeds what the stages hold",
    "concurrency_exceeded": "the workload's concurrency exceeds the concurrency ceiling of the stages",
    "route_mismatch": "the route does not list, node by node, the device of the stage holding it",
    "summary_mismatch": "the summary (devices, hops, hop latency with the groups' collectives, bound) does not "
                        "match the stages",
    "proof_mismatch": "proven_optimal is true while the status is not optimal",
    "pin_violated": "a recorded pin is not honoured",
    "group_mismatch": "a stage's group is not tp available devices of its node, or the model refuses the degree",
    "requirement_violated": "a requirement the mapping was solved under (require) does not hold on its stages",
}

_TOL_US = 1e-6


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``kind`` is a key of :data:`KINDS`."""

    kind: str
    message: str

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= _TOL_US * max(1.0, abs(b))


def _fmt_bytes(b) -> str:
    return "nothing" if b is None else f"{b:,}"


def _fmt_conc(c) -> str:
    return "unbounded" if c is None else str(c)


def _overstates(stated, actual) -> bool:
    """True when a stated concurrency (None = unbounded) exceeds the actual one (None = unbounded)."""
    if actual is None:
        return False
    if stated is None:
        return True
    return stated > actual


class _Links:
    """Latency between two devices as placer costs a hop: the direct link, else the shortest path."""

    def __init__(self, fleet):
        self.graph = fleet.graph
        self._paths: dict[tuple[str, str], float] = {}

    def direct(self, a: str, b: str) -> float | None:
        g = self.graph
        return g.edges[a, b]["latency_us"] if g.has_edge(a, b) else None

    def group_direct(self, ga, gb) -> float | None:
        """Lowest latency of a direct link between a member of ``ga`` and one of ``gb``."""
        best = None
        for a in ga:
            for b in gb:
                d = self.direct(a, b) if a in self.graph and b in self.graph else None
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
        if key not in self._paths:
            try:
                self._paths[key] = float(nx.dijkstra_path_length(self.graph, a, b, weight="latency_us"))
            except (nx.NetworkXNoPath, nx.NodeNotFound):
                self._paths[key] = math.inf
        return self._paths[key]


def _graph_at(doc: dict, base) -> tuple:
    """The node graph at the mapping's granularity, and the violations met building it."""
    mode, granularity = doc["mode"], doc["model"].get("granularity", "layer")
    if base.granularity != "layer":
        return base, [Violation("granularity_mismatch", f"the model given is already refined to "
                                                        f"{base.granularity}; pass the unrefined model")]
    if mode != "split" and granularity != "layer":
        return base, [Violation("granularity_mismatch",
                                f"granularity {granularity!r} applies to split mode only, not {mode}")]
    try:
        parse_granularity(granularity)
        return refine(base, granularity, expert_groups=doc["model"].get("expert_groups", 8)), []
    except ValueError as exc:
        return base, [Violation("granularity_mismatch", str(exc))]


class Reading:
    """A mapping read against its specs: what every check looks at, each fact recomputed once."""

    def __init__(self, doc: dict, base, fleet, workload, graph):
        self.doc, self.base, self.fleet, self.wl, self.graph = doc, base, fleet, workload, graph
        self.mode = doc["mode"]
        self.nodes = graph.layers
        self.n = len(self.nodes)
        self.index_of = {x.name: i for i, x in enumerate(self.nodes)}
        self.stages = doc["stages"]
        self.summary = doc["summary"]
        self.by_id = fleet.by_id
        self.links = _Links(fleet)
        layout = doc.get("parallel") or {"tp": 1, "ep": 1, "reserve": None}
        self.tp, self.ep_degree = layout["tp"], layout["ep"]
        self.ep = self.ep_degree > 1
        # per-stage degrees: every stage's group states its own tp (and ep); tp and ep above are the largest
        self.per_stage = bool(layout.get("per_stage"))
        # attention data parallelism: each stage's ranks split its requests (placer.mapping.dp_ranks)
        self.attention_dp = bool(layout.get("attention_dp"))
        if doc["schema_version"] == 1:
            self.override = NO_RESERVE           # written before reserves existed
        else:
            self.override = None if layout.get("reserve") is None else Reserve.from_dict(layout["reserve"])
        self.degrees = sorted({self.degree_of(st) for st in self.stages}) if self.per_stage else [self.tp]
        self.act = memory.activation_buffer_bytes(self.nodes, workload)

    # ------------------------------------------------------------------ groups and degrees
    def degree_of(self, st) -> int:
        if self.per_stage:
            return int(st["group"]["tp"]) if "group" in st else 1
        return self.tp

    @staticmethod
    def group_of(st) -> list[str]:
        return list(st["group"]["devices"]) if "group" in st else [st["device"]]

    @cached_property
    def refusals(self) -> dict[int, str | None]:
        """Per degree of the plan, why the model cannot run at it (None: it can)."""
        def refusal_at(g: int) -> str | None:
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
        return Counter(m for st in self.stages for m in dict.fromkeys(self.group_of(st)))

    # ------------------------------------------------------------------ nodes
    @cached_property
    def holders(self) -> dict[int, list[int]]:
        """Per node index, the stages listing it."""
        out: dict[int, list[int]] = {}
        for k, st in enumerate(self.stages):
            for name in st["layers"]:
                i = self.index_of.get(name)
                if i is not None:
                    out.setdefault(i, []).append(k)
        return out

    @cached_property
    def stage_of(self) -> dict[int, int]:
        """Per node placed exactly once, its stage."""
        return {i: held[0] for i, held in self.holders.items() if len(held) == 1}

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
        st, dev = self.stages[k], self.by_id[self.stages[k]["device"]]
        mine = sorted({self.index_of[x] for x in st["layers"] if x in self.index_of})
        room = dev.memory_bytes - self.reserve_of(dev) - self.act - sum(self.per_node[i][0] for i in mine)
        per = sum(self.per_node[i][1] + self.per_node[i][2] for i in mine)
        held = -1 if room < 0 else (None if per == 0 else room // per)
        return dp_ranks.group_holds(held, self.tp) if self.attention_dp else held

    @cached_property
    def ceiling(self) -> int | None:
        """The smallest stage's ceiling over the stages on known devices (None: unbounded)."""
        finite = [h for k, st in enumerate(self.stages) if st["device"] in self.by_id
                  for h in [self.stage_holds(k)] if h is not None]
        return min(finite) if finite else None


# ----------------------------------------------------------------------------- the checks
def check_specs(r: Reading) -> list[Violation]:
    """The mapping names the specs loaded, at the content it was made from."""
    out = []
    for key, spec, what in (("model", r.base, "model"), ("hardware", r.fleet, "hardware")):
        rec = r.doc[key]
        if rec["name"] != spec.name:
            out.append(Violation("spec_name_mismatch", f"the mapping is for {what} {rec['name']!r}, the spec "
                                                       f"loaded is {spec.name!r}"))
        if rec["sha256"] != spec.sha256:
            out.append(Violation("spec_hash_mismatch",
                                 f"{what} spec {spec.source or spec.name} has sha256 {spec.sha256[:12] or '(none)'}"
                                 f"..., the mapping was made from {rec['sha256'][:12] or '(none)'}...: the spec "
                                 f"changed since, re-solve or validate against the original file"))
    return out


def check_degrees(r: Reading) -> list[Violation]:
    """The plan's degrees: ep is tp or 1, the largest stage's degree is tp, the model runs at each."""
    out = []
    if r.ep_degree not in (1, r.tp):
        out.append(Violation("group_mismatch", f"expert-parallel degree {r.ep_degree} in a plan of tp {r.tp}: "
                                               f"experts are spread over a stage's group (ep = tp) or "
                                               f"tensor-split (ep = 1)"))
    if r.attention_dp and (r.per_stage or r.ep_degree != r.tp):
        out.append(Violation("group_mismatch", f"an attention-data-parallel plan spreads experts over each stage's "
                                               f"group at one degree (ep = tp), it states tp {r.tp}, ep "
                                               f"{r.ep_degree}" + (", per-stage degrees" if r.per_stage else "")))
    if r.per_stage and r.degrees and max(r.degrees) != r.tp:
        out.append(Violation("group_mismatch", f"a per-stage plan states tp {r.tp}, its largest stage has "
                                               f"{max(r.degrees)}"))
    out += [Violation("group_mismatch", f"{r.graph.name} cannot run at tp {g}: {why}")
            for g, why in r.refusals.items() if why is not None]
    return out


def check_stage_devices(r: Reading) -> list[Violation]:
    """Stages numbered in order, each on a group of available devices of one node and type, no device twice."""
    out = []
    for k, st in enumerate(r.stages):
        if st["index"] != k:
            out.append(Violation("stage_order", f"stage at position {k} is numbered {st['index']}; stages are "
                                                f"numbered 0..{len(r.stages) - 1}"))
    for dev, count in r.uses.items():
        if count > 1:
            where = [st["index"] for st in r.stages if dev in r.group_of(st)]
            out.append(Violation("device_reused", f"device {dev} is used by {count} stages "
                                                  f"({', '.join(map(str, where))})"))
    for k, st in enumerate(r.stages):
        out += _group_violations(r, k, st)
    return out


def _group_violations(r: Reading, k: int, st: dict) -> list[Violation]:
    out = []
    members, by_id = r.group_of(st), r.by_id
    g = st.get("group", {"tp": 1, "ep": 1})
    if members[0] != st["device"]:
        out.append(Violation("group_mismatch", f"stage {k}: the group's first device is {members[0]}, the stage "
                                               f"names {st['device']}"))
    want_tp = r.degree_of(st)
    want_ep = (want_tp if r.ep else 1) if r.per_stage else r.ep_degree
    if g["tp"] != want_tp or g.get("ep", 1) != want_ep or len(set(members)) != want_tp or len(members) != want_tp:
        plan = "a per-stage plan" if r.per_stage else f"a plan of tp {r.tp}, ep {r.ep_degree}"
        out.append(Violation("group_mismatch", f"stage {k}: a group of {len(members)} device(s) (tp {g['tp']}, "
                                               f"ep {g.get('ep', 1)}) in {plan}"))
    for m in members:
        dev = by_id.get(m)
        if dev is None:
            out.append(Violation("unknown_device", f"stage {k}: device {m!r} is not in {r.fleet.name}"))
        elif not dev.available:
            out.append(Violation("unavailable_device", f"stage {k}: device {m} is marked unavailable in "
                                                       f"{r.fleet.name}"))
        elif m != members[0] and members[0] in by_id and dev.rack != by_id[members[0]].rack:
            out.append(Violation("group_mismatch", f"stage {k}: device {m} is in rack {dev.rack}, not the node of "
                                                   f"{members[0]} (rack {by_id[members[0]].rack})"))
    kinds = {by_id[m].type.name for m in members if m in by_id}
    if len(kinds) > 1:
        out.append(Violation("group_mismatch", f"stage {k}: its group mixes device types {', '.join(sorted(kinds))}"))
    if not st["layers"]:
        out.append(Violation("empty_stage", f"stage {k} ({st['device']}) holds no node"))
    for name in st["layers"]:
        if name not in r.index_of:
            out.append(Violation("unknown_layer", f"stage {k} ({st['device']}): {name!r} is not a node of "
                                                  f"{r.graph.name} at granularity {r.graph.granularity}"))
    return out


def check_nodes_placed(r: Reading) -> list[Violation]:
    """Every node of the model on exactly one stage."""
    out = []
    for i in range(r.n):
        held = r.holders.get(i, [])
        if not held:
            out.append(Violation("layer_missing", f"{r.nodes[i].name} is on no stage"))
        elif len(held) > 1:
            out.append(Violation("layer_duplicated", f"{r.nodes[i].name} is placed {len(held)} times (stages "
                                                     f"{', '.join(map(str, held))})"))
    return out


def check_stage_bytes(r: Reading) -> list[Violation]:
    """Each stage: its rack, its bytes recomputed, capacity, its stated ceiling, the link to the next."""
    out = []
    c = r.rank_live
    for k, st in enumerate(r.stages):
        dev = r.by_id.get(st["device"])
        if dev is None:
            continue
        mine = sorted({r.index_of[x] for x in st["layers"] if x in r.index_of})
        weights = sum(r.per_node[i][0] for i in mine)
        kv = c * sum(r.per_node[i][1] for i in mine)
        state = c * sum(r.per_node[i][2] for i in mine)
        mem, reserve, act = dev.memory_bytes, r.reserve_of(dev), r.act
        total = weights + kv + state + act
        if dev.rack != st["rack"]:
            out.append(Violation("stage_mismatch", f"stage {k}: device {dev.id} is in rack {dev.rack}, the stage "
                                                   f"says {st['rack']}"))
        each = " on each of its devices" if r.degree_of(st) > 1 else ""
        if total + reserve > mem:
            over = total + reserve - mem
            out.append(Violation(
                "over_capacity",
                f"stage {k} ({dev.id}) is over capacity{each} by {over:,} B ({format_bytes(over)}): "
                f"weights {weights:,} + KV {kv:,} + state {state:,} + activations {act:,}"
                + (f" + reserve {reserve:,}" if reserve else "") + f" = {total + reserve:,} B > memory {mem:,} B"))
        expect = dict(weights=weights, kv_reserve=kv, state=state, activations=act, free=mem - total - reserve)
        if "reserve" in st["bytes"] or r.doc["schema_version"] > 1:
            expect["reserve"] = reserve
        wrong = [f"{f} states {_fmt_bytes(st['bytes'].get(f))}, recomputed {v:,}" for f, v in expect.items()
                 if st["bytes"].get(f) != v]
        if wrong:
            out.append(Violation("bytes_mismatch", f"stage {k} ({dev.id}): " + "; ".join(wrong)))
        holds = r.stage_holds(k)
        if _overstates(st["max_concurrency"], holds):
            out.append(Violation("concurrency_overstated", f"stage {k} ({dev.id}) states max_concurrency "
                                                           f"{_fmt_conc(st['max_concurrency'])} but holds "
                                                           f"{_fmt_conc(holds)}"))
        out += _next_hop_violations(r, k, st, dev)
    return out


def _next_hop_violations(r: Reading, k: int, st: dict, dev) -> list[Violation]:
    if k + 1 >= len(r.stages):
        if st["next_hop_latency_us"] is not None:
            return [Violation("stage_mismatch", f"stage {k} is the last stage but states next_hop_latency_us "
                                                f"{st['next_hop_latency_us']}")]
        return []
    out = []
    nxt = r.by_id.get(r.stages[k + 1]["device"])
    mine_g, next_g = r.group_of(st), r.group_of(r.stages[k + 1])
    if nxt is not None and dev.available and nxt.available:
        want = r.links.group_hop(mine_g, next_g)
        if r.mode != "free" and r.links.group_direct(mine_g, next_g) is None and dev.id != nxt.id:
            out.append(Violation("no_link", f"stages {k} ({dev.id}) and {k + 1} ({nxt.id}) are consecutive but "
                                            f"have no direct link"))
        got = st["next_hop_latency_us"]
        expected = want if math.isfinite(want) else None
        if (got is None) != (expected is None) or (got is not None and not _close(got, expected)):
            out.append(Violation("stage_mismatch", f"stage {k}: next_hop_latency_us states {got}, the link "
                                                   f"{dev.id}-{nxt.id} has {expected}"))
    return out


def check_shared_devices(r: Reading) -> list[Violation]:
    """A device listed by several stages holds all their nodes at once."""
    out = []
    shared = [(dev_id, count) for dev_id, count in r.uses.items() if count > 1 and dev_id in r.by_id]
    for dev_id, count in shared:
        dev = r.by_id[dev_id]
        mine = sorted({r.index_of[x] for st in r.stages if dev_id in r.group_of(st) for x in st["layers"]
                       if x in r.index_of})
        total = (sum(r.per_node[i][0] for i in mine) + r.act + r.reserve_of(dev)
                 + r.rank_live * sum(r.per_node[i][1] + r.per_node[i][2] for i in mine))
        if total > dev.memory_bytes:
            out.append(Violation("over_capacity", f"device {dev_id} holds the nodes of {count} stages together: "
                                                  f"{total:,} B > memory {dev.memory_bytes:,} B (over by "
                                                  f"{total - dev.memory_bytes:,} B)"))
    return out


def check_concurrency(r: Reading) -> list[Violation]:
    """The stated ceiling is what the stages hold, and the workload fits under it."""
    out = []
    ceiling, c, stated = r.ceiling, r.wl.concurrency, r.summary["concurrency_ceiling"]
    if _overstates(stated, ceiling):
        out.append(Violation("concurrency_overstated", f"summary states concurrency_ceiling {_fmt_conc(stated)} "
                                                       f"but the stages hold {_fmt_conc(ceiling)}"))
    if ceiling is not None and c > ceiling:
        out.append(Violation("concurrency_exceeded", f"the workload asks for {c} live requests; the stages hold "
                                                     f"at most {ceiling}"
                                                     + ("" if ceiling >= 0 else " (a stage's weights alone overflow)")))
    return out


def check_pipeline_order(r: Reading) -> list[Violation]:
    """Contiguous and split mode: each stage one run of the pipeline, in stage order; free mode: stages
    listed in order of first visit."""
    stages, nodes, stage_of = r.stages, r.nodes, r.stage_of
    if r.mode in ("contiguous", "split"):
        return [Violation("non_contiguous",
                          f"{nodes[v].name} (stage {stage_of[v]}, {stages[stage_of[v]]['device']}) follows "
                          f"{nodes[u].name} (stage {stage_of[u]}, {stages[stage_of[u]]['device']}) in the pipeline: "
                          f"each stage must hold one run of consecutive nodes, stages in pipeline order")
                for u, v in r.graph.edges if u in stage_of and v in stage_of and stage_of[v] < stage_of[u]]
    first_seen: list[int] = []
    for i in range(r.n):
        k = stage_of.get(i)
        if k is not None and k not in first_seen:
            first_seen.append(k)
    if first_seen != sorted(first_seen):
        return [Violation("stage_order", f"free-mode stages must be listed in order of first visit; the route "
                                         f"visits them as {first_seen}")]
    return []


def check_route(r: Reading) -> list[Violation]:
    """The route lists, node by node, the device of the stage holding it."""
    out = []
    route, n = r.doc["route"], r.n
    if len(route) != n:
        out.append(Violation("route_mismatch", f"the route has {len(route)} entries; the model has {n} nodes"))
    bad = [(r.nodes[i].name, route[i], r.stages[r.stage_of[i]]["device"]) for i in range(min(n, len(route)))
           if i in r.stage_of and route[i] != r.stages[r.stage_of[i]]["device"]]
    if bad:
        shown = "; ".join(f"{name}: route {x}, stage {s}" for name, x, s in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        out.append(Violation("route_mismatch", f"the route disagrees with the stages at {len(bad)} node(s): "
                                               f"{shown}{more}"))
    return out


def check_summary(r: Reading) -> list[Violation]:
    """Devices, lower bound, hops, hop latency (with the groups' collectives when stated) and proof."""
    out = []
    summary, stages = r.summary, r.stages
    used = len({m for st in stages if st["layers"] for m in r.group_of(st)})
    if summary["devices_used"] != used:
        out.append(Violation("summary_mismatch", f"summary states devices_used {summary['devices_used']}, the "
                                                 f"stages use {used}"))
    lb = summary["lower_bound_devices"]
    if lb is not None and lb > used:
        out.append(Violation("summary_mismatch", f"summary states a lower bound of {lb} devices, yet the stages "
                                                 f"use only {used}"))
    if len(r.stage_of) == r.n:
        out += _hop_violations(r)
    if summary["proven_optimal"] and summary["status"] != "optimal":
        out.append(Violation("proof_mismatch", f"proven_optimal is true but the status is {summary['status']!r}"))
    for level in summary.get("levels", ()):
        if level["proven"] and level["bound"] != level["value"]:
            out.append(Violation("proof_mismatch", f"level {level['name']} is stated proven with value "
                                                   f"{level['value']} but bound {level['bound']}"))
    return out


def _hop_violations(r: Reading) -> list[Violation]:
    out = []
    summary, nodes = r.summary, r.nodes
    devs = [r.stages[r.stage_of[i]]["device"] for i in range(r.n)]
    groups = {st["device"]: r.group_of(st) for st in r.stages}
    known = all(d in r.by_id and r.by_id[d].available for d in devs)
    # the groups' collectives, when the summary states that it counts them: each node's over the
    # link of its group's first two members, at its group's degree
    stated = summary.get("group_latency_us")
    lat = 0.0
    if stated is not None and known:
        for i in range(r.n):
            members = groups[devs[i]]
            link = r.links.direct(members[0], members[1]) if len(members) > 1 else None
            count = (dp_ranks.dp_collective_link_latencies(nodes[i], len(members)) if r.attention_dp
                     else ranks.collective_link_latencies(nodes[i], len(members), r.ep))
            lat += count * (link or 0.0)
        if not _close(stated, lat):
            out.append(Violation("summary_mismatch", f"summary states group_latency_us {stated}, the groups' "
                                                     f"collectives make {lat}"))
    hops = 0
    for u, v in r.graph.edges:
        a, b = devs[u], devs[v]
        if a != b:
            hops += 1
            if known:
                step = r.links.group_hop(groups[a], groups[b])
                if math.isinf(step) and r.mode == "free":
                    out.append(Violation("no_link", f"{nodes[u].name} on {a} and {nodes[v].name} on {b}: no path "
                                                    f"joins the two devices"))
                lat += step
    if summary["hops"] != hops:
        out.append(Violation("summary_mismatch", f"summary states {summary['hops']} hops, the stages make {hops}"))
    # latency is only defined over known, available devices (the others are reported elsewhere)
    if known and math.isfinite(lat) and not _close(summary["hop_latency_us"], lat):
        out.append(Violation("summary_mismatch", f"summary states hop_latency_us {summary['hop_latency_us']}, the "
                                                 f"stages make {lat}"))
    return out


def check_pins(r: Reading) -> list[Violation]:
    """Every recorded pin honoured."""
    out = []
    holding = {st["device"]: r.group_of(st) for st in r.stages}
    for p_i, pin in enumerate(r.doc.get("pins", [])):
        placed = [r.stages[r.stage_of[r.index_of[x]]]["device"] for x in pin["layers"]
                  if x in r.index_of and r.index_of[x] in r.stage_of]
        if pin["device"] is not None and any(pin["device"] not in holding.get(d, [d]) for d in placed):
            out.append(Violation("pin_violated", f"pin {p_i}: {', '.join(pin['layers'][:3])} must be on "
                                                 f"{pin['device']}, found on {', '.join(sorted(set(placed)))}"))
        elif pin["device"] is None and len(set(placed)) > 1:
            out.append(Violation("pin_violated", f"pin {p_i}: {', '.join(pin['layers'][:3])} must share one device, "
                                                 f"found on {', '.join(sorted(set(placed)))}"))
    return out


def check_requirements(r: Reading) -> list[Violation]:
    """The requirements the mapping records (placer.problem.instance.REQUIREMENTS) on its stages, from the node kinds."""
    out = []
    require = r.doc.get("require", ())
    held: dict[int, list[int]] = {k: [] for k in range(len(r.stages))}
    for i, k in r.stage_of.items():
        held[k].append(i)
    wanted = {"attention-per-stage": ("full-attention layer", lambda x: x.kind == "attention" and x.has_kv),
              "decoder-per-stage": ("decoder layer", lambda x: x.index is not None)}
    for name, (what, holds) in wanted.items():
        if name in require:
            bare = [k for k, ns in held.items() if ns and not any(holds(r.nodes[i]) for i in ns)]
            if bare:
                out.append(Violation("requirement_violated", f"{name}: stage(s) {', '.join(map(str, bare[:5]))} "
                                                             f"hold no {what}"))
    if "embedding-first-head-last" in require:
        for kind, where, want in (("embedding", "first", 0), ("lm_head", "last", len(r.stages) - 1)):
            for i, x in enumerate(r.nodes):
                drafter = (x.parent or x.name).startswith(("mtp.", "draft."))     # rides with the drafter
                if x.kind == kind and not drafter and i in r.stage_of and r.stage_of[i] != want:
                    out.append(Violation("requirement_violated", f"embedding-first-head-last: {x.name} is on stage "
                                                                 f"{r.stage_of[i]}, not the {where} stage ({want})"))
    if "mtp-with-head" in require:
        # the drafter runs on the last pipeline rank, beside the LM head: every MTP layer (or part
        # of one) and every draft-model node on the last stage (free mode: the head's device)
        last = len(r.stages) - 1
        heads = {r.stages[r.stage_of[i]]["device"] for i, x in enumerate(r.nodes)
                 if x.kind == "lm_head" and i in r.stage_of}
        drafted = False
        for i, x in enumerate(r.nodes):
            whole = x.parent or x.name
            drafts = (x.kind == "mtp" or (x.index is None and whole.startswith("mtp.")) or whole.startswith("draft."))
            if not drafts or i not in r.stage_of:
                continue
            k = r.stage_of[i]
            where = r.stages[k]["device"] in heads if r.mode == "free" and heads else k == last
            if x.kind == "mtp" or x.index is None and x.kind != "embedding":
                drafted = True
            if not where:
                out.append(Violation("requirement_violated", f"mtp-with-head: {x.name} is on stage {k}, not "
                                                             f"with the LM head on the last stage ({last})"))
        # past one pipeline rank the runtimes load the drafter's own copy of the vocabulary embedding
        # on the last rank (vLLM _maybe_share_embeddings shares it only when pp = 1; SGLang
        # pp_draft_embedding.py): an MTP drafter without a placed copy is short of those bytes
        own = any((x.parent or x.name).startswith("draft.") and x.kind == "embedding" for x in r.nodes)
        copy = any((x.parent or x.name) == "mtp.embed_tokens" for x in r.nodes)
        embeds = any(x.kind == "embedding" for x in r.nodes)
        if drafted and len(r.stages) > 1 and embeds and not own and not copy and r.mode != "free":
            out.append(Violation("requirement_violated", f"mtp-with-head: {len(r.stages)} stages, but the drafter's "
                                                         "own vocabulary embedding (mtp.embed_tokens), which the "
                                                         "runtimes load on the last rank past one rank, is not placed"))
    if "uniform-degree" in require:
        degrees = sorted({r.degree_of(st) for st in r.stages})
        if len(degrees) > 1:
            out.append(Violation("requirement_violated", f"uniform-degree: the stages run at degrees "
                                                         f"{', '.join(map(str, degrees))}"))
    return out


# the checks, in the order their violations are reported
CHECKS = (check_specs, check_degrees, check_stage_devices, check_nodes_placed, check_stage_bytes,
          check_shared_devices, check_concurrency, check_pipeline_order, check_route, check_summary, check_pins,
          check_requirements)


def validate_mapping(doc: dict, *, model=None, fleet=None, workload=None,
                     source: str = "<mapping>") -> list:
    """Every violation of ``doc`` against its specs; an empty list means the mapping is valid.

    ``model`` / ``fleet`` (objects, catalog names or paths) and ``workload`` override what the
    mapping records. Raises :class:`InvalidSpec` when ``doc`` is not a schema-valid mapping or a
    spec it names cannot be loaded: those are unreadable inputs, not violations. A two-pool
    mapping is :func:`placer.mapping.validate_pools.validate_document`'s.
    """
    check_mapping(doc, source)
    base, fl, wl = specs_from_mapping(doc, model=model, hardware=fleet, workload=workload)
    graph, found = _graph_at(doc, base)
    reading = Reading(doc, base, fl, wl, graph)
    out = check_specs(reading) + found
    for check in CHECKS[1:]:
        out += check(reading)
    return out


def validate_file(path, *, model=None, fleet=None) -> list:
    """Read the mapping at ``path`` and validate it (see :func:`validate_mapping`)."""
    from placer.mapping import read_mapping

    doc = read_mapping(path)
    return validate_mapping(doc, model=model, fleet=fleet, source=str(path))
