"""Independent check of a stage mapping against the specs it names.

Nothing here comes from the placement methods: every byte is recomputed from the model, hardware
and workload with :mod:`placer.memory` (per device of a tensor-parallel group with the validator's
own per-tensor rules, :mod:`placer.mapping.ranks`, from the unsharded model; neither the
solver's :mod:`placer.parallel` nor its derived instance is used), the runtime reserve from the
recorded ``--reserve`` or the device type's, links and paths are read from the fleet graph (a
group reaches another through its members' direct links, and its collectives run over the link
between its first two members), and every violation is reported (not just the first) as a
:class:`Violation` with a ``kind`` from :data:`KINDS` and a message a user can act on.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass

import networkx as nx

from .. import memory
from ..refine import parse_granularity, refine
from ..reserve import NO_RESERVE, Reserve
from ..units import format_bytes
from . import check_mapping, ranks, specs_from_mapping

__all__ = ["Violation", "KINDS", "validate_mapping", "validate_file"]

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


def validate_mapping(doc: dict, *, model=None, fleet=None, workload=None,
                     source: str = "<mapping>") -> list:
    """Every violation of ``doc`` against its specs; an empty list means the mapping is valid.

    ``model`` / ``fleet`` (objects, catalog names or paths) and ``workload`` override what the
    mapping records. Raises :class:`InvalidSpec` when ``doc`` is not a schema-valid mapping or a
    spec it names cannot be loaded: those are unreadable inputs, not violations.
    """
    check_mapping(doc, source)
    base, fl, wl = specs_from_mapping(doc, model=model, hardware=fleet, workload=workload)
    out: list[Violation] = []

    def report(kind: str, message: str) -> None:
        out.append(Violation(kind, message))

    # --- identity of the specs
    for key, spec, what in (("model", base, "model"), ("hardware", fl, "hardware")):
        rec = doc[key]
        if rec["name"] != spec.name:
            report("spec_name_mismatch", f"the mapping is for {what} {rec['name']!r}, the spec loaded is {spec.name!r}")
        if rec["sha256"] != spec.sha256:
            report("spec_hash_mismatch",
                   f"{what} spec {spec.source or spec.name} has sha256 {spec.sha256[:12] or '(none)'}..., the "
                   f"mapping was made from {rec['sha256'][:12] or '(none)'}...: the spec changed since, "
                   f"re-solve or validate against the original file")

    # --- the node graph at the recorded granularity
    mode = doc["mode"]
    granularity = doc["model"].get("granularity", "layer")
    graph = base
    if base.granularity != "layer":
        report("granularity_mismatch", f"the model given is already refined to {base.granularity}; "
                                       "pass the unrefined model")
    elif mode != "split" and granularity != "layer":
        report("granularity_mismatch", f"granularity {granularity!r} applies to split mode only, not {mode}")
    else:
        try:
            parse_granularity(granularity)
            graph = refine(base, granularity, expert_groups=doc["model"].get("expert_groups", 8))
        except ValueError as exc:
            report("granularity_mismatch", str(exc))
    nodes = graph.layers
    index_of = {x.name: i for i, x in enumerate(nodes)}
    n = len(nodes)

    # --- parallel layout: groups, degree, reserve
    version = doc["schema_version"]
    layout = doc.get("parallel") or {"tp": 1, "ep": 1, "reserve": None}
    tp, ep_degree = layout["tp"], layout["ep"]
    ep = ep_degree > 1
    # per-stage degrees: every stage's group states its own tp (and ep); tp and ep above are the largest
    per_stage = bool(layout.get("per_stage"))
    if ep_degree not in (1, tp):
        report("group_mismatch", f"expert-parallel degree {ep_degree} in a plan of tp {tp}: experts are spread "
                                 f"over a stage's group (ep = tp) or tensor-split (ep = 1)")
    if version == 1:
        override = NO_RESERVE           # written before reserves existed
    else:
        override = None if layout.get("reserve") is None else Reserve.from_dict(layout["reserve"])
    hidden = graph.hidden_size
    def degree_of(st) -> int:
        return int(st["group"]["tp"]) if per_stage and "group" in st else (1 if per_stage else tp)

    degrees = sorted({degree_of(st) for st in doc["stages"]}) if per_stage else [tp]
    if per_stage and degrees and max(degrees) != tp:
        report("group_mismatch", f"a per-stage plan states tp {tp}, its largest stage has {max(degrees)}")

    def refusal_at(g: int) -> str | None:
        if g == 1:
            return None
        for x in graph.layers:
            why = ranks.rank_refusal(x, hidden, g, ep)
            if why is not None:
                return f"{x.name}: {why}"
        return ranks.stored_formats_refusal(graph.layers, wl)

    refusals = {g: refusal_at(g) for g in degrees}
    for g, why in refusals.items():
        if why is not None:
            report("group_mismatch", f"{graph.name} cannot run at tp {g}: {why}")

    def group_of(st) -> list[str]:
        return list(st["group"]["devices"]) if "group" in st else [st["device"]]

    # --- stages: devices and nodes
    stages = doc["stages"]
    for k, st in enumerate(stages):
        if st["index"] != k:
            report("stage_order", f"stage at position {k} is numbered {st['index']}; stages are numbered "
                                  f"0..{len(stages) - 1}")
    by_id = fl.by_id
    links = _Links(fl)
    uses = Counter(m for st in stages for m in dict.fromkeys(group_of(st)))
    for dev, count in uses.items():
        if count > 1:
            where = [st["index"] for st in stages if dev in group_of(st)]
            report("device_reused", f"device {dev} is used by {count} stages ({', '.join(map(str, where))})")
    holders: dict[int, list[int]] = {}
    for k, st in enumerate(stages):
        members = group_of(st)
        g = st.get("group", {"tp": 1, "ep": 1})
        if members[0] != st["device"]:
            report("group_mismatch", f"stage {k}: the group's first device is {members[0]}, the stage names "
                                     f"{st['device']}")
        want_tp = degree_of(st)
        want_ep = (want_tp if ep else 1) if per_stage else ep_degree
        if g["tp"] != want_tp or g.get("ep", 1) != want_ep or len(set(members)) != want_tp \
                or len(members) != want_tp:
            plan = "a per-stage plan" if per_stage else f"a plan of tp {tp}, ep {ep_degree}"
            report("group_mismatch", f"stage {k}: a group of {len(members)} device(s) (tp {g['tp']}, ep "
                                     f"{g.get('ep', 1)}) in {plan}")
        for m in members:
            dev = by_id.get(m)
            if dev is None:
                report("unknown_device", f"stage {k}: device {m!r} is not in {fl.name}")
            elif not dev.available:
                report("unavailable_device", f"stage {k}: device {m} is marked unavailable in {fl.name}")
            elif m != members[0] and members[0] in by_id and dev.rack != by_id[members[0]].rack:
                report("group_mismatch", f"stage {k}: device {m} is in rack {dev.rack}, not the node of "
                                         f"{members[0]} (rack {by_id[members[0]].rack})")
        kinds = {by_id[m].type.name for m in members if m in by_id}
        if len(kinds) > 1:
            report("group_mismatch", f"stage {k}: its group mixes device types {', '.join(sorted(kinds))}")
        if not st["layers"]:
            report("empty_stage", f"stage {k} ({st['device']}) holds no node")
        for name in st["layers"]:
            i = index_of.get(name)
            if i is None:
                report("unknown_layer", f"stage {k} ({st['device']}): {name!r} is not a node of {graph.name} "
                                        f"at granularity {graph.granularity}")
            else:
                holders.setdefault(i, []).append(k)
    for i in range(n):
        held = holders.get(i, [])
        if not held:
            report("layer_missing", f"{nodes[i].name} is on no stage")
        elif len(held) > 1:
            report("layer_duplicated", f"{nodes[i].name} is placed {len(held)} times (stages "
                                       f"{', '.join(map(str, held))})")
    stage_of = {i: held[0] for i, held in holders.items() if len(held) == 1}

    # --- bytes per device, capacity and concurrency per stage
    def rank_bytes(i: int, g: int) -> tuple[int, int, int]:
        x = nodes[i]
        if g == 1 or refusals.get(g) is not None:
            return (memory.weight_bytes(x, wl), memory.kv_bytes_per_request(x, wl),
                    memory.state_bytes_per_request(x, wl))
        return (ranks.rank_weight_bytes(x, hidden, wl, g, ep),
                ranks.rank_kv_bytes_per_request(x, hidden, wl, g),
                ranks.rank_state_bytes_per_request(x, hidden, wl, g))

    # each node at the degree of the stage that holds it (a node on several stages is reported above)
    node_degree = {i: degree_of(stages[k]) for i, k in stage_of.items()}
    per_node = {i: rank_bytes(i, node_degree.get(i, tp)) for i in range(n)}
    c = wl.concurrency
    act = memory.activation_buffer_bytes(nodes, wl)
    ceilings = []
    for k, st in enumerate(stages):
        dev = by_id.get(st["device"])
        mine = sorted({index_of[x] for x in st["layers"] if x in index_of})
        weights = sum(per_node[i][0] for i in mine)
        kv_req = sum(per_node[i][1] for i in mine)
        state_req = sum(per_node[i][2] for i in mine)
        if dev is None:
            continue
        mem = dev.memory_bytes
        reserve = (override or dev.type.reserve).of(mem)
        kv, state = c * kv_req, c * state_req
        total = weights + kv + state + act
        if dev.rack != st["rack"]:
            report("stage_mismatch", f"stage {k}: device {dev.id} is in rack {dev.rack}, the stage says {st['rack']}")
        each = " on each of its devices" if degree_of(st) > 1 else ""
        if total + reserve > mem:
            over = total + reserve - mem
            report("over_capacity",
                   f"stage {k} ({dev.id}) is over capacity{each} by {over:,} B ({format_bytes(over)}): "
                   f"weights {weights:,} + KV {kv:,} + state {state:,} + activations {act:,}"
                   + (f" + reserve {reserve:,}" if reserve else "") + f" = {total + reserve:,} B > memory {mem:,} B")
        expect = dict(weights=weights, kv_reserve=kv, state=state, activations=act, free=mem - total - reserve)
        if "reserve" in st["bytes"] or version > 1:
            expect["reserve"] = reserve
        wrong = [f"{f} states {_fmt_bytes(st['bytes'].get(f))}, recomputed {v:,}" for f, v in expect.items()
                 if st["bytes"].get(f) != v]
        if wrong:
            report("bytes_mismatch", f"stage {k} ({dev.id}): " + "; ".join(wrong))
        room = mem - reserve - act - weights
        per = kv_req + state_req
        holds = -1 if room < 0 else (None if per == 0 else room // per)
        ceilings.append(holds)
        if _overstates(st["max_concurrency"], holds):
            report("concurrency_overstated", f"stage {k} ({dev.id}) states max_concurrency "
                                             f"{_fmt_conc(st['max_concurrency'])} but holds {_fmt_conc(holds)}")
        # latency of the link to the next stage
        if k + 1 < len(stages):
            nxt = by_id.get(stages[k + 1]["device"])
            mine_g, next_g = group_of(st), group_of(stages[k + 1])
            if nxt is not None and dev.available and nxt.available:
                want = links.group_hop(mine_g, next_g)
                if mode != "free" and links.group_direct(mine_g, next_g) is None and dev.id != nxt.id:
                    report("no_link", f"stages {k} ({dev.id}) and {k + 1} ({nxt.id}) are consecutive but "
                                      f"have no direct link")
                got = st["next_hop_latency_us"]
                expected = want if math.isfinite(want) else None
                if (got is None) != (expected is None) or (got is not None and not _close(got, expected)):
                    report("stage_mismatch", f"stage {k}: next_hop_latency_us states {got}, the link "
                                             f"{dev.id}-{nxt.id} has {expected}")
        elif st["next_hop_latency_us"] is not None:
            report("stage_mismatch", f"stage {k} is the last stage but states next_hop_latency_us "
                                     f"{st['next_hop_latency_us']}")

    # a device listed by several stages holds all their nodes at once
    for dev_id, count in uses.items():
        dev = by_id.get(dev_id)
        if count < 2 or dev is None:
            continue
        mine = sorted({index_of[x] for st in stages if dev_id in group_of(st) for x in st["layers"]
                       if x in index_of})
        reserve = (override or dev.type.reserve).of(dev.memory_bytes)
        total = (sum(per_node[i][0] for i in mine) + act + reserve
                 + c * sum(per_node[i][1] + per_node[i][2] for i in mine))
        if total > dev.memory_bytes:
            report("over_capacity", f"device {dev_id} holds the nodes of {count} stages together: {total:,} B "
                                    f"> memory {dev.memory_bytes:,} B (over by {total - dev.memory_bytes:,} B)")

    finite = [x for x in ceilings if x is not None]
    ceiling = min(finite) if finite else None
    summary = doc["summary"]
    if _overstates(summary["concurrency_ceiling"], ceiling):
        report("concurrency_overstated", f"summary states concurrency_ceiling "
                                         f"{_fmt_conc(summary['concurrency_ceiling'])} but the stages hold "
                                         f"{_fmt_conc(ceiling)}")
    if ceiling is not None and c > ceiling:
        report("concurrency_exceeded", f"the workload asks for {c} live requests; the stages hold at most "
                                       f"{ceiling}" + ("" if ceiling >= 0 else " (a stage's weights alone overflow)"))

    # --- pipeline order and links
    if mode in ("contiguous", "split"):
        for u, v in graph.edges:
            if u in stage_of and v in stage_of and stage_of[v] < stage_of[u]:
                su, sv = stage_of[u], stage_of[v]
                report("non_contiguous",
                       f"{nodes[v].name} (stage {sv}, {stages[sv]['device']}) follows {nodes[u].name} "
                       f"(stage {su}, {stages[su]['device']}) in the pipeline: each stage must hold one run "
                       f"of consecutive nodes, stages in pipeline order")
    else:
        first_seen: list[int] = []
        for i in range(n):
            k = stage_of.get(i)
            if k is not None and k not in first_seen:
                first_seen.append(k)
        if first_seen != sorted(first_seen):
            report("stage_order", f"free-mode stages must be listed in order of first visit; the route "
                                  f"visits them as {first_seen}")

    # --- route
    route = doc["route"]
    if len(route) != n:
        report("route_mismatch", f"the route has {len(route)} entries; the model has {n} nodes")
    bad = [(nodes[i].name, route[i], stages[stage_of[i]]["device"]) for i in range(min(n, len(route)))
           if i in stage_of and route[i] != stages[stage_of[i]]["device"]]
    if bad:
        shown = "; ".join(f"{name}: route {r}, stage {s}" for name, r, s in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        report("route_mismatch", f"the route disagrees with the stages at {len(bad)} node(s): {shown}{more}")

    # --- summary against the stages
    used = len({m for st in stages if st["layers"] for m in group_of(st)})
    if summary["devices_used"] != used:
        report("summary_mismatch", f"summary states devices_used {summary['devices_used']}, the stages use {used}")
    lb = summary["lower_bound_devices"]
    if lb is not None and lb > used:
        report("summary_mismatch", f"summary states a lower bound of {lb} devices, yet the stages use only {used}")
    if len(stage_of) == n:
        devs = [stages[stage_of[i]]["device"] for i in range(n)]
        groups = {st["device"]: group_of(st) for st in stages}
        hops, lat = 0, 0.0
        known = all(d in by_id and by_id[d].available for d in devs)
        # the groups' collectives, when the summary states that it counts them: each node's over
        # the link of its group's first two members, at its group's degree
        stated = summary.get("group_latency_us")
        intra = 0.0
        if stated is not None and known:
            for i in range(n):
                members = groups[devs[i]]
                link = links.direct(members[0], members[1]) if len(members) > 1 else None
                intra += ranks.collective_link_latencies(nodes[i], len(members), ep) * (link or 0.0)
            if not _close(stated, intra):
                report("summary_mismatch", f"summary states group_latency_us {stated}, the groups' collectives "
                                           f"make {intra}")
        lat += intra
        for u, v in graph.edges:
            a, b = devs[u], devs[v]
            if a != b:
                hops += 1
                if known:
                    step = links.group_hop(groups[a], groups[b])
                    if math.isinf(step) and mode == "free":
                        report("no_link", f"{nodes[u].name} on {a} and {nodes[v].name} on {b}: no path "
                                          f"joins the two devices")
                    lat += step
        if summary["hops"] != hops:
            report("summary_mismatch", f"summary states {summary['hops']} hops, the stages make {hops}")
        # latency is only defined over known, available devices (the others are reported above)
        if known and math.isfinite(lat) and not _close(summary["hop_latency_us"], lat):
            report("summary_mismatch", f"summary states hop_latency_us {summary['hop_latency_us']}, the "
                                       f"stages make {lat}")
    if summary["proven_optimal"] and summary["status"] != "optimal":
        report("proof_mismatch", f"proven_optimal is true but the status is {summary['status']!r}")

    # --- pins
    for p_i, pin in enumerate(doc.get("pins", [])):
        placed = [stages[stage_of[index_of[x]]]["device"] for x in pin["layers"]
                  if x in index_of and index_of[x] in stage_of]
        holding = {st["device"]: group_of(st) for st in stages}
        if pin["device"] is not None and any(pin["device"] not in holding.get(d, [d]) for d in placed):
            report("pin_violated", f"pin {p_i}: {', '.join(pin['layers'][:3])} must be on {pin['device']}, "
                                   f"found on {', '.join(sorted(set(placed)))}")
        elif pin["device"] is None and len(set(placed)) > 1:
            report("pin_violated", f"pin {p_i}: {', '.join(pin['layers'][:3])} must share one device, "
                                   f"found on {', '.join(sorted(set(placed)))}")
    return out


def validate_file(path, *, model=None, fleet=None) -> list:
    """Read the mapping at ``path`` and validate it (see :func:`validate_mapping`)."""
    from . import read_mapping

    doc = read_mapping(path)
    return validate_mapping(doc, model=model, fleet=fleet, source=str(path))

