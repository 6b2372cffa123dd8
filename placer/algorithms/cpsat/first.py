"""A first level before the device count: CP-SAT's ``moved`` (:mod:`.moved`) and ``cost``
(:mod:`.cost`) levels share how the levels after them are solved.

A first level is a linear row over the F2 (contiguous, split) or F1 (free) model's Booleans. Once
its optimum is proven it is fixed (the row at most its optimum) and the device count is minimised,
then the hop latency with the count fixed, then the bottleneck, each by
:func:`~.levels.solve_level` and each only after a proven level, as :func:`~.levels.solve_levels`
does for devices first. A rounded row never lets a later level take a placement whose exact first
value is worse.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from placer.algorithms.cpsat.core import explain_infeasible
from placer.algorithms.cpsat.fleet import path_latency_bound
from placer.algorithms.cpsat.levels import (
    Built,
    bottleneck_level,
    cheapest_hops_bound,
    exact_latency_units,
    latency_level,
    solve_level,
)
from placer.algorithms.cpsat.models import ContiguousModel, FreeModel, fix_latency
from placer.algorithms.cpsat.run import Run, bottleneck_value, device_level, finish, no_placement
from placer.problem.placement import Result, Status

__all__ = ["First", "first_model", "after_first", "rest_unsearched", "unplaced"]


@dataclass(frozen=True)
class First:
    """A first level: its ``name``, ``row(model)`` (the expression in a model's ``x`` / ``used``
    Booleans, solver units), ``units(assignment)`` (a placement's row value), ``exact(assignment)``
    (its exact value, what the level reports) and ``hints(model)`` (partial hints, or None)."""

    name: str
    row: Callable
    units: Callable
    exact: Callable
    hints: Callable | None = None


def unplaced(run: Run, kind: str, found) -> Result | None:
    """The answer when a first level's search placed nothing: why no placement exists (infeasible),
    or that none was found in time (interrupted or out of time); None when it found one."""
    if found.infeasible:
        return explain_infeasible(run, kind)
    if found.best is None:
        return no_placement(run, Status.UNKNOWN, "interrupted before any placement was found" if run.interrupted
                            else "no placement found within the time limit")
    return None


def first_model(run: Run, kind: str, first: First):
    """``model(problem, *, bottleneck, at_most, count, latency)``: the F1 (``kind`` free) or F2 model
    with ``first``'s row as ``model.lead``, the row at most ``at_most``, the device count fixed
    to ``count`` and the hop latency to ``latency`` (solver units) when given."""
    s_max = min(run.prob.n, run.prob.d)

    def model(p, *, bottleneck=False, at_most=None, count=None, latency=None):
        mdl = FreeModel(p, bottleneck=bottleneck) if kind == "free" else \
            ContiguousModel(p, s_max=s_max, bottleneck=bottleneck)
        mdl.lead = first.row(mdl)
        if at_most is not None:
            mdl.m.add(mdl.lead <= at_most)
        if count is not None:
            mdl.fix_count(count)
        if latency is not None:
            fix_latency(mdl, latency)
        if first.hints is not None:
            first.hints(mdl)
        return mdl
    return model


def after_first(run: Run, model, first: First, best, fixed: int, levels: dict, kind: str, light: bool) -> Result:
    """Devices, latency and bottleneck with the first level fixed at ``fixed`` (its units), each only
    after a proven level; ``best``: the first level's placement, ``levels`` its level."""
    instance, prob = run.instance, run.prob
    ordered = kind != "free"
    kept = first.exact(best[0])

    def no_worse(found, keep):
        got = found.best
        if got is None or first.exact(got[0]) > kept:
            return keep                              # a rounded row let it slip
        return got

    run.best = (best[0], best[1], dict(levels))
    if not levels[first.name]["proven"] or run.interrupted:
        used = len(set(best[0]))
        levels["devices"] = device_level(run, used, run.lower)
        if not levels["devices"]["proven"]:
            levels["devices"]["note"] = "not searched: " + ("interrupted" if run.interrupted else
                                                            f"the {first.name} level is not proven")
        return rest_unsearched(run, best, levels)
    found = solve_level(run, "devices", lambda p: Built(model(p, at_most=fixed), lambda m: m.devices_count(),
                                                        ordered=ordered),
                        start=best, value=lambda a: len(set(a)), target=run.lower, light=light)
    best = no_worse(found, best)
    used = len(set(best[0]))
    levels["devices"] = device_level(run, used, max(run.lower, found.bound or 0))
    run.best = (best[0], best[1], dict(levels))
    want_latency, want_bottleneck = "latency" in run.order, "bottleneck" in run.order
    probe = model(prob) if want_latency else None
    if not want_latency or run.interrupted or not levels["devices"]["proven"] or not probe.latency_supported:
        return rest_unsearched(run, best, levels, None if probe is None or probe.latency_supported else
                                "not searched: the fleet is too large for the per-edge latency table")
    target = cheapest_hops_bound(run, used)
    if kind != "free" and prob.is_chain:
        target = max(target, path_latency_bound(prob.link, prob.groups, used))
    found = solve_level(run, "latency", lambda p: Built(model(p, at_most=fixed, count=used),
                                                        lambda m: m.latency(), ordered=ordered),
                        start=best, value=lambda a: exact_latency_units(run, a), target=target,
                        scale=prob.lat_scale, light=light)
    best = no_worse(found, best)
    levels["latency"] = latency_level(run, best[0], found.bound)
    run.best = (best[0], best[1], dict(levels))
    if not want_bottleneck or run.interrupted or not levels["latency"]["proven"]:
        return rest_unsearched(run, best, levels)
    proven_latency = found.bound
    unit = run.quant.unit
    found = solve_level(run, "bottleneck", lambda p: Built(
        model(p, bottleneck=True, at_most=fixed, count=used, latency=proven_latency),
        lambda m: m.bottleneck, ordered=ordered), start=best,
        value=lambda a: Fraction(bottleneck_value(instance, a), unit))
    got = no_worse(found, best)
    if exact_latency_units(run, got[0]) <= proven_latency:
        best = got
    levels["bottleneck"] = bottleneck_level(run, best[0], found.bound)
    return finish(run, best[0], best[1], levels)


def rest_unsearched(run: Run, best, levels: dict, note: str | None = None) -> Result:
    """The levels after the last one searched, with the placement's values, unproven, and why."""
    why = note or ("not searched: interrupted" if run.interrupted else "not searched: a level before it is "
                   "not proven")
    if "latency" in run.order and "latency" not in levels:
        levels["latency"] = latency_level(run, best[0], None, why)
    if "bottleneck" in run.order and "bottleneck" not in levels:
        levels["bottleneck"] = dict(value=bottleneck_value(run.instance, best[0]), bound=None, proven=False,
                                    note=why)
    return finish(run, best[0], best[1], levels)


