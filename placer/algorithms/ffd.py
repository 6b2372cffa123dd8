"""First-fit decreasing (free mode).

Items in order of decreasing demand (ties: pipeline order) each go to the first device, in order of
decreasing capacity (ties: index), with room for them. Pins: nodes pinned to one device form a
single item; items pinned to a device are placed there first. A max-segment tree over the devices'
free bytes finds each first fit in O(log devices). Claims nothing (status heuristic).
"""

from __future__ import annotations

from time import perf_counter

from placer.algorithms.opening import open_method
from placer.algorithms.packing import first_fit_decreasing
from placer.algorithms.pins import PinConflict, pin_groups
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status, evaluate

__all__ = ["ffd"]


def ffd(instance: Instance, *, lower_bound: int | None = None) -> Result:
    """First-fit decreasing placement in free mode (status HEURISTIC when it places).
    ``lower_bound``: the instance's device lower bound when already known."""
    opening = open_method("ffd", instance, lower_bound, contiguous=False, per_piece=ffd)
    if opening.refusal is not None:
        return opening.refusal
    t0, lb, give_up = opening.t0, opening.lower_bound, opening.give_up
    try:
        groups = pin_groups(instance, contiguous=False)
    except PinConflict as exc:
        return give_up(str(exc), Status.INFEASIBLE)
    demand = instance.demand_bytes
    caps = instance.capacity_bytes
    order = sorted(range(instance.n_devices), key=lambda d: (-caps[d], d))
    slot_of = {d: k for k, d in enumerate(order)}
    rooms = [caps[d] for d in order]
    assignment = [-1] * instance.n_nodes
    items: list[tuple[int, ...]] = []
    grouped = set()
    for g in groups:
        grouped.update(g.nodes)
        need = sum(demand[i] for i in g.nodes)
        if g.device is None:
            items.append(g.nodes)
            continue
        k = slot_of[g.device]
        if need > rooms[k]:
            return give_up(f"nodes pinned to {instance.devices[g.device].id} need {need:,} B; it holds "
                           f"{rooms[k]:,} B", Status.INFEASIBLE)
        rooms[k] -= need
        for i in g.nodes:
            assignment[i] = g.device
    items.extend((i,) for i in range(instance.n_nodes) if i not in grouped)
    sizes = [sum(demand[i] for i in item) for item in items]
    slots = first_fit_decreasing(sizes, rooms)
    if slots is None:
        return give_up("first-fit decreasing ran out of devices")
    for item, k in zip(items, slots):
        for i in item:
            assignment[i] = order[k]
    used = len(set(assignment))
    return evaluate(instance, assignment, method="ffd", status=Status.HEURISTIC, lower_bound=lb,
                    seconds=perf_counter() - t0, objective=float(used), bound=float(lb))
