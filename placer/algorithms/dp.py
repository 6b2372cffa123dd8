"""Exact contiguous placement on a chain: fewest stages, then the smallest bottleneck, then a path.

Stage feasibility is hereditary (a run that fits keeps fitting when shortened), so next-fit in
pipeline order gives the fewest stages ("greedy stays ahead": after k stages it has covered at
least as many nodes as any other partition). It stays exact with per-stage capacities along a
fixed device order and with pins (stage ends that would split a pinned group are skipped; runs that
would hold nodes pinned to two devices are cut). Each stage end is one binary search in the
prefix sums, so a chain costs O(stages x log n).

Among minimum-count partitions the smallest bottleneck (largest stage demand) is found by binary
search on the bottleneck with the next-fit probe. The stages are then embedded on a minimum-latency
device path (:mod:`placer.algorithms.paths`).

With identical devices the stage count is the optimum when a path of that many devices exists (no
partition into fewer stages exists, whatever the devices). With different devices the count is
exact for the fixed device order used and proven only when it meets the lower bound.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from time import perf_counter

from ..instance import Instance
from ..placement import Result, Status, evaluate
from .bound import lower_bound
from .paths import find_path
from .pins import ChainPins, PinConflict, chain_pins

__all__ = ["dp", "next_fit_ends", "min_stages", "min_bottleneck_ends", "prefix_sums"]


def prefix_sums(values) -> list[int]:
    """``[0, v0, v0+v1, ...]`` in exact integers."""
    return [0, *accumulate(values)]


def next_fit_ends(prefix: list[int], capacity, *, pins: ChainPins | None = None,
                  max_stages: int | None = None) -> list[int] | None:
    """End positions (exclusive) of the next-fit partition: each stage takes the longest run that
    fits. ``capacity`` is one integer or a sequence, one per stage. None when a run cannot start
    (its first forced run does not fit) or more than ``max_stages`` (or ``len(capacity)``) stages
    would be needed."""
    n = len(prefix) - 1
    per_stage = not isinstance(capacity, int)
    limit = len(capacity) if per_stage else None
    if max_stages is not None:
        limit = max_stages if limit is None else min(limit, max_stages)
    floor_cut = pins.floor_cut if pins is not None and pins.any else None
    max_end = pins.max_end if pins is not None and pins.any else None
    ends: list[int] = []
    i = 0
    while i < n:
        k = len(ends)
        if limit is not None and k >= limit:
            return None
        c = capacity[k] if per_stage else capacity
        if c < 0:
            return None
        j = bisect_right(prefix, prefix[i] + c, i, n + 1) - 1
        if max_end is not None:
            j = min(j, max_end[i])
        if floor_cut is not None:
            j = floor_cut[j]
        if j <= i:
            return None
        ends.append(j)
        i = j
    return ends


def min_stages(instance: Instance, capacity: int | None = None) -> int | None:
    """Fewest contiguous stages of the instance's chain on devices of ``capacity`` bytes each
    (default: the largest available device), honouring pins; None when no partition exists."""
    cap = max(instance.capacity_bytes) if capacity is None else capacity
    ends = next_fit_ends(prefix_sums(instance.demand_bytes), cap, pins=chain_pins(instance))
    return None if ends is None else len(ends)


def min_bottleneck_ends(prefix: list[int], capacity, stages: int, *,
                        pins: ChainPins | None = None) -> list[int]:
    """A partition into ``stages`` stages (the minimum for ``capacity``) whose largest stage demand
    is as small as possible: binary search on the bottleneck with the next-fit probe."""
    n = len(prefix) - 1
    per_stage = not isinstance(capacity, int)
    top = max(capacity) if per_stage else capacity

    def probe(b: int) -> list[int] | None:
        cap = [min(c, b) for c in capacity] if per_stage else b
        return next_fit_ends(prefix, cap, pins=pins, max_stages=stages)

    largest = max(prefix[i + 1] - prefix[i] for i in range(n)) if n else 0
    lo = max(largest, -(-prefix[n] // stages)) - 1   # below this no partition into `stages` exists
    hi = top
    best = probe(hi)
    if best is None:
        raise ValueError("capacity admits no partition into the given number of stages")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ends = probe(mid)
        if ends is None:
            lo = mid
        else:
            hi, best = mid, ends
    return best


def _assignment(ends: list[int], path: list[int]) -> list[int]:
    out: list[int] = []
    start = 0
    for k, end in enumerate(ends):
        out.extend([path[k]] * (end - start))
        start = end
    return out


def dp(instance: Instance) -> Result:
    """Exact contiguous placement of a chain (fewest devices, then smallest bottleneck), embedded
    on a minimum-latency device path. See the module docstring for what is proven when."""
    t0 = perf_counter()
    lb = lower_bound(instance)
    if instance.mode == "free":
        return Result("dp", instance.mode, Status.UNKNOWN, lower_bound_devices=lb,
                      message="dp places contiguous stages; use ffd, typepack or cpsat for free mode")
    try:
        pins = chain_pins(instance)
    except PinConflict as exc:
        return Result("dp", instance.mode, Status.INFEASIBLE, lower_bound_devices=lb, message=str(exc),
                      seconds=perf_counter() - t0)
    prefix = prefix_sums(instance.demand_bytes)
    caps = instance.capacity_bytes
    chain = instance.model.is_chain
    identical = len(set(caps)) == 1
    stats: dict = {"chain": chain, "identical_devices": identical}

    def unknown(msg: str) -> Result:
        return Result("dp", instance.mode, Status.UNKNOWN, lower_bound_devices=lb, message=msg,
                      seconds=perf_counter() - t0, stats=stats)

    if identical:
        cap = caps[0]
        ends = next_fit_ends(prefix, cap, pins=pins)
        if ends is None:
            # every node fits (checked before any method), so only a pinned run can overflow
            if not chain:
                return unknown("a pinned run of nodes (in pipeline order) does not fit on one device")
            return Result("dp", instance.mode, Status.INFEASIBLE, lower_bound_devices=lb,
                          seconds=perf_counter() - t0, stats=stats,
                          message="a pinned run of nodes does not fit on one device")
        stages = len(ends)
        ends = min_bottleneck_ends(prefix, cap, stages, pins=pins)
        fixed = _fixed_positions(ends, pins)
        found = find_path(instance, stages, fixed=fixed)
        if found.path is None:
            if found.proven and not fixed and chain:
                return Result("dp", instance.mode, Status.INFEASIBLE, lower_bound_devices=lb,
                              seconds=perf_counter() - t0, stats=stats,
                              message=f"the pipeline needs {stages} stages but the fleet graph has no "
                                      f"simple path of {stages} linked devices")
            return unknown(f"no device path of {stages} linked devices found ({found.how})")
        count_proven = chain
        path = found.path
        stats.update(latency_proven=found.proven, path_search=found.how)
    else:
        if pins.has_devices:
            return unknown("dp along a fixed device order cannot honour device pins on a fleet of "
                           "different devices; use cpsat")
        # a fixed device order: the walk that prefers larger devices, from the largest one
        start = min(range(instance.n_devices), key=lambda d: (-caps[d], d))
        order = _capacity_walk(instance, start)
        ends = next_fit_ends(prefix, [caps[d] for d in order], pins=pins)
        if ends is None:
            return unknown(f"next-fit along a fixed order of {len(order)} devices does not place the chain")
        ends = min_bottleneck_ends(prefix, [caps[d] for d in order[:len(ends)]], len(ends), pins=pins)
        path = order[:len(ends)]
        count_proven = False
        stats.update(latency_proven=False, path_search="fixed device order (largest devices first)")
    assignment = _assignment(ends, path)
    stages = len(ends)
    proven = (count_proven or stages <= lb)
    stats.update(bottleneck_bytes=max(prefix[e] - prefix[s] for s, e in zip([0, *ends], ends)))
    status = Status.OPTIMAL if proven else Status.FEASIBLE
    result = evaluate(instance, assignment, method="dp", status=status, lower_bound=lb,
                      seconds=perf_counter() - t0, proven_optimal=proven, objective=float(stages),
                      bound=float(stages if proven else lb), gap=0.0 if proven else (stages - lb) / stages,
                      stats=stats)
    return result


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


def _capacity_walk(instance: Instance, start: int) -> list[int]:
    """A device order for different devices: from ``start``, the largest unused linked neighbour
    (ties: lower latency, then index) until a dead end."""
    caps = instance.capacity_bytes
    nbrs: dict[int, list[tuple[int, float, int]]] = {}
    for (a, b), lat in instance.link_us.items():
        nbrs.setdefault(a, []).append((-caps[b], lat, b))
    for lst in nbrs.values():
        lst.sort()
    seen = {start}
    order = [start]
    while True:
        for _, _, v in nbrs.get(order[-1], ()):
            if v not in seen:
                seen.add(v)
                order.append(v)
                break
        else:
            return order
