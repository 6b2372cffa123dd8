"""The hop-latency term of the node-to-device CP-SAT models (:mod:`placer.algorithms.cpsat.models`):
the latency between the devices of every model edge's ends, per hierarchy level on an ultrametric
fleet, else per device pair."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placer.algorithms.cpsat.fleet import level_runs
from placer.algorithms.quantize import check_row

if TYPE_CHECKING:   # annotations only (models imports this module)
    from placer.algorithms.cpsat.models import Problem


def tick(p: Problem, k: int, every: int = 32) -> None:
    """Every ``every`` steps of a loop that builds a model: raise
    :class:`~placer.algorithms.deadline.DeadlineReached` once the problem's deadline has passed
    (the strategy then reports its best placement, its unsearched levels "not solved")."""
    if p.deadline is not None and k % every == 0:
        p.deadline.check()

__all__ = ["EdgeLatency", "tick"]


class EdgeLatency:
    """Sum over model edges of the latency between the devices of their ends (0 on one device).

    Ultrametric fleets: one crossing literal per edge and hierarchy level, cost = sum of level
    steps. Otherwise ``lat[e] >= sum_b L[a][b] x[v,b]`` enforced by ``x[u,a]`` (D^2 terms per edge).
    """

    def __init__(self, m, p: Problem, by_node, *, max_terms: int = 2_000_000, cuts: bool = True):
        self.m, self.p = m, p
        self.levels = []          # (step, labels, [crossing literal or None per edge])
        self.edge_lat = None
        self.supported = True
        if not p.edges:
            return
        if p.hierarchy is not None:
            self._levels(by_node)
            if cuts:
                self.crossing_cuts()
        elif len(p.edges) * p.d * p.d <= max_terms:
            self._table(by_node)
        else:
            self.supported = False

    def _levels(self, by_node):
        m, p = self.m, self.p
        prev = None
        for step, labels in p.hierarchy:
            member = []
            for node in range(p.n):
                tick(p, node)
                by_g: dict[int, list] = {}
                for d, v in by_node[node]:
                    by_g.setdefault(labels[d], []).append(v)
                member.append(by_g)
            crosses = []
            for k, (u, v) in enumerate(p.edges):
                tick(p, k)
                if step is None:     # unreachable groups: an edge never crosses them
                    for g in set(member[u]) | set(member[v]):
                        m.add(sum(member[u].get(g, [])) == sum(member[v].get(g, [])))
                    crosses.append(None)
                    continue
                c = m.new_bool_var("")
                for g in member[u]:
                    m.add(c >= sum(member[u][g]) - sum(member[v].get(g, [])))
                crosses.append(c)
            if prev is not None:
                for c, c_prev in zip(crosses, prev):
                    if c is not None and c_prev is not None:
                        m.add_implication(c, c_prev)
            if step is not None:
                self.levels.append((step, labels, crosses))
            prev = crosses

    def crossing_cuts(self, devices: int | None = None):
        """Chains: a maximal run of nodes inside one group packs into that group's devices, so
        crossings at a level number at least (fewest such runs) - 1; with ``devices`` devices used,
        at least (fewest groups holding them) - 1 (:func:`~.fleet.level_runs`)."""
        p = self.p
        if not p.is_chain:
            return
        for _, labels, crosses in self.levels:
            tick(p, 0)
            pieces = level_runs(p.demand_bytes, p.capacity_bytes, labels, devices)
            lits = [c for c in crosses if c is not None]
            if pieces > 1 and lits:
                self.m.add(sum(lits) >= pieces - 1)

    def _table(self, by_node):
        m, p = self.m, self.p
        table = p.latency      # a view property: read once, not per term
        top = max((x for row in table for x in row if x is not None), default=0)
        check_row(max((sum(x for x in row if x is not None) for row in table), default=0),
                  "hop-latency row (latencies x scale)")
        self.edge_lat = []
        for k, (u, v) in enumerate(p.edges):
            tick(p, k, 1)       # DeadlineReached: the caller keeps its best placement
            lat = m.new_int_var(0, top, "")
            xv = dict(by_node[v])
            for a, xa in by_node[u]:
                row = table[a]
                far = [xb for b, xb in xv.items() if row[b] is None]
                if far:
                    m.add(sum(far) == 0).only_enforce_if(xa)
                terms = [(row[b], xb) for b, xb in xv.items() if b != a and row[b] is not None and row[b] > 0]
                if terms:
                    m.add(lat >= sum(w * xb for w, xb in terms)).only_enforce_if(xa)
            self.edge_lat.append(lat)

    def expr(self):
        if self.edge_lat is not None:
            return sum(self.edge_lat)
        return sum(step * c for step, _, crosses in self.levels for c in crosses if c is not None)

    def hint(self, assignment):
        p, m = self.p, self.m
        for _, labels, crosses in self.levels:
            for (u, v), c in zip(p.edges, crosses):
                if c is not None:
                    m.add_hint(c, labels[assignment[u]] != labels[assignment[v]])
        if self.edge_lat is not None:
            for (u, v), lat in zip(p.edges, self.edge_lat):
                a, b = assignment[u], assignment[v]
                m.add_hint(lat, 0 if a == b else (p.latency[a][b] or 0))
