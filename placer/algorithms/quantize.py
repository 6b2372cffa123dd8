"""Integer sizes for CP-SAT: one unit per instance, conservative rounding, row limits.

CP-SAT works on integers, and OR-Tools 9.15 can silently drop an enforcement literal when the
coefficients of a row sum above 2^31 (google/or-tools#5293, see :mod:`ortools_adapter`). Placer
therefore picks a unit per instance:

* the greatest common divisor of every demand and capacity, when every capacity row
  (sum of all demands + the largest capacity) stays below 2^31 in that unit: no rounding at all;
* otherwise the finest power-of-two unit that keeps the rows below 2^31, rounding demands **up**
  and capacities **down**, so any placement feasible in units is feasible in bytes.

Rounding can only remove placements. :func:`rounding_is_harmless` decides exactly (for few
distinct sizes) whether every set of nodes that fits a device in bytes still fits in units; when
it does, the quantized problem *is* the byte problem and every proof carries over.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import reduce

from placer.specs.errors import SolverLimitError

__all__ = ["ROW_LIMIT", "Quantization", "choose_unit", "check_row", "rounding_is_harmless"]

ROW_LIMIT = 2**31 - 1          # strict limit on any row's sum of |coefficients| (or-tools#5293)
_KNAPSACK_STATES = 200_000     # cap on the exact harmlessness check


@dataclass(frozen=True)
class Quantization:
    """Sizes in ``unit`` bytes: ``demand`` rounded up, ``capacity`` rounded down (negative -> 0), so
    a placement feasible in units is feasible in bytes; and the other way round, ``demand_down``
    rounded down and ``capacity_up`` rounded up, a relaxation: every placement feasible in bytes
    is feasible in those units, so its optimum is a valid bound for the exact problem."""

    unit: int
    demand: tuple[int, ...]
    capacity: tuple[int, ...]
    exact: bool                 # the unit divides every size: no rounding happened
    row_sum: int                # largest capacity-row coefficient sum, in units
    harmless: bool | None       # every byte-feasible node set is unit-feasible (None: not decided)
    demand_down: tuple[int, ...] = ()
    capacity_up: tuple[int, ...] = ()

    @property
    def faithful(self) -> bool:
        """Units and bytes admit the same node sets per device: proofs in units hold in bytes."""
        return bool(self.exact or self.harmless)

    @property
    def rounding_may_cost_device(self) -> bool:
        return not (self.exact or self.harmless)

    def describe(self) -> str:
        how = "exact (gcd)" if self.exact else ("power of two, harmless" if self.harmless
                                                  else "power of two, rounding may matter")
        return f"unit {self.unit} B ({how})"


def _row_sum(demand, capacity, unit: int) -> int:
    up = sum(-(-d // unit) for d in demand)
    return up + max((max(c, 0) // unit for c in capacity), default=0)


def check_row(coefficient_sum: int, what: str) -> None:
    """Raise :class:`SolverLimitError` when a row's coefficient sum reaches 2^31."""
    if coefficient_sum > ROW_LIMIT:
        raise SolverLimitError(
            f"{what}: coefficients sum to {coefficient_sum:,}, beyond 2^31 - 1; CP-SAT 9.15 can then "
            "drop constraints silently (google/or-tools#5293)")


def choose_unit(demand_bytes, capacity_bytes) -> Quantization:
    """The unit for an instance (see module docstring); raises :class:`SolverLimitError` if none works."""
    demand = [int(d) for d in demand_bytes]
    capacity = [int(c) for c in capacity_bytes]
    if any(d < 0 for d in demand):
        raise SolverLimitError("negative node demand cannot be quantized")
    sizes = [d for d in demand if d > 0] + [c for c in capacity if c > 0]
    g = reduce(math.gcd, sizes, 0) or 1
    if _row_sum(demand, capacity, g) <= ROW_LIMIT:
        unit, exact = g, True
    else:
        # the row sum is non-increasing in the unit: find the smallest power of two that works
        total = sum(demand) + max((max(c, 0) for c in capacity), default=0)
        k = max(0, (total // ROW_LIMIT).bit_length() - 1)
        while _row_sum(demand, capacity, 1 << k) > ROW_LIMIT:
            k += 1
            if k > 126:
                raise SolverLimitError(
                    f"{sum(1 for d in demand if d > 0):,} nodes cannot be written as CP-SAT rows below "
                    "2^31 in any unit (google/or-tools#5293)")
        while k > 0 and _row_sum(demand, capacity, 1 << (k - 1)) <= ROW_LIMIT:
            k -= 1
        unit = 1 << k
        exact = all(s % unit == 0 for s in sizes)
    row = _row_sum(demand, capacity, unit)
    check_row(row, "capacity row")
    q_demand = tuple(-(-d // unit) for d in demand)
    q_capacity = tuple(max(c, 0) // unit for c in capacity)
    harmless = True if exact else rounding_is_harmless(demand, capacity, unit)
    down = tuple(d // unit for d in demand)
    up = tuple(-(-max(c, 0) // unit) for c in capacity)
    check_row(sum(down) + max(up, default=0), "capacity row (relaxed)")
    return Quantization(unit=unit, demand=q_demand, capacity=q_capacity, exact=exact, row_sum=row,
                        harmless=harmless, demand_down=down, capacity_up=up)


def rounding_is_harmless(demand_bytes, capacity_bytes, unit: int,
                         max_states: int = _KNAPSACK_STATES) -> bool | None:
    """True when every multiset of nodes that fits a capacity in bytes also fits in ``unit``s.

    A bounded-knapsack sweep over the distinct sizes keeps, per reachable byte sum, the largest
    rounded-up sum reaching it. ``None`` when there are too many reachable sums to decide.
    """
    counts = Counter(int(d) for d in demand_bytes if d > 0)
    for cap in sorted({int(c) for c in capacity_bytes if c > 0}):
        limit_units = cap // unit
        states = {0: 0}      # exact byte sum -> largest rounded sum
        for size, n in sorted(counts.items(), reverse=True):
            if size > cap:
                continue
            q = -(-size // unit)
            new = dict(states)
            for s, qs in states.items():
                for k in range(1, n + 1):
                    t = s + k * size
                    if t > cap:
                        break
                    if new.get(t, -1) < qs + k * q:
                        new[t] = qs + k * q
            states = new
            if len(states) > max_states:
                return None
        if max(states.values()) > limit_units:
            return False
    return True
