"""Stages that are groups of devices: a fixed tensor-parallel degree as a reduction.

For a degree ``tp``, every node (rack) of the fleet is cut into groups of ``tp`` of its available
devices, in slot order (inside a node every device pair is linked alike, so which devices form a
group does not matter; the devices left over, fewer than ``tp``, stay unused). Each group becomes
one device of a derived fleet, named after its first member; two groups are linked when some pair
of their members is, at the lowest such latency. Every layer becomes one rank's share of it
(:func:`placer.problem.parallel.shard_model`). The reduction is :func:`apply` (the rank's model),
:func:`group_fleet` and :func:`group_pins` (the groups as devices), which
:func:`placer.problem.instance.group_instance` composes into the derived instance; its inverse is
:func:`per_device`. The placement methods run unchanged on the derived instance, so a proof there
is a proof for the degree: the fewest groups times ``tp`` is the fewest devices a degree-``tp``
plan can use.

Pins name devices of the specs: a pin to any member applies to its group; unavailable devices
are in no group.

**The intra-group links in the hop-latency level.** A group runs its collectives over the node's
links, and the hop-latency level counts their latency beside the hops between stages. Per node,
as the simulator times them (:func:`placer.simulate.cost.collective_time_us`, a ring all-reduce
of ``2 (g - 1)`` steps and a pairwise all-to-all of ``g - 1``, each step one link latency):

* a decoder layer: two all-reduces (after the row-parallel attention output and MLP down
  projections), ``4 (g - 1)`` link latencies; under expert parallelism an MoE layer swaps its
  FFN all-reduce for a dispatch and a combine all-to-all, again ``2 (g - 1) + 2 (g - 1)``;
* the vocabulary-parallel embedding: one all-reduce, ``2 (g - 1)``; every other node none
  (the LM head's logits stay sharded for the sampler, as the simulator has it).

The link is the one between the group's first two members (inside a node every pair is linked
alike). The bandwidth part of a collective is left to the simulator, as it is for the hops, with
one exception: a group spanning nodes (:mod:`placer.problem.reductions.wide_ep`) runs its dispatch
and combine on DeepEP's kernels, which send to every rank at once, so ring steps would be no
measure of them (72 ranks over 9 nodes made 31 ms a step for DeepSeek-V3): each MoE layer's pair
costs the all-to-all model's time instead (:func:`placer.problem.all_to_all.all_to_all_us`,
low-latency figures, at the tokens a rank sends at the workload's concurrency,
:func:`~placer.problem.all_to_all.rank_tokens`). For a fixed degree every node pays its
collectives on whichever group holds it, so when every group's term is the same it is one
constant added to the level's value and to its bound (a proof carries over); when the groups'
terms differ, the bound adds each node's cheapest group's term and the level is proven only if
the value still meets it (:func:`per_device`).
"""

from __future__ import annotations

from dataclasses import replace

from placer.problem.all_to_all import all_to_all_us, group_links, moe_width, rank_tokens
from placer.problem.parallel import model_refusal, shard_model, stored_refusal
from placer.problem.reductions.attention_dp import per_group
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Device, Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["apply", "group_pins", "group_fleet", "fleet_of_groups", "node_sizes", "has_gpus", "candidate_degrees", "default_degrees", "per_device", "collectives_of",
           "group_link_us", "node_collective_latency_us", "group_latency_us"]


def apply(model: LayerGraph, workload: Workload, tp: int, ep: bool, mode: str) -> LayerGraph:
    """One rank's share of every layer of ``model`` at degree ``tp`` (``ep``: experts spread whole):
    :class:`InvalidSpec` (field ``tp``) in split mode or when the model's dimensions (or its stored
    formats under ``workload``) refuse the degree."""
    if mode == "split" and tp > 1:
        raise InvalidSpec(ARGUMENT, "tp", "split mode cuts layers itself; tensor parallelism runs in contiguous "
                                        "or free mode")
    why = model_refusal(model, tp, ep) or stored_refusal(model, workload, tp, ep)
    if why is not None:
        raise InvalidSpec(ARGUMENT, "tp", f"{model.name} cannot run at tp {tp}: {why}")
    return shard_model(model, workload, tp, ep)


def group_pins(pins, parse, fleet: Fleet, members, tp: int) -> tuple:
    """Pins naming devices (and nodes) of the specs, each read by ``parse``, translated to the
    groups' devices ``members`` (:func:`group_fleet`): a pin to any member applies to its group."""
    of = {m: ids[0] for ids in members for m in ids}
    known = {d.id: d for d in fleet.devices}
    translated = []
    for p in pins:
        pin = parse(p)
        if pin.device is not None:
            dev = known.get(pin.device)
            if dev is None:
                raise InvalidSpec(ARGUMENT, "pins", f"unknown device {pin.device!r}")
            if not dev.available:
                raise InvalidSpec(ARGUMENT, "pins", f"unavailable device {pin.device!r}")
            if pin.device not in of:
                raise InvalidSpec(ARGUMENT, "pins", f"device {pin.device} is in no group of {tp} (its node has "
                                                     f"{node_sizes(fleet)[dev.rack]} available devices)")
            pin = replace(pin, device=of[pin.device])
        translated.append(pin)
    return tuple(translated)


def node_sizes(fleet: Fleet) -> dict[int, int]:
    """Available devices per rack (node)."""
    out: dict[int, int] = {}
    for d in fleet.available:
        out[d.rack] = out.get(d.rack, 0) + 1
    return out


def has_gpus(fleet: Fleet) -> bool:
    """Whether some available device of ``fleet`` is a GPU (only then may a stage be a group of devices)."""
    return any(d.type.kind == "gpu" for d in fleet.available)


def candidate_degrees(fleet: Fleet, *, per_stage: bool = False) -> list[int]:
    """Degrees tried unless named: 1 on wafer fleets; on GPU fleets the divisors of the largest
    node's size (``per_stage``: of every node's size)."""
    if not has_gpus(fleet):
        return [1]
    sizes = node_sizes(fleet).values()
    pool = sizes if per_stage else [max(sizes)]
    return sorted({g for size in pool for g in range(1, size + 1) if size % g == 0})


def default_degrees(model: LayerGraph, fleet: Fleet, ep: bool = False,
                    workload=None) -> tuple[list[int], dict[int, str]]:
    """The degrees ``--tp`` defaults to: :func:`candidate_degrees` that the model allows (under
    ``workload`` when given: see :func:`placer.problem.parallel.allowed_degrees`). Returns (degrees,
    {refused degree: reason}); :func:`placer.planning.layouts.device_layouts` adds the fleet's
    node sizes and expert parallelism."""
    from placer.problem.parallel import allowed_degrees

    return allowed_degrees(model, candidate_degrees(fleet), ep, workload)


def group_fleet(fleet: Fleet, tp: int) -> tuple[Fleet, tuple[tuple[str, ...], ...]]:
    """(the derived fleet whose devices are groups of ``tp`` devices of one node, the member ids of
    each of its devices in order); a ``tp`` above every node's size forms groups of whole nodes
    (:mod:`placer.problem.reductions.wide_ep`). Raises :class:`InvalidSpec` when no group forms."""
    if fleet.available and tp > max(node_sizes(fleet).values()):
        from placer.problem.reductions.wide_ep import spanning_members  # groups of whole nodes

        spanning = spanning_members(fleet, tp)
        return fleet_of_groups(fleet, spanning), tuple(spanning)
    racks: dict[int, list[Device]] = {}
    for d in fleet.available:
        racks.setdefault(d.rack, []).append(d)
    members: list[tuple[str, ...]] = []
    for rack in sorted(racks):
        avail = sorted(racks[rack], key=lambda d: d.slot)
        for k in range(len(avail) // tp):
            members.append(tuple(d.id for d in avail[k * tp:(k + 1) * tp]))
    if not members:
        largest = max(node_sizes(fleet).values())
        raise InvalidSpec(ARGUMENT, "tp", f"no node of {fleet.name} has {tp} available devices (the largest has "
                                        f"{largest})")
    return fleet_of_groups(fleet, members), tuple(members)


def fleet_of_groups(fleet: Fleet, members) -> Fleet:
    """The derived fleet whose devices are the groups ``members`` (device ids of ``fleet``, each
    group named after its first member); two groups are linked when some pair of their members is,
    at the lowest such latency. The fleet's fabric (:mod:`placer.specs.fabric`) carries over when
    every group lies in one rack and is named after its lowest slot (a group then links as its
    first member does); else its implied links are listed."""
    by_id = fleet.by_id
    devices: list[Device] = []
    leader: dict[str, str] = {}
    for ids in members:
        devices.append(by_id[ids[0]])
        for i in ids:
            leader[i] = ids[0]
    keep = fleet.fabric is not None and all(
        len({by_id[i].rack for i in ids}) == 1 and by_id[ids[0]].slot == min(by_id[i].slot for i in ids)
        for ids in members)
    if keep and not fleet.fabric.extra:
        return replace(fleet, devices=tuple(devices), links=_fabric_group_links(fleet, devices, leader))
    listed = fleet.links if keep or fleet.fabric is None else \
        [(a, b, lat, bw) for (a, b), (lat, bw) in fleet.link_table.items()]
    best: dict[tuple[str, str], tuple[float, float | None]] = {}
    for a, b, lat, bw in listed:
        ga, gb = leader.get(a), leader.get(b)
        if ga is None or gb is None or ga == gb:
            continue
        key = (ga, gb) if ga < gb else (gb, ga)
        if key not in best or lat < best[key][0]:
            best[key] = (lat, bw)
    links = tuple((a, b, lat, bw) for (a, b), (lat, bw) in best.items())
    return replace(fleet, devices=tuple(devices), links=links, fabric=fleet.fabric if keep else None)


def _fabric_group_links(fleet: Fleet, leaders: list[Device], leader: dict[str, str]) -> tuple:
    """The listed links of groups of one rack each on a fabric without extra links: every pair of
    groups of a rack at the intra-rack latency (their members' links all are), and the ring or
    line links between gateways, which belong to the groups that lead with them."""
    fabric = fleet.fabric
    by_rack: dict[int, list[str]] = {}
    for d in leaders:
        by_rack.setdefault(d.rack, []).append(d.id)
    out = [(a, b, fabric.intra_us, fabric.intra_bw) for ids in by_rack.values()
           for k, a in enumerate(ids) for b in ids[k + 1:]]
    if not fabric.implied:
        out += [(leader[a], leader[b], lat, bw) for a, b, lat, bw in fleet.links
                if a in leader and b in leader and fleet.by_id[a].rack != fleet.by_id[b].rack]
    return tuple(out)


def collectives_of(layer, ep: bool = False, attention_dp: bool = False) -> tuple[int, int]:
    """(all-reduces, all-to-alls) ``layer`` runs per decode step on a group of more than one
    device (see the module docstring): a decoder layer (2, 0), one all-reduce for each sub-block it
    has when its spec gives them (a Nemotron-H layer of a mixer or an FFN alone: (1, 0)), or (1, 2)
    for an MoE layer under expert parallelism; the embedding (1, 0); any other node (0, 0). Under
    attention data parallelism (:mod:`placer.problem.reductions.attention_dp`) every rank runs its
    own requests through replicated weights, so only an MoE layer communicates: a dispatch and a
    combine all-to-all (0, 2)."""
    moe = layer.ffn == "moe" and bool(layer.ffn_dims or layer.tensors)
    if attention_dp:
        return (0, 2) if moe and layer.index is not None else (0, 0)
    if layer.kind == "embedding":
        return 1, 0
    if layer.index is None:
        return 0, 0
    blocks = (bool(layer.mixer_dims) + bool(layer.ffn_dims)) if (layer.mixer_dims or layer.ffn_dims) else 2
    if ep and moe:
        return blocks - 1, 2
    return blocks, 0


def group_link_us(fleet: Fleet, members) -> float:
    """Latency (us) of the link a group's collectives run over: the mean of its first member's
    links to the others (inside a node every pair is linked alike, so the first two members'
    link; a group spanning nodes, :mod:`placer.problem.reductions.wide_ep`, crosses the links
    between them on its share of the steps; 0 for a group of one, a missing link counts 0)."""
    if len(members) < 2:
        return 0.0
    a = members[0]
    lats = [float(fleet.link_latency_us(a, b) or 0.0) for b in members[1:]]
    return lats[0] if len(set(lats)) == 1 else sum(lats) / len(lats)


def node_collective_latency_us(layer, g: int, link_us: float, ep: bool = False,
                               attention_dp: bool = False, all_to_all_us: float | None = None) -> float:
    """Link latency ``layer``'s collectives cost on a group of ``g`` devices whose link has
    ``link_us``: ``2 (g - 1)`` per all-reduce and ``g - 1`` per all-to-all; a group spanning nodes
    gives ``all_to_all_us``, the time of the layer's dispatch and combine together, which its two
    all-to-alls cost instead."""
    if g < 2:
        return 0.0
    reduces, to_all = collectives_of(layer, ep, attention_dp)
    steps = 2 * reduces * (g - 1) * link_us
    if to_all and all_to_all_us is not None:
        return steps + to_all / 2 * all_to_all_us
    return steps + to_all * (g - 1) * link_us


class _GroupTerm:
    """What one group's collectives cost a node it holds: its ring link and, spanning nodes, its
    all-to-all links (:class:`~placer.problem.all_to_all.GroupLinks`)."""

    def __init__(self, instance, links, a2a):
        self.instance, self.link_us, self.a2a = instance, links, a2a
        self._memo: dict = {}

    def __call__(self, layer) -> float:
        inst = self.instance
        pair = None
        if self.a2a is not None:
            moe = moe_width(layer, inst.model.hidden_size)
            if moe is not None:
                if moe not in self._memo:
                    a = self.a2a
                    self._memo[moe] = all_to_all_us("low_latency", inst.tp, rank_tokens(inst), moe[0], moe[1], True,
                                                    a.intra_bytes_per_s, a.inter_bytes_per_s, a.latency_us).us
                pair = self._memo[moe]
        return node_collective_latency_us(layer, inst.tp, self.link_us, inst.ep, inst.attention_dp, pair)


def _group_terms(instance) -> list[_GroupTerm]:
    """Per device index of ``instance``, its group's term (groups alike share one)."""
    base = instance.layout.base_fleet if instance.layout is not None and instance.layout.base_fleet else None
    fleet = base or instance.fleet
    spread = instance.ep or instance.attention_dp
    alike: dict = {}
    out = []
    for d in range(instance.n_devices):
        members = instance.members(d)
        links = group_links(fleet, members) if spread and len(members) > 1 else None
        key = (group_link_us(fleet, members), links if links is not None and links.spans else None)
        if key not in alike:
            alike[key] = _GroupTerm(instance, *key)
        out.append(alike[key])
    return out


def group_latency_us(instance, assignment) -> float:
    """The intra-group part of a placement's hop latency: every node's collectives on the group
    that holds it (0 when every stage is one device, and for per-stage degrees, whose own model,
    :mod:`placer.algorithms.stage_degrees`, counts the hops between stages only)."""
    if instance.tp < 2 or assignment is None or (instance.layout is not None and instance.layout.per_stage):
        return 0.0
    terms = _group_terms(instance)
    return sum(terms[int(d)](x) for x, d in zip(instance.nodes, assignment))


def _group_latency_floor_us(instance) -> float:
    """The least :func:`group_latency_us` any placement can have: each node on its cheapest group."""
    kinds = list({id(t): t for t in _group_terms(instance)}.values())
    return sum(min(t(x) for t in kinds) for x in instance.nodes) if kinds else 0.0


def per_device(result, instance):
    """The inverse of the reduction: ``result`` of a derived instance with its device figures counted
    in devices, not groups (and, under attention data parallelism, its concurrency figures in live
    requests of a group, :func:`placer.problem.reductions.attention_dp.per_group`):
    devices used, lower bound, objective, bound and the devices level, each times the degree
    (the planning step keeps the stage count, ``Solved.stages``); and, given the instance, its hop latency
    with the intra-group links costed (:func:`group_latency_us`; the latency level's bound adds
    the cheapest group's term, so the level stays proven exactly when its value meets the bound).
    ``instance`` may be the degree alone (device figures only)."""
    tp = instance if isinstance(instance, int) else instance.tp
    if not isinstance(instance, int) and instance.attention_dp:
        result = per_group(result, instance)
    if tp == 1:
        return result
    def times(x):
        return None if x is None else x * tp

    levels = tuple(replace(lv, value=times(lv.value), bound=times(lv.bound)) if lv.name == "devices" else lv
                   for lv in result.levels)
    stats = dict(result.stats)
    changes = dict(devices_used=times(result.devices_used), lower_bound_devices=times(result.lower_bound_devices),
                   objective=times(result.objective), bound=times(result.bound), stats=stats)
    if not isinstance(instance, int) and result.assignment is not None:
        intra = group_latency_us(instance, result.assignment)
        floor = _group_latency_floor_us(instance)
        stats["group_latency_us"] = intra
        changes["hop_latency_us"] = (result.hop_latency_us or 0.0) + intra
        lost = False
        out = []
        for lv in levels:
            if lv.name == "latency":
                value = None if lv.value is None else lv.value + intra
                bound = None if lv.bound is None else lv.bound + floor
                proven = lv.proven and intra == floor
                lost |= lv.proven and not proven
                lv = replace(lv, value=value, bound=bound, proven=proven)
            out.append(lv)
        levels = tuple(out)
        if lost and str(result.status) == "optimal":
            # the status enum's own "feasible" (placer.problem.placement imports instance, which imports this)
            changes.update(status=type(result.status)("feasible"), proven_optimal=False)
    return result.replace(levels=levels, **changes)
