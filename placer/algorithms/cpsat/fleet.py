"""Fleet structure CP-SAT exploits: interchangeable devices, latency hierarchies, integer latencies.

* :func:`twin_classes`: devices that can swap places without changing anything (same type, same
  capacity, same links with the same latencies to every other device). Swapping two twins maps
  any placement to one of equal cost, so symmetry may be broken inside a class, never across.
* :attr:`FleetView.hierarchy`: when hop latency is an ultrametric (as in racks joined by a uniform
  fabric), latency(a, b) = sum over levels of (step of the level) x [a, b in different groups of
  that level]; a free-mode hop then costs a few linear terms instead of a D x D table.
* :func:`integer_latencies`: latencies as integers with one exact scale factor.
"""

from __future__ import annotations

from fractions import Fraction
from math import isfinite, lcm

__all__ = ["twin_classes", "integer_latencies", "rack_groups", "min_groups_covering",
           "path_latency_bound", "FleetView", "symmetry_classes"]


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


class FleetView:
    """Solver-side views of an instance's fleet, computed on first use with numpy (dense fleets of
    hundreds of devices have hundreds of thousands of links; most strategies need only some views).

    ``cost[a][b]``: what a hop from a to b costs, as :func:`placer.placement.hops_of` counts it (the
    direct link's latency when there is one, else the shortest path; inf when unreachable).
    """

    def __init__(self, instance, exclude=()):
        self.instance = instance
        self.exclude = set(exclude)
        self._cache: dict = {}

    def _get(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def cost(self):
        def make():
            import numpy as np
            inst = self.instance
            cost = np.array(inst.latency_us, dtype=float).reshape(inst.n_devices, inst.n_devices)
            if inst.link_us:
                keys = np.array(list(inst.link_us.keys()), dtype=np.int64)
                cost[keys[:, 0], keys[:, 1]] = np.array(list(inst.link_us.values()), dtype=float)
            np.fill_diagonal(cost, 0.0)
            return cost
        return self._get("cost", make)

    @property
    def scale(self) -> int:
        def make():
            import numpy as np
            c = self.cost
            values = np.unique(c[np.isfinite(c)]).tolist() + sorted(set(self.instance.link_us.values()))
            return integer_latencies(values)[0]
        return self._get("scale", make)

    @property
    def link(self) -> dict:
        def make():
            s = self.scale
            return {k: round(v * s) for k, v in self.instance.link_us.items()}
        return self._get("link", make)

    @property
    def latency(self) -> list:
        def make():
            import numpy as np
            c = self.cost
            finite = np.isfinite(c)
            ints = np.where(finite, np.rint(np.where(finite, c, 0) * self.scale), 0).astype(np.int64).tolist()
            if not finite.all():
                for a, b in np.argwhere(~finite).tolist():
                    ints[a][b] = None
            return ints
        return self._get("latency", make)

    @property
    def unreachable(self) -> bool:
        import numpy as np
        return bool(np.isinf(self.cost).any())

    @property
    def hierarchy(self):
        """``[(step, labels)]`` with cost(a, b) = sum(step for step, lab in levels if lab[a] != lab[b]),
        steps as scaled integers (None: an unreachable level, never crossed); level 0 puts every
        device in a group of its own. None when ``cost`` is not an ultrametric: then the groups of
        "cost <= t" are not cliques for some t and no such decomposition exists."""
        def make():
            import numpy as np
            c = self.cost
            n = len(c)
            if n == 0:
                return []
            off = ~np.eye(n, dtype=bool)
            values = np.unique(c[off & np.isfinite(c)])
            if len(values) > 64:
                return None
            levels = [[None, list(range(n))]]
            prev = 0.0
            for t in values.tolist():
                near = c <= t
                _, labels = np.unique(near, axis=0, return_inverse=True)
                labels = labels.reshape(-1)
                if not np.array_equal(near, labels[:, None] == labels[None, :]):
                    return None
                levels[-1][0] = t - prev
                levels.append([None, labels.tolist()])
                prev = t
            levels[-1][0] = float("inf") if len(set(levels[-1][1])) > 1 else 0.0
            s = self.scale
            return [(None if step == float("inf") else round(step * s), labels)
                    for step, labels in levels if step != 0.0]
        return self._get("hierarchy", make)

    @property
    def twins(self) -> list[list[int]]:
        """:func:`twin_classes`, by comparing rows of the link matrix (the diagonal set to each
        candidate mutual latency in turn) instead of neighbour sets."""
        def make():
            import numpy as np
            inst = self.instance
            n = inst.n_devices
            if n < 2:
                return []
            m = np.full((n, n), -1.0)
            if inst.link_us:
                keys = np.array(list(inst.link_us.keys()), dtype=np.int64)
                m[keys[:, 0], keys[:, 1]] = np.array(list(inst.link_us.values()), dtype=float)
            values = np.unique(m).tolist()
            if len(values) > 32:
                return twin_classes(inst, exclude=self.exclude)
            base = [(d.type.name, d.memory_bytes, inst.capacity_bytes[i]) for i, d in enumerate(inst.devices)]
            parent = list(range(n))

            def find(i):
                while parent[i] != i:
                    parent[i] = parent[parent[i]]
                    i = parent[i]
                return i

            for v in values:
                r = m.copy()
                np.fill_diagonal(r, v)
                seen: dict = {}
                for i in range(n):
                    if i in self.exclude:
                        continue
                    key = (base[i], r[i].tobytes())
                    j = seen.setdefault(key, i)
                    if j != i:
                        parent[find(i)] = find(j)
            classes: dict[int, list[int]] = {}
            for i in range(n):
                if i not in self.exclude:
                    classes.setdefault(find(i), []).append(i)
            return sorted((sorted(c) for c in classes.values() if len(c) > 1), key=lambda c: c[0])
        return self._get("twins", make)


def symmetry_classes(view: FleetView) -> list[list[list[int]]] | None:
    """Interchangeable groups of an ultrametric fleet, top level first.

    The latency hierarchy is a tree (devices, racks, ...). Two sibling subtrees of the same shape
    (same device types and capacities, same structure below) can swap wholesale without changing
    any latency or capacity, so their order is a pure symmetry. Each class lists such siblings,
    each as its devices in a canonical order (subtrees by shape, then lowest index), so that
    position i of one maps to position i of another. Devices named by a pin never take part.
    None when latency is not an ultrametric.
    """
    levels = view.hierarchy
    if levels is None:
        return None
    inst = view.instance
    n = inst.n_devices
    if n < 2:
        return []
    partitions = [labels for _, labels in levels]
    if not partitions or len(set(partitions[0])) != n:
        partitions.insert(0, list(range(n)))
    partitions.append([0] * n)          # the root

    def leaf_shape(d):
        dev = inst.devices[d]
        pinned = d in view.exclude
        return (dev.type.name, dev.memory_bytes, inst.capacity_bytes[d], d if pinned else -1)

    # nodes of the tree per level: label -> (shape, canonical device order)
    current = {d: (leaf_shape(d), [d]) for d in range(n)}
    classes: list[list[list[int]]] = []
    for labels in partitions[1:]:
        children: dict[int, list] = {}
        for shape, order in current.values():
            parent = labels[order[0]]
            children.setdefault(parent, []).append((shape, min(order), order))
        nxt = {}
        for parent, kids in children.items():
            kids.sort(key=lambda k: (k[0], k[1]))
            by_shape: dict = {}
            for shape, low, order in kids:
                by_shape.setdefault(shape, []).append((low, order))
            for members in by_shape.values():
                if len(members) > 1:     # shapes holding a pinned device are unique
                    classes.append([order for _, order in sorted(members)])
            nxt[parent] = (tuple(k[0] for k in kids), [d for _, _, order in kids for d in order])
        current = nxt
    classes.reverse()   # top level first
    return classes
