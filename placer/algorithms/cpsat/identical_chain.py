"""Chains on identical devices, no pins: next-fit gives the exact fewest stages S (feasibility is a
sum, hence hereditary), so the device level is proven without search; CP-SAT then finds the
cheapest simple path of S linked devices (``add_circuit``, symmetry broken among twins, a rack
cut), and the cuts minimise the bottleneck exactly (binary search)."""

from __future__ import annotations

import math

from ...instance import Instance
from ...placement import Result, Status
from ..chain import bottleneck_ends, next_fit, prefix_sums
from ..paths import find_path
from .fleet import path_latency_bound
from .levels import latency_level
from .models import PathModel
from .run import Run, finish, no_placement, objective_levels

__all__ = ["identical_chain"]


def identical_chain(run: Run) -> Result:
    """Chains on identical devices: exact stage count by next-fit, then the cheapest fleet path."""
    instance, prob = run.instance, run.prob
    cap = instance.capacity_bytes[0]
    segments = next_fit(instance.demand_bytes, cap)
    count = len(segments)
    run.record("stages", method="next-fit (exact)", devices=count)
    if count > instance.n_devices:
        return no_placement(
            run, Status.INFEASIBLE, f"a contiguous pipeline needs {count} stages; the fleet has "
                                    f"{instance.n_devices} available devices")
    want_latency, want_bottleneck = objective_levels(run)
    model = PathModel(prob, count)
    target = None
    if want_latency:
        model.m.minimize(model.latency())
        target = path_latency_bound(prob.link, prob.groups, count)
    start = _path_hint(instance, count)
    if start is not None:
        model.hint(start)
    out = run.solve("path", model.m, model.watch(), scale=prob.lat_scale, target=target, light_presolve=True,
                    quiet=not want_latency)
    if out.status == "INFEASIBLE":
        return no_placement(
            run, Status.INFEASIBLE, f"a contiguous pipeline needs {count} stages, but the fleet graph has no "
                                    f"simple path of {count} linked devices")
    if out.values is None:
        if start is None:
            return no_placement(
                run, Status.UNKNOWN, f"{count} stages needed; no path of {count} linked devices found in time")
        order = list(start)
        lat_bound = target
    else:
        order = model.order(out.values)
        got = out.objective if out.proven else out.bound
        lat_bound = None if got is None else max(math.ceil(got - 1e-6), target or 0)
    ends = bottleneck_ends(prefix_sums(instance.demand_bytes), cap, count,
                           load_prefix=prefix_sums(instance.weight_bytes))
    cuts = list(zip([0, *ends], ends))
    assignment = [0] * instance.n_nodes
    for k, (a, b) in enumerate(cuts):
        for node in range(a, b):
            assignment[node] = order[k]
    levels = {"devices": dict(value=count, bound=count, proven=True)}
    if want_latency:
        levels["latency"] = latency_level(run, assignment, lat_bound)
    if want_bottleneck:
        top = max(sum(instance.weight_bytes[a:b]) for a, b in cuts)
        levels["bottleneck"] = dict(value=top, bound=top, proven=True)
    run.stats["strategy"] = "identical-chain: next-fit stages + CP-SAT fleet path"
    return finish(run, assignment, order, levels)


def _path_hint(instance: Instance, count: int):
    return find_path(instance, count, budget=20_000).path
