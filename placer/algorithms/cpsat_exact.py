"""Exact pieces CP-SAT builds on, all in exact bytes.

* :func:`next_fit` / :func:`fewest_segments`: fewest contiguous segments of a chain under one
  capacity (next-fit is optimal because feasibility is hereditary: a node set's demand is a sum).
* :func:`chain_min_devices`: fewest devices for a chain when devices come in capacity classes of
  given sizes, ignoring the fleet graph: a dynamic program over prefixes whose states are the
  Pareto-minimal vectors of devices used per class. Exact whenever the fleet can order devices
  freely; a lower bound otherwise.
* :func:`min_bottleneck_cuts`: with ``k`` segments on identical devices, the cuts minimising the
  largest segment load (binary search on the bottleneck with a greedy probe).
* :func:`segment_lower_bound`: fewest pieces a chain must be cut into when each piece must fit a
  given capacity; bounds free-mode crossings from below.
"""

from __future__ import annotations

from itertools import accumulate

__all__ = ["next_fit", "fewest_segments", "chain_min_devices", "min_bottleneck_cuts",
           "segment_lower_bound", "prefix_bounds", "min_group_runs"]


def next_fit(demand, capacity: int) -> list[tuple[int, int]] | None:
    """Segments ``(start, end)`` (end exclusive) of next-fit, or None when a node exceeds ``capacity``."""
    out = []
    start, load = 0, 0
    for i, d in enumerate(demand):
        if d > capacity:
            return None
        if load + d > capacity:
            out.append((start, i))
            start, load = i, 0
        load += d
    if len(demand):
        out.append((start, len(demand)))
    return out


def fewest_segments(demand, capacity: int) -> int | None:
    seg = next_fit(demand, capacity)
    return None if seg is None else len(seg)


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
    if len(front) <= 1:
        return front
    vecs = sorted(front, key=lambda v: (sum(v), v))
    kept: list = []
    for v in vecs:
        if not any(all(a <= b for a, b in zip(k, v)) for k in kept):
            kept.append(v)
    return {v: front[v] for v in kept}


def min_bottleneck_cuts(demand, load, capacity: int, segments: int) -> list[tuple[int, int]] | None:
    """``segments`` contiguous segments, each with demand <= ``capacity``, minimising the largest
    sum of ``load`` over a segment; None when impossible. Exact (binary search on the bottleneck)."""
    n = len(demand)
    if segments > n or segments < 1:
        return None

    def probe(limit):
        out, start, dem, ld = [], 0, 0, 0
        for i in range(n):
            if demand[i] > capacity or load[i] > limit:
                return None
            if dem + demand[i] > capacity or ld + load[i] > limit:
                out.append((start, i))
                start, dem, ld = i, 0, 0
            dem += demand[i]
            ld += load[i]
        out.append((start, n))
        return out

    lo, hi = max(load), sum(load)
    if probe(hi) is None or len(probe(hi)) > segments:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        p = probe(mid)
        if p is not None and len(p) <= segments:
            hi = mid
        else:
            lo = mid + 1
    cuts = probe(lo)
    # split the longest segments until there are exactly `segments` (splitting never raises a load)
    while len(cuts) < segments:
        k = max(range(len(cuts)), key=lambda s: cuts[s][1] - cuts[s][0])
        a, b = cuts[k]
        if b - a < 2:
            return None
        cuts[k:k + 1] = [(a, b - 1), (b - 1, b)]
    return cuts


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
