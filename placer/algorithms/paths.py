"""Device paths through the fleet graph for contiguous pipelines.

A contiguous pipeline of ``s`` stages runs on a simple path of ``s`` available devices, stage
``k`` -> stage ``k+1`` over a direct link; its hop latency is the sum of those links' latencies.

* Rack-structured fleets (every pair of devices linked; one latency inside racks and a larger or
  equal one between racks) have an exact answer: fill the largest racks in turn. Any path through
  ``r`` racks crosses at least ``r - 1`` rack boundaries, and filling the largest racks first uses
  the fewest racks.
* Otherwise a depth-first search whose first descent is the greedy walk (lowest-latency unused
  neighbour, ties by larger capacity then id), with branch and bound on
  ``remaining hops x cheapest link`` and a work budget. It proves its answer when it finishes within
  the budget or meets the bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.problem.instance import Instance

__all__ = ["PathResult", "find_path", "min_latency_path", "neighbours", "walk", "path_latency_us",
           "rack_layout"]

DEFAULT_BUDGET = 200_000   # DFS expansions before the search settles for its best path


@dataclass(frozen=True)
class PathResult:
    """``path`` (device indices) or None; ``proven``: the path has minimum latency among all simple
    paths meeting the request, or (with ``path`` None) no such path exists."""

    path: list[int] | None
    latency_us: float | None
    proven: bool
    how: str


def path_latency_us(instance: Instance, path) -> float:
    """Sum of the direct-link latencies along ``path`` (KeyError when two neighbours are not linked)."""
    link = instance.link_us
    return float(sum(link[a, b] for a, b in zip(path, path[1:])))


def neighbours(instance: Instance, prefer: str = "latency") -> list[list[tuple[float, int]]]:
    """Per device: (latency, neighbour) pairs in walk order: ``prefer="latency"`` lowest latency
    first (ties: larger capacity, then lower index); ``"capacity"`` larger capacity first (ties:
    lower latency, then lower index)."""
    cap = instance.capacity_bytes
    adj: list[list[tuple[float, int]]] = [[] for _ in range(instance.n_devices)]
    for (a, b), lat in instance.link_us.items():
        adj[a].append((lat, b))
    if prefer == "latency":
        def key(t): return (t[0], -cap[t[1]], t[1])
    elif prefer == "capacity":
        def key(t): return (-cap[t[1]], t[0], t[1])
    else:
        raise ValueError(f"prefer must be 'latency' or 'capacity', got {prefer!r}")
    for lst in adj:
        lst.sort(key=key)
    return adj


def rack_layout(instance: Instance) -> tuple[list[list[int]], float, float] | None:
    """(racks as device-index lists, intra-rack latency, inter-rack latency) when every pair of
    available devices is linked with one latency inside racks and one between them; else None."""
    n = instance.n_devices
    link = instance.link_us
    if len(link) != n * (n - 1):
        return None
    intra: set[float] = set()
    inter: set[float] = set()
    rack = [d.rack for d in instance.devices]
    for (a, b), lat in link.items():
        (intra if rack[a] == rack[b] else inter).add(lat)
        if len(intra) > 1 or len(inter) > 1:
            return None
    by_rack: dict[int, list[int]] = {}
    for i, r in enumerate(rack):
        by_rack.setdefault(r, []).append(i)
    a = next(iter(intra)) if intra else 0.0
    b = next(iter(inter)) if inter else a
    return list(by_rack.values()), a, b


def _rack_fill(instance: Instance, s: int, layout) -> list[int]:
    racks, _, _ = layout
    cap = instance.capacity_bytes
    ordered = sorted(racks, key=lambda r: (-len(r), r[0]))
    path: list[int] = []
    for members in ordered:
        path.extend(sorted(members, key=lambda d: (-cap[d], d)))
        if len(path) >= s:
            break
    return path[:s]


def find_path(instance: Instance, s: int, *, fixed: dict[int, int] | None = None,
              budget: int = DEFAULT_BUDGET) -> PathResult:
    """A minimum-latency simple path of ``s`` linked devices; ``fixed`` maps positions to devices."""
    fixed = dict(fixed or {})
    n = instance.n_devices
    if s <= 0:
        return PathResult([], 0.0, True, "empty")
    if s > n:
        return PathResult(None, None, True, f"the fleet has {n} available devices")
    if len(set(fixed.values())) < len(fixed):
        return PathResult(None, None, True, "one device pinned at two positions of the path")
    cap = instance.capacity_bytes
    if s == 1:
        d = fixed.get(0, min(range(n), key=lambda x: (-cap[x], x)))
        return PathResult([d], 0.0, True, "single device")
    if not fixed:
        layout = rack_layout(instance)
        if layout is not None and layout[1] <= layout[2]:
            path = _rack_fill(instance, s, layout)
            return PathResult(path, path_latency_us(instance, path), True, "rack fill (exact)")
    return _search(instance, s, fixed, budget)


def min_latency_path(instance: Instance, s: int) -> list[int] | None:
    """A simple path of ``s`` linked available devices with minimum hop latency (exact for
    rack-structured fleets, else the best path the bounded search finds), or None."""
    return find_path(instance, s).path


def _search(instance: Instance, s: int, fixed: dict[int, int], budget: int) -> PathResult:
    adj = neighbours(instance)
    n = instance.n_devices
    cap = instance.capacity_bytes
    min_link = min((lat for lst in adj for lat, _ in lst), default=0.0)
    lower = (s - 1) * min_link
    reserved = set(fixed.values())
    starts = [fixed[0]] if 0 in fixed else sorted((d for d in range(n) if d not in reserved),
                                                  key=lambda d: (-cap[d], d))
    best: list[int] | None = None
    best_cost = float("inf")
    work = 0
    exhausted = True
    used = [False] * n
    for start in starts:
        if best is not None and best_cost <= lower:
            break
        path = [start]
        used[start] = True
        cost = 0.0
        # stack of neighbour iterators, one per path position
        stack = [iter(adj[start])]
        while stack:
            nxt = None
            if len(path) == s:      # a full path: keep it if cheaper, then step back
                if cost < best_cost:
                    best, best_cost = list(path), cost
                    if best_cost <= lower:
                        break
            else:
                work += 1
                if work > budget:
                    exhausted = False
                    break
                pos = len(path)
                want = fixed.get(pos)
                for lat, v in stack[-1]:
                    if used[v] or (want is not None and v != want) or (want is None and v in reserved):
                        continue
                    if cost + lat + (s - 1 - pos) * min_link >= best_cost:
                        if want is None:
                            break   # neighbours are sorted by latency: none further is cheaper
                        continue
                    nxt = (lat, v)
                    break
            if nxt is None:
                stack.pop()
                last = path.pop()
                used[last] = False
                if path:
                    cost -= instance.link_us[path[-1], last]
                continue
            lat, v = nxt
            path.append(v)
            used[v] = True
            cost += lat
            stack.append(iter(adj[v]))
        for d in path:
            used[d] = False
        if not exhausted:
            break
    if best is None:
        proven = exhausted
        why = "no simple path of that length honours the links" if proven else "search budget spent"
        return PathResult(None, None, proven, why)
    proven = exhausted or best_cost <= lower
    return PathResult(best, best_cost, proven, "search (exact)" if proven else "search (best found)")


def walk(instance: Instance, start: int, *, prefer: str = "latency", length: int | None = None) -> list[int]:
    """From ``start``, move to the first unused linked neighbour in :func:`neighbours` order until
    ``length`` devices (default: all) or a dead end."""
    adj = neighbours(instance, prefer)
    length = instance.n_devices if length is None else length
    seen = {start}
    path = [start]
    while len(path) < length:
        for _, v in adj[path[-1]]:
            if v not in seen:
                path.append(v)
                seen.add(v)
                break
        else:
            break
    return path
