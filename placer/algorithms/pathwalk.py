"""A first contiguous placement on any fleet graph, fast: next-fit along walked device paths.

A contiguous pipeline runs on a simple path of linked devices. On sparse fleets (a ring of racks,
a few chords) most walks dead-end or wander onto small devices, and methods that fix one device
order (dp) or take one greedy walk (greedy) can find no placement at all although walking the ring
gives one at once. This module searches paths directly:

* a depth-first search over simple paths from every start device, each stage taking the longest
  run of nodes its device holds (next-fit); neighbours are tried in Warnsdorff order (fewest
  unvisited neighbours first, so the walk follows the ring instead of cutting it with a chord, then
  larger capacity, then lower latency); a branch is cut when its devices plus a volume bound on the
  nodes left cannot beat the best path found. The search stops at a work budget or a deadline.
* the best path found is then re-cut exactly for its device order
  (:func:`placer.algorithms.dp.fixed_order_ends`: the fewest stages along that order, since next-fit
  is not exact on devices of different sizes).
* a fleet whose graph is a single path or cycle has only arcs as simple paths: every maximal arc
  (each start, both directions) is cut exactly, and the count is the proven minimum.

The result is a placement (status heuristic) and its device order: CP-SAT takes it as its hint and
incumbent, free mode as a start.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from time import perf_counter

from placer.algorithms.bound import lower_bound as compute_lower_bound
from placer.algorithms.chain import fixed_order_ends, prefix_sums
from placer.algorithms.deadline import Deadline
from placer.problem.instance import Instance
from placer.problem.placement import Level, Result, Status, evaluate, unplaced

__all__ = ["WalkFound", "walk_paths", "pathwalk"]

DEFAULT_BUDGET = 400_000      # path extensions before the search settles for its best
DEFAULT_SECONDS = 0.5         # wall-clock cap of one search (a first placement within a second)
WALKS = 3                     # long walks whose arcs are cut exactly before the search


@dataclass(frozen=True)
class WalkFound:
    """The best path: ``order`` (device indices, stage k on ``order[k]``), the stage ``ends``
    (exclusive node indices), and ``proven``: no simple path of the fleet holds the chain on fewer
    devices (path- and cycle-shaped fleets)."""

    order: list[int]
    ends: list[int]
    proven: bool
    expansions: int

    def assignment(self, n_nodes: int) -> list[int]:
        out, start = [], 0
        for d, end in zip(self.order, self.ends):
            out.extend([d] * (end - start))
            start = end
        assert len(out) == n_nodes
        return out


def walk_paths(instance: Instance, *, budget: int = DEFAULT_BUDGET, deadline: Deadline | None = None,
               seconds: float = DEFAULT_SECONDS) -> WalkFound | None:
    """The fewest-device contiguous placement of the instance's chain found along simple fleet
    paths (see the module docstring), or None when the search finds none (pins are not handled:
    None then too, and for models that are not chains)."""
    if not instance.model.is_chain or instance.pins or instance.n_nodes == 0:
        return None
    stop = Deadline.of(deadline, seconds)
    demand = instance.demand_bytes
    caps = instance.capacity_bytes
    n, nd = instance.n_nodes, instance.n_devices
    prefix = prefix_sums(demand)
    cmax = max(caps)
    if max(demand) > cmax:
        return None
    adj: list[list[int]] = [[] for _ in range(nd)]
    lat: dict[tuple[int, int], float] = instance.link_us
    for a, b in lat:
        adj[a].append(b)
    if all(len(a) <= 2 for a in adj):
        return _arcs(instance, adj, prefix)
    # first the arcs of a few long (Hamiltonian-ish) walks, each cut exactly; then the search
    walked = None
    for s in sorted(range(nd), key=lambda d: (-caps[d], d))[:WALKS]:
        if stop.budget() < seconds / 2 and walked is not None:
            break
        arc = _best_arc(_long_walk(adj, s, caps, lat, stop), adj, prefix, caps, stop)
        if arc is not None and (walked is None or len(arc[1]) < len(walked[1])):
            walked = arc

    def reach(i: int, d: int) -> int:
        return bisect_right(prefix, prefix[i] + caps[d], i, n + 1) - 1

    def left_bound(i: int) -> int:
        """Devices still needed for nodes i.. (volume over the largest device), a lower bound."""
        rest = prefix[n] - prefix[i]
        return -(-rest // cmax) if rest > 0 else 0

    best_order: list[int] | None = None if walked is None else walked[0]
    best_len = nd + 1 if walked is None else len(walked[1])
    expansions = 0
    exhausted = True
    used = [False] * nd
    # starts: larger devices first, then index; every device is a start
    starts = sorted(range(nd), key=lambda d: (-caps[d], d))
    for s in starts:
        if reach(0, s) <= 0:
            continue
        if best_len <= 1 + left_bound(reach(0, s)):
            continue
        path = [s]
        pos = [reach(0, s)]
        used[s] = True
        stack = [iter(_ordered(adj, s, used, caps, lat))]
        while stack:
            i = pos[-1]
            if i >= n:
                if len(path) < best_len:
                    best_len, best_order = len(path), list(path)
                _pop(path, pos, stack, used)
                continue
            expansions += 1
            if expansions > budget or stop.expired():     # an expansion sorts a dense fleet's neighbours: check each
                exhausted = False
                break
            nxt = None
            for v in stack[-1]:
                if used[v]:
                    continue
                j = reach(i, v)
                if j <= i:
                    continue
                if len(path) + 1 + left_bound(j) >= best_len:
                    continue
                nxt = (v, j)
                break
            if nxt is None:
                _pop(path, pos, stack, used)
                continue
            v, j = nxt
            path.append(v)
            pos.append(j)
            used[v] = True
            stack.append(iter(_ordered(adj, v, used, caps, lat)))
        for d in path:
            used[d] = False
        if not exhausted:
            break
    if best_order is None:
        return None
    # the exact fewest stages along the best order (next-fit is not exact on mixed capacities)
    ends = fixed_order_ends(prefix, [caps[d] for d in best_order])
    if ends is None or len(ends) > len(best_order):     # cannot happen: next-fit is one partition
        ends = _next_fit_ends(prefix, [caps[d] for d in best_order])
    order = best_order[:len(ends)]
    return WalkFound(order=order, ends=ends, proven=False, expansions=expansions)


def _long_walk(adj, start: int, caps, lat, stop: Deadline | None = None) -> list[int]:
    """A simple path from ``start``, always to the unused neighbour with the fewest unused
    neighbours (Warnsdorff's rule), until a dead end (or ``stop``). The unused-neighbour counts
    are kept up to date as the walk goes (a dense fleet would recount them cubically)."""
    used = [False] * len(adj)
    free = [len(a) for a in adj]

    def take(d: int) -> None:
        used[d] = True
        for w in adj[d]:
            free[w] -= 1

    walk = [start]
    take(start)
    while stop is None or not stop.expired():
        v = walk[-1]
        nxt = min((u for u in adj[v] if not used[u]), key=lambda u: (free[u], -caps[u], lat[v, u], u), default=None)
        if nxt is None:
            return walk
        walk.append(nxt)
        take(nxt)
    return walk


def _best_arc(walk: list[int], adj, prefix, caps, stop: Deadline):
    """The arc of ``walk`` (a cycle when its ends are linked) holding the chain on the fewest
    devices, each arc cut exactly: ``(order, ends)`` or None."""
    cyclic = len(walk) > 2 and walk[0] in adj[walk[-1]]
    best = None
    for s in range(len(walk)):
        if stop.expired():
            break
        forward = walk[s:] + (walk[:s] if cyclic else [])
        backward = walk[s::-1] + (walk[:s:-1] if cyclic else [])
        for order in (forward, backward):
            ends = fixed_order_ends(prefix, [caps[d] for d in order])
            if ends is not None and (best is None or len(ends) < len(best[1])):
                best = (order[:len(ends)], ends)
    return best


def _arcs(instance: Instance, adj, prefix) -> WalkFound | None:
    """Fleets whose graph is a path or a cycle: every simple path is an arc, so the exact fewest
    stages along every maximal arc (each start, both directions) is the exact minimum."""
    caps = instance.capacity_bytes
    nd = len(adj)
    best = None
    count = 0
    for s in range(nd):
        for first in (adj[s] or [None])[:2]:
            order, prev, cur = [s], s, first
            seen = {s}
            while cur is not None and cur not in seen:
                order.append(cur)
                seen.add(cur)
                nxt = [u for u in adj[cur] if u != prev]
                prev, cur = cur, (nxt[0] if nxt else None)
            count += 1
            ends = fixed_order_ends(prefix, [caps[d] for d in order])
            if ends is not None and (best is None or len(ends) < len(best[1])):
                best = (order[:len(ends)], ends)
    if best is None:
        return None
    return WalkFound(order=best[0], ends=best[1], proven=True, expansions=count)


def _ordered(adj, v: int, used, caps, lat) -> list[int]:
    """Unused neighbours of ``v``: fewest unused neighbours of their own first (Warnsdorff), then
    larger capacity, lower latency, lower index."""
    out = [u for u in adj[v] if not used[u]]
    out.sort(key=lambda u: (sum(1 for w in adj[u] if not used[w] and w != v), -caps[u], lat[v, u], u))
    return out


def _pop(path, pos, stack, used) -> None:
    stack.pop()
    used[path.pop()] = False
    pos.pop()


def _next_fit_ends(prefix: list[int], capacities: list[int]) -> list[int]:
    n = len(prefix) - 1
    ends, i = [], 0
    for c in capacities:
        if i >= n:
            break
        i = bisect_right(prefix, prefix[i] + c, i, n + 1) - 1
        ends.append(i)
    return ends


def pathwalk(instance: Instance, *, lower_bound: int | None = None, deadline: Deadline | None = None) -> Result:
    """The path-walk placement as a Result (status heuristic; optimal when the search was
    exhaustive on a path- or cycle-shaped fleet, or the count meets ``lower_bound``): the
    registry's ``pathwalk`` method, for chains without pins in contiguous and split mode."""
    t0 = perf_counter()
    lb = compute_lower_bound(instance) if lower_bound is None else lower_bound
    give_up = unplaced("pathwalk", instance, since=t0, lower_bound=lb)

    if instance.mode == "free":
        return give_up("pathwalk places contiguous stages")
    if not instance.model.is_chain:
        return give_up("pathwalk places chains (a model whose layers form a DAG needs cpsat)")
    if instance.pins:
        return give_up("pathwalk does not honour pins; use cpsat or dp")
    found = walk_paths(instance, deadline=deadline)
    if found is None:
        return give_up("no simple fleet path holding the chain was found")
    used = len(found.order)
    proven = found.proven or used <= lb
    return evaluate(instance, found.assignment(instance.n_nodes), method="pathwalk",
                    status=Status.OPTIMAL if proven else Status.HEURISTIC, lower_bound=lb,
                    seconds=perf_counter() - t0, objective=float(used), bound=float(used if proven else lb),
                    proven_optimal=proven, order=tuple(found.order),
                    levels=(Level("devices", used, used if proven else lb, proven),),
                    stats={"order": list(found.order), "expansions": found.expansions})
