"""CP-SAT models for placement (formulations of the project's CP-SAT reference, sections 3-5).

* :class:`PathModel`: a simple path of devices in the fleet graph (``add_circuit`` over the devices
  plus a dummy node 0; a true self-loop means "device unused"), with ranks along the path. Alone it
  solves "the cheapest path of S devices" (F0); with nodes it is F2.
* :class:`ContiguousModel` (F2): node-to-device Booleans, a monotone ``stage`` per node (chain:
  ``stage[l+1] - stage[l]`` in {0, 1}; DAG: the same along every edge), ``x[l,d] => stage[l] ==
  rank[d]``, capacity rows gated by ``used[d]``.
* :class:`FreeModel` (F1): node-to-device Booleans and capacity rows; a crossing edge costs the
  shortest-path latency between its devices, written level by level when latency is an ultrametric.

Symmetry is broken only among devices that can swap without changing anything: twins (same type,
capacity and links) in F2, used first and in path order; in F1 on an ultrametric fleet whole
interchangeable subtrees (racks of the same make-up, then devices inside a rack), ordered by the
first node they hold. Hints are made canonical under the same rule before use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model, cp_model_helper

from placer.algorithms.chain import prefix_bounds
from placer.algorithms.cpsat.edge_latency import EdgeLatency, tick
from placer.algorithms.cpsat.fleet import min_groups_covering, symmetry_classes
from placer.algorithms.quantize import check_row

__all__ = ["Problem", "PathModel", "ContiguousModel", "FreeModel", "canonical", "canonical_classes", "fix_latency"]


@dataclass
class Problem:
    """Everything a model needs, in solver units (built by :mod:`placer.algorithms.cpsat.run`).

    Fleet views (integer link latencies, hop costs, the latency hierarchy, twin classes) come from
    ``view`` (:class:`~placer.algorithms.cpsat.fleet.FleetView`) on first use.
    """

    n: int
    edges: list[tuple[int, int]]
    is_chain: bool
    demand: list[int]                  # units, rounded up
    capacity: list[int]                # units, rounded down
    load: list[int]                    # units, bottleneck load per node (weights), rounded up
    demand_bytes: list[int]
    capacity_bytes: list[int]
    view: object = None                # FleetView
    pins_to: dict[int, int] = field(default_factory=dict)          # node -> device
    pins_same: list[list[int]] = field(default_factory=list)       # node groups on one device
    # attention-per-stage, decoder-per-stage: every used device holds one node of each of these lists
    cover: list[list[int]] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)          # racks
    deadline: object = None            # Deadline: large per-edge tables stop building past it

    @property
    def link(self) -> dict[tuple[int, int], int]:
        """Direct links, scaled integer latency, both directions."""
        return self.view.link

    @property
    def latency(self) -> list[list[int | None]]:
        """Hop cost between devices, scaled integer (None = unreachable)."""
        return self.view.latency

    @property
    def lat_scale(self) -> int:
        return self.view.scale

    @property
    def twins(self) -> list[list[int]]:
        return self.view.twins

    @property
    def hierarchy(self):
        """[(step scaled int or None = unreachable, labels)] or None when not an ultrametric."""
        return self.view.hierarchy

    @property
    def d(self) -> int:
        return len(self.capacity)

    def allowed(self, node: int, *, relax_pins: bool = False) -> list[int]:
        if node in self.pins_to and not relax_pins:
            dev = self.pins_to[node]
            return [dev] if self.demand[node] <= self.capacity[dev] else []
        return [d for d in range(self.d) if self.demand[node] <= self.capacity[d]]


def canonical(problem: Problem, assignment, order) -> tuple[list[int], list[int]]:
    """Relabel devices inside twin classes so used ones come first, in path order (a bijection
    within each class, so feasibility and cost are unchanged)."""
    pos = {dev: k for k, dev in enumerate(order)}
    mapping = {}
    for cls in problem.twins:
        used = sorted((d for d in cls if d in pos), key=lambda d: pos[d])
        unused = [d for d in cls if d not in pos]
        for new, old in zip(cls, used + unused):
            mapping[old] = new
    relabel = [mapping.get(d, d) for d in range(problem.d)]
    return [relabel[a] for a in assignment], [relabel[d] for d in order]


# ----------------------------------------------------------------------------------------- parts
class PathPart:
    """A simple path through the fleet graph: ``add_circuit`` over devices + dummy node 0.

    With ``ranks`` each device gets its position on the path (F2 needs it). Twin devices are used
    lowest index first and, with ranks, in index order along the path; a canonical path then steps
    from one twin straight to another only from index i to i+1, so the other arcs inside a twin
    class are left out.
    """

    def __init__(self, m: cp_model.CpModel, p: Problem, s_max: int, *, ranks: bool = True):
        self.m, self.p = m, p
        D = p.d
        top = max(s_max - 1, 0)
        twin = {d: (c, k) for c, members in enumerate(p.twins) for k, d in enumerate(members)}
        self.used = [m.new_bool_var(f"used{d}") for d in range(D)]
        self.start = [m.new_bool_var(f"start{d}") for d in range(D)]
        self.end = [m.new_bool_var(f"end{d}") for d in range(D)]
        self.arc = {}
        for (a, b) in p.link:
            if a == b:
                continue
            if a in twin and b in twin and twin[a][0] == twin[b][0] and twin[b][1] != twin[a][1] + 1:
                continue
            self.arc[a, b] = m.new_bool_var(f"arc{a}_{b}")
        arcs = []
        for d in range(D):
            arcs.append((0, d + 1, self.start[d]))
            arcs.append((d + 1, 0, self.end[d]))
            arcs.append((d + 1, d + 1, ~self.used[d]))
        for (a, b), lit in self.arc.items():
            arcs.append((a + 1, b + 1, lit))
        m.add_circuit(arcs)
        m.add_exactly_one(self.start)
        m.add_exactly_one(self.end)
        for cls in p.twins:
            for i, j in zip(cls, cls[1:]):
                m.add_implication(self.used[j], self.used[i])
        self.rank = None
        self.last = m.new_int_var(0, top, "last")
        m.add(sum(self.used) == self.last + 1)
        m.add(sum(self.arc.values()) == self.last)
        if not ranks:
            return
        self.rank = [m.new_int_var(0, top, f"rank{d}") for d in range(D)]
        for d in range(D):
            m.add(self.rank[d] == 0).only_enforce_if(self.start[d])
            m.add(self.rank[d] == self.last).only_enforce_if(self.end[d])
            m.add(self.rank[d] <= self.last)
            m.add(self.rank[d] == 0).only_enforce_if(~self.used[d])
        for (a, b), lit in self.arc.items():
            m.add(self.rank[b] == self.rank[a] + 1).only_enforce_if(lit)
        for cls in p.twins:
            for i, j in zip(cls, cls[1:]):
                m.add(self.rank[i] < self.rank[j]).only_enforce_if(self.used[j])

    def fix_count(self, count: int, cuts=None):
        """Exactly ``count`` devices, plus cuts ``[(labels, k)]``: at least k arcs of the path join
        devices with different labels. By default the rack cut: a path of ``count`` devices changes
        rack at least (fewest racks that can hold ``count`` devices) - 1 times."""
        m, p = self.m, self.p
        m.add(sum(self.used) == count)
        if cuts is None and len(p.groups) > 1:
            label = [0] * p.d
            for g, members in enumerate(p.groups):
                for d in members:
                    label[d] = g
            cuts = [(label, min_groups_covering([len(g) for g in p.groups], count) - 1)]
        for labels, need in cuts or ():
            if need > 0:
                m.add(sum(lit for (a, b), lit in self.arc.items() if labels[a] != labels[b]) >= need)

    def latency(self):
        return sum(self.p.link[a, b] * lit for (a, b), lit in self.arc.items())

    def hint(self, order):
        m = self.m
        pos = {d: k for k, d in enumerate(order)}
        for d in range(self.p.d):
            m.add_hint(self.used[d], d in pos)
            if self.rank is not None:
                m.add_hint(self.rank[d], pos.get(d, 0))
            m.add_hint(self.start[d], d == order[0])
            m.add_hint(self.end[d], d == order[-1])
        succ = dict(zip(order, order[1:]))
        for (a, b), lit in self.arc.items():
            m.add_hint(lit, succ.get(a) == b)
        m.add_hint(self.last, len(order) - 1)

    def watch(self) -> dict:
        w = {"used": self.used}
        if self.rank is not None:
            w["rank"] = self.rank
        else:
            w["start"] = self.start
            w["arc"] = list(self.arc.values())
        return w

    def order(self, values) -> list[int]:
        used = values["used"]
        if "rank" in values:
            rank = values["rank"]
            return sorted((d for d in range(self.p.d) if used[d]), key=lambda d: rank[d])
        succ = {a: b for (a, b), val in zip(self.arc, values["arc"]) if val}
        d = next(d for d, val in enumerate(values["start"]) if val)
        out = [d]
        while d in succ:
            d = succ[d]
            out.append(d)
        return out


class _Placement:
    """Node-to-device Booleans, capacity rows gated by ``used``, pins, optional bottleneck."""

    def _nodes(self, used, *, bottleneck: bool, explain: bool):
        p, m = self.p, self.m
        self.used = used
        self.x: dict[tuple[int, int], cp_model.IntVar] = {}
        self.by_node = [[] for _ in range(p.n)]
        self.by_dev = [[] for _ in range(p.d)]
        for node in range(p.n):
            tick(p, node)
            for d in p.allowed(node, relax_pins=explain):
                v = m.new_bool_var(f"x{node}_{d}")
                self.x[node, d] = v
                self.by_node[node].append((d, v))
                self.by_dev[d].append((node, v))
        for node in range(p.n):
            tick(p, node)
            m.add_exactly_one(v for _, v in self.by_node[node])
            for d, v in self.by_node[node]:
                m.add_implication(v, used[d])
        self.pin_lits = []
        self.pin_names = []
        if explain:
            # pins to a device become assumptions too, one literal per device
            by_device: dict[int, list[int]] = {}
            for node, dev in p.pins_to.items():
                by_device.setdefault(dev, []).append(node)
            for dev, nodes in sorted(by_device.items()):
                lit = m.new_bool_var(f"pin_to{dev}")
                for node in nodes:
                    target = self.x.get((node, dev))
                    m.add(target == 1 if target is not None else False).only_enforce_if(lit)
                self.pin_lits.append(lit)
                self.pin_names.append(("device", dev, sorted(nodes)))
        for nodes in p.cover:
            for d in range(p.d):
                held = [self.x[node, d] for node in nodes if (node, d) in self.x]
                if held:
                    m.add_bool_or(held).only_enforce_if(used[d])
                else:
                    m.add(used[d] == 0)
        self.capacity_lits = {}
        for d in range(p.d):
            tick(p, d)
            terms = self.by_dev[d]
            if not terms:
                m.add(used[d] == 0)
                continue
            m.add_bool_or([v for _, v in terms]).only_enforce_if(used[d])
            row = sum(p.demand[node] * v for node, v in terms) <= p.capacity[d] * used[d]
            if explain:
                lit = m.new_bool_var(f"capacity{d}")
                m.add(row).only_enforce_if(lit)
                self.capacity_lits[d] = lit
            else:
                m.add(row)
        for k, group in enumerate(p.pins_same):
            lit = m.new_bool_var(f"pin{k}") if explain else None
            for node in group[1:]:
                for d in {d for d, _ in self.by_node[node]} | {d for d, _ in self.by_node[group[0]]}:
                    a, b = self.x.get((node, d)), self.x.get((group[0], d))
                    c = m.add((a if a is not None else 0) == (b if b is not None else 0))
                    if lit is not None:
                        c.only_enforce_if(lit)
            if lit is not None:
                self.pin_lits.append(lit)
                self.pin_names.append(("together", None, list(group)))
        self.bottleneck = None
        if bottleneck:
            top = max((sum(p.load[node] for node, _ in self.by_dev[d]) for d in range(p.d)), default=0)
            self.bottleneck = m.new_int_var(0, max(top, 0), "bottleneck")
            for d in range(p.d):
                if self.by_dev[d]:
                    m.add(sum(p.load[node] * v for node, v in self.by_dev[d]) <= self.bottleneck)

    def devices_count(self):
        return sum(self.used)

    def _hint_nodes(self, assignment, *, with_used: bool = True):
        m = self.m
        used = set(assignment)
        for d in range(self.p.d if with_used else 0):
            m.add_hint(self.used[d], d in used)
        for k, ((node, d), v) in enumerate(self.x.items()):
            tick(self.p, k, 4096)
            m.add_hint(v, assignment[node] == d)
        for lit in list(self.capacity_lits.values()) + self.pin_lits:
            m.add_hint(lit, True)
        if self.bottleneck is not None:
            loads: dict[int, int] = {}
            for node, d in enumerate(assignment):
                loads[d] = loads.get(d, 0) + self.p.load[node]
            m.add_hint(self.bottleneck, max(loads.values(), default=0))

    def assumptions(self) -> list:
        return list(self.capacity_lits.values()) + self.pin_lits

    def watch(self) -> dict:
        self._keys = list(self.x)
        return {"x": [self.x[k] for k in self._keys], "used": self.used}

    def assignment(self, values) -> list[int]:
        out = [-1] * self.p.n
        for (node, d), val in zip(self._keys, values["x"]):
            if val:
                out[node] = d
        return out


# ----------------------------------------------------------------------------------------- F0 / F2
class PathModel:
    """F0: the cheapest simple path of exactly ``count`` devices (no nodes)."""

    def __init__(self, p: Problem, count: int):
        self.p = p
        self.m = cp_model.CpModel()
        self.path = PathPart(self.m, p, count, ranks=False)
        self.path.fix_count(count)

    def latency(self):
        return self.path.latency()

    def hint(self, order):
        _, order = canonical(self.p, [], order)
        self.m.clear_hints()
        self.path.hint(order)

    def watch(self) -> dict:
        return self.path.watch()

    def order(self, values) -> list[int]:
        return self.path.order(values)


class ContiguousModel(_Placement):
    """F2: each device one stage along a simple fleet path; stages monotone along model edges."""

    def __init__(self, p: Problem, *, s_max: int, bottleneck: bool = False, explain: bool = False,
                 latency: bool = True):
        self.p = p
        m = self.m = cp_model.CpModel()
        self.path = PathPart(m, p, s_max)
        self._nodes(self.path.used, bottleneck=bottleneck, explain=explain)
        n = p.n
        rank, last = self.path.rank, self.path.last
        self.stage = [m.new_int_var(0, max(s_max - 1, 0), f"stage{node}") for node in range(n)]
        for node in range(n):
            for d, v in self.by_node[node]:
                m.add(self.stage[node] == rank[d]).only_enforce_if(v)
            m.add(self.stage[node] <= last)
        for u, v in p.edges:
            m.add(self.stage[v] >= self.stage[u])
            if p.is_chain:
                m.add(self.stage[v] <= self.stage[u] + 1)
        self.edges = None
        if p.is_chain and n:
            m.add(self.stage[0] == 0)
            m.add(self.stage[n - 1] == last)
            pre, suf = prefix_bounds(p.demand_bytes, max(p.capacity_bytes))
            for node in range(n):
                m.add(self.stage[node] >= pre[node] - 1)
                m.add(self.stage[node] <= node)
                m.add(self.stage[node] + suf[node] - 1 <= last)
        elif latency:
            # a DAG edge may skip stages; it then costs the latency between its two devices
            self.edges = EdgeLatency(m, p, self.by_node, cuts=False)
        sources = [node for node in range(n) if all(v != node for _, v in p.edges)]
        if len(sources) == 1:
            m.add(self.stage[sources[0]] == 0)

    def fix_count(self, count: int, cuts=None):
        self.path.fix_count(count, cuts)

    @property
    def latency_supported(self) -> bool:
        return self.edges is None or self.edges.supported

    def latency(self):
        return self.path.latency() if self.edges is None else self.edges.expr()

    def hint(self, assignment, order):
        assignment, order = canonical(self.p, assignment, order)
        self.m.clear_hints()
        self.path.hint(order)
        self._hint_nodes(assignment, with_used=False)
        pos = {d: k for k, d in enumerate(order)}
        for node in range(self.p.n):
            self.m.add_hint(self.stage[node], pos[assignment[node]])
        if self.edges is not None:
            self.edges.hint(assignment)

    def watch(self) -> dict:
        w = super().watch()
        w["rank"] = self.path.rank
        return w

    def read(self, values) -> tuple[list[int], list[int]]:
        return self.assignment(values), self.path.order(values)


# ----------------------------------------------------------------------------------------- F1
class FreeModel(_Placement):
    """F1: any packing; a crossing edge costs the latency between its devices."""

    def __init__(self, p: Problem, *, bottleneck: bool = False, explain: bool = False, latency: bool = True,
                 max_terms: int = 2_000_000):
        self.p = p
        m = self.m = cp_model.CpModel()
        used = [m.new_bool_var(f"used{d}") for d in range(p.d)]
        self._nodes(used, bottleneck=bottleneck, explain=explain)
        self.first = {}          # group (tuple of devices) -> prefix literals
        self.classes = symmetry_classes(p.view) if p.view is not None else None
        if self.classes is None:
            self.classes = [[[d] for d in cls] for cls in p.twins]
        budget = 400_000
        for cls in self.classes:
            members = [tuple(g) for g in cls]
            if len(members[0]) == 1:
                for a, b in zip(members, members[1:]):
                    m.add_implication(used[b[0]], used[a[0]])
            if p.n * len(members) > budget:
                continue
            budget -= p.n * len(members)
            self._first_node_order(members)
        self.edges = EdgeLatency(m, p, self.by_node, max_terms=max_terms) if latency else None

    @property
    def latency_supported(self) -> bool:
        return self.edges is not None and self.edges.supported

    @staticmethod
    def latency_fits(p: Problem, max_terms: int = 2_000_000) -> bool:
        """Whether the hop latency of ``p`` can be modelled (an ultrametric, or a table small enough)."""
        return not p.edges or p.hierarchy is not None or len(p.edges) * p.d * p.d <= max_terms

    def _first_node_order(self, groups):
        """Interchangeable groups are ordered by the first node they hold: prefix[g][l] = group g
        holds one of nodes 0..l, and group k+1's first node comes after group k's."""
        m, p = self.m, self.p
        for g in groups:
            prefix, acc = [], None
            for node in range(p.n):
                tick(p, node)
                xs = [self.x[node, d] for d in g if (node, d) in self.x]
                cur = m.new_bool_var("")
                for v in xs:
                    m.add_implication(v, cur)
                if acc is not None:
                    m.add_implication(acc, cur)
                m.add_bool_or([~cur, *([acc] if acc is not None else []), *xs])
                prefix.append(cur)
                acc = cur
            self.first[g] = prefix
        for a, b in zip(groups, groups[1:]):
            pa, pb = self.first[a], self.first[b]
            m.add(pb[0] == 0)
            for node in range(1, p.n):
                m.add_implication(pb[node], pa[node - 1])

    def latency(self):
        return self.edges.expr()

    def fix_count(self, count: int):
        self.m.add(sum(self.used) == count)
        if self.edges is not None and self.edges.levels:
            self.edges.crossing_cuts(count)        # the crossing cuts again, now knowing the count

    def hint(self, assignment) -> list[int]:
        assignment = canonical_classes(self.classes, assignment)
        self.m.clear_hints()
        self._hint_nodes(assignment)
        for g, prefix in self.first.items():
            members = set(g)
            seen = False
            for node, lit in enumerate(prefix):
                seen = seen or assignment[node] in members
                self.m.add_hint(lit, seen)
        if self.edges is not None:
            self.edges.hint(assignment)
        return assignment

    def read(self, values) -> list[int]:
        return self.assignment(values)


def canonical_classes(classes, assignment) -> list[int]:
    """Relabel devices so every class of interchangeable groups is ordered by the first node each
    group holds (unused groups last), top level first; position i of a group maps to position i
    of the group that takes its place."""
    assignment = list(assignment)
    for cls in classes:
        first: dict[int, int] = {}
        for node, d in enumerate(assignment):
            first.setdefault(d, node)
        inf = len(assignment)
        ranked = sorted(range(len(cls)), key=lambda k: (min((first.get(d, inf) for d in cls[k]), default=inf), k))
        mapping = {}
        for new_pos, old_pos in enumerate(ranked):
            for a, b in zip(cls[old_pos], cls[new_pos]):
                mapping[a] = b
        assignment = [mapping.get(d, d) for d in assignment]
    return assignment


def fix_latency(model, value: int):
    """Fix a proven latency for the next level (its coefficients checked like any row)."""
    expr = model.latency()
    coeffs = sum(abs(c) for c in cp_model_helper.FlatIntExpr(expr).coeffs)
    check_row(coeffs + abs(value), "latency row")
    model.m.add(expr == value)
