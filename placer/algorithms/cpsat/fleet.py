"""Fleet structure CP-SAT exploits: interchangeable devices, latency hierarchies, integer latencies.

* :func:`twin_classes`: devices that can swap places without changing anything (same type, same
  capacity, same links with the same latencies to every other device). Swapping two twins maps
  any placement to one of equal cost, so symmetry may be broken inside a class, never across.
* :attr:`FleetView.hierarchy`: when hop latency is an ultrametric (as in racks joined by a uniform
  fabric), latency(a, b) = sum over levels of (step of the level) x [a, b in different groups of
  that level]; a free-mode hop then costs a few linear terms instead of a D x D table.
* :func:`integer_latencies`: latencies as integers, with one exact scale factor when the decimals
  allow it, else rounded down (then the integer optimum is a lower bound, never a false proof).
"""

from __future__ import annotations

from fractions import Fraction
from math import isfinite, lcm

from placer.algorithms.chain import fewest_packed_runs
from placer.algorithms.reach import DisjointSets

__all__ = ["twin_classes", "integer_latencies", "decimal", "rack_groups", "min_groups_covering",
           "path_latency_bound", "level_runs", "FleetView", "symmetry_classes"]


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
    sets = DisjointSets(len(devices))
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
                sets.union(i, j)
    return [c for c in sets.groups(i for i in range(len(devices)) if i not in excluded) if len(c) > 1]


MAX_LATENCY_SCALE = 10**6      # finest exact unit: 1e-6 us
ROW_LIMIT = 2**31 - 1


def decimal(value: float) -> Fraction:
    """The latency as the decimal it was written as (the shortest repr of the float), exactly."""
    return Fraction(repr(float(value)))


def integer_latencies(values, max_scale: int = MAX_LATENCY_SCALE, row_sum: float = 0.0
                      ) -> tuple[int, bool]:
    """``(scale, exact)``: latencies become ``floor(value x scale)`` integers.

    ``exact`` when one scale (the least common multiple of the decimals' denominators, at most
    ``max_scale``) makes every value an integer and keeps a row of ``row_sum`` us below 2^31; then
    the integer problem *is* the latency problem. Otherwise the largest power of ten the rows allow
    (at most 1,000) and every value rounded **down**: the integer optimum is then a valid lower
    bound, never above any real latency, and a level is proven only when a placement's exact
    latency meets it.
    """
    finite = sorted({float(v) for v in values if isfinite(v)})
    limit = max_scale if row_sum <= 0 else max(1, min(max_scale, int(ROW_LIMIT // max(row_sum, 1e-300))))
    scale = 1
    for v in finite:
        scale = lcm(scale, decimal(v).denominator)
        if scale > limit:
            break
    if scale <= limit:
        return scale, True
    power = 1
    while power * 10 <= min(limit, 1000):
        power *= 10
    return power, False


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


def level_runs(demand_bytes, capacity_bytes, labels, devices: int | None = None) -> int:
    """Fewest runs of a chain's nodes in the groups of one latency level (``labels[d]``: the group
    of device d), free mode: each maximal run inside a group packs into that group's devices
    (:func:`~placer.algorithms.chain.fewest_packed_runs`), and with ``devices`` devices used at
    least the fewest groups holding that many devices each hold a run."""
    groups: dict[int, list[int]] = {}
    for d, g in enumerate(labels):
        groups.setdefault(g, []).append(max(int(capacity_bytes[d]), 0))
    runs = fewest_packed_runs(demand_bytes, list(groups.values()))
    if devices:
        runs = max(runs, min_groups_covering([len(g) for g in groups.values()], devices))
    return runs


def path_latency_bound(link: dict, groups: list[list[int]], count: int, gateways: bool = False) -> int:
    """A lower bound on the latency of any simple path of ``count`` devices: it has ``count - 1``
    links, at least (fewest groups holding ``count`` devices) - 1 of them between groups; each
    costs at least the cheapest link of its kind.

    ``gateways``: racks are joined only through one gateway device each (a ring, line or torus of
    racks, :mod:`placer.specs.fabric`). A simple path then passes a rack it enters and leaves through the
    gateway alone (coming back would visit it twice), so only its first and last racks hold more
    than one device: ``count <= (k - 2) + (the two largest racks)`` over k racks."""
    arcs = count - 1
    if arcs <= 0 or not link:
        return 0
    label = {d: g for g, members in enumerate(groups) for d in members}
    intra = [w for (a, b), w in link.items() if label[a] == label[b]]
    inter = [w for (a, b), w in link.items() if label[a] != label[b]]
    sizes = sorted((len(g) for g in groups), reverse=True)
    k_min = max(0, min_groups_covering(sizes, count) - 1)
    if gateways and count > sizes[0]:
        k_min = max(k_min, count - sizes[0] - (sizes[1] if len(sizes) > 1 else 0) + 1)
    if not inter:
        return arcs * min(intra)
    if not intra:
        return arcs * min(inter)
    lo_intra, lo_inter = min(intra), min(inter)
    return min(k * lo_inter + (arcs - k) * lo_intra for k in (k_min, arcs))


class FleetView:
    """Solver-side views of an instance's fleet, computed on first use with numpy (dense fleets of
    hundreds of devices have hundreds of thousands of links; most strategies need only some views).

    ``cost[a][b]``: what a hop from a to b costs, as :func:`placer.problem.placement.hops_of` counts it (the
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
        return self._scaling[0]

    @property
    def exact(self) -> bool:
        """The integer latencies equal the real ones (else they are rounded down)."""
        return self._scaling[1]

    @property
    def _scaling(self) -> tuple[int, bool]:
        def make():
            import numpy as np
            c = self.cost
            finite = np.where(np.isfinite(c), c, 0.0)
            row = float(finite.sum(axis=1).max()) if len(c) else 0.0
            values = np.unique(c[np.isfinite(c)]).tolist() + sorted(set(self.instance.link_us.values()))
            return integer_latencies(values, row_sum=row)
        return self._get("scaling", make)

    def integer(self, value: float) -> int:
        """One latency in solver units (exact, or rounded down)."""
        q = decimal(value) * self.scale
        return q.numerator // q.denominator

    def exact_units(self, value: float) -> Fraction:
        """A latency in solver units, exactly (a fraction when the scale is not exact)."""
        return decimal(value) * self.scale

    @property
    def link(self) -> dict:
        def make():
            cache: dict[float, int] = {}
            out = {}
            for k, v in self.instance.link_us.items():
                if v not in cache:
                    cache[v] = self.integer(v)
                out[k] = cache[v]
            return out
        return self._get("link", make)

    @property
    def latency(self) -> list:
        def make():
            import numpy as np
            c = self.cost
            finite = np.isfinite(c)
            values = np.unique(c[finite]).tolist()
            table = {v: self.integer(v) for v in values}
            keys = np.array(values) if values else np.zeros(0)
            ints_arr = np.zeros(c.shape, dtype=np.int64)
            if values:
                pos = np.searchsorted(keys, np.where(finite, c, keys[0]))
                mapped = np.array([table[v] for v in values], dtype=np.int64)[pos]
                ints_arr = np.where(finite, mapped, 0)
            ints = ints_arr.tolist()
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
            thresholds: list[float] = []
            prev = 0.0
            for t in values.tolist():
                near = c <= t
                _, labels = np.unique(near, axis=0, return_inverse=True)
                labels = labels.reshape(-1)
                if not np.array_equal(near, labels[:, None] == labels[None, :]):
                    return None
                levels[-1][0] = t - prev
                thresholds.append(t)
                levels.append([None, labels.tolist()])
                prev = t
            levels[-1][0] = float("inf") if len(set(levels[-1][1])) > 1 else 0.0
            # steps in solver units: differences of the (exact or rounded-down) integer latencies,
            # so a hop's cost, the sum of the steps it crosses, is the integer latency of the pair
            out, prev_int = [], 0
            for k, (step, labels) in enumerate(levels):
                if step == float("inf"):
                    out.append((None, labels))
                    continue
                if step == 0.0:
                    continue
                t_int = self.integer(thresholds[k])
                out.append((t_int - prev_int, labels))
                prev_int = t_int
            return out
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
            sets = DisjointSets(n)
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
                        sets.union(i, j)
            return [c for c in sets.groups(i for i in range(n) if i not in self.exclude) if len(c) > 1]
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
