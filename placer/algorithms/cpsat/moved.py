"""The ``moved`` level: re-placement after failures, fewest weight bytes loaded anew first.

A placement lost devices; ``previous[i]`` is the device index (of the instance on the devices
left) that held node ``i`` before, or a negative number when its device is gone (nodes with the
same negative number were on one lost device). The bytes moved are the weight bytes of every
node placed on a device that did not hold it before, counted for every device of a group (a
stage of ``tp`` devices loads ``tp`` shares): the bytes of nodes whose device is gone are moved
whatever the placement, the others only when the node leaves its device.

The levels, each by :func:`~.levels.solve_level` on the F2 model (contiguous, split) or F1 (free),
each searched only when the one before it is proven:

1. **moved**: the weight bytes loaded anew, from a start that puts every lost device's nodes on an
   unused device (its bytes are the least any placement moves, so the level is often proven
   without a search); the old placement is the hint for every node it still places;
2. **devices** with the moved bytes fixed at their optimum;
3. **latency** and **bottleneck** with the device count fixed, as :func:`~.levels.solve_levels` does.

Devices that held nodes before are no longer interchangeable: they are kept out of every symmetry
class (the unused devices stay twins). The moved row counts bytes in units of the greatest common
divisor of the nodes' weights when that keeps it within CP-SAT's row limit (exact), else in
rounded-down units (its bound is then a lower bound in bytes, and a later level never takes a
placement that moves more exact bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

from placer.algorithms.check import acceptable, stage_order
from placer.algorithms.cpsat.first import First, after_first, first_model, unplaced
from placer.algorithms.cpsat.fleet import FleetView
from placer.algorithms.cpsat.levels import Built, solve_level
from placer.algorithms.cpsat.run import LIGHT_F1, LIGHT_F2, Run, reachable
from placer.algorithms.quantize import ROW_LIMIT
from placer.problem.instance import Instance
from placer.problem.placement import Result

__all__ = ["Previous", "moved_levels", "moved_bytes", "substitute"]


@dataclass(frozen=True)
class Previous:
    """The placement before a failure, given to CP-SAT as its ``hint`` with a ``moved`` objective:
    per node, the device index (of the instance on the devices left) that held it, or a negative
    number for a lost device (one number per lost device)."""

    previous: tuple[int, ...]


def moved_bytes(instance: Instance, previous, assignment) -> int:
    """The weight bytes ``assignment`` loads anew against ``previous`` (see the module docstring),
    counted on every device of a group."""
    w = instance.weight_bytes
    return instance.tp * sum(w[i] for i, (p, a) in enumerate(zip(previous, assignment)) if p != a)


class _Row:
    """The moved bytes as a CP-SAT row: ``coef[i]`` per node that still has its device, the
    ``unit`` (bytes per coefficient unit, per rank) and whether the coefficients are exact."""

    def __init__(self, instance: Instance, previous):
        w = instance.weight_bytes
        self.nodes = [i for i, p in enumerate(previous) if p >= 0 and w[i] > 0]
        total = sum(w[i] for i in self.nodes)
        unit = reduce(math.gcd, (w[i] for i in self.nodes), 0) or 1
        self.exact = total // unit <= ROW_LIMIT
        if not self.exact:
            unit = max(unit, -(-total // ROW_LIMIT))
        self.unit = unit
        self.coef = {i: w[i] // unit for i in self.nodes}
        self.previous = previous

    def expr(self, model):
        """The row of ``model`` (its ``x`` Booleans): units of the nodes not on their old device."""
        terms = [(c, model.x.get((i, self.previous[i]))) for i, c in self.coef.items() if c]
        return sum(c for c, _ in terms) - sum(c * x for c, x in terms if x is not None)

    def units(self, assignment) -> int:
        return sum(c for i, c in self.coef.items() if assignment[i] != self.previous[i])


def moved_levels(run: Run, previous) -> Result:
    """The levels of ``run.order`` with ``moved`` first (see the module docstring)."""
    instance, prob = run.instance, run.prob
    if previous is None or len(previous) != instance.n_nodes or any(p >= instance.n_devices for p in previous):
        raise ValueError("previous: one device index (or a negative number) per node of the instance")
    held = {p for p in previous if p >= 0}
    view = FleetView(instance, exclude=set(prob.view.exclude) | held)
    prob.view = view
    run.relaxed.view = view
    kind = "free" if instance.mode == "free" else "contiguous"
    light = LIGHT_F1 if kind == "free" else LIGHT_F2
    row = _Row(instance, previous)
    run.stats.update(strategy=f"moved bytes first ({'F1' if kind == 'free' else 'F2'})", moved_unit_bytes=row.unit,
                     moved_exact=row.exact)

    def hints(mdl):
        for i in row.nodes:                          # the old placement, where it still stands
            if (i, previous[i]) in mdl.x:
                mdl.m.add_hint(mdl.x[i, previous[i]], True)

    first = First("moved", row.expr, row.units, lambda a: moved_bytes(instance, previous, a), hints)
    model = first_model(run, kind, first)
    start = substitute(instance, previous, prob)
    found = solve_level(run, "moved", lambda p: Built(model(p), lambda m: m.lead, ordered=kind != "free"),
                        start=start, value=row.units, target=0, light=light)
    refused = unplaced(run, kind, found)
    if refused is not None:
        return refused
    best = found.best
    fixed = row.units(best[0])
    levels = {"moved": _moved_level(instance, previous, row, best[0], found.bound)}
    return after_first(run, model, first, best, fixed, levels, kind, light)


def _moved_level(instance, previous, row: _Row, assignment, bound_units) -> dict:
    value = moved_bytes(instance, previous, assignment)
    if bound_units is None:
        return dict(value=value, bound=None, proven=False)
    lost = instance.tp * sum(w for w, p in zip(instance.weight_bytes, previous) if p < 0)
    bound = lost + instance.tp * bound_units * row.unit
    proven = value <= bound
    return dict(value=value, bound=value if proven else min(bound, value), proven=proven)


def substitute(instance: Instance, previous, prob=None):
    """The old placement with each lost device's nodes on an unused device (the one with the
    cheapest links to the stages around it that holds them), as (assignment, order); None when
    that is not a valid placement (capacity, requirements, links of a pipeline)."""
    held = {p for p in previous if p >= 0}
    lost: dict[int, list[int]] = {}
    for i, p in enumerate(previous):
        if p < 0:
            lost.setdefault(p, []).append(i)
    assignment = list(previous)
    spare = [d for d in range(instance.n_devices) if d not in held]
    demand = instance.demand_bytes
    for nodes in sorted(lost.values(), key=lambda ns: ns[0]):
        need = sum(demand[i] for i in nodes)
        around = {assignment[j] for i in nodes for j in (i - 1, i + 1)
                  if 0 <= j < instance.n_nodes and assignment[j] >= 0 and j not in nodes}
        fits = [d for d in spare if instance.capacity_bytes[d] >= need]
        if not fits:
            return None
        d = min(fits, key=lambda d: (sum(instance.hop_us(d, a) for a in around), d))
        spare.remove(d)
        for i in nodes:
            assignment[i] = d
    if not acceptable(instance, assignment):
        return None
    order = None
    if instance.mode != "free":
        order = stage_order(instance, assignment)
        if order is None:
            return None
        if instance.model.is_chain and any(b not in (a, c) for a, b, c in _steps(assignment, order)):
            return None
    if prob is not None and not reachable(prob, assignment):
        return None
    return assignment, order


def _steps(assignment, order):
    """(device of node i, device of node i+1, the stage after node i's): a chain's next node sits on
    the same stage or the next."""
    pos = {d: k for k, d in enumerate(order)}
    for u in range(len(assignment) - 1):
        a, b = assignment[u], assignment[u + 1]
        nxt = order[pos[a] + 1] if pos[a] + 1 < len(order) else a
        yield a, b, nxt
