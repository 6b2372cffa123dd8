"""Lower bounds on the number of devices a placement needs.

Every bound here is valid for the instance's mode (a placement using fewer devices cannot exist)
and cheap. Bounds that treat every device as the largest one are relaxations of a heterogeneous
fleet, hence still valid.

* ``volume``: the fewest of the largest devices whose capacities add up to the total demand;
* ``martello_toth_l2``: Martello and Toth's L2 (items above half a device cannot share one; for a
  threshold k, items above ``C - k`` block their device for items of size ``>= k``);
* ``dual_feasible``: Fekete and Schepers' dual feasible functions ``u^(k)``: an item of size x
  counts ``floor((k+1) x / C) / k`` (or ``x / C`` when that is exact); the sum over a device's items
  never exceeds 1. With k = 2 this counts items that fit two but not three per device as halves;
* ``chain``: for contiguous and split chains, the exact fewest stages on devices as large as the
  largest (next-fit; see :mod:`placer.algorithms.chain`), pins included.

A node larger than every device makes every bound ``n_devices + 1`` (no placement on this fleet).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from fractions import Fraction
from itertools import accumulate
from math import ceil

from placer.algorithms.chain import next_fit_ends, prefix_sums
from placer.algorithms.pins import PinConflict, chain_pins
from placer.problem.instance import Instance

__all__ = ["lower_bound", "bounds", "volume_bound", "martello_toth_l2", "dual_feasible_bound"]

_DFF_K = 64          # u^(k) for k = 1..64: beyond, items are small and the volume bound says as much
_DFF_WORK = 400_000  # distinct sizes x k evaluated at most (many distinct sizes: fewer k)


def volume_bound(demand, capacities) -> int:
    """Smallest k such that the k largest capacities add up to the total demand (len + 1 if none)."""
    total = sum(demand)
    if total <= 0:
        return 1 if len(demand) else 0
    acc = 0
    caps = sorted((max(c, 0) for c in capacities), reverse=True)
    for k, c in enumerate(caps, start=1):
        acc += c
        if acc >= total:
            return k
    return len(caps) + 1


def martello_toth_l2(demand, capacity: int) -> int:
    """Martello and Toth's L2 bin-packing bound for bins of ``capacity``."""
    counts = Counter(s for s in demand if s > 0)
    if not counts:
        return 1 if len(demand) else 0
    if capacity <= 0:
        return sum(counts.values())
    sizes = sorted(counts)                       # ascending distinct sizes
    n_before = [0, *accumulate(counts[s] for s in sizes)]
    sum_before = [0, *accumulate(counts[s] * s for s in sizes)]

    def count_sum(lo_excl: int, hi_incl: int) -> tuple[int, int]:
        """Items with lo_excl < size <= hi_incl."""
        a, b = bisect_right(sizes, lo_excl), bisect_right(sizes, hi_incl)
        if b <= a:
            return 0, 0
        return n_before[b] - n_before[a], sum_before[b] - sum_before[a]

    half = capacity // 2                        # size <= C/2  <=>  size <= floor(C/2)
    best = 0
    for k in [0, *(s for s in sizes if s <= half)]:
        n1, _ = count_sum(capacity - k, sizes[-1])
        n2, s2 = count_sum(half, capacity - k)
        n3, s3 = count_sum(k - 1, half)
        room = n2 * capacity - s2
        extra = max(0, -(-(s3 - room) // capacity))
        best = max(best, n1 + n2 + extra)
    return best


def dual_feasible_bound(demand, capacity: int, k_max: int = _DFF_K) -> int:
    """max over k of ceil(sum u^(k)(s / capacity)) (Fekete and Schepers)."""
    counts = Counter(s for s in demand if s > 0)
    if not counts:
        return 1 if len(demand) else 0
    if capacity <= 0:
        return sum(counts.values())
    k_max = max(2, min(k_max, _DFF_WORK // len(counts)))
    best = 0
    for k in range(1, k_max + 1):
        floors = 0
        exact = 0
        for s, n in counts.items():
            if ((k + 1) * s) % capacity == 0:
                exact += n * s
            else:
                floors += n * ((k + 1) * s // capacity)
        value = Fraction(floors, k) + Fraction(exact, capacity)
        best = max(best, ceil(value))
    return best


def _chain_bound(instance: Instance, capacity: int) -> int | None:
    """Fewest stages of the chain on devices of ``capacity`` (pins honoured); None on a pin conflict
    or when a pinned run fits no device."""
    try:
        pins = chain_pins(instance)
    except PinConflict:
        return None
    ends = next_fit_ends(prefix_sums(instance.demand_bytes), capacity, pins=pins)
    return None if ends is None else len(ends)


def bounds(instance: Instance) -> dict[str, int]:
    """Each lower bound on the device count, by name (see the module docstring)."""
    demand = instance.demand_bytes
    caps = instance.capacity_bytes
    n_dev = instance.n_devices
    cmax = max(caps)
    if not demand:
        return {"volume": 0}
    if max(demand) > cmax:
        return {"oversized_node": n_dev + 1}
    out = {
        "volume": volume_bound(demand, caps),
        "martello_toth_l2": martello_toth_l2(demand, cmax),
        "dual_feasible": dual_feasible_bound(demand, cmax),
    }
    if instance.mode != "free" and instance.model.is_chain:
        stages = _chain_bound(instance, cmax)
        if stages is not None:
            out["chain"] = stages
    return out


def lower_bound(instance: Instance) -> int:
    """The strongest of :func:`bounds` (at least 1 for a non-empty model)."""
    return max(bounds(instance).values())
