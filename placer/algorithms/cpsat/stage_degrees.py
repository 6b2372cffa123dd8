"""The CP-SAT model for per-stage degrees (:mod:`placer.algorithms.stage_degrees`): a path of candidate
stages over the model's node boundaries.

* One Boolean per candidate stage ``(start, end, degree, fleet node)``; candidates exist only when
  they fit in exact bytes, so the model has no capacity rows and nothing is rounded.
* A path from boundary 0 to boundary n: one stage starts at 0, and at every inner boundary as many
  stages start as end (stages only go forward, so the chosen ones form one chain).
* Each fleet node supplies at most its available devices: the degrees of its chosen stages sum to
  at most its size.
* Concurrency: ``conc <= ceiling`` of every chosen stage (exact integers per candidate).
* Hop latency at a boundary: from the node of the stage that ends there to the node of the one
  that starts there. ``end[p][u]`` / ``start[p][u]`` are the (0/1) sums of the candidates of node
  ``u`` ending / starting at ``p``; the hop costs the latency of the pair, an exact AND of the two.
  When every pair of different nodes is linked at one latency, a hop costs that latency less the
  saving of staying in the node (one AND per node and boundary); unlinked pairs are forbidden.
* Symmetry: fleet nodes that can swap without changing anything (same type, devices, capacities
  and latencies) are used in order of decreasing devices.

Levels (devices, concurrency, latency) are objectives on the same model; a level's proven optimum
is added as a constraint before the next.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ortools.sat.python import cp_model

from placer.algorithms import ortools_adapter as ora
from placer.algorithms.cpsat.fleet import decimal, integer_latencies

__all__ = ["PerStageModel", "twin_nodes"]


def twin_nodes(prob) -> list[list[int]]:
    """Classes of fleet nodes that swap without changing any plan's value: the same size and
    per-rank capacities (the device type itself plays no part in the levels), the same latency
    inside, and the same latency to every other node."""
    classes: list[list[int]] = []
    lat = prob.latency

    def twins(u, v):
        a, b = prob.nodes[u], prob.nodes[v]
        if (a.size, a.capacity) != (b.size, b.capacity):
            return False
        if lat[u][u] != lat[v][v] or lat[u][v] != lat[v][u]:
            return False
        return all(lat[u][w] == lat[v][w] and lat[w][u] == lat[w][v]
                   for w in range(len(prob.nodes)) if w not in (u, v))

    for u in range(len(prob.nodes)):
        for cls in classes:
            if all(twins(u, v) for v in cls):
                cls.append(u)
                break
        else:
            classes.append([u])
    return classes


class PerStageModel:
    """The model of one per-stage problem; :meth:`solve_level` minimises one level."""

    def __init__(self, prob, cands, *, deadline=None, concurrency: bool = True):
        self.prob, self.cands = prob, cands
        self._fixed: set[str] = set()
        m = self.m = cp_model.CpModel()
        n = prob.n
        U = len(prob.nodes)
        x = self.x = [m.new_bool_var(f"s{c.start}_{c.end}_g{c.degree}_n{c.node}") for c in cands]
        starting: list[list[int]] = [[] for _ in range(n + 1)]
        ending: list[list[int]] = [[] for _ in range(n + 1)]
        for k, c in enumerate(cands):
            starting[c.start].append(k)
            ending[c.end].append(k)
        m.add(sum(x[k] for k in starting[0]) == 1)
        m.add(sum(x[k] for k in ending[n]) == 1)
        for p in range(1, n):
            m.add(sum(x[k] for k in starting[p]) == sum(x[k] for k in ending[p]))
        # devices per fleet node
        on: list[list[int]] = [[] for _ in range(U)]
        for k, c in enumerate(cands):
            on[c.node].append(k)
        self.usage = []
        for u, fn in enumerate(prob.nodes):
            use = m.new_int_var(0, fn.size, f"use{u}")
            m.add(use == sum(cands[k].degree * x[k] for k in on[u]))
            self.usage.append(use)
        for cls in twin_nodes(prob):
            for a, b in zip(cls, cls[1:]):
                m.add(self.usage[a] >= self.usage[b])
        self.devices = sum(c.degree * x[k] for k, c in enumerate(cands))
        # concurrency: the smallest ceiling of a chosen stage (without it, the candidates are those
        # that fit at the concurrency in force)
        self.conc = None
        if concurrency:
            finite = [c.ceiling for c in cands if c.ceiling is not None]
            top = max(finite) if finite else 0
            self.conc = m.new_int_var(min(0, top), max(top, 0), "concurrency")
            for k, c in enumerate(cands):
                if c.ceiling is not None:
                    m.add(self.conc <= c.ceiling).only_enforce_if(x[k])
        # hop latency
        if deadline is not None:
            deadline.check()
        self.latency = self._hop_latency(starting, ending)

    def _hop_latency(self, starting, ending):
        """The hop latency of the chosen chain (model units), with ``lat_scale`` and ``lat_exact``."""
        m, prob, x, cands = self.m, self.prob, self.x, self.cands
        n, U = prob.n, len(prob.nodes)
        links = [lat for row in prob.latency for lat in row if lat is not None]
        scale, exact = integer_latencies(links, row_sum=float(sum(links)) * max(n, 1) if links else 0.0)
        self.lat_scale, self.lat_exact = scale, exact

        def units(value) -> int:
            q = decimal(value) * scale
            return q.numerator // q.denominator       # exact, or rounded down (a bound only)

        def expr(ks):
            return sum(x[k] for k in ks)

        end_on = [[[k for k in ending[p] if cands[k].node == u] for u in range(U)] for p in range(n + 1)]
        start_on = [[[k for k in starting[p] if cands[k].node == u] for u in range(U)] for p in range(n + 1)]
        terms = []

        def hop(p, u, v, name):
            """A literal equal to "the stage ending at ``p`` is on node ``u`` and the one starting there
            on ``v``" (an exact AND, its latency a term), or None where ``u`` and ``v`` are unlinked
            (then the pair is forbidden)."""
            e, f = expr(end_on[p][u]), expr(start_on[p][v])
            lat = prob.latency[u][v]
            if lat is None:
                m.add(e + f <= 1)
                return None
            lit = m.new_bool_var(name)
            m.add(lit <= e)
            m.add(lit <= f)
            m.add(lit >= e + f - 1)
            terms.append(units(lat) * lit)
            return lit

        off = {prob.latency[u][v] for u in range(U) for v in range(U) if u != v}
        if len(off) == 1 and None not in off and U > 1 or U == 1:
            # a hop is inside one node (same[p][u]) or between two (across[p]), each at its own
            # non-negative cost: across = cut - sum(same) is a row the LP sees, so its bound holds
            out = units(next(iter(off))) if U > 1 else 0
            for p in range(1, n):
                if not ending[p]:
                    continue
                sames = [hop(p, u, u, f"same{p}_{u}") for u in range(U) if end_on[p][u] and start_on[p][u]]
                across = m.new_int_var(0, 1, f"across{p}")
                m.add(across == expr(ending[p]) - sum(s for s in sames if s is not None))
                if U == 1:
                    m.add(across == 0)
                terms.append(out * across)
        else:
            for p in range(1, n):
                pairs = [hop(p, u, v, f"hop{p}_{u}_{v}") for u in range(U) if end_on[p][u]
                         for v in range(U) if start_on[p][v]]
                if ending[p]:
                    # exactly one hop at a cut (a row the LP sees)
                    m.add(sum(s for s in pairs if s is not None) == expr(ending[p]))
        return sum(terms)

    # ------------------------------------------------------------------ levels
    def objective(self, name: str):
        if name == "devices":
            return self.devices
        if name == "concurrency":
            return -self.conc
        return self.latency

    def fix(self, name: str, value) -> None:
        """Keep level ``name`` at its proven optimum ``value`` (exact)."""
        if name == "devices":
            self.m.add(self.devices == int(value))
        elif name == "concurrency":
            if self.conc is not None:     # else the candidates already fit at the concurrency in force
                self.m.add(self.conc >= int(value))
        else:
            q = Fraction(value) * self.lat_scale
            # exact units: the optimum itself; rounded units: every plan at the optimum stays
            self.m.add(self.latency <= math.floor(q))

    def at_least(self, devices: int) -> None:
        """A lower bound on the devices, valid for every plan (it only helps the search prune)."""
        self.m.add(self.devices >= int(devices))

    def solve_level(self, name: str, found: dict, *, hint, time_limit: float, seed: int, threads: int,
                    progress=None, t0=None, target=None):
        """Minimise level ``name`` (``"feasible"``: any plan) with the levels of ``found`` (name ->
        optimum) fixed; returns
        (the adapter's outcome, the chosen candidates in pipeline order or None)."""
        for level, value in found.items():
            if level not in self._fixed:
                self.fix(level, value)
                self._fixed.add(level)
        if name == "feasible":
            self.m.clear_objective()
        else:
            self.m.minimize(self.objective(name))
        self.m.clear_hints()
        if hint is not None:
            chosen = set(hint)
            for k, c in enumerate(self.cands):
                self.m.add_hint(self.x[k], c in chosen)
        scale = {"devices": 1.0, "concurrency": -1.0, "latency": float(self.lat_scale)}.get(name, 1.0)
        cb = None
        if progress is not None and name != "feasible":
            def cb(info):
                info["phase"] = name
                progress(info)
        # probing thousands of candidate literals costs seconds in presolve and finds little here
        params = ora.parameters(time_limit=max(time_limit, 0.05), seed=seed, threads=threads, light_presolve=True)
        out = ora.solve(self.m, {"x": self.x}, params=params, progress=cb, report_scale=scale, t0=t0,
                        target=target)
        plan = None
        if out.values is not None:
            chosen = [self.cands[k] for k, v in enumerate(out.values["x"]) if v]
            plan = sorted(chosen, key=lambda c: c.start)
        return out, plan

    def latency_target(self, devices: int) -> int:
        """A lower bound (model units) on the hop latency of a plan of ``devices`` devices: it spans
        at least as many nodes as it takes for their sizes to reach ``devices``, so at least that
        many less one hops leave a node, each at least the cheapest link between two nodes."""
        sizes = sorted((fn.size for fn in self.prob.nodes), reverse=True)
        spanned, total = 0, 0
        for size in sizes:
            if total >= devices:
                break
            spanned, total = spanned + 1, total + size
        between = [lat for u, row in enumerate(self.prob.latency) for v, lat in enumerate(row)
                   if u != v and lat is not None]
        if spanned <= 1 or not between:
            return 0
        q = decimal(min(between)) * self.lat_scale
        return (spanned - 1) * (q.numerator // q.denominator)

    def satisfies(self, plan, found: dict) -> bool:
        """Whether a chain of this model's candidates meets the fixed levels ``found`` (and every
        node's supply): devices equal, concurrency at least, latency at most."""
        use: dict[int, int] = {}
        for c in plan:
            use[c.node] = use.get(c.node, 0) + c.degree
        if any(use[u] > self.prob.nodes[u].size for u in use):
            return False
        for name, value in found.items():
            got = self.exact_value(name, plan)
            if name == "devices" and got != value:
                return False
            if name == "concurrency" and self.conc is not None and (got is None or got < value):
                return False
            if name == "latency" and got > value:
                return False
        return True

    def exact_value(self, name: str, plan):
        """Level ``name`` of a plan (chosen candidates), exactly: devices and concurrency as
        integers, latency as the Fraction of the decimals as written."""
        if name == "devices":
            return sum(c.degree for c in plan)
        if name == "concurrency":
            finite = [c.ceiling for c in plan if c.ceiling is not None]
            return min(finite) if finite else None
        lat = self.prob.latency
        return sum((decimal(lat[a.node][b.node]) for a, b in zip(plan, plan[1:])), Fraction(0))

    def level_bound(self, name: str, out, value):
        """A bound on level ``name`` valid for the exact problem (the model is exact in bytes; rounded
        latencies only lower it), never beyond ``value``; None when CP-SAT gave none."""
        if out.bound is None or not math.isfinite(out.bound):
            return None
        if name == "devices":
            return min(math.ceil(out.bound - 1e-6), value)
        if name == "concurrency":
            if value is None:
                return None
            return max(math.floor(-out.bound + 1e-6), value)
        return min(Fraction(math.ceil(out.bound - 1e-6), self.lat_scale), value)
