"""Free mode: nodes of equal size are interchangeable for the device count, so an arc-flow model
over fill levels (no node symmetry, Gilmore-Gomory LP bound) gives the exact count in bytes, solved
for exactly z devices from the lower bound up on a graph pruned to the waste z devices allow; the
per-node F1 model then minimises hop latency with that count fixed."""

from __future__ import annotations

from placer.algorithms import ortools_adapter as ora
from placer.algorithms.chain import next_fit
from placer.algorithms.cpsat.arcflow import solve_arcflow
from placer.algorithms.cpsat.levels import (
    Built,
    CountFixed,
    Strategy,
    chain_runs_bound,
    cheapest_hops_bound,
    solve_levels,
)
from placer.algorithms.cpsat.models import FreeModel, fix_latency
from placer.algorithms.cpsat.run import (
    LIGHT_F1,
    Run,
    acceptable,
    capacity_classes,
    fits_bytes,
    latency_value,
    no_placement,
    objective_levels,
    reachable,
    tag,
)
from placer.algorithms.ffd import ffd
from placer.algorithms.packing import build_arcflow, ffd_bins, ffd_classes, max_fill_bins, prune_for_waste
from placer.algorithms.pathwalk import walk_paths
from placer.algorithms.rackruns import rack_runs
from placer.problem.placement import Result, Status

__all__ = ["free"]


def free(run: Run) -> Result:
    instance, prob = run.instance, run.prob
    want_latency, want_bottleneck = objective_levels(run)
    classes = capacity_classes(instance)
    disconnected = prob.view.unreachable
    bound_bytes = run.lower
    arc = build_arcflow(instance.demand_bytes, classes)
    bins = None
    if arc is not None:
        run.record("arcflow-size", arcs=arc.n_arcs, sizes=len(arc.sizes))
        bins, bound_bytes, infeasible = _arcflow_devices(run, arc, classes, bound_bytes)
        if infeasible:
            return no_placement(
                run, Status.INFEASIBLE, f"the nodes cannot be packed into the fleet's "
                                        f"{instance.count_words(instance.n_devices)} (proven by the arc-flow model)")
    candidates = []
    if bins is not None and not run.pins_any and not disconnected:
        candidates.append(_free_start(run, bins))
    if bins is not None and want_latency and prob.is_chain and not run.pins_any and not disconnected:
        # runs of the chain on racks of their own: placements at the device count whose device and
        # rack changes meet the crossing bounds, which the per-node search rarely finds
        candidates.append(rack_runs(instance, len(bins), deadline=run.deadline))
    if run.user_hint is not None:
        candidates.append(run.user_hint)
    baseline = ffd(instance, lower_bound=run.lower)
    if baseline.assignment is not None:
        candidates.append(baseline.assignment)
    # the path walk only when no start already meets the device bound (on a dense fleet of hundreds
    # of devices it costs seconds, and the arc-flow start is then optimal anyway)
    met = any(c is not None and len(set(c)) <= bound_bytes and acceptable(instance, c) for c in candidates)
    walked = walk_paths(instance, deadline=run.deadline) if prob.is_chain and not run.pins_any and not met \
        else None
    if walked is not None:      # a contiguous pipeline along linked devices: a free placement with short hops
        candidates.append(walked.assignment(instance.n_nodes))
    start = None
    for cand in candidates:
        if cand is None or not acceptable(instance, cand) or not reachable(prob, cand):
            continue
        key = (len(set(cand)), latency_value(instance, cand))
        if start is None or key < start[0]:
            start = (key, list(cand))
    start = start[1] if start is not None else None
    skipped = None
    if want_latency and not FreeModel.latency_fits(prob):
        skipped = "not searched: the fleet is too large for the per-edge latency table"
    run.stats["strategy"] = "free: arc-flow device count + F1 hop latency"

    def count_model(p):
        # the device count alone needs no latency terms, unless they keep edges inside components
        return Built(FreeModel(p, latency=disconnected), lambda m: m.devices_count(), ordered=False)

    def fix_count(used: int, best) -> CountFixed:
        def latency_model(p):
            mdl = FreeModel(p, bottleneck=want_bottleneck, latency=True)
            mdl.fix_count(used)
            return Built(mdl, lambda m: m.latency(), ordered=False)

        def bottleneck_model(p, proven_latency):
            mdl = FreeModel(p, bottleneck=True, latency=True)
            mdl.fix_count(used)
            fix_latency(mdl, proven_latency)
            return Built(mdl, lambda m: m.bottleneck, ordered=False)

        return CountFixed(best, max(cheapest_hops_bound(run, used), chain_runs_bound(run, used)), latency_model,
                          bottleneck_model)

    # pins, a disconnected fleet, or an arc-flow model too large: devices on the per-node model
    return solve_levels(run, Strategy("free", LIGHT_F1, count_model, fix_count),
                        start=None if start is None else (start, None), device_target=bound_bytes,
                        want_latency=want_latency, want_bottleneck=want_bottleneck,
                        latency_skipped=skipped)


def _arcflow_devices(run: Run, arc, classes, lower: int):
    """Fewest devices by arc flow, raising the bound one device at a time.

    For each candidate count z from the lower bound up, the graph is pruned to packings of at most
    z devices (:func:`prune_for_waste`) and solved for exactly z: a solution is optimal (z is a
    bound), INFEASIBLE proves z + 1 is a bound. Stops at the heuristic's count (then optimal), at
    the time limit, or when the pruned graph cannot be built. Returns (bins, bound, infeasible).
    """
    demand = run.instance.demand_bytes
    best = _best_bins(demand, classes)
    fleet_size = sum(c for _, c in classes)
    z = max(lower, 1)
    while True:
        if best is not None and len(best) <= z:
            run.record("devices (heuristic)", devices=len(best), bound=z)
            return best, len(best), False
        if z > fleet_size:
            return None, z, True            # every count up to the fleet size is proven impossible
        if run.remaining() <= 0.05 or run.interrupted:
            return best, z, False
        pruned = prune_for_waste(arc, z)
        if pruned is None:                  # z devices cannot even hold the volume
            z += 1
            continue
        params = ora.parameters(time_limit=max(run.remaining(), 0.05), seed=run.seed, threads=run.threads,
                                work_limit=run.work_limit)
        out, bins = solve_arcflow(pruned, params=params, lower_bound=z, max_bins=z,
                                  progress=tag(run.progress, "devices"), t0=run.t0)
        rec = out.record()
        rec.update(phase="devices (arc-flow)", devices_tried=z, arcs=pruned.n_arcs)
        run.phases.append(rec)
        run.interrupted = run.interrupted or out.interrupted
        if bins is not None:
            return bins, z, False
        if out.status != "INFEASIBLE":
            return best, z, False
        z += 1


def _best_bins(demand, classes):
    """The better of first-fit decreasing and the minimum-slack greedy, as an arc-flow hint."""
    found = [b for b in (ffd_bins(demand, classes), max_fill_bins(demand, classes)) if b is not None]
    return min(found, key=len) if found else None


def _free_start(run: Run, bins):
    """A free placement with exactly ``len(bins)`` devices and few crossings: cut the chain into
    next-fit runs and pack the runs first-fit decreasing; if that needs more devices, fill the
    arc-flow bins with nodes in pipeline order. Devices are taken rack by rack."""
    instance = run.instance
    classes = capacity_classes(instance)
    target = len(bins)
    demand = instance.demand_bytes
    packed = None
    if instance.model.is_chain:
        runs = next_fit(demand, max(instance.capacity_bytes))
        sizes = [sum(demand[a:b]) for a, b in runs]
        packing = ffd_classes(sizes, classes)
        if packing is not None and len(packing) <= target:
            packed = [(c, [node for r in members for node in range(*runs[r])]) for c, members in packing]
    if packed is None:
        queues: dict[int, list[int]] = {}
        for node, d in enumerate(demand):
            queues.setdefault(d, []).append(node)
        packed = []
        for c, items in bins:
            nodes = [queues[s].pop(0) for s in items]
            packed.append((c, sorted(nodes)))
    packed.sort(key=lambda cb: min(cb[1]))
    free_devices = {c: [d for d in range(instance.n_devices) if instance.capacity_bytes[d] == cap]
                    for c, (cap, _) in enumerate(classes)}
    assignment = [0] * instance.n_nodes
    for c, nodes in packed:
        d = free_devices[c].pop(0)
        for node in nodes:
            assignment[node] = d
    return assignment if fits_bytes(instance, assignment) else None


