"""Fewest devices when placement order does not matter: an arc-flow model over identical nodes.

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

from ortools.sat.python import cp_model

from . import ortools_adapter as ora

__all__ = ["ArcFlow", "build_arcflow", "prune_for_waste", "solve_arcflow", "ffd_bins", "max_fill_bins"]

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


def ffd_bins(demand, classes) -> list[tuple[int, list[int]]] | None:
    """First-fit decreasing into the largest devices first: ``[(class, [sizes])]``; None if it fails."""
    order = sorted(range(len(classes)), key=lambda t: -classes[t][0])
    bins: list[list] = []     # [class, free, items]
    left = {t: classes[t][1] for t in order}
    for d in sorted(demand, reverse=True):
        for b in bins:
            if b[1] >= d:
                b[1] -= d
                b[2].append(d)
                break
        else:
            for t in order:
                if left[t] > 0 and classes[t][0] >= d:
                    left[t] -= 1
                    bins.append([t, classes[t][0] - d, [d]])
                    break
            else:
                return None
    return [(b[0], b[2]) for b in bins]


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


def solve_arcflow(af: ArcFlow, *, params: dict, lower_bound: int = 0, max_bins: int | None = None,
                  hint_bins=None, progress=None, t0=None):
    """Solve min devices (between ``lower_bound`` and ``max_bins``); returns (outcome, bins) where
    bins = ``[(class, [sizes])]`` or None."""
    model = cp_model.CpModel()
    flows = []       # per class: list of vars aligned with af.arcs[c]
    per_size: dict[int, list] = {k: [] for k in range(len(af.sizes))}
    bins_used = []
    for c, arcs in enumerate(af.arcs):
        cap_count = af.classes[c][1]
        vs = []
        out_of: dict[int, list] = {}
        into: dict[int, list] = {}
        for a, (lo, hi, k) in enumerate(arcs):
            ub = min(cap_count, af.counts[k]) if k >= 0 else cap_count
            v = model.new_int_var(0, ub, f"f{c}_{a}")
            vs.append(v)
            out_of.setdefault(lo, []).append(v)
            if hi >= 0:
                into.setdefault(hi, []).append(v)
            if k >= 0:
                per_size[k].append(v)
        z = model.new_int_var(0, cap_count, f"bins{c}")
        model.add(sum(out_of.get(0, [])) == z)
        for level in af.levels[c]:
            if level > 0:
                model.add(sum(into.get(level, [])) == sum(out_of.get(level, [])))
        flows.append(vs)
        bins_used.append(z)
    for k, vs in per_size.items():
        model.add(sum(vs) == af.counts[k])
    model.add(sum(bins_used) >= lower_bound)
    if max_bins is not None:
        model.add(sum(bins_used) <= max_bins)
    model.minimize(sum(bins_used))
    if hint_bins:
        _hint(model, af, flows, bins_used, hint_bins)
    watch = {"z": bins_used}
    for c, vs in enumerate(flows):
        watch[f"f{c}"] = vs
    out = ora.solve(model, watch, params=params, progress=progress, target=lower_bound, t0=t0)
    bins = None
    if out.values is not None:
        bins = _decompose(af, {c: out.values[f"f{c}"] for c in range(len(af.arcs))})
    return out, bins


def _hint(model, af, flows, bins_used, hint_bins):
    index = {s: k for k, s in enumerate(af.sizes)}
    pos = [{(lo, hi, k): a for a, (lo, hi, k) in enumerate(arcs)} for arcs in af.arcs]
    value = [[0] * len(arcs) for arcs in af.arcs]
    count = [0] * len(af.arcs)
    for c, items in hint_bins:
        level = 0
        count[c] += 1
        for s in sorted(items, reverse=True):
            k = index[s]
            a = pos[c].get((level, level + s, k))
            if a is None:
                return
            value[c][a] += 1
            level += s
        if level > 0:
            value[c][pos[c][(level, -1, -1)]] += 1
    for c, vs in enumerate(flows):
        for v, x in zip(vs, value[c]):
            model.add_hint(v, x)
        model.add_hint(bins_used[c], count[c])


def _decompose(af, flow_values) -> list[tuple[int, list[int]]]:
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
