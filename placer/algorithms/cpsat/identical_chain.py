"""Chains on identical devices, no pins: next-fit gives the exact fewest stages S (feasibility is a
sum, hence hereditary), so the device level is proven without search; CP-SAT then finds the
cheapest simple path of S linked devices (``add_circuit``, symmetry broken among twins, a rack
cut), and the cuts minimise the bottleneck exactly (binary search)."""

from __future__ import annotations

from placer.algorithms.chain import bottleneck_ends, next_fit, prefix_sums
from placer.algorithms.cpsat.fleet import path_latency_bound
from placer.algorithms.cpsat.levels import LevelSearch, exact_latency_units, latency_level, solve_level
from placer.algorithms.cpsat.models import PathModel, Problem
from placer.algorithms.cpsat.run import Run, finish, no_placement, objective_levels
from placer.algorithms.paths import find_path
from placer.problem.placement import Result, Status
from placer.specs.fabric import GATEWAYS

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
                                    f"{instance.count_words(instance.n_devices, bare=True)} available"
                                    + (" devices" if instance.tp == 1 else ""))
    want_latency, want_bottleneck = objective_levels(run)
    # the cuts do not depend on the path: whichever devices the path visits, stage k holds cuts[k]
    ends = bottleneck_ends(prefix_sums(instance.demand_bytes), cap, count,
                           load_prefix=prefix_sums(instance.weight_bytes))
    cuts = list(zip([0, *ends], ends))
    path = find_path(instance, count, budget=20_000).path
    start = None if path is None else (_lay_cuts(instance.n_nodes, cuts, path), list(path))
    # the path level: the cheapest path when latency is wanted, else any path of ``count`` devices
    # (a path found already settles it: no search)
    fabric = instance.fleet.fabric
    gateways = instance.fleet.formula and fabric.kind in GATEWAYS
    target = path_latency_bound(prob.link, prob.groups, count, gateways) if want_latency else None
    if start is not None and not want_latency:
        run.record("path", settled="a path of the stage count is found; no search")
        found = LevelSearch(start, None)
    else:
        found = solve_level(run, "path", lambda p: _PathLevel(p, count, cuts, instance.n_nodes, want_latency),
                            start=start, value=lambda a: exact_latency_units(run, a), target=target,
                            scale=prob.lat_scale, light=True, sizes=False)
    if found.infeasible:
        return no_placement(
            run, Status.INFEASIBLE, f"a contiguous pipeline needs {count} stages, but the fleet graph has no "
                                    f"simple path of {count} linked devices")
    if found.best is None:
        return no_placement(
            run, Status.UNKNOWN, f"{count} stages needed; no path of {count} linked devices found in time")
    assignment, order = found.best
    levels = {"devices": dict(value=count, bound=count, proven=True)}
    if want_latency:
        levels["latency"] = latency_level(run, assignment, found.bound)
    if want_bottleneck:
        top = max(sum(instance.weight_bytes[a:b]) for a, b in cuts)
        levels["bottleneck"] = dict(value=top, bound=top, proven=True)
    run.stats["strategy"] = "identical-chain: next-fit stages + CP-SAT fleet path"
    return finish(run, assignment, order, levels)


class _PathLevel:
    """The F0 path model as :func:`solve_level` sees it: a placement is the fixed cuts laid along
    the path's devices; the objective is the path's latency (None when latency is not wanted)."""

    def __init__(self, p: Problem, count: int, cuts, n_nodes: int, want_latency: bool):
        self.model = PathModel(p, count)
        self.m = self.model.m
        self._cuts, self._n, self._want_latency = cuts, n_nodes, want_latency

    def objective(self):
        return self.model.latency() if self._want_latency else None

    def hint(self, assignment, order):
        self.model.hint(order)

    def watch(self) -> dict:
        return self.model.watch()

    def read(self, values) -> tuple:
        order = self.model.order(values)
        return _lay_cuts(self._n, self._cuts, order), order


def _lay_cuts(n_nodes: int, cuts, order) -> list[int]:
    """Stage k's nodes ``cuts[k]`` on device ``order[k]``."""
    assignment = [0] * n_nodes
    for k, (a, b) in enumerate(cuts):
        for node in range(a, b):
            assignment[node] = order[k]
    return assignment
