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
partition into fewer stages exists, whatever the devices). With different devices the count is
exact for the fixed device order used and proven only when it meets the lower bound.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from time import perf_counter

from ..instance import Instance
from ..placement import Result, Status, evaluate
from .bound import lower_bound as compute_lower_bound
from .paths import find_path, walk
from .pins import ChainPins, PinConflict, chain_pins

__all__ = ["dp", "next_fit_ends", "fixed_order_ends", "min_stages", "min_bottleneck_ends", "prefix_sums"]


def prefix_sums(values) -> list[int]:
    """``[0, v0, v0+v1, ...]`` in exact integers."""
    return [0, *accumulate(values)]


class _Runs:
    """Stage runs ``[s, e)`` of a chain: prefix sums plus the pins' cut rules."""

    def __init__(self, prefix: list[int], pins: ChainPins | None):
        self.prefix = prefix
        self.n = n = len(prefix) - 1
        on = pins is not None and pins.any
        self.floor_cut = pins.floor_cut if on else None
        self.max_end = pins.max_end if on else None
        self._dead: dict[int, list[int]] = {}
        self._by_unit: list[int] | None = None
        self._units: list[int] | None = None
        if on:
            ceil_cut = [n] * (n + 1)
            nxt = n
            for j in range(n, -1, -1):
                if self.floor_cut[j] == j:
                    nxt = j
                ceil_cut[j] = nxt
            self.ceil_cut = ceil_cut
        else:
            self.ceil_cut = None

    def floor(self, j: int) -> int:
        return j if self.floor_cut is None else self.floor_cut[j]

    def ceil(self, j: int) -> int:
        return j if self.ceil_cut is None else self.ceil_cut[j]

    def reach(self, s: int, c: int) -> int:
        """Furthest allowed end of a run from ``s`` that fits ``c`` bytes (``<= s`` when none)."""
        if c < 0:
            return s
        j = bisect_right(self.prefix, self.prefix[s] + c, s, self.n + 1) - 1
        if self.max_end is not None:
            j = min(j, self.max_end[s])
        return self.floor(j)

    def dead(self, c: int) -> list[int]:
        """Sorted allowed starts whose first forced run (a node, or a pinned group) exceeds ``c``."""
        if c not in self._dead:
            if self._by_unit is None:
                starts = [s for s in range(self.n) if self.floor(s) == s]
                unit = {s: self.prefix[self.ceil(s + 1)] - self.prefix[s] for s in starts}
                self._by_unit = sorted(starts, key=lambda s: -unit[s])
                self._units = [-unit[s] for s in self._by_unit]
            k = bisect_left(self._units, -c)      # units strictly above c
            self._dead[c] = sorted(self._by_unit[:k])
        return self._dead[c]


def next_fit_ends(prefix: list[int], capacity: int, *, pins: ChainPins | None = None,
                  max_stages: int | None = None) -> list[int] | None:
    """End positions (exclusive) of the next-fit partition on devices of ``capacity`` bytes: each
    stage takes the longest run that fits. None when a run cannot start (its first forced run does
    not fit) or more than ``max_stages`` stages would be needed."""
    runs = _Runs(prefix, pins)
    n = runs.n
    ends: list[int] = []
    i = 0
    while i < n:
        if max_stages is not None and len(ends) >= max_stages:
            return None
        j = runs.reach(i, capacity)
        if j <= i:
            return None
        ends.append(j)
        i = j
    return ends


def fixed_order_ends(prefix: list[int], capacities, *, pins: ChainPins | None = None) -> list[int] | None:
    """Fewest stages when stage k must run on device k of a fixed order (``capacities[k]`` bytes;
    no device skipped); None when the order admits no partition.

    Next-fit is not exact here (a short first stage can be what lets a small second device take
    the next run), so this tracks every end position reachable after k stages: a union of
    intervals. From a run of starts that can all begin a stage the ends form one interval (the
    furthest reach is monotone in the start), so only the starts whose first forced run exceeds the
    device split an interval.
    """
    runs = _Runs(prefix, pins)
    n = runs.n
    if n == 0:
        return []
    layers: list[list[tuple[int, int]]] = [[(0, 0)]]
    for c in capacities:
        dead = runs.dead(c)
        fresh: list[tuple[int, int]] = []
        for a, b in layers[-1]:
            b = min(b, n - 1)
            lo, idx = a, bisect_left(dead, a)
            while lo <= b:
                cut = dead[idx] if idx < len(dead) and dead[idx] <= b else None
                hi = b if cut is None else cut - 1
                p, q = runs.ceil(lo), runs.floor(hi) if hi >= lo else -1
                if lo <= p <= q:
                    fresh.append((p + 1, runs.reach(q, c)))
                if cut is None:
                    break
                lo, idx = cut + 1, idx + 1
        fresh.sort()
        merged: list[tuple[int, int]] = []
        for a, b in fresh:
            if merged and a <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        if not merged:
            return None
        layers.append(merged)
        if merged[-1][1] >= n:
            break
    else:
        return None
    # walk back: the largest reachable allowed start below the target always reaches it
    ends = [n]
    target = n
    for k in range(len(layers) - 2, 0, -1):
        start = None
        for a, b in reversed(layers[k]):
            if a >= target:
                continue
            cand = runs.floor(min(b, target - 1))
            if cand >= a:
                start = cand
                break
        ends.append(start)
        target = start
    return ends[::-1]


def min_stages(instance: Instance, capacity: int | None = None) -> int | None:
    """Fewest contiguous stages of the instance's chain on devices of ``capacity`` bytes each
    (default: the largest available device), honouring pins; None when no partition exists."""
    cap = max(instance.capacity_bytes) if capacity is None else capacity
    ends = next_fit_ends(prefix_sums(instance.demand_bytes), cap, pins=chain_pins(instance))
    return None if ends is None else len(ends)


def min_bottleneck_ends(prefix: list[int], capacity, stages: int, *,
                        pins: ChainPins | None = None) -> list[int]:
    """A partition into ``stages`` stages (the minimum for ``capacity``: one integer, or one per
    stage along a fixed device order) whose largest stage demand is as small as possible: binary
    search on the bottleneck with the exact stage-count probe."""
    n = len(prefix) - 1
    per_stage = not isinstance(capacity, int)
    top = max(capacity) if per_stage else capacity

    def probe(b: int) -> list[int] | None:
        if per_stage:
            ends = fixed_order_ends(prefix, [min(c, b) for c in capacity[:stages]], pins=pins)
        else:
            ends = next_fit_ends(prefix, b, pins=pins, max_stages=stages)
        return ends

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


def dp(instance: Instance, *, lower_bound: int | None = None) -> Result:
    """Exact contiguous placement of a chain (fewest devices, then smallest bottleneck), embedded
    on a minimum-latency device path. See the module docstring for what is proven when.
    ``lower_bound``: the instance's device lower bound when already known."""
    t0 = perf_counter()
    lb = compute_lower_bound(instance) if lower_bound is None else lower_bound
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
        order = walk(instance, start, prefer="capacity")
        ends = fixed_order_ends(prefix, [caps[d] for d in order], pins=pins)
        if ends is None:
            return unknown(f"no partition along a fixed order of {len(order)} devices places the chain")
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
