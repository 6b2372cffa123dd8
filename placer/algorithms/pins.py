"""User pins, and the node groups a requirement keeps together, as constraints every method can read.

A pin says "these nodes on device X" or "these nodes on one device". Pins that share a node or a
device merge into one :class:`PinGroup`. In contiguous and split modes a device holds one run of
the pipeline, so a group also covers every node between its first and last node: :func:`chain_pins`
turns the groups into the arrays a next-fit scan needs (where a stage may end, and how far a stage
may reach before it would hold nodes pinned to two different devices).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.algorithms.chain import NO_PINS, ChainPins
from placer.problem.instance import Instance, Pin

__all__ = ["PinGroup", "PinConflict", "pin_groups", "ChainPins", "chain_pins"]


class PinConflict(ValueError):
    """The pins cannot all hold at once (e.g. one node on two devices); the message says which."""


@dataclass(frozen=True)
class PinGroup:
    """Nodes that must share one device; ``device`` is its index, or None when any device will do."""

    nodes: tuple[int, ...]
    device: int | None


def _device_name(instance: Instance, d: int) -> str:
    return instance.devices[d].id


def pin_groups(instance: Instance, *, contiguous: bool | None = None) -> list[PinGroup]:
    """Merged pin groups, sorted by first node; ``contiguous`` (default: the instance's mode is not
    ``free``) widens each group to the run between its first and last node.

    Raises :class:`PinConflict` when a merged group is pinned to two different devices.
    """
    if not instance.pins and not instance.end_groups:
        return []
    if contiguous is None:
        contiguous = instance.mode != "free"
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    device_of: dict[int, int] = {}     # node -> pinned device index
    first_on: dict[int, int] = {}      # device index -> a node pinned there
    # embedding-first-head-last: the embedding shares a device with the graph's sources, the head
    # with its sinks (Instance.end_groups), as an unpinned "together" pin does
    for pin in (*instance.pins, *(Pin(g) for g in instance.end_groups)):
        nodes = list(pin.nodes)
        for n in nodes:
            find(n)
        for n in nodes[1:]:
            union(nodes[0], n)
        if pin.device is not None:
            d = instance.device_index[pin.device]
            for n in nodes:
                if n in device_of and device_of[n] != d:
                    raise PinConflict(f"node {instance.nodes[n].name} is pinned to both "
                                      f"{_device_name(instance, device_of[n])} and {pin.device}")
                device_of[n] = d
            if d in first_on:
                union(first_on[d], nodes[0])
            else:
                first_on[d] = nodes[0]

    while True:
        members: dict[int, list[int]] = {}
        for n in list(parent):
            members.setdefault(find(n), []).append(n)
        if not contiguous:
            break
        # a device holds one run: widen each group to its span, and merge groups whose spans overlap
        changed = False
        spans = sorted((min(ns), max(ns)) for ns in members.values())
        for lo, hi in spans:
            for n in range(lo, hi + 1):
                if find(n) != find(lo):
                    union(lo, n)
                    changed = True
        if not changed:
            break

    groups = []
    for ns in members.values():
        devices = {device_of[n] for n in ns if n in device_of}
        if len(devices) > 1:
            names = ", ".join(sorted(_device_name(instance, d) for d in devices))
            lo, hi = min(ns), max(ns)
            why = "must share one device" if not contiguous else \
                f"must share one device (a device holds one run, {instance.nodes[lo].name}.." \
                f"{instance.nodes[hi].name})"
            raise PinConflict(f"pinned nodes {why} but are pinned to {names}")
        groups.append(PinGroup(tuple(sorted(ns)), devices.pop() if devices else None))
    return sorted(groups, key=lambda g: g.nodes[0])


def chain_pins(instance: Instance) -> ChainPins:
    """Contiguous-mode pin constraints of ``instance`` (raises :class:`PinConflict`)."""
    groups = pin_groups(instance, contiguous=True)
    n = instance.n_nodes
    if not groups:
        return NO_PINS
    allowed = [True] * (n + 1)
    device_of: dict[int, int] = {}
    for g in groups:
        lo, hi = g.nodes[0], g.nodes[-1]
        for j in range(lo + 1, hi + 1):
            allowed[j] = False
        if g.device is not None:
            for x in g.nodes:
                device_of[x] = g.device
    floor_cut = [0] * (n + 1)
    last = 0
    for j in range(n + 1):
        if allowed[j]:
            last = j
        floor_cut[j] = last
    # next_pinned[i], and for a pinned node p the first pinned node after it on another device
    next_pinned = [n] * (n + 1)
    next_other = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        next_pinned[i] = i if i in device_of else next_pinned[i + 1]
        if i in device_of:
            q = next_pinned[i + 1]
            next_other[i] = q if q == n or device_of[q] != device_of[i] else next_other[q]
    max_end = [n] * (n + 1)
    for i in range(n):
        p = next_pinned[i]
        max_end[i] = n if p == n else next_other[p]
    return ChainPins(tuple(groups), tuple(floor_cut), tuple(max_end), tuple(next_pinned), device_of)
