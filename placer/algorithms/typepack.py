"""The published packing rule, whatever the pipeline order (free mode).

Every node with a KV cache (dense attention) gets a device of its own, the rest of that device
being its KV reserve; the other nodes are grouped by kind and packed next-fit within each kind
(as many per device as fit: two linear-attention layers per wafer in the worked example). Devices
are taken largest first. This is how the published recipe counts 24 + 35 = 59 wafers for Kimi K3.
It claims nothing (status heuristic), and follows the rule only: it takes no pins.
"""

from __future__ import annotations

from time import perf_counter

from placer.algorithms.opening import open_method
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status, evaluate

__all__ = ["typepack"]


def typepack(instance: Instance, *, lower_bound: int | None = None) -> Result:
    """Dense-attention nodes one per device, other nodes next-fit by kind; free mode.
    ``lower_bound``: the instance's device lower bound when already known."""
    # pins are refused before a cut fleet is split into pieces
    opening = open_method("typepack", instance, lower_bound, contiguous=False,
                          per_piece=None if instance.pins else typepack)
    if opening.refusal is not None:
        return opening.refusal
    t0, lb, give_up = opening.t0, opening.lower_bound, opening.give_up
    if instance.pins:
        return give_up("typepack follows the published rule, which has no pins; use ffd or cpsat")
    demand = instance.demand_bytes
    caps = instance.capacity_bytes
    devices = iter(sorted(range(instance.n_devices), key=lambda d: (-caps[d], d)))
    assignment = [-1] * instance.n_nodes
    dense = [i for i, x in enumerate(instance.nodes) if x.has_kv]
    by_kind: dict[str, list[int]] = {}
    for i, x in enumerate(instance.nodes):
        if not x.has_kv:
            by_kind.setdefault(x.kind, []).append(i)
    per_kind: dict[str, int] = {}

    for i in dense:
        d = next(devices, None)
        if d is None:
            return give_up(f"the fleet's {instance.n_devices} devices run out before every dense node "
                           f"has its own ({len(dense)} dense nodes)")
        if demand[i] > caps[d]:
            return give_up(f"{instance.nodes[i].name} needs {demand[i]:,} B with its KV reserve; "
                           f"device {instance.devices[d].id} holds {caps[d]:,} B")
        assignment[i] = d
    per_kind["dense"] = len(dense)

    for kind, nodes in by_kind.items():
        current, room, opened = None, 0, 0
        for i in nodes:
            if current is None or demand[i] > room:
                current = next(devices, None)
                if current is None:
                    return give_up(f"the fleet's {instance.n_devices} devices run out while packing "
                                   f"{kind} nodes")
                room = caps[current]
                opened += 1
                if demand[i] > room:
                    return give_up(f"{instance.nodes[i].name} ({demand[i]:,} B) does not fit the next "
                                   f"device {instance.devices[current].id} ({room:,} B)")
            assignment[i] = current
            room -= demand[i]
        per_kind[kind] = opened

    return evaluate(instance, assignment, method="typepack", status=Status.HEURISTIC, lower_bound=lb,
                    seconds=perf_counter() - t0, objective=float(sum(per_kind.values())), bound=float(lb),
                    stats={"devices_by_kind": per_kind})
