"""The exact-bytes check every placement passes before a method's result is returned.

This is the algorithms' own guard (the independent validator lives in :mod:`placer.mapping.validate` and
shares no code with this package). A placement that fails it is a bug in the method that made it,
never a user error: :class:`PlacementBug` is raised.
"""

from __future__ import annotations

import math

from placer.problem.instance import Instance
from placer.problem.placement import Result, hops_of

__all__ = ["PlacementBug", "check_placement", "stage_order", "overloaded", "pin_violation", "fits_bytes",
           "requirement_violation", "acceptable"]

_ORDER_SEARCH_STEPS = 100_000


class PlacementBug(RuntimeError):
    """A method returned a placement that breaks the instance's rules."""


def stage_order(instance: Instance, assignment, hint=None) -> list[int] | None:
    """An order of the used devices in which every edge goes forward or stays (each device one
    stage, stage numbers monotone along edges) and consecutive stages are directly linked; None
    when there is none. Tries ``hint``, then the order of first visit, then a bounded search."""
    used: list[int] = []
    seen: set[int] = set()
    for d in assignment:
        if d not in seen:
            seen.add(d)
            used.append(d)
    succ: dict[int, set[int]] = {d: set() for d in used}
    for u, v in instance.edges:
        a, b = assignment[u], assignment[v]
        if a != b:
            succ[a].add(b)
    def valid(order) -> bool:
        if sorted(order) != sorted(used):
            return False
        rank = {d: k for k, d in enumerate(order)}
        if any(rank[a] > rank[b] for a in succ for b in succ[a]):
            return False
        return all(instance.link_between(a, b) is not None for a, b in zip(order, order[1:]))

    for candidate in (hint, used):
        if candidate is not None and valid(list(candidate)):
            return list(candidate)
    # a topological order of the stage graph with linked neighbours (parallel stages of a DAG)
    indeg = {d: 0 for d in used}
    for a in succ:
        for b in succ[a]:
            indeg[b] += 1
    steps = 0
    order: list[int] = []

    def extend() -> bool:
        nonlocal steps
        if len(order) == len(used):
            return True
        steps += 1
        if steps > _ORDER_SEARCH_STEPS:
            return False
        for d in used:
            if indeg[d] == 0 and d not in placed and (not order or instance.link_between(order[-1], d) is not None):
                placed.add(d)
                order.append(d)
                for b in succ[d]:
                    indeg[b] -= 1
                if extend():
                    return True
                for b in succ[d]:
                    indeg[b] += 1
                order.pop()
                placed.discard(d)
        return False

    placed: set[int] = set()
    return list(order) if extend() else None


def overloaded(instance: Instance, assignment) -> list[tuple[int, int]]:
    """(device, bytes held) for every device whose demand exceeds its capacity, in exact bytes."""
    load = [0] * instance.n_devices
    for i, d in enumerate(assignment):
        load[d] += instance.demand_bytes[i]
    return [(d, total) for d, total in enumerate(load) if total > instance.capacity_bytes[d]]


def pin_violation(instance: Instance, assignment) -> str | None:
    """What the first pin ``assignment`` breaks says, or None when every pin holds."""
    for pin in instance.pins:
        on = {assignment[i] for i in pin.nodes}
        if len(on) > 1:
            return f"pinned nodes {[instance.nodes[i].name for i in pin.nodes]} on {len(on)} devices"
        if pin.device is not None and instance.devices[on.pop()].id != pin.device:
            return f"pin to {pin.device} not honoured"
    return None


def fits_bytes(instance: Instance, assignment) -> bool:
    """Every device within its capacity in exact bytes and every pin honoured."""
    return not overloaded(instance, assignment) and pin_violation(instance, assignment) is None


_COVER_WORDS = {"attention-per-stage": "full-attention layer", "decoder-per-stage": "decoder layer"}


def requirement_violation(instance: Instance, assignment) -> str | None:
    """What the first requirement (``instance.require``) ``assignment`` breaks says, or None."""
    used = set(assignment)
    for name, nodes in instance.cover_sets:
        held = set(assignment[i] for i in nodes)
        bare = sorted(d for d in used if d not in held)
        if bare:
            return (f"{len(bare)} stage(s) hold no {_COVER_WORDS[name]} ({instance.devices[bare[0]].id} "
                    f"first); {name} asks for one on every stage")
    for name, group in instance.together_groups:
        on = {assignment[i] for i in group}
        if len(on) > 1 and name == "mtp-with-head":
            return (f"the draft nodes are not all on the LM head's (last) stage ({len(on)} devices hold "
                    f"{', '.join(instance.nodes[i].name for i in group[:6])}{' ...' if len(group) > 6 else ''}); "
                    "mtp-with-head asks for one")
        if len(on) > 1:
            what = "embedding" if any(instance.nodes[i].kind == "embedding" for i in group) else "LM head"
            return (f"the {what} is not on the {'first' if what == 'embedding' else 'last'} stage "
                    f"({', '.join(instance.nodes[i].name for i in group)} on {len(on)} devices); "
                    "embedding-first-head-last asks for it")
    if "uniform-degree" in instance.require and instance.layout is not None and instance.layout.per_stage:
        sizes = sorted({len(instance.members(d)) for d in used})
        if len(sizes) > 1:
            return f"stages run at degrees {', '.join(map(str, sizes))}; uniform-degree asks for one"
    return None


def acceptable(instance: Instance, assignment) -> bool:
    """Within capacity in exact bytes, every pin and every requirement honoured."""
    return fits_bytes(instance, assignment) and requirement_violation(instance, assignment) is None


def check_placement(instance: Instance, result: Result) -> None:
    """Raise :class:`PlacementBug` unless ``result``'s placement holds in exact bytes: every node
    placed once on an available device, each device's demand within its capacity, pins honoured,
    the mode's contiguity and links, and the reported counts equal to the recomputed ones."""
    a = result.assignment
    name = result.method

    def fail(msg: str) -> None:
        raise PlacementBug(f"method {name} returned a placement that fails the exact check: {msg}")

    n, n_dev = instance.n_nodes, instance.n_devices
    if a is None or len(a) != n:
        fail(f"{0 if a is None else len(a)} entries for {n} nodes")
    for i, d in enumerate(a):
        if not isinstance(d, int) or not 0 <= d < n_dev:
            fail(f"node {instance.nodes[i].name} on device index {d!r}")
    for d, total in overloaded(instance, a):
        fail(f"device {instance.devices[d].id} holds {total:,} B, capacity {instance.capacity_bytes[d]:,} B")
    broken = pin_violation(instance, a) or requirement_violation(instance, a)
    if broken is not None:
        fail(broken)
    if instance.mode == "free":
        for u, v in instance.edges:
            if a[u] != a[v] and math.isinf(instance.hop_us(a[u], a[v])):
                fail(f"edge {instance.nodes[u].name} -> {instance.nodes[v].name} joins unconnected devices")
    elif stage_order(instance, a, result.order) is None:
        fail("the stages are not contiguous along linked devices")
    used = len(set(a))
    hops, latency = hops_of(instance, a)
    if result.devices_used != used:
        fail(f"reports {result.devices_used} devices, uses {used}")
    reported = result.hop_latency_us or 0.0
    if result.hops != hops or not math.isclose(reported, latency, rel_tol=1e-9, abs_tol=1e-9):
        fail(f"reports {result.hops} hops / {result.hop_latency_us} us, placement has {hops} / {latency} us")
