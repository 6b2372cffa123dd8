"""Pure combinatorics of packing, on plain integer lists (exact bytes, no instance, no solver).

* :func:`first_fit_decreasing` (one first-fit decreasing for every caller: the ``ffd`` method,
  the CP-SAT hints) and :func:`ffd_bins` / :func:`ffd_classes` over capacity classes;
* :func:`max_fill_bins`: the minimum-slack greedy;
* :func:`packs`: whether given items fit given bins (exact, with a search budget);
* the arc-flow graph (:func:`build_arcflow`, :func:`prune_for_waste`, :func:`decompose`), solved
  by :mod:`placer.algorithms.cpsat.arcflow`.

Fewest devices when placement order does not matter: an arc-flow model over identical nodes.

Nodes with equal demand are interchangeable for the device count, so instead of assigning each
node we route integer flow through a graph of fill levels (Valério de Carvalho 1999; graph
compression after Brandão & Pedroso 2016): for each device capacity class, vertices are the byte
levels reachable by packing nodes in non-increasing size order, an arc of type k adds one node of
the k-th size, loss arcs lead to a sink. One unit of flow from level 0 to the sink is one device;
a demand row per size asks for exactly the number of nodes of that size. The model has no node
symmetry and its LP bound is the strong Gilmore-Gomory bound. Sizes stay in exact bytes: levels
are labels, every coefficient is 1.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

__all__ = ["FirstFit", "first_fit_decreasing", "ffd_bins", "ffd_classes", "max_fill_bins", "packs", "ArcFlow",
           "build_arcflow", "prune_for_waste", "decompose"]

MAX_ARCS = 60_000


@dataclass
class ArcFlow:
    sizes: list[int]                       # distinct demands, decreasing
    counts: list[int]                      # nodes of each size
    classes: list[tuple[int, int]]         # (capacity_bytes, devices available)
    arcs: list[list[tuple[int, int, int]]]  # per class: (from_level, to_level, size index or -1 = loss)
    levels: list[list[int]]                # per class: reachable levels (0 first)

    @property
    def n_arcs(self) -> int:
        return sum(len(a) for a in self.arcs)


def build_arcflow(demand, classes, *, max_arcs: int = MAX_ARCS) -> ArcFlow | None:
    """The compressed arc-flow graph; None when it would exceed ``max_arcs`` (too many distinct sums)."""
    counter = Counter(int(d) for d in demand)
    sizes = sorted(counter, reverse=True)
    counts = [counter[s] for s in sizes]
    all_arcs, all_levels = [], []
    total = 0
    for cap, _ in classes:
        reach = {0}          # levels reachable with sizes seen so far
        arcs = []
        for k, s in enumerate(sizes):
            if s > cap:
                continue
            # levels reachable using this size 0..counts[k] times on top of `reach`
            frontier = set(reach)
            new_reach = set(reach)
            for _ in range(counts[k]):
                nxt = set()
                for level in frontier:
                    t = level + s
                    if t <= cap:
                        arcs.append((level, t, k))
                        nxt.add(t)
                nxt -= new_reach
                new_reach |= nxt
                frontier = nxt
                if not frontier:
                    break
            reach = new_reach
            if len(arcs) + total > max_arcs:
                return None
        arcs = sorted(set(arcs))
        levels = sorted(reach)
        arcs.extend((level, -1, -1) for level in levels if level > 0)   # loss arcs to the sink
        total += len(arcs)
        if total > max_arcs:
            return None
        all_arcs.append(arcs)
        all_levels.append(levels)
    return ArcFlow(sizes, counts, list(classes), all_arcs, all_levels)


def prune_for_waste(af: ArcFlow, max_bins: int) -> ArcFlow | None:
    """The graph restricted to packings with at most ``max_bins`` devices.

    Such a packing wastes at most ``max_bins x (largest capacity) - sum of demands`` bytes in all,
    so no single device ends below its capacity minus that: loss arcs from lower levels go, and then
    every level that can no longer reach the sink. On tight instances (perfect packings waste
    nothing) this leaves a small fraction of the graph. None when ``max_bins`` cannot hold the
    demand at all."""
    total = sum(s * c for s, c in zip(af.sizes, af.counts))
    waste = max_bins * max(c for c, _ in af.classes) - total
    if waste < 0:
        return None
    arcs_out, levels_out = [], []
    for (cap, _), arcs in zip(af.classes, af.arcs):
        kept = [a for a in arcs if a[2] >= 0 or a[0] >= cap - waste]
        by_from: dict[int, list] = {}
        for a in kept:
            by_from.setdefault(a[0], []).append(a)
        alive: set[int] = set()
        for level in sorted(by_from, reverse=True):
            if any(hi == -1 or hi in alive for _, hi, _ in by_from[level]):
                alive.add(level)
        kept = [a for a in kept if a[0] in alive and (a[1] == -1 or a[1] in alive)]
        arcs_out.append(kept)
        levels_out.append(sorted(alive | {0}))
    return ArcFlow(af.sizes, af.counts, af.classes, arcs_out, levels_out)


class FirstFit:
    """Free bytes per slot; ``take(size)`` fills the leftmost slot with room (None when none)."""

    def __init__(self, rooms: list[int]):
        size = 1
        while size < max(1, len(rooms)):
            size *= 2
        self.size = size
        self.tree = [-1] * (2 * size)
        self.tree[size:size + len(rooms)] = rooms
        for k in range(size - 1, 0, -1):
            self.tree[k] = max(self.tree[2 * k], self.tree[2 * k + 1])

    def take(self, amount: int) -> int | None:
        if self.tree[1] < amount:
            return None
        k = 1
        while k < self.size:
            k = 2 * k if self.tree[2 * k] >= amount else 2 * k + 1
        slot = k - self.size
        self.tree[k] -= amount
        k //= 2
        while k:
            self.tree[k] = max(self.tree[2 * k], self.tree[2 * k + 1])
            k //= 2
        return slot


def first_fit_decreasing(sizes: list[int], rooms: list[int]) -> list[int] | None:
    """Slot of each item under first-fit decreasing into ``rooms`` (None when an item fits nowhere)."""
    ff = FirstFit(list(rooms))
    out = [-1] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        slot = ff.take(sizes[i])
        if slot is None:
            return None
        out[i] = slot
    return out


def packs(sizes, rooms, *, budget: int = 20_000) -> bool | None:
    """Whether the items ``sizes`` fit into bins of free bytes ``rooms`` (exact bytes).

    True or False when decided: first-fit decreasing, then a depth-first search placing items in
    decreasing size, trying bins of equal free room once (they are interchangeable) and cutting a
    branch when the items left exceed the room left. None when ``budget`` search nodes did not
    decide it (a caller computing a lower bound treats None as "fits", never as "does not").
    """
    items = sorted((int(s) for s in sizes), reverse=True)
    rooms = [int(r) for r in rooms]
    if not items:
        return True
    if not rooms or items[0] > max(rooms) or sum(items) > sum(rooms):
        return False
    if first_fit_decreasing(items, rooms) is not None:
        return True
    if len(items) > 500:             # deeper than a search this size can settle (and the stack allows)
        return None
    free = sorted(rooms, reverse=True)
    suffix = [0] * (len(items) + 1)
    for k in range(len(items) - 1, -1, -1):
        suffix[k] = suffix[k + 1] + items[k]
    nodes = [0]

    def place(k: int) -> bool | None:
        if k == len(items):
            return True
        nodes[0] += 1
        if nodes[0] > budget:
            return None
        if suffix[k] > sum(free):
            return False
        tried = set()
        unknown = False
        for b, room in enumerate(free):
            if room < items[k] or room in tried:
                continue
            tried.add(room)
            free[b] -= items[k]
            got = place(k + 1)
            free[b] += items[k]
            if got:
                return True
            unknown = unknown or got is None
        return None if unknown else False

    return place(0)


def ffd_bins(demand, classes) -> list[tuple[int, list[int]]] | None:
    """First-fit decreasing into devices of capacity classes ``[(capacity_bytes, count)]``, the
    largest first: ``[(class, [sizes])]`` per device opened; None if it fails."""
    packed = ffd_classes(list(demand), classes)
    if packed is None:
        return None
    return [(c, [demand[i] for i in members]) for c, members in packed]


def ffd_classes(sizes, classes) -> list[tuple[int, list[int]]] | None:
    """First-fit decreasing of item indices into devices of capacity classes, largest first:
    ``[(class, [item indices])]`` per device opened, in opening order; None if an item fits nowhere.

    Devices in decreasing capacity form the slots of :func:`first_fit_decreasing`; an item that
    fits no opened device fits no later (smaller) one either, so the used slots are a prefix.
    """
    slot_class = []
    for c in sorted(range(len(classes)), key=lambda t: -classes[t][0]):
        slot_class.extend([c] * classes[c][1])
    rooms = [classes[c][0] for c in slot_class]
    slots = first_fit_decreasing(list(sizes), rooms)
    if slots is None:
        return None
    members: dict[int, list[int]] = {}
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        members.setdefault(slots[i], []).append(i)
    return [(slot_class[k], members[k]) for k in sorted(members)]


def max_fill_bins(demand, classes, *, max_units: int = 1 << 20) -> list[tuple[int, list[int]]] | None:
    """Minimum-slack greedy: each new device (largest class first) takes the largest node left and
    then the subset of the others that fills it most (an exact subset sum, as bitsets over the
    sizes' common divisor). Much closer to optimal than first-fit decreasing on hard mixes; None
    when it runs out of devices or the capacity is too fine-grained for bitsets."""
    from math import gcd

    sizes = [int(d) for d in demand]
    if not sizes:
        return []
    g = 0
    for x in sizes + [c for c, _ in classes]:
        g = gcd(g, x)
    g = g or 1
    if max(c for c, _ in classes) // g > max_units:
        return None
    left = Counter(x // g for x in sizes)
    caps = sorted(((c // g, n) for c, n in classes), reverse=True)
    cls_of = {c // g: k for k, (c, _) in enumerate(classes)}
    bins = []
    for cap, count in caps:
        for _ in range(count):
            if not left:
                break
            big = max(s for s in left if left[s])
            if big > cap:
                break
            left[big] -= 1
            room = cap - big
            kinds = sorted((s for s in left if left[s] and s <= room), reverse=True)
            layers = [1]
            mask = (1 << (room + 1)) - 1
            for s in kinds:
                r = layers[-1]
                for _ in range(min(left[s], room // s)):
                    r = (r | (r << s)) & mask
                layers.append(r)
            best = layers[-1].bit_length() - 1
            items = [big]
            t = best
            for k in range(len(kinds) - 1, -1, -1):
                s, before = kinds[k], layers[k]
                j = 0
                while not (before >> (t - j * s)) & 1:
                    j += 1
                items.extend([s] * j)
                left[s] -= j
                t -= j * s
            left = +left
            bins.append((cls_of[cap], [x * g for x in items]))
    if left:
        return None
    return bins


def decompose(af: ArcFlow, flow_values) -> list[tuple[int, list[int]]]:
    """Split each class's integer flow into paths from level 0 to the sink: one path per device."""
    bins = []
    for c, arcs in enumerate(af.arcs):
        remaining = {a: v for a, v in enumerate(flow_values[c]) if v > 0}
        out_of: dict[int, list[int]] = {}
        for a in remaining:
            out_of.setdefault(arcs[a][0], []).append(a)
        while True:
            level, items = 0, []
            start = [a for a in out_of.get(0, []) if remaining.get(a, 0) > 0]
            if not start:
                break
            while True:
                nxt = [a for a in out_of.get(level, []) if remaining.get(a, 0) > 0]
                if not nxt:
                    break
                a = nxt[0]
                remaining[a] -= 1
                lo, hi, k = arcs[a]
                if k < 0:
                    break
                items.append(af.sizes[k])
                level = hi
            bins.append((c, items))
    return bins
