"""Contiguous and split placement on different devices, with pins, or on DAGs: the F2 model (stages
along a fleet path). A Pareto dynamic program over capacity classes gives the exact fewest devices
when the fleet could order devices freely (a proven lower bound, and a hint); on an ultrametric
fleet a second DP over runs of stages inside one rack bounds the rack changes from below."""

from __future__ import annotations

import time

from placer.algorithms.chain import chain_min_devices, min_group_runs, next_fit
from placer.algorithms.check import stage_order
from placer.algorithms.cpsat.fleet import min_groups_covering, path_latency_bound
from placer.algorithms.cpsat.levels import Built, CountFixed, Strategy, cheapest_hops_bound, solve_levels
from placer.algorithms.cpsat.models import ContiguousModel, fix_latency
from placer.algorithms.cpsat.run import (
    LIGHT_F2,
    Run,
    acceptable,
    capacity_classes,
    device_level,
    latency_value,
    no_placement,
    objective_levels,
)
from placer.algorithms.deadline import Deadline
from placer.algorithms.dp import dp
from placer.algorithms.greedy import greedy
from placer.algorithms.pathbound import path_relaxation
from placer.algorithms.pathwalk import walk_paths
from placer.problem.instance import Instance
from placer.problem.placement import Result, Status

__all__ = ["contiguous"]


def contiguous(run: Run) -> Result:
    """F2 on heterogeneous fleets, with pins, or on DAGs."""
    instance, prob = run.instance, run.prob
    want_latency, want_bottleneck = objective_levels(run)
    classes = capacity_classes(instance)
    bound_bytes = run.lower
    dp_segments = None
    # the path walk first: a placement within a second on any fleet graph, kept as the incumbent
    walked = walk_paths(instance, deadline=run.deadline) if prob.is_chain and not run.pins_any else None
    if walked is not None and not acceptable(instance, walked.assignment(instance.n_nodes)):
        # a requirement the walk does not model: its count still bounds the optimum from below
        # when proven (the requirement only removes placements), its placement is no incumbent
        if walked.proven:
            bound_bytes = max(bound_bytes, len(walked.order))
        walked = None
    if walked is not None:
        used = len(walked.order)
        proven = walked.proven or used <= run.lower     # proven: a path- or cycle-shaped fleet
        run.best = (walked.assignment(instance.n_nodes), list(walked.order),
                    {"devices": dict(value=used, bound=used if proven else run.lower, proven=proven)})
        run.record("start", how="path walk", devices=used, elapsed=round(time.monotonic() - run.t0, 4))
        if walked.proven:
            bound_bytes = max(bound_bytes, used)
    if prob.is_chain:
        count, segs = chain_min_devices(instance.demand_bytes, classes)
        if count is None:
            return no_placement(
                run, Status.INFEASIBLE, "no contiguous cover of the chain fits the fleet's devices, "
                                        "whatever their order")
        if count != "unknown":
            bound_bytes = max(bound_bytes, count)
            dp_segments = (segs, classes)
    run.record("bound", devices=bound_bytes)
    start = _contiguous_hints(run, dp_segments, walked)
    if prob.is_chain and not run.pins_any and (start is None or len(set(start[0])) > bound_bytes):
        start, bound_bytes = _path_relaxation(run, start, bound_bytes)
    if start is not None:
        if walked is None:
            run.record("start", how="hints", devices=len(set(start[0])), elapsed=round(time.monotonic() - run.t0, 4))
        run.best = (list(start[0]), list(start[1]), {"devices": device_level(run, len(set(start[0])), bound_bytes)})
    if run.deadline is not None:
        run.deadline.check()    # no time left to build the model: the best start stands (DeadlineReached)
    s_max = min(prob.n, prob.d, len(set(start[0])) if start else prob.d)
    probe = ContiguousModel(prob, s_max=s_max, bottleneck=want_bottleneck)
    skipped = None
    if want_latency and not probe.latency_supported:
        skipped = "not searched: the fleet is too large for the per-edge latency table"
    run.stats["strategy"] = "F2: contiguous stages along a fleet path"
    first = [probe]

    def devices_model(p):
        mdl = first.pop() if first and p is prob else ContiguousModel(p, s_max=s_max, bottleneck=want_bottleneck)
        return Built(mdl, lambda m: m.devices_count(), ordered=True)

    def fix_count(used: int, best) -> CountFixed:
        cuts, target, witness = _level_bounds(run, used)
        if witness is not None and latency_value(instance, witness[0]) < latency_value(instance, best[0]):
            best = witness
        target = max(target or 0, path_latency_bound(prob.link, prob.groups, used) if prob.is_chain else 0,
                     cheapest_hops_bound(run, used))

        def latency_model(p):
            mdl = ContiguousModel(p, s_max=s_max, bottleneck=want_bottleneck)
            mdl.fix_count(used, cuts)
            return Built(mdl, lambda m: m.latency(), ordered=True)

        def bottleneck_model(p, proven_latency):
            mdl = ContiguousModel(p, s_max=s_max, bottleneck=True)
            mdl.fix_count(used, cuts)
            fix_latency(mdl, proven_latency)
            return Built(mdl, lambda m: m.bottleneck, ordered=True)

        return CountFixed(best, target, latency_model, bottleneck_model)

    return solve_levels(run, Strategy("contiguous", LIGHT_F2, devices_model, fix_count), start=start,
                        device_target=bound_bytes, want_latency=want_latency, want_bottleneck=want_bottleneck,
                        latency_skipped=skipped)


PATH_RELAXATION_CELLS = 1_500_000     # chain positions x fleet links the walk program may tabulate
PATH_RELAXATION_DEGREE = 6            # links per device above which a fleet is not sparse


def _path_relaxation(run: Run, start, bound: int):
    """A sparse fleet (at most ``PATH_RELAXATION_DEGREE`` links per device) whose best start misses
    the device bound: the walk relaxation's bound, which sees the fleet graph, and its best simple
    path (:mod:`placer.algorithms.pathbound`), in at most half the time left. Returns the (start,
    device bound) to go on with."""
    instance = run.instance
    links = len(instance.link_us)
    if links > PATH_RELAXATION_DEGREE * instance.n_devices \
            or (instance.n_nodes + 1) * (links + instance.n_devices) > PATH_RELAXATION_CELLS:
        return start, bound     # dense: the order-free bound sees nearly every path already
    upper = len(set(start[0])) if start is not None else None
    t = time.monotonic()
    got = path_relaxation(instance.demand_bytes, instance.capacity_bytes, instance.link_us, upper=upper,
                          deadline=Deadline.of(run.deadline).within(run.remaining() / 2))
    run.record("path relaxation", bound=got.bound, devices=None if got.order is None else len(got.order),
               iterations=got.iterations, seconds=round(time.monotonic() - t, 3))
    if got.bound is not None:
        bound = max(bound, got.bound)
    if got.order is not None and (upper is None or len(got.order) < upper):
        assignment, begin = [], 0
        for d, end in zip(got.order, got.ends):
            assignment.extend([d] * (end - begin))
            begin = end
        if acceptable(instance, assignment):
            start = (assignment, list(got.order))
    return start, bound


def _level_bounds(run: Run, count: int):
    """Cuts and a latency lower bound for a chain's path of ``count`` devices on an ultrametric
    fleet, where latency = sum over hierarchy levels of step x (arcs leaving a group of that level).

    At the device level the path has ``count - 1`` arcs. At a higher level whose groups each hold
    one device capacity, :func:`min_group_runs` gives the fewest runs of consecutive stages inside
    one group (a lower bound on the group changes + 1) and a witness, laid out on the fleet as a
    hint when it packs into the groups; other levels get the fewest groups holding ``count``
    devices. Returns ``(cuts, target, witness)``; ``cuts`` None and ``target`` None when latency is
    not an ultrametric or the model is not a chain.
    """
    instance, prob = run.instance, run.prob
    if prob.hierarchy is None or not prob.is_chain or count < 1:
        return None, None, None
    cuts, target, witness = [], 0, None
    for step, labels in prob.hierarchy:
        if step is None:
            continue
        groups: dict[int, list[int]] = {}
        for d, g in enumerate(labels):
            groups.setdefault(g, []).append(d)
        if len(groups) == len(labels):
            target += step * (count - 1)
            continue
        caps = instance.capacity_bytes
        homogeneous = all(len({caps[d] for d in members}) == 1 for members in groups.values())
        need = min_groups_covering([len(g) for g in groups.values()], count)
        if homogeneous:
            kinds = {}
            for members in groups.values():
                cap = caps[members[0]]
                size, total = kinds.get(cap, (0, 0))
                kinds[cap] = (max(size, len(members)), total + len(members))
            kind_list = sorted(((c, g, t) for c, (g, t) in kinds.items()), reverse=True)
            runs, trail = min_group_runs(instance.demand_bytes, kind_list, count)
            if isinstance(runs, int):
                need = max(need, runs)
                if witness is None and trail is not None:
                    witness = _realize_runs(instance, trail, kind_list, groups)
        cuts.append((labels, need - 1))
        target += step * (need - 1)
    return cuts, target, witness


def _realize_runs(instance: Instance, trail, kinds, groups):
    """Lay the runs of :func:`min_group_runs` on real groups (first-fit decreasing by devices) and
    devices (lowest index first); None when they do not pack or a needed link is missing."""
    caps = instance.capacity_bytes
    free = {}
    for members in groups.values():
        free.setdefault(caps[members[0]], []).append(sorted(members))
    where = {}
    for r in sorted(range(len(trail)), key=lambda r: -trail[r][3]):
        _, _, k, m = trail[r]
        for members in free[kinds[k][0]]:
            if len(members) >= m:
                where[r] = members[:m]
                del members[:m]
                break
        else:
            return None
    assignment = [0] * instance.n_nodes
    order = []
    for r, (i, j, k, m) in enumerate(trail):
        segments = next_fit(instance.demand_bytes[i:j], kinds[k][0])
        if segments is None or len(segments) != m:
            return None
        for (a, b), d in zip(segments, where[r]):
            for node in range(i + a, i + b):
                assignment[node] = d
            order.append(d)
    if any((a, b) not in instance.link_us for a, b in zip(order, order[1:])):
        return None
    if not acceptable(instance, assignment):
        return None
    return assignment, order


def _contiguous_hints(run: Run, dp_segments, walked=None):
    """The best valid contiguous start: the user's hint, the Pareto DP's cover laid on a fleet path,
    the path walk's placement (:mod:`placer.algorithms.pathwalk`), or the dp / greedy baselines.
    Returns (assignment, order) or None."""
    instance = run.instance
    candidates = []
    if run.user_hint is not None:
        candidates.append(run.user_hint)
    if walked is not None:
        candidates.append(walked.assignment(instance.n_nodes))
    if dp_segments is not None and not run.pins_any:
        laid = _lay_segments(instance, *dp_segments)
        if laid is not None:
            candidates.append(laid)
    for baseline in (dp, greedy):
        res = baseline(instance, lower_bound=run.lower)
        if res.assignment is not None:
            candidates.append(list(res.assignment))
    best = None
    for assignment in candidates:
        if not acceptable(instance, assignment):
            continue
        order = stage_order(instance, assignment)
        if order is None or not _next_stage_only(instance, assignment, order):
            continue
        if best is None or len(set(assignment)) < len(set(best[0])):
            best = (list(assignment), order)
    return best


def _next_stage_only(instance, assignment, order) -> bool:
    """The model requires chain edges to go to the same or the next stage."""
    if not instance.model.is_chain:
        return True
    pos = {d: k for k, d in enumerate(order)}
    return all(0 <= pos[assignment[v]] - pos[assignment[u]] <= 1 for u, v in instance.edges)


def _lay_segments(instance: Instance, segments, classes):
    """Place the DP's segments (each needing a device of a class) on a simple fleet path, by a
    depth-first search that prefers cheap links; None if the budget runs out."""
    caps = instance.capacity_bytes
    need = [classes[t][0] for _, _, t in segments]
    demand = [sum(instance.demand_bytes[a:b]) for a, b, _ in segments]
    adj: dict[int, list[tuple[float, int]]] = {d: [] for d in range(instance.n_devices)}
    for (a, b), lat in instance.link_us.items():
        adj[a].append((lat, b))
    for lst in adj.values():
        lst.sort()
    k_total = len(segments)
    budget = [20_000]

    def dfs(path, seen):
        if len(path) == k_total:
            return list(path)
        budget[0] -= 1
        if budget[0] < 0:
            return None
        k = len(path)
        # the DP's class first (its counts are known to suffice), cheap links first
        options = sorted(((caps[d] != need[k], lat, d) for lat, d in adj[path[-1]]
                          if d not in seen and caps[d] >= demand[k]))
        for _, _, d in options:
            seen.add(d)
            path.append(d)
            found = dfs(path, seen)
            if found:
                return found
            path.pop()
            seen.discard(d)
        return None

    starts = sorted((d for d in range(instance.n_devices) if caps[d] >= demand[0]),
                    key=lambda d: (caps[d] != need[0], d))
    for s in starts[:50]:
        found = dfs([s], {s})
        if found:
            assignment = [0] * instance.n_nodes
            for (a, b, _), d in zip(segments, found):
                for node in range(a, b):
                    assignment[node] = d
            return assignment
        if budget[0] < 0:
            break
    return None


