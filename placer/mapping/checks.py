"""The validator's checks (:data:`CHECKS`): each reads a :class:`~placer.mapping.validate.Reading`
and yields its violations, changing nothing. Nothing here comes from the placement methods."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from placer.mapping import dp_ranks, ranks
from placer.mapping.violations import Violation
from placer.problem.all_to_all import all_to_all_us
from placer.specs.units import format_bytes

if TYPE_CHECKING:
    from placer.mapping.validate import Reading
    from placer.mapping.view import MappingStage

__all__ = ["CHECKS"]

_TOL_US = 1e-6


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


def check_specs(r: Reading) -> Iterator[Violation]:
    """The mapping names the specs loaded, at the content it was made from."""
    for key, spec, what in (("model", r.base, "model"), ("hardware", r.fleet, "hardware")):
        rec = getattr(r.view, key)
        if rec.name != spec.name:
            yield Violation("spec_name_mismatch", f"the mapping is for {what} {rec.name!r}, the spec "
                                                  f"loaded is {spec.name!r}")
        if rec.sha256 != spec.sha256:
            yield Violation("spec_hash_mismatch",
                            f"{what} spec {spec.source or spec.name} has sha256 {spec.sha256[:12] or '(none)'}"
                            f"..., the mapping was made from {rec.sha256[:12] or '(none)'}...: the spec "
                            f"changed since, re-solve or validate against the original file")


def check_degrees(r: Reading) -> Iterator[Violation]:
    """The plan's degrees: ep is tp or 1, the largest stage's degree is tp, the model runs at each."""
    if r.ep_degree not in (1, r.tp):
        yield Violation("group_mismatch", f"expert-parallel degree {r.ep_degree} in a plan of tp {r.tp}: "
                                          f"experts are spread over a stage's group (ep = tp) or "
                                          f"tensor-split (ep = 1)")
    if r.attention_dp and (r.per_stage or r.ep_degree != r.tp):
        yield Violation("group_mismatch", f"an attention-data-parallel plan spreads experts over each stage's "
                                          f"group at one degree (ep = tp), it states tp {r.tp}, ep "
                                          f"{r.ep_degree}" + (", per-stage degrees" if r.per_stage else ""))
    if r.per_stage and r.degrees and max(r.degrees) != r.tp:
        yield Violation("group_mismatch", f"a per-stage plan states tp {r.tp}, its largest stage has "
                                          f"{max(r.degrees)}")
    yield from [Violation("group_mismatch", f"{r.graph.name} cannot run at tp {g}: {why}")
                for g, why in r.refusals.items() if why is not None]


def check_stage_devices(r: Reading) -> Iterator[Violation]:
    """Stages numbered in order, each on a group of available devices of one node and type, no device twice."""
    for k, st in enumerate(r.stages):
        if st.index != k:
            yield Violation("stage_order", f"stage at position {k} is numbered {st.index}; stages are "
                                           f"numbered 0..{len(r.stages) - 1}")
    for dev, count in r.uses.items():
        if count > 1:
            where = [st.index for st in r.stages if dev in st.devices]
            yield Violation("device_reused", f"device {dev} is used by {count} stages "
                                             f"({', '.join(map(str, where))})")
    for k, st in enumerate(r.stages):
        yield from _group_violations(r, k, st)


def _group_violations(r: Reading, k: int, st: MappingStage) -> Iterator[Violation]:
    members, by_id = st.devices, r.by_id
    if members[0] != st.device:
        yield Violation("group_mismatch", f"stage {k}: the group's first device is {members[0]}, the stage "
                                          f"names {st.device}")
    want_tp = r.degree_of(st)
    want_ep = (want_tp if r.ep else 1) if r.per_stage else r.ep_degree
    if st.tp != want_tp or st.ep != want_ep or len(set(members)) != want_tp or len(members) != want_tp:
        plan = "a per-stage plan" if r.per_stage else f"a plan of tp {r.tp}, ep {r.ep_degree}"
        yield Violation("group_mismatch", f"stage {k}: a group of {len(members)} device(s) (tp {st.tp}, "
                                          f"ep {st.ep}) in {plan}")
    spans = r.ep or r.attention_dp          # an expert-parallel group may span nodes, in equal shares
    racks = Counter(by_id[m].rack for m in members if m in by_id)
    stated = st.group.racks if st.group is not None else ()
    if (stated or len(racks) > 1) and all(m in by_id for m in members) and tuple(stated) != tuple(dict.fromkeys(
            by_id[m].rack for m in members)):
        yield Violation("group_mismatch", f"stage {k}: its group states racks {list(stated)}, its devices lie in "
                                          f"racks {list(dict.fromkeys(by_id[m].rack for m in members))}")
    if spans and len(set(racks.values())) > 1:
        yield Violation("group_mismatch", f"stage {k}: its group spans racks unevenly ("
                                          + ", ".join(f"{n} in rack {rack}" for rack, n in sorted(racks.items()))
                                          + "); an expert-parallel group takes the same devices of every node")
    for m in members:
        dev = by_id.get(m)
        if dev is None:
            yield Violation("unknown_device", f"stage {k}: device {m!r} is not in {r.fleet.name}")
        elif not dev.available:
            yield Violation("unavailable_device", f"stage {k}: device {m} is marked unavailable in "
                                                  f"{r.fleet.name}")
        elif m != members[0] and members[0] in by_id and dev.rack != by_id[members[0]].rack and not spans:
            yield Violation("group_mismatch", f"stage {k}: device {m} is in rack {dev.rack}, not the node of "
                                              f"{members[0]} (rack {by_id[members[0]].rack})")
    kinds = {by_id[m].type.name for m in members if m in by_id}
    if len(kinds) > 1:
        yield Violation("group_mismatch", f"stage {k}: its group mixes device types {', '.join(sorted(kinds))}")
    if not st.layers:
        yield Violation("empty_stage", f"stage {k} ({st.device}) holds no node")
    for name in st.layers:
        if name not in r.index_of:
            yield Violation("unknown_layer", f"stage {k} ({st.device}): {name!r} is not a node of "
                                             f"{r.graph.name} at granularity {r.graph.granularity}")


def check_nodes_placed(r: Reading) -> Iterator[Violation]:
    """Every node of the model on exactly one stage."""
    for i in range(r.n):
        held = r.holders.get(i, [])
        if not held:
            yield Violation("layer_missing", f"{r.nodes[i].name} is on no stage")
        elif len(held) > 1:
            yield Violation("layer_duplicated", f"{r.nodes[i].name} is placed {len(held)} times (stages "
                                                f"{', '.join(map(str, held))})")


def check_stage_bytes(r: Reading) -> Iterator[Violation]:
    """Each stage: its rack, its bytes recomputed, capacity, its stated ceiling, the link to the next."""
    c = r.rank_live
    for k, st in enumerate(r.stages):
        dev = r.by_id.get(st.device)
        if dev is None:
            continue
        mine = r.nodes_of(st)
        weights = sum(r.per_node[i][0] for i in mine)
        kv = c * sum(r.per_node[i][1] for i in mine)
        state = c * sum(r.per_node[i][2] for i in mine)
        mem, reserve, act = dev.memory_bytes, r.reserve_of(dev), r.act
        total = weights + kv + state + act
        if dev.rack != st.rack:
            yield Violation("stage_mismatch", f"stage {k}: device {dev.id} is in rack {dev.rack}, the stage "
                                              f"says {st.rack}")
        each = " on each of its devices" if r.degree_of(st) > 1 else ""
        if total + reserve > mem:
            over = total + reserve - mem
            yield Violation(
                "over_capacity",
                f"stage {k} ({dev.id}) is over capacity{each} by {over:,} B ({format_bytes(over)}): "
                f"weights {weights:,} + KV {kv:,} + state {state:,} + activations {act:,}"
                + (f" + reserve {reserve:,}" if reserve else "") + f" = {total + reserve:,} B > memory {mem:,} B")
        expect = dict(weights=weights, kv_reserve=kv, state=state, activations=act, free=mem - total - reserve)
        if st.bytes.reserve is not None or r.view.schema_version > 1:
            expect["reserve"] = reserve
        wrong = [f"{f} states {_fmt_bytes(getattr(st.bytes, f))}, recomputed {v:,}" for f, v in expect.items()
                 if getattr(st.bytes, f) != v]
        if wrong:
            yield Violation("bytes_mismatch", f"stage {k} ({dev.id}): " + "; ".join(wrong))
        holds = r.stage_holds(k)
        if _overstates(st.max_concurrency, holds):
            yield Violation("concurrency_overstated", f"stage {k} ({dev.id}) states max_concurrency "
                                                      f"{_fmt_conc(st.max_concurrency)} but holds "
                                                      f"{_fmt_conc(holds)}")
        yield from _next_hop_violations(r, k, st, dev)


def _next_hop_violations(r: Reading, k: int, st: MappingStage, dev) -> Iterator[Violation]:
    if k + 1 >= len(r.stages):
        if st.next_hop_latency_us is not None:
            yield Violation("stage_mismatch", f"stage {k} is the last stage but states next_hop_latency_us "
                                              f"{st.next_hop_latency_us}")
            return
        return
    nxt = r.by_id.get(r.stages[k + 1].device)
    mine_g, next_g = st.devices, r.stages[k + 1].devices
    if nxt is not None and dev.available and nxt.available:
        want = r.links.group_hop(mine_g, next_g)
        if r.mode != "free" and r.links.group_direct(mine_g, next_g) is None and dev.id != nxt.id:
            yield Violation("no_link", f"stages {k} ({dev.id}) and {k + 1} ({nxt.id}) are consecutive but "
                                       f"have no direct link")
        got = st.next_hop_latency_us
        expected = want if math.isfinite(want) else None
        if (got is None) != (expected is None) or (got is not None and not _close(got, expected)):
            yield Violation("stage_mismatch", f"stage {k}: next_hop_latency_us states {got}, the link "
                                              f"{dev.id}-{nxt.id} has {expected}")


def check_shared_devices(r: Reading) -> Iterator[Violation]:
    """A device listed by several stages holds all their nodes at once."""
    shared = [(dev_id, count) for dev_id, count in r.uses.items() if count > 1 and dev_id in r.by_id]
    for dev_id, count in shared:
        dev = r.by_id[dev_id]
        mine = sorted({i for st in r.stages if dev_id in st.devices for i in r.nodes_of(st)})
        total = (sum(r.per_node[i][0] for i in mine) + r.act + r.reserve_of(dev)
                 + r.rank_live * sum(r.per_node[i][1] + r.per_node[i][2] for i in mine))
        if total > dev.memory_bytes:
            yield Violation("over_capacity", f"device {dev_id} holds the nodes of {count} stages together: "
                                             f"{total:,} B > memory {dev.memory_bytes:,} B (over by "
                                             f"{total - dev.memory_bytes:,} B)")


def check_concurrency(r: Reading) -> Iterator[Violation]:
    """The stated ceiling is what the stages hold, and the workload fits under it."""
    ceiling, c, stated = r.ceiling, r.wl.concurrency, r.summary.concurrency_ceiling
    if _overstates(stated, ceiling):
        yield Violation("concurrency_overstated", f"summary states concurrency_ceiling {_fmt_conc(stated)} "
                                                  f"but the stages hold {_fmt_conc(ceiling)}")
    if ceiling is not None and c > ceiling:
        yield Violation("concurrency_exceeded", f"the workload asks for {c} live requests; the stages hold "
                                                f"at most {ceiling}"
                                                + ("" if ceiling >= 0 else " (a stage's weights alone overflow)"))


def check_pipeline_order(r: Reading) -> Iterator[Violation]:
    """Contiguous and split mode: each stage one run of the pipeline, in stage order; free mode: stages
    listed in order of first visit."""
    stages, nodes, stage_of = r.stages, r.nodes, r.stage_of
    if r.mode in ("contiguous", "split"):
        yield from (Violation("non_contiguous",
                              f"{nodes[v].name} (stage {stage_of[v]}, {stages[stage_of[v]].device}) follows "
                              f"{nodes[u].name} (stage {stage_of[u]}, {stages[stage_of[u]].device}) in the pipeline: "
                              f"each stage must hold one run of consecutive nodes, stages in pipeline order")
                    for u, v in r.graph.edges if u in stage_of and v in stage_of and stage_of[v] < stage_of[u])
        return
    first_seen: list[int] = []
    for i in range(r.n):
        k = stage_of.get(i)
        if k is not None and k not in first_seen:
            first_seen.append(k)
    if first_seen != sorted(first_seen):
        yield Violation("stage_order", f"free-mode stages must be listed in order of first visit; the route "
                                       f"visits them as {first_seen}")


def check_route(r: Reading) -> Iterator[Violation]:
    """The route lists, node by node, the device of the stage holding it."""
    route, n = r.view.route, r.n
    if len(route) != n:
        yield Violation("route_mismatch", f"the route has {len(route)} entries; the model has {n} nodes")
    bad = [(r.nodes[i].name, route[i], r.device_of(i)) for i in range(min(n, len(route)))
           if i in r.stage_of and route[i] != r.device_of(i)]
    if bad:
        shown = "; ".join(f"{name}: route {x}, stage {s}" for name, x, s in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        yield Violation("route_mismatch", f"the route disagrees with the stages at {len(bad)} node(s): "
                                          f"{shown}{more}")


def check_summary(r: Reading) -> Iterator[Violation]:
    """Devices, lower bound, hops, hop latency (with the groups' collectives when stated) and proof."""
    summary, stages = r.summary, r.stages
    used = len({m for st in stages if st.layers for m in st.devices})
    if summary.devices_used != used:
        yield Violation("summary_mismatch", f"summary states devices_used {summary.devices_used}, the "
                                            f"stages use {used}")
    lb = summary.lower_bound_devices
    if lb is not None and lb > used:
        yield Violation("summary_mismatch", f"summary states a lower bound of {lb} devices, yet the stages "
                                            f"use only {used}")
    if len(r.stage_of) == r.n:
        yield from _hop_violations(r)
    if summary.proven_optimal and summary.status != "optimal":
        yield Violation("proof_mismatch", f"proven_optimal is true but the status is {summary.status!r}")
    for level in summary.levels:
        if level.proven and level.bound != level.value:
            yield Violation("proof_mismatch", f"level {level.name} is stated proven with value "
                                              f"{level.value} but bound {level.bound}")


def _hop_violations(r: Reading) -> Iterator[Violation]:
    summary, nodes = r.summary, r.nodes
    devs = [r.device_of(i) for i in range(r.n)]
    groups = {st.device: st.devices for st in r.stages}
    known = all(d in r.by_id and r.by_id[d].available for d in devs)
    # the groups' collectives, when the summary states that it counts them: each node's over its
    # group's links, at its group's degree
    stated = summary.group_latency_us
    lat = 0.0
    if stated is not None and known:
        for i in range(r.n):
            members = groups[devs[i]]
            # the mean of the first member's links to the others: the all-to-all's steps (one link
            # inside a node; a group spanning nodes crosses the links between them)
            lats = [r.links.direct(members[0], m) or 0.0 for m in members[1:]]
            link = (lats[0] if len(set(lats)) == 1 else sum(lats) / len(lats)) if lats else None
            count = (dp_ranks.dp_collective_link_latencies(nodes[i], len(members)) if r.attention_dp
                     else ranks.collective_link_latencies(nodes[i], len(members), r.ep))
            spanning = _spanning_all_to_all_us(r, nodes[i], members)
            if spanning is not None:        # its dispatch and combine at their sizes, not 2 (g - 1) steps
                count -= 2 * (len(members) - 1)
                lat += spanning
            lat += count * (link or 0.0)
        if not _close(stated, lat):
            yield Violation("summary_mismatch", f"summary states group_latency_us {stated}, the groups' "
                                                f"collectives make {lat}")
    hops = 0
    for u, v in r.graph.edges:
        a, b = devs[u], devs[v]
        if a != b:
            hops += 1
            if known:
                step = r.links.group_hop(groups[a], groups[b])
                if math.isinf(step) and r.mode == "free":
                    yield Violation("no_link", f"{nodes[u].name} on {a} and {nodes[v].name} on {b}: no path "
                                               f"joins the two devices")
                lat += step
    if summary.hops != hops:
        yield Violation("summary_mismatch", f"summary states {summary.hops} hops, the stages make {hops}")
    # latency is only defined over known, available devices (the others are reported elsewhere)
    if known and math.isfinite(lat) and not _close(summary.hop_latency_us, lat):
        yield Violation("summary_mismatch", f"summary states hop_latency_us {summary.hop_latency_us}, the "
                                            f"stages make {lat}")


def _spanning_all_to_all_us(r: Reading, layer, members) -> float | None:
    """The dispatch and combine of an MoE layer whose experts are spread over a group spanning
    nodes, at DeepEP's low-latency figures (the one table the validator shares with the solver):
    ``ceil(c / g)`` tokens a rank of the workload's ``c``, each sent to its experts at the layer's
    latent width (else the model's hidden size), over the slowest links the first member has
    inside its node and to the other nodes, paying the slowest latency once. None for any other
    layer or group."""
    dims = dict(layer.ffn_dims or ())
    racks = {r.by_id[m].rack for m in members}
    if (len(racks) < 2 or not (r.ep or r.attention_dp) or layer.ffn != "moe" or layer.index is None
            or "experts_per_token" not in dims):
        return None
    first, fleet = members[0], r.fleet
    same = [fleet.link_bandwidth(first, m) for m in members[1:] if r.by_id[m].rack == r.by_id[first].rack]
    other = [fleet.link_bandwidth(first, m) for m in members[1:] if r.by_id[m].rack != r.by_id[first].rack]
    latency = max((fleet.link_latency_us(first, m) or 0.0) for m in members[1:])
    g = len(members)
    width = dims.get("latent_size") or r.graph.hidden_size
    return all_to_all_us("low_latency", g, max(1, -(-r.wl.concurrency // g)), width, dims["experts_per_token"],
                         True, min((b for b in same if b), default=None), min((b for b in other if b), default=None),
                         latency).us


def check_pins(r: Reading) -> Iterator[Violation]:
    """Every recorded pin honoured."""
    holding = {st.device: st.devices for st in r.stages}
    for p_i, pin in enumerate(r.view.pins):
        placed = [r.device_of(r.index_of[x]) for x in pin.layers
                  if x in r.index_of and r.index_of[x] in r.stage_of]
        if pin.device is not None and any(pin.device not in holding.get(d, [d]) for d in placed):
            yield Violation("pin_violated", f"pin {p_i}: {', '.join(pin.layers[:3])} must be on "
                                            f"{pin.device}, found on {', '.join(sorted(set(placed)))}")
        elif pin.device is None and len(set(placed)) > 1:
            yield Violation("pin_violated", f"pin {p_i}: {', '.join(pin.layers[:3])} must share one device, "
                                            f"found on {', '.join(sorted(set(placed)))}")


def check_requirements(r: Reading) -> Iterator[Violation]:
    """The requirements the mapping records (placer.problem.instance.REQUIREMENTS) on its stages, from the node kinds."""
    require = r.view.require
    held: dict[int, list[int]] = {k: [] for k in range(len(r.stages))}
    for i, k in r.stage_of.items():
        held[k].append(i)
    wanted = {"attention-per-stage": ("full-attention layer", lambda x: x.kind == "attention" and x.has_kv),
              "decoder-per-stage": ("decoder layer", lambda x: x.index is not None)}
    for name, (what, holds) in wanted.items():
        if name in require:
            bare = [k for k, ns in held.items() if ns and not any(holds(r.nodes[i]) for i in ns)]
            if bare:
                yield Violation("requirement_violated", f"{name}: stage(s) {', '.join(map(str, bare[:5]))} "
                                                        f"hold no {what}")
    if "embedding-first-head-last" in require:
        for kind, where, want in (("embedding", "first", 0), ("lm_head", "last", len(r.stages) - 1)):
            for i, x in enumerate(r.nodes):
                drafter = (x.parent or x.name).startswith(("mtp.", "draft."))     # rides with the drafter
                if x.kind == kind and not drafter and i in r.stage_of and r.stage_of[i] != want:
                    yield Violation("requirement_violated", f"embedding-first-head-last: {x.name} is on stage "
                                                            f"{r.stage_of[i]}, not the {where} stage ({want})")
    if "mtp-with-head" in require:
        # the drafter runs on the last pipeline rank, beside the LM head: every MTP layer (or part
        # of one) and every draft-model node on the last stage (free mode: the head's device)
        last = len(r.stages) - 1
        heads = {r.device_of(i) for i, x in enumerate(r.nodes)
                 if x.kind == "lm_head" and i in r.stage_of}
        drafted = False
        for i, x in enumerate(r.nodes):
            whole = x.parent or x.name
            drafts = (x.kind == "mtp" or (x.index is None and whole.startswith("mtp.")) or whole.startswith("draft."))
            if not drafts or i not in r.stage_of:
                continue
            k = r.stage_of[i]
            where = r.stages[k].device in heads if r.mode == "free" and heads else k == last
            if x.kind == "mtp" or x.index is None and x.kind != "embedding":
                drafted = True
            if not where:
                yield Violation("requirement_violated", f"mtp-with-head: {x.name} is on stage {k}, not "
                                                        f"with the LM head on the last stage ({last})")
        # past one pipeline rank the runtimes load the drafter's own copy of the vocabulary embedding
        # on the last rank (vLLM _maybe_share_embeddings shares it only when pp = 1; SGLang
        # pp_draft_embedding.py): an MTP drafter without a placed copy is short of those bytes
        own = any((x.parent or x.name).startswith("draft.") and x.kind == "embedding" for x in r.nodes)
        copy = any((x.parent or x.name) == "mtp.embed_tokens" for x in r.nodes)
        embeds = any(x.kind == "embedding" for x in r.nodes)
        if drafted and len(r.stages) > 1 and embeds and not own and not copy and r.mode != "free":
            yield Violation("requirement_violated", f"mtp-with-head: {len(r.stages)} stages, but the drafter's "
                                                    "own vocabulary embedding (mtp.embed_tokens), which the "
                                                    "runtimes load on the last rank past one rank, is not placed")
    if "uniform-degree" in require:
        degrees = sorted({r.degree_of(st) for st in r.stages})
        if len(degrees) > 1:
            yield Violation("requirement_violated", f"uniform-degree: the stages run at degrees "
                                                    f"{', '.join(map(str, degrees))}")


# the checks, in the order their violations are reported
CHECKS = (check_specs, check_degrees, check_stage_devices, check_nodes_placed, check_stage_bytes,
          check_shared_devices, check_concurrency, check_pipeline_order, check_route, check_summary, check_pins,
          check_requirements)

