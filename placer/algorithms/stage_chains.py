"""Chains of candidate stages for per-stage degrees (:mod:`placer.algorithms.stage_degrees`) with
every node's supply unlimited: whether one covers the model, the fewest devices of one (a lower
bound), a plan laid on real nodes from the cheapest one, and the least hop latency at a device
count (a bound, and a plan when its chain fits the supply)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # annotations only (stage_degrees imports this module)
    from placer.algorithms.stage_degrees import Candidate, PerStageProblem

__all__ = ["reachable", "fewest_devices_bound", "path_plan", "latency_bound"]


def reachable(prob: PerStageProblem, cands) -> bool:
    """Some chain of candidates covers the model (node capacities and links aside): when none does,
    no plan exists."""
    reach = [False] * (prob.n + 1)
    reach[0] = True
    for c in sorted(cands, key=lambda c: c.start):
        if reach[c.start]:
            reach[c.end] = True
    return reach[prob.n]


def _cheapest_chains(prob: PerStageProblem, cands) -> tuple[list[int | None], list[Candidate | None]]:
    """Per boundary: the fewest devices of a chain of candidates from boundary 0 to it (each costing
    its degree, every node's supply unlimited; None: no chain) and the last candidate of such a chain,
    by a shortest path over the boundaries."""
    dist: list[int | None] = [None] * (prob.n + 1)
    back: list[Candidate | None] = [None] * (prob.n + 1)
    dist[0] = 0
    for c in sorted(cands, key=lambda c: c.start):
        if dist[c.start] is not None and (dist[c.end] is None or dist[c.start] + c.degree < dist[c.end]):
            dist[c.end], back[c.end] = dist[c.start] + c.degree, c
    return dist, back


def fewest_devices_bound(prob: PerStageProblem, cands) -> int | None:
    """A lower bound on the devices of any plan: the cheapest chain of candidates (each costing its
    degree) with every node's supply unlimited, by a shortest path over the boundaries (exact over
    longest-stage candidates, see :func:`placer.algorithms.stage_degrees.solve_problem`). None when
    no chain covers the model."""
    return _cheapest_chains(prob, cands)[0][prob.n]


def path_plan(prob: PerStageProblem, cands) -> list[Candidate] | None:
    """A plan from the cheapest chain of :func:`fewest_devices_bound` laid on real nodes: each stage
    on a node of the chain's per-rank capacity (the previous stage's node first, then in
    order) that still has the devices, every stage then grown to its longest; None when a stage
    finds no node (the chain needs more of some node than the fleet has) or two consecutive stages
    land on unlinked nodes. With longest-stage candidates its devices are at most the chain's."""
    dist, back = _cheapest_chains(prob, cands)
    if dist[prob.n] is None:
        return None
    chain = []
    at = prob.n
    while at > 0:
        chain.append(back[at])
        at = back[at].start
    chain.reverse()
    free = [fn.size for fn in prob.nodes]
    longest = {(c.start, c.degree, c.node): c for c in cands}
    plan: list[Candidate] = []
    at, prev = 0, None
    for c in chain:
        if at >= prob.n:
            break
        want = prob.nodes[c.node]
        options = [u for u, fn in enumerate(prob.nodes) if fn.capacity[c.degree] == want.capacity[c.degree]]
        options.sort(key=lambda u: (u != prev, u))
        got = None
        for u in options:
            stage = longest.get((at, c.degree, u))
            if free[u] >= c.degree and stage is not None and \
                    (prev is None or prob.latency[prev][u] is not None):
                got = stage
                break
        if got is None:
            return None
        free[got.node] -= got.degree
        plan.append(got)
        at, prev = got.end, got.node
    return plan if at >= prob.n else None


def latency_bound(prob: PerStageProblem, cands, devices: int) -> tuple[Fraction | None, list[Candidate] | None]:
    """(the least hop latency of a chain of candidates using exactly ``devices`` devices with every
    node's supply unlimited, that chain): a lower bound on the latency of every plan of ``devices``
    devices (a dynamic program over (boundary, devices so far, last node)); when the chain also
    respects every node's supply it is a plan meeting the bound. (None, None) without such a chain."""
    from_start: dict[int, list[Candidate]] = {}
    for c in cands:
        from_start.setdefault(c.start, []).append(c)
    lat = [[None if x is None else Fraction(repr(float(x))) for x in row] for row in prob.latency]
    best: dict[tuple[int, int, int], tuple[Fraction, tuple | None, Candidate]] = {}
    for c in from_start.get(0, ()):
        key = (c.end, c.degree, c.node)
        if c.degree <= devices and (key not in best or best[key][0] > 0):
            best[key] = (Fraction(0), None, c)
    for p in range(1, prob.n):
        for d in range(1, devices + 1):
            for u in range(len(prob.nodes)):
                here = best.get((p, d, u))
                if here is None:
                    continue
                for c in from_start.get(p, ()):
                    hop = lat[u][c.node]
                    if hop is None or d + c.degree > devices:
                        continue
                    key, cost = (c.end, d + c.degree, c.node), here[0] + hop
                    if key not in best or cost < best[key][0]:
                        best[key] = (cost, (p, d, u), c)
    ends = [(best[(prob.n, devices, u)][0], u) for u in range(len(prob.nodes)) if (prob.n, devices, u) in best]
    if not ends:
        return None, None
    cost, u = min(ends)
    chain, key = [], (prob.n, devices, u)
    while key is not None:
        _, back, c = best[key]
        chain.append(c)
        key = back
    chain.reverse()
    use = [0] * len(prob.nodes)
    for c in chain:
        use[c.node] += c.degree
    fits = all(use[u] <= fn.size for u, fn in enumerate(prob.nodes))
    return cost, (chain if fits else None)
