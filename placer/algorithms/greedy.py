"""Contiguous next-fit over a device path walked greedily through the fleet.

Nodes are taken in pipeline order; each stage takes the longest run that fits its device; the next
device is the unused linked neighbour with the lowest latency (ties: larger capacity, then lower
index) that can hold the next forced run. The walk starts on the largest device (lowest index on
ties), or on the device the first node is pinned to. Pins: a stage never splits a pinned group; a
stage on an unpinned device stops before the next node pinned to a device; that device is entered
next, over a direct link, or the method gives up and says so. Claims nothing (status heuristic).
"""

from __future__ import annotations

from time import perf_counter

from placer.algorithms.chain import Runs, prefix_sums
from placer.algorithms.opening import open_method
from placer.algorithms.paths import neighbours
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status, evaluate

__all__ = ["greedy"]


def greedy(instance: Instance, *, lower_bound: int | None = None) -> Result:
    """Contiguous next-fit along a greedily walked device path (status HEURISTIC when it places).
    ``lower_bound``: the instance's device lower bound when already known."""
    opening = open_method("greedy", instance, lower_bound, contiguous=True)
    if opening.refusal is not None:
        return opening.refusal
    t0, lb, give_up, pins = opening.t0, opening.lower_bound, opening.give_up, opening.pins
    n = instance.n_nodes
    runs = Runs(prefix_sums(instance.demand_bytes), pins)
    caps = instance.capacity_bytes
    adj = neighbours(instance)
    reserved = set(pins.device_of.values())

    def reach(i: int, d: int) -> int:
        """End of the longest run from i that device d holds, honouring pins (i when none)."""
        j = runs.reach(i, caps[d])
        if pins.any:
            p = pins.next_pinned[i]
            if p < n and pins.device_of[p] != d:
                j = runs.floor(min(j, p))       # the next pinned node belongs to another device
        return j

    def first_device(i: int) -> int | None:
        if i in pins.device_of:
            return pins.device_of[i]
        order = sorted((d for d in range(instance.n_devices) if d not in reserved),
                       key=lambda d: (-caps[d], d))
        return next((d for d in order if reach(i, d) > i), None)

    used: set[int] = set()
    assignment = [0] * n
    path: list[int] = []
    i = 0
    while i < n:
        if not path:
            d = first_device(i)
        elif i in pins.device_of:
            d = pins.device_of[i]
            if d in used:
                return give_up(f"node {instance.nodes[i].name} is pinned to {instance.devices[d].id}, "
                               "which already holds an earlier stage")
            if (path[-1], d) not in instance.link_us:
                return give_up(f"the walk reached {instance.devices[path[-1]].id}, which has no direct link "
                               f"to {instance.devices[d].id} where {instance.nodes[i].name} is pinned")
        else:
            d = next((v for _, v in adj[path[-1]]
                      if v not in used and v not in reserved and reach(i, v) > i), None)
        if d is None:
            where = f" after {instance.devices[path[-1]].id}" if path else ""
            return give_up(f"the greedy walk found no unused linked device{where} for "
                           f"{instance.nodes[i].name} ({len(path)} stages placed)")
        j = reach(i, d)
        if j <= i:
            return give_up(f"{instance.nodes[i].name} and the nodes pinned with it do not fit "
                           f"on {instance.devices[d].id}")
        assignment[i:j] = [d] * (j - i)
        used.add(d)
        path.append(d)
        i = j
    return evaluate(instance, assignment, method="greedy", status=Status.HEURISTIC, lower_bound=lb,
                    seconds=perf_counter() - t0, objective=float(len(path)), bound=float(lb),
                    proven_optimal=False, stats={"path": [instance.devices[d].id for d in path]})
