"""Fleet structure CP-SAT exploits: interchangeable devices, latency hierarchies, integer latencies.

* :func:`twin_classes`: devices that can swap places without changing anything (same type, same
  capacity, same links with the same latencies to every other device). Swapping two twins maps
  any placement to one of equal cost, so symmetry may be broken inside a class, never across.
* :func:`latency_hierarchy`: when shortest-path latency is an ultrametric (as in racks joined by a
  uniform fabric), latency(a, b) = sum over levels of (step of the level) x [a, b in different
  groups of that level]; a free-mode hop then costs a few linear terms instead of a D x D table.
* :func:`integer_latencies`: latencies as integers with one exact scale factor.
"""

from __future__ import annotations

from fractions import Fraction
from math import inf, isfinite, lcm

__all__ = ["twin_classes", "latency_hierarchy", "integer_latencies", "rack_groups", "min_groups_covering",
           "path_latency_bound"]


def twin_classes(instance, exclude=()) -> list[list[int]]:
    """Classes (sorted device indices, size >= 2) of pairwise interchangeable available devices.

    ``exclude``: devices that must stay distinguishable (e.g. named by a pin).
    """
    devices = instance.devices
    caps = instance.capacity_bytes
    links = instance.link_us
    nbrs: dict[int, dict[int, float]] = {i: {} for i in range(len(devices))}
    for (a, b), w in links.items():
        nbrs[a][b] = w
    excluded = set(exclude)
    parent = list(range(len(devices)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    buckets: dict = {}
    for i, d in enumerate(devices):
        if i in excluded:
            continue
        base = (d.type.name, d.memory_bytes, caps[i])
        sig = frozenset(nbrs[i].items())
        keys = [("apart", base, sig)]
        for w in set(nbrs[i].values()):
            keys.append(("adjacent", base, w, sig | {(i, w)}))
        for key in keys:
            j = buckets.setdefault(key, i)
            if j != i:
                parent[find(i)] = find(j)
    classes: dict[int, list[int]] = {}
    for i in range(len(devices)):
        if i not in excluded:
            classes.setdefault(find(i), []).append(i)
    return sorted((sorted(c) for c in classes.values() if len(c) > 1), key=lambda c: c[0])


def latency_hierarchy(lat: list[list[float]]):
    """Levels ``[(step, labels)]`` with latency(a, b) = sum(step for step, lab in levels if lab[a] != lab[b]).

    Level 0 has every device in its own group. Returns ``None`` when latency is not an
    ultrametric (then no such decomposition exists). Infinite latency (disconnected devices) ends
    the hierarchy: the top level's groups are the connected components.
    """
    n = len(lat)
    if n == 0:
        return []
    values = sorted({lat[a][b] for a in range(n) for b in range(n) if a != b and isfinite(lat[a][b])})
    levels = [(None, list(range(n)))]
    prev = 0.0
    for t in values:
        # groups of the relation latency <= t must be cliques of that relation
        labels = [-1] * n
        for a in range(n):
            if labels[a] >= 0:
                continue
            members = [b for b in range(n) if b == a or lat[a][b] <= t]
            for b in members:
                if labels[b] >= 0 and labels[b] != a:
                    return None
                labels[b] = a
            for b in members:
                for c in members:
                    if b != c and lat[b][c] > t:
                        return None
        levels[-1] = (t - prev, levels[-1][1])
        levels.append((None, labels))
        prev = t
    # the last partition's step: inf between components, if any
    last_labels = levels[-1][1]
    levels[-1] = (inf if len(set(last_labels)) > 1 else 0.0, last_labels)
    return [(step, labels) for step, labels in levels if step != 0.0]


def integer_latencies(values, max_scale: int = 1000) -> tuple[int, dict]:
    """(scale, {value: int}) with int = value x scale exactly when a scale up to ``max_scale`` exists,
    else rounded to 1 / ``max_scale`` (then the reported latency is re-computed from floats)."""
    finite = sorted({float(v) for v in values if isfinite(v)})
    dens = [Fraction(v).limit_denominator(10**6).denominator for v in finite]
    scale = 1
    for d in dens:
        scale = lcm(scale, d)
        if scale > max_scale:
            scale = max_scale
            break
    return scale, {v: round(v * scale) for v in finite}


def rack_groups(instance) -> list[list[int]]:
    """Available devices grouped by rack."""
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(instance.devices):
        groups.setdefault(d.rack, []).append(i)
    return list(groups.values())


def min_groups_covering(sizes, count: int) -> int:
    """Fewest groups (of the given sizes) whose sizes add up to at least ``count``."""
    total = 0
    for k, s in enumerate(sorted(sizes, reverse=True), start=1):
        total += s
        if total >= count:
            return k
    return len(sizes) + 1


def path_latency_bound(link: dict, groups: list[list[int]], count: int) -> int:
    """A lower bound on the latency of any simple path of ``count`` devices: it has ``count - 1``
    links, at least (fewest groups holding ``count`` devices) - 1 of them between groups; each
    costs at least the cheapest link of its kind."""
    arcs = count - 1
    if arcs <= 0 or not link:
        return 0
    label = {d: g for g, members in enumerate(groups) for d in members}
    intra = [w for (a, b), w in link.items() if label[a] == label[b]]
    inter = [w for (a, b), w in link.items() if label[a] != label[b]]
    k_min = max(0, min_groups_covering([len(g) for g in groups], count) - 1)
    if not inter:
        return arcs * min(intra)
    if not intra:
        return arcs * min(inter)
    lo_intra, lo_inter = min(intra), min(inter)
    return min(k * lo_inter + (arcs - k) * lo_intra for k in (k_min, arcs))
