"""One way to solve an objective level, for every strategy: exact in bytes, honest about bounds.

CP-SAT sees sizes in units (:mod:`placer.algorithms.quantize`) and latencies in integers
(:mod:`.fleet`). A level is solved on the conservative model (demands rounded up, capacities
down: its placements are feasible in bytes). When that rounding may lose placements, the same
level is solved again on the relaxed model (demands down, capacities up: every byte-feasible
placement is in it), whose bound is then valid for the exact problem and whose placement is kept
when it passes the exact-bytes check. A bound is only ever taken from a model every exact
placement satisfies; a level is proven only when a placement's exact value meets such a bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from placer.algorithms.check import acceptable
from placer.algorithms.cpsat.core import explain_infeasible
from placer.algorithms.cpsat.fleet import level_runs
from placer.algorithms.cpsat.models import Problem
from placer.algorithms.cpsat.run import (
    Run,
    bottleneck_value,
    device_level,
    finish,
    latency_value,
    no_placement,
    reachable,
)
from placer.algorithms.reach import components
from placer.problem.placement import Result, Status

__all__ = ["LevelSearch", "Built", "solve_level", "exact_latency_units", "latency_level", "cheapest_hops_bound",
           "chain_runs_bound", "bottleneck_level", "CountFixed", "Strategy", "solve_levels"]


@dataclass
class LevelSearch:
    """The outcome of :func:`solve_level`.

    ``best``: (assignment, order) of the best placement valid in bytes (the start when nothing
    better was found; None when there is none); ``bound``: a lower bound on the level's objective,
    in solver units, valid for the exact problem (None: none known); ``infeasible``: proven that no
    placement exists under the model's constraints (in bytes)."""

    best: tuple | None
    bound: int | None
    infeasible: bool = False


def exact_latency_units(run: Run, assignment) -> Fraction:
    """A placement's hop latency in solver units, exactly (the decimals as written x scale)."""
    view = run.prob.view
    total = Fraction(0)
    for u, v in run.instance.edges:
        a, b = assignment[u], assignment[v]
        if a != b:
            total += view.exact_units(run.instance.hop_us(a, b))
    return total


def solve_level(run: Run, phase: str, build: Callable, *, start, value: Callable, target: int | None = None,
                scale: float = 1.0, light: bool = False, sizes: bool = True) -> LevelSearch:
    """Minimise one level.

    ``build(problem)`` returns a model with ``m``, ``objective()`` (None: no objective, any
    placement will do), ``hint(assignment, order)``, ``watch()`` and
    ``read(values) -> (assignment, order)``; ``value(assignment)`` is the exact
    objective of a placement in solver units; ``start``: (assignment, order) valid in bytes, or
    None; ``target``: a lower bound valid for the exact problem (the search stops on reaching
    it); ``sizes``: the model has capacity rows (else the rounding of sizes does not matter).
    """
    passes = [run.prob] if (not sizes or run.relaxed is run.prob) else [run.prob, run.relaxed]
    best = start
    bound = target
    for k, prob in enumerate(passes):
        relaxed = prob is not run.prob
        if run.interrupted or (k and run.remaining() <= 0.05):
            break
        if best is not None and bound is not None and value(best[0]) <= bound:
            if not k:                                # settled without a search: say so once
                met = float(value(best[0])) / scale
                run.record(phase, settled="the incumbent meets a valid bound; no search", value=met,
                           bound=bound / scale, elapsed=round(time.monotonic() - run.t0, 4))
                if run.progress is not None:
                    run.progress(dict(phase=phase, best=met, bound=bound / scale, elapsed=time.monotonic() - run.t0))
            break                                    # the incumbent meets a valid bound
        model = build(prob)
        objective = model.objective()
        if objective is not None:       # None: a feasibility search (any placement will do)
            model.m.minimize(objective)
        if best is not None:
            model.hint(*best)
        cap = run.remaining() / 2 if len(passes) > 1 and not relaxed else None
        out = run.solve(phase + (" (relaxed sizes)" if relaxed else ""), model.m, model.watch(), target=target,
                        scale=scale, light_presolve=light, time_cap=cap, quiet=objective is None)
        valid = relaxed or len(passes) == 1          # this model's bound holds in bytes
        if out.status == "INFEASIBLE":
            if valid:
                return LevelSearch(best, bound, infeasible=best is None)
            continue
        if out.values is not None:
            cand = model.read(out.values)
            if acceptable(run.instance, cand[0]) and reachable(run.prob, cand[0]):
                if best is None or value(cand[0]) < value(best[0]):
                    best = cand
        if valid and out.bound is not None:
            got = out.objective if out.proven else out.bound
            b = math.ceil(got - 1e-6)
            bound = b if bound is None else max(bound, b)
    return LevelSearch(best, bound)


class Built:
    """A model as :func:`solve_level` sees it (``objective``: the expression to minimise, from the
    model)."""

    def __init__(self, model, objective, *, ordered: bool):
        self.model = model
        self.m = model.m
        self._objective = objective
        self._ordered = ordered

    def objective(self):
        return self._objective(self.model)

    def hint(self, assignment, order=None):
        if self._ordered:
            self.model.hint(assignment, order)
        else:
            self.model.hint(assignment)

    def watch(self) -> dict:
        return self.model.watch()

    def read(self, values) -> tuple:
        got = self.model.read(values)
        return got if self._ordered else (got, None)


def latency_level(run: Run, assignment, bound: int | None, note: str | None = None) -> dict:
    """The latency level of ``assignment``: its exact value (us), the bound (us, never above the
    value), proven only when the exact value in solver units meets the bound; ``note``: why it was
    not searched (kept only when that leaves it unproven)."""
    value = latency_value(run.instance, assignment)
    if bound is None:
        return dict(value=value, bound=None, proven=False, note=note)
    proven = exact_latency_units(run, assignment) <= bound
    shown = min(float(Fraction(bound, run.prob.lat_scale)), value)
    return dict(value=value, bound=value if proven else shown, proven=proven, note=None if proven else note)


def cheapest_hops_bound(run: Run, devices: int) -> int:
    """A lower bound (solver units) on the hop latency of any placement on ``devices`` devices of a
    connected model: its nodes span the devices, so at least ``devices - 1`` edges cross, each
    costing at least the cheapest hop between two available devices."""
    if devices <= 1 or len(components(run.prob.n, run.prob.edges)) > 1:
        return 0
    cheapest = None
    for row_index, row in enumerate(run.prob.latency):
        for b, x in enumerate(row):
            if b != row_index and x is not None and (cheapest is None or x < cheapest):
                cheapest = x
    return 0 if cheapest is None else (devices - 1) * cheapest


def chain_runs_bound(run: Run, devices: int) -> int:
    """A lower bound (solver units) on the hop latency of a free-mode chain on ``devices`` devices
    of an ultrametric fleet (0 otherwise).

    The hop latency is a sum over levels of (step) x (edges between groups of that level); along a
    chain those edges number runs - 1, and the runs of each level are at least
    :func:`~.fleet.level_runs`. The steps are the integer latencies' differences (exact, or rounded
    down), so the sum never exceeds a placement's exact latency in solver units.
    """
    prob = run.prob
    if not prob.is_chain or prob.n < 2 or prob.hierarchy is None:
        return 0
    total = 0
    for step, labels in prob.hierarchy:
        if step is None or step <= 0:
            continue
        if run.deadline is not None and run.deadline.remaining() <= 0:
            break                      # a partial sum is still a bound
        runs = level_runs(prob.demand_bytes, prob.capacity_bytes, labels, devices)
        total += step * max(runs - 1, 0)
    return total


def bottleneck_level(run: Run, assignment, bound: int | None) -> dict:
    """The bottleneck level (largest weight bytes on a device); the bound in units x unit is a
    lower bound in bytes (loads are rounded down in the model)."""
    value = bottleneck_value(run.instance, assignment)
    if bound is None:
        return dict(value=value, bound=None, proven=False)
    b = bound * run.quant.unit
    return dict(value=value, bound=min(b, value), proven=value <= b)


@dataclass
class CountFixed:
    """What a strategy supplies once the device count is proven: ``start`` (assignment, order) for
    the latency level, ``target`` a latency lower bound valid for the exact problem (solver units),
    ``latency(problem)`` the model with the count fixed, ``bottleneck(problem, latency)`` the model
    with the count and the proven latency (solver units) fixed."""

    start: tuple
    target: int
    latency: Callable[[Problem], Built]
    bottleneck: Callable[[Problem, int], Built]


@dataclass
class Strategy:
    """A search strategy as :func:`solve_levels` sees it: ``kind`` (``"contiguous"`` or
    ``"free"``, the model an unsat core is taken from), ``light`` (light presolve),
    ``devices(problem)`` the device-count model, ``fix_count(used, best)`` the rest
    (:class:`CountFixed`) once ``used`` devices are proven, ``best`` the (assignment, order) found."""

    kind: str
    light: bool
    devices: Callable[[Problem], Built]
    fix_count: Callable[[int, tuple], CountFixed]


def solve_levels(run: Run, strategy: Strategy, *, start, device_target: int, want_latency: bool,
                 want_bottleneck: bool, latency_skipped: str | None = None) -> Result:
    """The levels in order, each by :func:`solve_level`: devices (from ``start``, an
    (assignment, order) valid in bytes or None, towards ``device_target``, a device lower bound
    valid in bytes), then hop latency with the count fixed, then the bottleneck with the latency
    fixed at its proven optimum. A level is searched only when the one before it is proven and
    nothing interrupted the run; a level not searched is reported with its value, unproven, and
    why. ``latency_skipped``: why hop latency cannot be modelled (a wanted level then gets the
    incumbent's value against the bounds known without a model: proven only when it meets them)."""
    instance = run.instance
    if start is not None:       # what a deadline reached while building the model leaves standing
        run.best = (start[0], start[1], {"devices": device_level(run, len(set(start[0])), device_target)})
    found = solve_level(run, "devices", strategy.devices, start=start, value=lambda a: len(set(a)),
                        target=device_target, light=strategy.light)
    if found.infeasible:
        return explain_infeasible(run, strategy.kind)
    if found.best is None:
        why = "interrupted before any placement was found" if run.interrupted else \
            "no placement found within the time limit"
        return no_placement(run, Status.UNKNOWN, why)
    assignment, order = found.best
    used = len(set(assignment))
    levels = {"devices": device_level(run, used, max(device_target, found.bound or 0))}
    run.best = (assignment, order, dict(levels))
    if not want_latency or run.interrupted or not levels["devices"]["proven"]:
        if want_latency:
            levels["latency"] = latency_level(run, assignment, None, "not searched: " + (
                "interrupted" if run.interrupted else "the device count is not proven"))
        return finish(run, assignment, order, levels)
    # hop latency with the device count fixed
    fixed = strategy.fix_count(used, (assignment, order))
    if latency_skipped is not None:
        # no model: the better start against the bounds known without one
        best = min((fixed.start, (assignment, order)), key=lambda b: exact_latency_units(run, b[0]))
        found = LevelSearch(best, fixed.target)
        run.record("latency", note=latency_skipped, bound=fixed.target / run.prob.lat_scale)
    else:
        # the better start against the bound known without a model stands if the deadline passes
        # while the model is built (DeadlineReached)
        best = min((fixed.start, (assignment, order)), key=lambda b: exact_latency_units(run, b[0]))
        run.best = (best[0], best[1], {**levels, "latency": latency_level(
            run, best[0], fixed.target, "not searched: the time limit was reached while building its model")})
        found = solve_level(run, "latency", fixed.latency, start=fixed.start,
                            value=lambda a: exact_latency_units(run, a), target=fixed.target,
                            scale=run.prob.lat_scale, light=strategy.light)
    assignment, order = found.best
    levels["latency"] = latency_level(run, assignment, found.bound, latency_skipped)
    run.best = (assignment, order, dict(levels))
    if not want_bottleneck or run.interrupted or not levels["latency"]["proven"] or latency_skipped is not None:
        if want_bottleneck:
            why = "interrupted" if run.interrupted else "the hop latency is not proven" \
                if not levels["latency"]["proven"] else "the fleet is too large for the per-edge latency table"
            levels["bottleneck"] = dict(value=bottleneck_value(instance, assignment), bound=None, proven=False,
                                        note="not searched: " + why)
        return finish(run, assignment, order, levels)
    # the bottleneck with latency fixed at its proven optimum
    proven_latency = found.bound
    keep = (assignment, order)
    unit = run.quant.unit
    found = solve_level(run, "bottleneck", lambda p: fixed.bottleneck(p, proven_latency), start=keep,
                        value=lambda a: Fraction(bottleneck_value(instance, a), unit))
    assignment, order = found.best
    if exact_latency_units(run, assignment) > proven_latency:     # a rounded latency let it slip
        assignment, order = keep
    levels["bottleneck"] = bottleneck_level(run, assignment, found.bound)
    return finish(run, assignment, order, levels)
