"""A free-mode start for chains on racked fleets: cut the chain into runs, one rack per run.

In free mode a chain's hop latency on racks joined by a fabric is (intra-rack hop) x (device
changes inside racks) + (inter-rack hop) x (rack changes). Both counts have combinatorial lower
bounds (:func:`placer.algorithms.cpsat.fleet.level_runs`), and placements meeting both at the
fewest devices exist on many real instances, but a search that assigns nodes one by one rarely
finds them: it has to pair nodes that are far apart in the chain on one device *and* keep the
rack changes down. This constructs them directly.

A dynamic program over (chain position, devices used) chooses runs ``[i, j)`` of the chain, each
on its own rack (of any rack shape: the sorted device capacities), and for each run one of two
packings into that rack's devices: the next-fit pieces of the run packed first-fit decreasing
(fewest device changes), or the run's nodes packed first-fit decreasing in any order (fewest
devices; nodes far apart may share a device). Its cost is the device changes inside runs at the
rack's intra hop plus the run boundaries at the fleet's cheapest inter-rack hop; it returns the
cheapest placement on at most ``max_devices`` devices. The placement is checked like any other;
its latency is recomputed exactly by the caller. It is a heuristic: no claim of optimality.
"""

from __future__ import annotations

import math

from placer.algorithms.chain import next_fit
from placer.algorithms.check import fits_bytes
from placer.algorithms.deadline import Deadline
from placer.algorithms.packing import first_fit_decreasing
from placer.problem.instance import Instance

__all__ = ["rack_runs"]

MAX_WORK = 300_000        # items packed plus states relaxed before the program gives up
MAX_SECONDS = 0.5         # a start, not a search: at most this long


def _packings(run: list[int], rooms: list[int]):
    """The packings of ``run`` (node demands in chain order) into a rack of free bytes ``rooms``:
    ``[(devices, pieces, slot per node)]``, or [] when the nodes do not fit."""
    out = []
    cuts = next_fit(run, max(rooms))
    if cuts is not None:
        sizes = [sum(run[a:b]) for a, b in cuts]
        slots = first_fit_decreasing(sizes, rooms)
        if slots is not None:
            per_node = [slots[k] for k, (a, b) in enumerate(cuts) for _ in range(a, b)]
            out.append((len(set(slots)), len(cuts), per_node))
    slots = first_fit_decreasing(run, rooms)
    if slots is not None:
        pieces = 1 + sum(1 for a, b in zip(slots, slots[1:]) if a != b)
        out.append((len(set(slots)), pieces, list(slots)))
    return out


def rack_runs(instance: Instance, max_devices: int, *, deadline: Deadline | None = None) -> list[int] | None:
    """A free placement of the instance's chain with at most ``max_devices`` devices and few rack
    and device changes (see the module docstring), or None when the program finds none (not a
    chain, a single rack, too few racks for its runs, out of time or work)."""
    stop = Deadline.of(deadline).within(MAX_SECONDS)
    n = instance.n_nodes
    if not instance.model.is_chain or n == 0 or max_devices < 1:
        return None
    racks: dict[int, list[int]] = {}
    for d, dev in enumerate(instance.devices):
        racks.setdefault(dev.rack, []).append(d)
    if len(racks) < 2:
        return None
    caps = instance.capacity_bytes
    shapes: dict[tuple[int, ...], list[list[int]]] = {}
    for members in racks.values():
        members = sorted(members, key=lambda d: (-caps[d], d))
        shapes.setdefault(tuple(caps[d] for d in members), []).append(members)
    shape_list = list(shapes)
    intra = []
    for shape in shape_list:
        rack = shapes[shape][0]
        intra.append(min((instance.hop_us(a, b) for a in rack for b in rack if a != b), default=0.0))
    first = [shapes[s][0][0] for s in shape_list]
    inter = min((instance.hop_us(a, b) for a in first for b in first if a != b), default=math.inf)
    if len(shape_list) == 1:
        second = shapes[shape_list[0]][1][0]
        inter = instance.hop_us(first[0], second)
    if not math.isfinite(inter):
        return None
    demand = list(instance.demand_bytes)
    # runs hold about (largest rack / mean node) nodes; each start packs every run length once
    longest = min(n, max(sum(s) for s in shape_list) * n // max(sum(demand), 1) + 1)
    if n * longest * longest // 2 > MAX_WORK:
        return None
    big = math.inf
    D = min(max_devices, instance.n_devices)
    # cost[j][k]: least estimated latency covering nodes [0, j) on k devices; back[j][k]: the run
    cost = [[big] * (D + 1) for _ in range(n + 1)]
    back: list[list[tuple | None]] = [[None] * (D + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    work = steps = 0
    for i in range(n):
        if stop.expired():
            return None
        reach = [k for k in range(D + 1) if cost[i][k] < big]
        if not reach:
            continue
        for s, shape in enumerate(shape_list):
            rooms = list(shape)
            total = sum(rooms)
            load = 0
            for j in range(i + 1, n + 1):
                load += demand[j - 1]
                if load > total:
                    break
                work += j - i + len(reach)
                steps += 1
                if work > MAX_WORK or (steps % 256 == 0 and stop.expired()):
                    return None
                options = _packings(demand[i:j], rooms)
                if not options:
                    break
                for o, (m, pieces, _) in enumerate(options):
                    add = intra[s] * (pieces - 1) + (inter if i > 0 else 0.0)
                    for k in reach:
                        if k + m > D:
                            break
                        c = cost[i][k] + add
                        if c < cost[j][k + m] - 1e-12:
                            cost[j][k + m] = c
                            back[j][k + m] = (i, k, s, o)
    best_k = min(range(D + 1), key=lambda k: (cost[n][k], k))
    if cost[n][best_k] == big:
        return None
    runs = []
    j, k = n, best_k
    while j > 0:
        i, k_prev, s, o = back[j][k]
        runs.append((i, j, s, o))
        j, k = i, k_prev
    runs.reverse()
    free_racks = {s: list(shapes[shape]) for s, shape in enumerate(shape_list)}
    if any(sum(1 for r in runs if r[2] == s) > len(free_racks[s]) for s in free_racks):
        return None
    assignment = [0] * n
    for i, j, s, o in runs:
        rack = free_racks[s].pop(0)
        _, _, slots = _packings(demand[i:j], list(shape_list[s]))[o]
        for node, slot in zip(range(i, j), slots):
            assignment[node] = rack[slot]
    return assignment if fits_bytes(instance, assignment) else None
