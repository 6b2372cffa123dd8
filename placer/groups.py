"""Stages that are groups of devices: a fixed tensor-parallel degree as a reduction.

For a degree ``tp``, every node (rack) of the fleet is cut into groups of ``tp`` of its available
devices, in slot order (inside a node every device pair is linked alike, so which devices form a
group does not matter; the devices left over, fewer than ``tp``, stay unused). Each group becomes
one device of a derived fleet, named after its first member; two groups are linked when some pair
of their members is, at the lowest such latency. Every layer becomes one rank's share of it
(:func:`placer.parallel.shard_model`); :func:`placer.instance.make_instance` builds the derived
instance (``tp=``). The placement methods then run unchanged on the derived
instance, so a proof there is a proof for the degree: the fewest groups times ``tp`` is the
fewest devices a degree-``tp`` plan can use.

Pins name devices of the specs: a pin to any member applies to its group; unavailable devices
are in no group.
"""

from __future__ import annotations

from dataclasses import replace

from .errors import ARGUMENT, InvalidSpec
from .fleet import Device, Fleet
from .model import LayerGraph

__all__ = ["group_fleet", "fleet_of_groups", "node_sizes", "default_degrees", "per_device"]


def node_sizes(fleet: Fleet) -> dict[int, int]:
    """Available devices per rack (node)."""
    out: dict[int, int] = {}
    for d in fleet.available:
        out[d.rack] = out.get(d.rack, 0) + 1
    return out


def default_degrees(model: LayerGraph, fleet: Fleet, ep: bool = False,
                    workload=None) -> tuple[list[int], dict[int, str]]:
    """The degrees ``--tp`` defaults to: 1 on wafer fleets; on GPU fleets every divisor of the
    largest node's size that the model allows (under ``workload`` when given: see
    :func:`placer.parallel.allowed_degrees`). Returns (degrees, {refused degree: reason})."""
    from .parallel import allowed_degrees

    if all(d.type.kind != "gpu" for d in fleet.available):
        return [1], {}
    size = max(node_sizes(fleet).values())
    return allowed_degrees(model, [g for g in range(1, size + 1) if size % g == 0], ep, workload)


def group_fleet(fleet: Fleet, tp: int) -> tuple[Fleet, tuple[tuple[str, ...], ...]]:
    """(the derived fleet whose devices are groups of ``tp`` devices of one node, the member ids of
    each of its devices in order). Raises :class:`InvalidSpec` when no node has ``tp`` devices."""
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
    at the lowest such latency."""
    by_id = fleet.by_id
    devices: list[Device] = []
    leader: dict[str, str] = {}
    for ids in members:
        devices.append(by_id[ids[0]])
        for i in ids:
            leader[i] = ids[0]
    best: dict[tuple[str, str], tuple[float, float | None]] = {}
    for a, b, lat, bw in fleet.links:
        ga, gb = leader.get(a), leader.get(b)
        if ga is None or gb is None or ga == gb:
            continue
        key = (ga, gb) if ga < gb else (gb, ga)
        if key not in best or lat < best[key][0]:
            best[key] = (lat, bw)
    links = tuple((a, b, lat, bw) for (a, b), (lat, bw) in best.items())
    return replace(fleet, devices=tuple(devices), links=links)


def per_device(result, tp: int):
    """``result`` of a derived instance with its device figures counted in devices, not groups:
    devices used, lower bound, objective, bound and the devices level, each times ``tp``
    (``stats["groups_used"]`` keeps the stage count)."""
    if tp == 1:
        return result
    from dataclasses import replace as _replace

    def times(x):
        return None if x is None else x * tp

    levels = tuple(_replace(lv, value=times(lv.value), bound=times(lv.bound)) if lv.name == "devices" else lv
                   for lv in result.levels)
    stats = dict(result.stats)
    stats["groups_used"] = result.devices_used
    return result.replace(devices_used=times(result.devices_used),
                          lower_bound_devices=times(result.lower_bound_devices),
                          objective=times(result.objective), bound=times(result.bound), levels=levels,
                          stats=stats)
