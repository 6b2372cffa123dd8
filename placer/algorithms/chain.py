"""Pure combinatorics of chains, on plain integer lists (exact bytes, no instance, no solver).

A chain is a list of node demands in pipeline order; a stage is a run ``[s, e)`` of it. Stage
feasibility is hereditary (a run that fits keeps fitting when shortened), which makes next-fit
exact on one capacity.

* :func:`prefix_sums`; :class:`Runs`: the furthest end of a run that fits, honouring pins
  (:class:`ChainPins`);
* :func:`next_fit_ends` / :func:`next_fit`: the fewest stages on one capacity (next-fit);
* :func:`fixed_order_ends`: the fewest stages along a fixed order of different capacities;
* :func:`bottleneck_ends`: among partitions into k stages, the one minimising the largest stage
  load (binary search on the bottleneck with the exact next-fit probe);
* :func:`segment_lower_bound` / :func:`prefix_bounds`: stage counts of prefixes and suffixes;
* :func:`chain_min_devices`: fewest devices when devices come in capacity classes (Pareto DP);
* :func:`min_group_runs`: fewest runs inside one group (rack) of devices (a lower bound);
* :func:`fewest_packed_runs`: fewest runs when a run's nodes may share devices in any order but
  must pack into one group's devices (free mode: a lower bound on the group changes).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from placer.algorithms.packing import packs

__all__ = ["prefix_sums", "ChainPins", "NO_PINS", "Runs", "next_fit_ends", "next_fit", "fixed_order_ends",
           "bottleneck_ends", "covered_ends", "covered_bottleneck_ends", "segment_lower_bound", "prefix_bounds", "chain_min_devices", "min_group_runs",
           "fewest_packed_runs"]


@dataclass(frozen=True)
class ChainPins:
    """Pins as next-fit constraints on nodes in pipeline order (stage = run ``[i, j)``).

    * ``floor_cut[j]``: the largest position ``<= j`` where a stage may end (no group spans it);
    * ``max_end[i]``: the furthest end of a stage starting at ``i`` that holds nodes pinned to at
      most one device;
    * ``next_pinned[i]``: the first node ``>= i`` pinned to a device (``n`` when none);
    * ``device_of``: node -> pinned device index.
    """

    groups: tuple                       # the PinGroups they come from
    floor_cut: tuple[int, ...] | None
    max_end: tuple[int, ...] | None
    next_pinned: tuple[int, ...] | None
    device_of: dict[int, int]

    @property
    def any(self) -> bool:
        return bool(self.groups)

    @property
    def has_devices(self) -> bool:
        return bool(self.device_of)



NO_PINS = ChainPins((), None, None, None, {})


def prefix_sums(values) -> list[int]:
    """``[0, v0, v0+v1, ...]`` in exact integers."""
    return [0, *accumulate(values)]


class Runs:
    """Stage runs ``[s, e)`` of a chain: prefix sums plus the pins' cut rules."""

    def __init__(self, prefix: list[int], pins: ChainPins | None):
        self.prefix = prefix
        self.n = n = len(prefix) - 1
        on = pins is not None and pins.any
        self.floor_cut = pins.floor_cut if on else None
        self.max_end = pins.max_end if on else None
        self._dead: dict[int, list[int]] = {}
        self._by_unit: list[int] | None = None
        self._units: list[int] | None = None
        if on:
            ceil_cut = [n] * (n + 1)
            nxt = n
            for j in range(n, -1, -1):
                if self.floor_cut[j] == j:
                    nxt = j
                ceil_cut[j] = nxt
            self.ceil_cut = ceil_cut
        else:
            self.ceil_cut = None

    def floor(self, j: int) -> int:
        return j if self.floor_cut is None else self.floor_cut[j]

    def ceil(self, j: int) -> int:
        return j if self.ceil_cut is None else self.ceil_cut[j]

    def reach(self, s: int, c: int) -> int:
        """Furthest allowed end of a run from ``s`` that fits ``c`` bytes (``<= s`` when none)."""
        if c < 0:
            return s
        j = bisect_right(self.prefix, self.prefix[s] + c, s, self.n + 1) - 1
        if self.max_end is not None:
            j = min(j, self.max_end[s])
        return self.floor(j)

    def dead(self, c: int) -> list[int]:
        """Sorted allowed starts whose first forced run (a node, or a pinned group) exceeds ``c``."""
        if c not in self._dead:
            if self._by_unit is None:
                starts = [s for s in range(self.n) if self.floor(s) == s]
                unit = {s: self.prefix[self.ceil(s + 1)] - self.prefix[s] for s in starts}
                self._by_unit = sorted(starts, key=lambda s: -unit[s])
                self._units = [-unit[s] for s in self._by_unit]
            k = bisect_left(self._units, -c)      # units strictly above c
            self._dead[c] = sorted(self._by_unit[:k])
        return self._dead[c]


def next_fit_ends(prefix: list[int], capacity: int, *, pins: ChainPins | None = None,
                  max_stages: int | None = None, load: tuple[list[int], int] | None = None) -> list[int] | None:
    """End positions (exclusive) of the next-fit partition on devices of ``capacity`` bytes: each
    stage takes the longest run that fits. None when a run cannot start (its first forced run does
    not fit) or more than ``max_stages`` stages would be needed. ``load``: (prefix sums of a
    second per-node load, its limit per stage), a second hereditary constraint."""
    runs = Runs(prefix, pins)
    n = runs.n
    ends: list[int] = []
    i = 0
    while i < n:
        if max_stages is not None and len(ends) >= max_stages:
            return None
        j = runs.reach(i, capacity)
        if load is not None:
            lp, limit = load
            j = runs.floor(min(j, bisect_right(lp, lp[i] + limit, i, n + 1) - 1))
        if j <= i:
            return None
        ends.append(j)
        i = j
    return ends


def fixed_order_ends(prefix: list[int], capacities, *, pins: ChainPins | None = None) -> list[int] | None:
    """Fewest stages when stage k must run on device k of a fixed order (``capacities[k]`` bytes;
    no device skipped); None when the order admits no partition.

    Next-fit is not exact here (a short first stage can be what lets a small second device take
    the next run), so this tracks every end position reachable after k stages: a union of
    intervals. From a run of starts that can all begin a stage the ends form one interval (the
    furthest reach is monotone in the start), so only the starts whose first forced run exceeds the
    device split an interval.
    """
    runs = Runs(prefix, pins)
    n = runs.n
    if n == 0:
        return []
    layers: list[list[tuple[int, int]]] = [[(0, 0)]]
    for c in capacities:
        dead = runs.dead(c)
        fresh: list[tuple[int, int]] = []
        for a, b in layers[-1]:
            b = min(b, n - 1)
            lo, idx = a, bisect_left(dead, a)
            while lo <= b:
                cut = dead[idx] if idx < len(dead) and dead[idx] <= b else None
                hi = b if cut is None else cut - 1
                p, q = runs.ceil(lo), runs.floor(hi) if hi >= lo else -1
                if lo <= p <= q:
                    fresh.append((p + 1, runs.reach(q, c)))
                if cut is None:
                    break
                lo, idx = cut + 1, idx + 1
        fresh.sort()
        merged: list[tuple[int, int]] = []
        for a, b in fresh:
            if merged and a <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        if not merged:
            return None
        layers.append(merged)
        if merged[-1][1] >= n:
            break
    else:
        return None
    # walk back: the largest reachable allowed start below the target always reaches it
    ends = [n]
    target = n
    for k in range(len(layers) - 2, 0, -1):
        start = None
        for a, b in reversed(layers[k]):
            if a >= target:
                continue
            cand = runs.floor(min(b, target - 1))
            if cand >= a:
                start = cand
                break
        ends.append(start)
        target = start
    return ends[::-1]


def next_fit(demand, capacity: int) -> list[tuple[int, int]] | None:
    """Segments ``(start, end)`` (end exclusive) of next-fit, or None when a node exceeds ``capacity``."""
    ends = next_fit_ends(prefix_sums(demand), capacity)
    if ends is None:
        return None
    return list(zip([0, *ends], ends))


def bottleneck_ends(prefix: list[int], capacity, stages: int, *, load_prefix: list[int] | None = None,
                    pins: ChainPins | None = None) -> list[int] | None:
    """A partition into at most ``stages`` stages, each within ``capacity`` (one integer, or one per
    stage along a fixed device order), whose largest stage load is as small as possible; the load
    is the demand itself unless ``load_prefix`` (prefix sums of another per-node load, e.g. weight
    bytes) is given. Binary search on the bottleneck with the exact stage-count probe. None when
    no partition into ``stages`` stages exists. With ``stages`` the minimum count, the partition
    has exactly ``stages`` stages."""
    n = len(prefix) - 1
    per_stage = not isinstance(capacity, int)
    if per_stage and load_prefix is not None:
        raise ValueError("a separate load needs one capacity for every stage")
    load = prefix if load_prefix is None else load_prefix

    def probe(b: int) -> list[int] | None:
        if per_stage:
            return fixed_order_ends(prefix, [min(c, b) for c in capacity[:stages]], pins=pins)
        if load_prefix is None:
            return next_fit_ends(prefix, min(capacity, b), pins=pins, max_stages=stages)
        return next_fit_ends(prefix, capacity, pins=pins, max_stages=stages, load=(load_prefix, b))

    if n == 0 or stages < 1:
        return [] if n == 0 else None
    largest = max(load[i + 1] - load[i] for i in range(n))
    lo = max(largest, -(-load[n] // stages)) - 1   # below this no partition into `stages` exists
    hi = max(capacity) if per_stage and load_prefix is None else \
        (capacity if load_prefix is None else load[n])
    best = probe(hi)
    if best is None:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ends = probe(mid)
        if ends is None:
            lo = mid
        else:
            hi, best = mid, ends
    return best


def covered_ends(prefix: list[int], capacity: int, covers, *, pins: ChainPins | None = None) -> list[int] | None:
    """Fewest stages on devices of ``capacity`` bytes when every stage must also hold a node of each
    list in ``covers`` (sorted node indices): end positions, or None when no partition exists.

    Holding a node of a list is not hereditary (a shortened run can lose it), so next-fit is not
    exact; a dynamic program over stage ends is. A run ``[s, j)`` is a stage when it fits, its ends
    are allowed cuts, it holds nodes pinned to one device at most, and ``s`` is at most the last
    node of every list before ``j``. The starts allowed for ``j`` form a window whose both ends
    move right as ``j`` grows, so a monotone queue gives the best start: O(n) overall.
    """
    runs = Runs(prefix, pins)
    n = runs.n
    if n == 0:
        return []
    last_before = [[-1] * (n + 1) for _ in covers]
    for k, nodes in enumerate(covers):
        members = set(nodes)
        row = last_before[k]
        for j in range(1, n + 1):
            row[j] = j - 1 if j - 1 in members else row[j - 1]
    inf = n + 1
    best = [inf] * (n + 1)
    parent = [-1] * (n + 1)
    best[0] = 0
    window: list[int] = []          # allowed starts, best[] increasing (a monotone queue)
    head = 0
    pushed = 0                      # starts below this were offered to the queue
    max_end = runs.max_end
    for j in range(1, n + 1):
        hi = min((row[j] for row in last_before), default=j - 1)
        while pushed <= hi:
            s = pushed
            pushed += 1
            if runs.floor(s) != s or best[s] >= inf:
                continue
            while len(window) > head and best[window[-1]] >= best[s]:
                window.pop()
            window.append(s)
        if runs.floor(j) != j:
            continue
        lo = bisect_left(prefix, prefix[j] - capacity, 0, j + 1)
        while head < len(window) and (window[head] < lo or (max_end is not None and max_end[window[head]] < j)):
            head += 1
        if head < len(window):
            s = window[head]
            best[j], parent[j] = best[s] + 1, s
    if best[n] >= inf:
        return None
    ends, j = [], n
    while j > 0:
        ends.append(j)
        j = parent[j]
    return ends[::-1]


def covered_bottleneck_ends(prefix: list[int], capacity: int, stages: int, covers, *,
                            pins: ChainPins | None = None) -> list[int] | None:
    """Among partitions of :func:`covered_ends` into at most ``stages`` stages, one whose largest stage
    demand is smallest (binary search on the bottleneck with the exact count as the probe)."""
    n = len(prefix) - 1
    if n == 0:
        return []
    best = covered_ends(prefix, capacity, covers, pins=pins)
    if best is None or len(best) > stages:
        return None
    lo = max(max(prefix[i + 1] - prefix[i] for i in range(n)), -(-prefix[n] // stages)) - 1
    hi = capacity
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ends = covered_ends(prefix, mid, covers, pins=pins)
        if ends is None or len(ends) > stages:
            lo = mid
        else:
            hi, best = mid, ends
    return best


def segment_lower_bound(demand, capacity: int) -> int:
    """Fewest pieces of the chain when each piece's total must be <= ``capacity`` (0 pieces if empty).

    A node larger than ``capacity`` counts as its own piece (the caller decides feasibility).
    """
    count, load = 0, None
    for d in demand:
        if load is None or load + d > capacity:
            count += 1
            load = d
        else:
            load += d
    return count


def prefix_bounds(demand, capacity: int) -> tuple[list[int], list[int]]:
    """For each node i: (fewest segments covering nodes 0..i) and (fewest covering nodes i..n-1)."""
    n = len(demand)
    pre, suf = [0] * n, [0] * n
    count, load = 0, None
    for i, d in enumerate(demand):
        if load is None or load + d > capacity:
            count, load = count + 1, d
        else:
            load += d
        pre[i] = count
    count, load = 0, None
    for i in range(n - 1, -1, -1):
        d = demand[i]
        if load is None or load + d > capacity:
            count, load = count + 1, d
        else:
            load += d
        suf[i] = count
    return pre, suf


def chain_min_devices(demand, classes, *, max_front: int = 5000):
    """Fewest devices covering the chain with contiguous segments, one device per segment.

    ``classes``: list of ``(capacity_bytes, count)``. Returns ``(devices, segments)`` where
    ``segments`` is a list of ``(start, end, class_index)``, or ``(None, None)`` when no cover
    exists with the devices available. Returns ``("unknown", None)`` when a Pareto front would
    exceed ``max_front`` vectors (the caller then uses a weaker bound).
    """
    n = len(demand)
    if n == 0:
        return 0, []
    prefix = [0, *accumulate(demand)]
    t_count = len(classes)
    # reach[i][t]: largest end j such that nodes i..j-1 fit class t
    reach = []
    for i in range(n):
        row = []
        for cap, _ in classes:
            lo, hi = i, n
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if prefix[mid] - prefix[i] <= cap:
                    lo = mid
                else:
                    hi = mid - 1
            row.append(lo)
        reach.append(row)
    fronts: list[dict] = [dict() for _ in range(n + 1)]
    fronts[0][(0,) * t_count] = None
    for i in range(n):
        front = _pareto(fronts[i])
        fronts[i] = front
        if len(front) > max_front:
            return "unknown", None
        for vec in front:
            for t in range(t_count):
                if vec[t] >= classes[t][1]:
                    continue
                new = vec[:t] + (vec[t] + 1,) + vec[t + 1:]
                for j in range(i + 1, reach[i][t] + 1):
                    if new not in fronts[j]:
                        fronts[j][new] = (i, vec, t)
    final = _pareto(fronts[n])
    if not final:
        return None, None
    best = min(final, key=lambda v: (sum(v), v))
    fronts[n] = final
    segments = []
    j, vec = n, best
    while j > 0:
        i, prev, t = fronts[j][vec]
        segments.append((i, j, t))
        j, vec = i, prev
    segments.reverse()
    return sum(best), segments


def _pareto(front: dict) -> dict:
    """The vectors of ``front`` no other vector of it dominates (component-wise <=)."""
    if len(front) <= 1:
        return front
    vecs = sorted(front, key=lambda v: (sum(v), v))
    kept: list = []
    table = np.empty((len(vecs), len(vecs[0])), dtype=np.int64)   # the kept vectors, as rows
    for v in vecs:
        if kept and bool((table[:len(kept)] <= np.asarray(v)).all(axis=1).any()):
            continue
        table[len(kept)] = v
        kept.append(v)
    return {v: front[v] for v in kept}


def min_group_runs(demand, kinds, total_devices: int, *, max_states: int = 300_000):
    """Fewest *runs* covering the chain, where a run is a contiguous piece placed on devices of one
    group (a rack) of one kind, using at most ``total_devices`` devices in all.

    ``kinds``: list of ``(capacity_bytes, largest_group_size, devices_of_kind)``; a run on kind k
    with m devices covers as many nodes as next-fit fits in m devices of that capacity, and
    m <= the largest group. Runs of one kind sharing groups are not packed here (a relaxation), so
    the count is a lower bound on the runs of any contiguous placement with that many devices.
    Returns ``(runs, witness)`` with witness ``[(start, end, kind, devices)]``, ``(None, None)``
    when no cover exists, ``("unknown", None)`` when the state space exceeds ``max_states``.
    """
    n = len(demand)
    if n == 0:
        return 0, []
    # reach[k][i][m]: end (exclusive) of the longest run from i on m devices of kind k
    reach = []
    for cap, group, _ in kinds:
        rows = []
        for i in range(n):
            ends = [i]
            j, load, used = i, 0, 1
            while j < n and used <= group:
                if demand[j] > cap:
                    break
                if load + demand[j] > cap:
                    ends.append(j)
                    used += 1
                    load = 0
                    continue
                load += demand[j]
                j += 1
            while len(ends) <= group:
                ends.append(j)
            rows.append(ends)
        reach.append(rows)
    budget = [k[2] for k in kinds]
    states: list[dict] = [dict() for _ in range(n + 1)]
    states[0][(0,) * len(kinds)] = (0, None)
    count = 1
    for i in range(n):
        for vec, (runs, _) in list(states[i].items()):
            spent = sum(vec)
            for k, (_, group, _) in enumerate(kinds):
                ends = reach[k][i]
                for m in range(1, min(group, budget[k] - vec[k], total_devices - spent) + 1):
                    j = ends[m]
                    if j == ends[m - 1]:
                        break            # one more device covers nothing more
                    new = vec[:k] + (vec[k] + m,) + vec[k + 1:]
                    old = states[j].get(new)
                    if old is None or old[0] > runs + 1:
                        if old is None:
                            count += 1
                            if count > max_states:
                                return "unknown", None
                        states[j][new] = (runs + 1, (i, vec, k, m))
    if not states[n]:
        return None, None
    vec = min(states[n], key=lambda v: (states[n][v][0], sum(v)))
    runs = states[n][vec][0]
    witness = []
    j = n
    while j > 0:
        _, back = states[j][vec]
        i, prev, k, m = back
        witness.append((i, j, k, m))
        j, vec = i, prev
    witness.reverse()
    return runs, witness


def fewest_packed_runs(demand, groups, *, budget: int = 200_000) -> int:
    """Fewest runs covering the chain, where a run is a contiguous piece whose nodes pack (in any
    arrangement, :func:`~placer.algorithms.packing.packs`) into the devices of one group.

    ``groups``: the device capacities (bytes) of each group. In free mode a maximal run of nodes
    inside one group must fit that group's devices, so a placement has at least this many runs
    in groups, and at least this many - 1 edges between groups. Packability of runs is
    hereditary, so the greedy longest run from each start is optimal; a packing the search does
    not settle counts as fitting, which keeps the count a lower bound. When ``budget`` (items
    examined) runs out, falls back to the runs of the largest group's total capacity (weaker,
    still a bound). A node too large for every group counts as a run of its own.
    """
    shapes = sorted({tuple(sorted((int(c) for c in g), reverse=True)) for g in groups if g},
                    key=lambda s: -sum(s))
    if not shapes:
        return 0
    if all(len(s) == 1 for s in shapes):
        return segment_lower_bound(demand, max(s[0] for s in shapes))
    totals = [sum(s) for s in shapes]
    n = len(demand)
    count, i, spent = 0, 0, 0
    while i < n:
        count += 1
        j = i + 1                     # [i, j) is taken; try to add node j
        while j < n:
            run = demand[i:j + 1]
            spent += len(run)
            if spent > budget:
                return segment_lower_bound(demand, max(totals))
            total = sum(run)
            if not any(total <= t and packs(run, s) is not False for s, t in zip(shapes, totals)):
                break
            j += 1
        i = j
    return count
