"""Exact contiguous placement on a chain: fewest stages, then the smallest bottleneck, then a path.

Stage feasibility is hereditary (a run that fits keeps fitting when shortened), so on identical
devices next-fit in pipeline order gives the fewest stages ("greedy stays ahead": after k stages
it has covered at least as many nodes as any other partition), with pins too (stage ends that
would split a pinned group are skipped; runs that would hold nodes pinned to two devices are cut).
Each stage end is one binary search in the prefix sums: O(stages x log n). Along a fixed order of
different devices, where no device may be skipped, next-fit is not exact; :func:`fixed_order_ends`
tracks every reachable stage end instead.

Among minimum-count partitions the smallest bottleneck (largest stage demand) is found by binary
search on the bottleneck with the exact stage-count probe. The stages are then embedded on a minimum-latency
device path (:mod:`placer.algorithms.paths`).

With identical devices the stage count is the optimum when a path of that many devices exists (no
partition into fewer stages exists, whatever the devices). With different devices (a chain, no
pins) a Pareto DP over capacity classes gives the fewest devices in any order, a lower bound on
every fleet graph; when a depth-first search lays those stages on a simple path of linked devices
(always on a fully linked fleet) that count is proven. Otherwise the stages follow one fixed
device order (a walk preferring large devices), proven only when they meet the lower bound; when
that order does not place the chain either, the answer is UNKNOWN (never infeasible), and
INFEASIBLE only when no cover fits the devices in any order.

With requirements that every stage hold a layer of a kind (``attention-per-stage``,
``decoder-per-stage``) a stage is no longer hereditary; on identical devices a dynamic program over
stage ends (:func:`~placer.algorithms.chain.covered_ends`) gives the fewest such stages and the
bottleneck search runs on it; on different devices dp answers unknown (cpsat models them).
``embedding-first-head-last`` keeps nodes together as a pin does.

The result states two levels (:class:`~placer.problem.placement.Level`): devices, and the hop latency of
the path, proven when the device count is and the path search was exhaustive on a chain with no
device pins (pins fix stage positions that other cuts could move). Its status (``optimal``) and
``proven_optimal`` speak of the device count, dp's objective.
"""

from __future__ import annotations

from collections import Counter
from time import perf_counter

from placer.algorithms.chain import (
    bottleneck_ends,
    chain_min_devices,
    covered_bottleneck_ends,
    covered_ends,
    fixed_order_ends,
    next_fit_ends,
    prefix_sums,
)
from placer.algorithms.opening import open_method
from placer.algorithms.paths import find_path, walk
from placer.algorithms.pins import ChainPins, chain_pins
from placer.problem.instance import Instance
from placer.problem.placement import Level, Result, Status, evaluate

__all__ = ["dp", "min_stages"]

MAX_FRONT = 400     # Pareto vectors per chain position before the order-free count is skipped (dp stays fast)


def min_stages(instance: Instance, capacity: int | None = None) -> int | None:
    """Fewest contiguous stages of the instance's chain on devices of ``capacity`` bytes each
    (default: the largest available device), honouring pins; None when no partition exists."""
    cap = max(instance.capacity_bytes) if capacity is None else capacity
    ends = next_fit_ends(prefix_sums(instance.demand_bytes), cap, pins=chain_pins(instance))
    return None if ends is None else len(ends)


def _assignment(ends: list[int], path: list[int]) -> list[int]:
    out: list[int] = []
    start = 0
    for k, end in enumerate(ends):
        out.extend([path[k]] * (end - start))
        start = end
    return out


def dp(instance: Instance, *, lower_bound: int | None = None) -> Result:
    """Exact contiguous placement of a chain (fewest devices, then smallest bottleneck), embedded
    on a minimum-latency device path. See the module docstring for what is proven when.
    ``lower_bound``: the instance's device lower bound when already known."""
    opening = open_method("dp", instance, lower_bound, contiguous=True)
    if opening.refusal is not None:
        return opening.refusal
    t0, lb, give_up, pins = opening.t0, opening.lower_bound, opening.give_up, opening.pins
    prefix = prefix_sums(instance.demand_bytes)
    caps = instance.capacity_bytes
    chain = instance.model.is_chain
    identical = len(set(caps)) == 1
    stats: dict = {"chain": chain, "identical_devices": identical}

    def unknown(msg: str) -> Result:
        return give_up(msg, stats=stats)

    covers = [list(nodes) for _, nodes in instance.cover_sets]
    if covers and not identical:
        return unknown("dp models a stage that must hold a layer of a kind (" +
                       ", ".join(name for name, _ in instance.cover_sets) + ") on identical devices only; use cpsat")
    if identical:
        cap = caps[0]
        ends = covered_ends(prefix, cap, covers, pins=pins) if covers else next_fit_ends(prefix, cap, pins=pins)
        if ends is None:
            if covers:
                # every stage must hold one node of each list: a chain is then refused in bytes
                if not chain:
                    return unknown("no cut of the nodes in pipeline order gives every stage the layers required")
                return give_up("no contiguous stages hold the layers every stage requires ("
                               + ", ".join(name for name, _ in instance.cover_sets) + ") within a device",
                               Status.INFEASIBLE, stats=stats)
            # every node fits (checked before any method), so only a pinned run can overflow
            if not chain:
                return unknown("a pinned run of nodes (in pipeline order) does not fit on one device")
            return give_up("a pinned run of nodes does not fit on one device", Status.INFEASIBLE, stats=stats)
        stages = len(ends)
        ends = covered_bottleneck_ends(prefix, cap, stages, covers, pins=pins) if covers else \
            bottleneck_ends(prefix, cap, stages, pins=pins)
        fixed = _fixed_positions(ends, pins)
        found = find_path(instance, stages, fixed=fixed)
        if found.path is None:
            if found.proven and not fixed and chain:
                return give_up(f"the pipeline needs {stages} stages but the fleet graph has no simple path of "
                               f"{stages} linked devices", Status.INFEASIBLE, stats=stats)
            return unknown(f"no device path of {stages} linked devices found ({found.how})")
        count_proven = chain
        path = found.path
        # the cheapest path of that many devices is the latency optimum for a chain whose stage
        # positions are free (pins to devices fix some, and other cuts could move them)
        latency_proven = found.proven and chain and not fixed
        stats.update(path_search=found.how)
    else:
        if pins.has_devices:
            return unknown("dp along a fixed device order cannot honour device pins on a fleet of "
                           "different devices; use cpsat")
        # the fewest devices in any device order (Pareto DP over capacity classes): a lower bound
        # for every fleet graph, and the optimum wherever its stages lie on a path of linked devices
        free_count, laid = _order_free(instance, prefix) if chain and not pins.any else (None, None)
        if free_count == "none":
            return give_up("no cover of the chain by contiguous stages fits the fleet's devices in any order",
                           Status.INFEASIBLE, stats=stats)
        if isinstance(free_count, int):
            lb = max(lb, free_count)
            stats["order_free_devices"] = free_count
        if laid is not None:
            ends, path = laid
            count_proven = True
            latency_proven = False
            stats.update(path_search="order-free optimum laid on a device path")
        else:
            # a fixed device order: the walk that prefers larger devices, from the largest one
            start = min(range(instance.n_devices), key=lambda d: (-caps[d], d))
            order = walk(instance, start, prefer="capacity")
            ends = fixed_order_ends(prefix, [caps[d] for d in order], pins=pins)
            if ends is None:
                lower = f" (at least {free_count} devices in any order)" if isinstance(free_count, int) else ""
                return unknown(f"no device path found for the fewest stages{lower}, and no partition along "
                               f"a fixed order of {len(order)} devices places the chain")
            ends = bottleneck_ends(prefix, [caps[d] for d in order[:len(ends)]], len(ends), pins=pins)
            path = order[:len(ends)]
            count_proven = False
            latency_proven = False
            stats.update(path_search="fixed device order (largest devices first)")
    assignment = _assignment(ends, path)
    stages = len(ends)
    proven = (count_proven or stages <= lb)
    stats.update(bottleneck_bytes=max(prefix[e] - prefix[s] for s, e in zip([0, *ends], ends)))
    # the levels, lexicographic: hop latency is proven only on top of a proven device count; the
    # status speaks of the device count (dp's objective), the latency level of its own proof
    latency_proven = proven and latency_proven
    status = Status.OPTIMAL if proven else Status.FEASIBLE
    result = evaluate(instance, assignment, method="dp", status=status, lower_bound=lb,
                      seconds=perf_counter() - t0, proven_optimal=proven, objective=float(stages),
                      bound=float(stages if proven else lb), gap=0.0 if proven else (stages - lb) / stages,
                      order=tuple(path), stats=stats)
    latency = result.hop_latency_us
    levels = (Level("devices", stages, stages if proven else lb, proven),
              Level("latency", latency, latency if latency_proven else None, latency_proven))
    return result.replace(levels=levels)


def _order_free(instance: Instance, prefix: list[int], *, budget: int = 50_000):
    """(fewest devices in any order, (stage ends, device path) or None) for a chain without pins
    on devices of different sizes.

    The count is :func:`~placer.algorithms.chain.chain_min_devices` (exact when devices may come in
    any order: a lower bound on every fleet graph); "none" when no cover fits the devices at all,
    "unknown" when the DP's front grew past ``MAX_FRONT`` (then the fixed order alone). Its stages (largest stage demand first among the
    devices of the class the DP chose) are laid on a simple path of directly linked devices by a
    depth-first search of at most ``budget`` steps; None when none was found.
    """
    caps = instance.capacity_bytes
    counts = Counter(caps)
    classes = sorted(counts.items(), reverse=True)
    count, segments = chain_min_devices(instance.demand_bytes, classes, max_front=MAX_FRONT)
    if count is None:
        return "none", None
    if count == "unknown":
        return "unknown", None
    need = [prefix[e] - prefix[s] for s, e, _ in segments]
    want = [classes[t][0] for _, _, t in segments]
    linked: dict[int, list[int]] = {d: [] for d in range(instance.n_devices)}
    for a, b in instance.link_us:
        if a != b:
            linked[a].append(b)

    def ranked(options, k):
        # the class the DP chose first, then the smallest device that holds the stage
        return sorted((d for d in options if caps[d] >= need[k]), key=lambda d: (caps[d] != want[k], caps[d], d))

    steps = 0
    path: list[int] = []
    used: set[int] = set()
    stack = [iter(ranked(range(instance.n_devices), 0))]
    while stack:
        d = next(stack[-1], None)
        if d is None:
            stack.pop()
            if path:
                used.discard(path.pop())
            continue
        if d in used:
            continue
        steps += 1
        if steps > budget:
            return count, None
        path.append(d)
        used.add(d)
        if len(path) == len(segments):
            ends = [e for _, e, _ in segments]
            better = bottleneck_ends(prefix, [caps[x] for x in path], len(path))
            return count, (better if better is not None else ends, list(path))
        stack.append(iter(ranked(linked[d], len(path))))
    return count, None


def _fixed_positions(ends: list[int], pins: ChainPins) -> dict[int, int]:
    if not pins.has_devices:
        return {}
    fixed: dict[int, int] = {}
    start = 0
    for k, end in enumerate(ends):
        p = pins.next_pinned[start]
        if p < end:
            fixed[k] = pins.device_of[p]
        start = end
    return fixed
