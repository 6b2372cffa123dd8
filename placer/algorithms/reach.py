"""Reachability: which devices can talk to each other, and what that rules out.

Unavailable devices can cut a fleet into pieces whose devices have no route between them. A
placement never splits linked nodes across pieces: in free mode every model edge joins devices
with a route between them (so each connected part of the model graph lies in one piece); in
contiguous and split mode consecutive stages are directly linked (so the whole pipeline lies in
one piece). Heuristics that do not walk the fleet graph (first-fit decreasing, the published
rule) place inside one piece at a time with :func:`pieces` and :func:`restricted`;
:func:`reachability_infeasibility` proves, from the pieces alone, when no placement exists.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from placer.problem.instance import Instance, Pin
from placer.problem.placement import Result, Status, evaluate

__all__ = ["DisjointSets", "components", "pieces", "node_parts", "restricted", "reachability_infeasibility", "in_pieces"]


def pieces(instance: Instance) -> list[list[int]]:
    """The available devices (indices) grouped into pieces that reach each other (a route of
    links, i.e. a finite shortest-path latency), each sorted; the pieces by decreasing total
    capacity, ties by their first device. One piece when the fleet is connected (always where the
    fabric's formula holds: every rack reaches every other; no table is built)."""
    n = instance.n_devices
    if instance.fleet.formula:
        return [list(range(n))]
    reach = np.isfinite(np.asarray(instance.latency_us))
    seen = np.zeros(n, dtype=bool)
    out: list[list[int]] = []
    for d in range(n):
        if seen[d]:
            continue
        members = np.flatnonzero(reach[d])
        members = members if members.size else np.array([d])
        seen[members] = True
        out.append(sorted(int(x) for x in members))
    caps = instance.capacity_bytes
    out.sort(key=lambda p: (-sum(caps[d] for d in p), p[0]))
    return out


class DisjointSets:
    """Union-find over ``0 .. n-1`` (path halving): the one partition helper of the package."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)

    def groups(self, members=None) -> list[list[int]]:
        """The sets (of ``members``, default all), each sorted, ordered by their first element."""
        out: dict[int, list[int]] = {}
        for x in range(len(self.parent)) if members is None else sorted(members):
            out.setdefault(self.find(x), []).append(x)
        return sorted(out.values())


def components(n: int, pairs) -> list[list[int]]:
    """The connected components of the graph on ``0 .. n-1`` with edges ``pairs``, each sorted,
    ordered by their first element."""
    sets = DisjointSets(n)
    for u, v in pairs:
        sets.union(u, v)
    return sets.groups()


def node_parts(instance: Instance) -> list[list[int]]:
    """The nodes grouped into the parts that must share a piece of the fleet: connected parts of the
    model graph (edges and pins together) in free mode, the whole model in contiguous and split
    mode (the stages form one linked path)."""
    n = instance.n_nodes
    if instance.mode != "free":
        return [list(range(n))]
    links = list(instance.edges) + [(p.nodes[0], v) for p in instance.pins for v in p.nodes[1:]]
    return components(n, links)


def restricted(instance: Instance, devices) -> Instance:
    """``instance`` with only ``devices`` (indices) available: the same model, workload, mode and
    pins (every pinned device must be among ``devices``)."""
    keep = {instance.devices[d].id for d in devices}
    others = [d.id for d in instance.devices if d.id not in keep]
    return instance.with_fleet(instance.fleet.without(others)) if others else instance


def _pinned_pieces(instance: Instance, where: dict[int, int], nodes) -> set[int]:
    index = instance.device_index
    wanted = set(nodes)
    return {where[index[p.device]] for p in instance.pins if p.device is not None and wanted & set(p.nodes)}


def reachability_infeasibility(instance: Instance, check) -> str | None:
    """Why no placement can exist because the fleet is cut into pieces, or None when the pieces rule
    nothing out (or the fleet is connected).

    Proven reasons only: nodes that must share a piece are pinned to devices in different pieces,
    or (when the model is one part) no piece alone passes ``check``, a function of an instance
    returning ``(reason, weights_alone)`` or None (:func:`placer.algorithms.infeasibility`: a node
    larger than every device of the piece, a lower bound above the piece's size, ...).
    """
    parts = pieces(instance)
    if len(parts) == 1:
        return None
    where = {d: k for k, p in enumerate(parts) for d in p}
    shape = ", ".join(f"{len(p)} device{'s' if len(p) > 1 else ''}" for p in parts)
    head = f"the fleet's available devices fall into {len(parts)} pieces with no route between them ({shape})"
    groups = node_parts(instance)
    for nodes in groups:
        pinned = _pinned_pieces(instance, where, nodes)
        if len(pinned) > 1:
            devs = sorted({p.device for p in instance.pins if p.device is not None and set(nodes) & set(p.nodes)})
            return (f"{head}; linked nodes are pinned to devices in different pieces ({', '.join(devs)}), "
                    f"but a placement keeps linked nodes in one piece")
    if len(groups) == 1:
        found = _no_piece_holds(instance, parts, where, groups[0], check)
        if found is None:
            return None
        what = "the pipeline's stages form one linked path" if instance.mode != "free" else \
            "the model's nodes are all linked"
        return f"{head}; {what}, so the whole model must sit in one piece, and none can hold it: {found}"
    # unlinked parts (free mode): each part lies in one piece, so a part no piece holds alone rules
    # every placement out
    for nodes in groups:
        sub = _part_instance(instance, nodes)
        if sub is None:
            return None
        found = _no_piece_holds(sub, parts, where, range(sub.n_nodes), check, pinned_in=(instance, nodes))
        if found is not None:
            first, last = instance.nodes[nodes[0]].name, instance.nodes[nodes[-1]].name
            span = first if len(nodes) == 1 else f"{first}..{last}"
            return (f"{head}; the model falls into {len(groups)} unlinked parts and each must sit in one piece, "
                    f"but none can hold the part of {len(nodes)} node{'s' if len(nodes) > 1 else ''} {span}: "
                    f"{found}")
    return None


def _no_piece_holds(instance: Instance, parts, where, nodes, check, pinned_in=None) -> str | None:
    """Why no piece (of those holding the nodes' pinned devices) passes ``check`` for ``instance``
    restricted to it, in words about the largest such piece; None when one passes."""
    owner, owner_nodes = pinned_in if pinned_in is not None else (instance, nodes)
    pinned = _pinned_pieces(owner, where, owner_nodes)
    reasons = []
    for k in range(len(parts)):
        if pinned and k not in pinned:
            continue
        why = check(restricted(instance, parts[k]))
        if why is None:
            return None
        reasons.append((k, why[0]))
    k, why = reasons[0]
    why = why.replace("the fleet has", "the piece has")
    first = instance.devices[parts[k][0]].id
    return f"in the largest{' allowed' if pinned else ''} piece (with {first}), {why}"


def _part_instance(instance: Instance, nodes) -> Instance | None:
    """The nodes of one unlinked part as an instance of their own (their edges and pins; no
    requirement, which concerns stages other parts may share), or None for grouped devices
    (tensor-parallel layouts are rebuilt from the whole model). A part that fits no piece alone
    fits none in ``instance`` either: the whole model's activation buffer is at least the part's."""
    lay = instance.layout
    if lay is not None and (lay.tp > 1 or lay.base_fleet is not None):
        return None
    index = {v: k for k, v in enumerate(nodes)}
    model = replace(instance.model, layers=tuple(instance.model.layers[i] for i in nodes),
                    edges=tuple((index[u], index[v]) for u, v in instance.edges if u in index))
    pins = tuple(Pin(tuple(index[n] for n in p.nodes), p.device) for p in instance.pins if p.nodes[0] in index)
    return Instance(model, instance.fleet, instance.workload, instance.mode, pins)


def in_pieces(instance: Instance, method, lower_bound: int | None) -> Result:
    """Run ``method(sub_instance, lower_bound=...)`` on each piece of a cut fleet that holds every
    pinned device, and return the placement using the fewest devices (then the least hop latency)
    in ``instance``'s device indices; without one, a Result saying why (INFEASIBLE only when the
    model must sit in one piece and every piece's answer is INFEASIBLE)."""
    from time import perf_counter

    t0 = perf_counter()
    parts = pieces(instance)
    where = {d: k for k, p in enumerate(parts) for d in p}
    pinned = _pinned_pieces(instance, where, range(instance.n_nodes))
    best, answers = None, []
    for k, members in enumerate(parts):
        if pinned - {k}:
            continue
        sub = restricted(instance, members)
        r = method(sub, lower_bound=lower_bound)
        answers.append((members, r))
        if r.assignment is None:
            continue
        back = [instance.device_index[sub.devices[d].id] for d in r.assignment]
        key = (r.devices_used, r.hop_latency_us or 0.0)
        if best is None or key < best[0]:
            best = (key, back, r)
    name = getattr(method, "__name__", "method")
    if best is not None:
        _, assignment, r = best
        stats = dict(r.stats)
        stats["pieces"] = len(parts)
        return evaluate(instance, assignment, method=r.method, status=r.status, lower_bound=lower_bound,
                        seconds=perf_counter() - t0, objective=r.objective, bound=r.bound,
                        proven_optimal=r.proven_optimal and len(parts) == 1, stats=stats)
    one_part = len(node_parts(instance)) == 1
    status = Status.INFEASIBLE if one_part and answers and all(r.status == Status.INFEASIBLE for _, r in answers) \
        else Status.UNKNOWN
    if answers:
        members, r = answers[0]
        why = f"in the largest piece (with {instance.devices[members[0]].id}): {r.message}"
    else:
        why = "the pins lie in different pieces"
    return Result(name, instance.mode, status, lower_bound_devices=lower_bound, seconds=perf_counter() - t0,
                  message=f"the fleet falls into {len(parts)} pieces with no route between them; {name} "
                          f"places inside one piece and found no placement: {why}")
