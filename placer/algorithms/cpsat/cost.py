"""The ``cost`` level: the devices level weighted by price (US dollars per hour).

Each device type's ``price:`` (:class:`~placer.specs.prices.PriceSpec`) gives a device-hour price;
a device of the instance (a group of ``tp`` devices under tensor parallelism) costs its devices'
prices. The level minimises the price of the devices used, an hour of the whole pipeline: on a
fleet of one device type it orders placements as the device count does, on a mixed fleet it may
take more devices of a cheaper type. Then the devices, the hop latency and the bottleneck with
the price fixed (:mod:`.first`).

The row counts prices exactly, in the smallest unit their decimals allow, when that keeps it
within CP-SAT's row limit; else in rounded-down units (a bound then stays a lower bound in
dollars, and a placement is proven only when its exact price meets it). Twin devices have the
same type, hence the same price: the symmetry broken among them stays a symmetry.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import reduce

from placer.algorithms.cpsat.first import First, after_first, first_model, unplaced
from placer.algorithms.cpsat.levels import Built, solve_level
from placer.algorithms.cpsat.run import LIGHT_F1, LIGHT_F2, Run, acceptable
from placer.algorithms.quantize import ROW_LIMIT
from placer.problem.instance import Instance
from placer.problem.placement import Result
from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["cost_levels", "device_prices", "price_of"]


def device_prices(instance: Instance) -> list[Fraction]:
    """US dollars per hour of each device of ``instance`` (a group: its devices' sum), exactly as the
    specs write them; :class:`InvalidSpec` (``objective``) naming a device type without a price."""
    out = []
    for d in instance.devices:
        if d.type.price_per_hour is None:
            raise InvalidSpec(ARGUMENT, "objective", f"device type {d.type.name} of {instance.fleet.name} has no "
                                                     f"price: block (the cost objective needs one for every type)")
        out.append(Fraction(repr(d.type.price_per_hour)) * instance.tp)
    return out


def price_of(instance: Instance, assignment) -> float:
    """US dollars per hour of the devices ``assignment`` uses."""
    prices = device_prices(instance)
    return float(sum(prices[d] for d in set(assignment)))


class _Row:
    """The price of the devices used as a row over ``used``: ``coef[d]`` units of ``unit`` dollars
    per hour (exact when ``exact``)."""

    def __init__(self, instance: Instance):
        self.prices = device_prices(instance)
        den = reduce(math.lcm, (p.denominator for p in self.prices), 1)
        ints = [int(p * den) for p in self.prices]
        g = reduce(math.gcd, ints, 0) or 1
        coef = [c // g for c in ints]
        step = max(1, -(-sum(coef) // ROW_LIMIT))
        self.exact = step == 1
        self.coef = [c // step for c in coef]
        self.unit = Fraction(g * step, den)

    def expr(self, model):
        return sum(c * u for c, u in zip(self.coef, model.used) if c)

    def units(self, assignment) -> int:
        return sum(self.coef[d] for d in set(assignment))

    def exact_price(self, assignment) -> Fraction:
        return sum((self.prices[d] for d in set(assignment)), Fraction(0))


def cost_levels(run: Run) -> Result:
    """The levels of ``run.order`` with ``cost`` first (see the module docstring)."""
    instance = run.instance
    kind = "free" if instance.mode == "free" else "contiguous"
    light = LIGHT_F1 if kind == "free" else LIGHT_F2
    row = _Row(instance)
    run.stats.update(strategy=f"cost first ({'F1' if kind == 'free' else 'F2'})", cost_unit=float(row.unit),
                     cost_exact=row.exact)
    first = First("cost", row.expr, row.units, row.exact_price)
    model = first_model(run, kind, first)
    target = run.lower * min(row.coef)           # at least run.lower devices, none cheaper than the cheapest
    found = solve_level(run, "cost", lambda p: Built(model(p), lambda m: m.lead, ordered=kind != "free"),
                        start=_start(run, kind), value=row.units, target=target, light=light)
    refused = unplaced(run, kind, found)
    if refused is not None:
        return refused
    best = found.best
    value = row.exact_price(best[0])
    level = dict(value=float(value), bound=None, proven=False)
    if found.bound is not None:
        bound = found.bound * row.unit
        proven = value <= bound
        level = dict(value=float(value), bound=float(value if proven else min(bound, value)), proven=proven)
    return after_first(run, model, first, best, row.units(best[0]), {"cost": level}, kind, light)


def _start(run: Run, kind: str):
    """A placement to start from: the caller's hint (a concurrency search passes the last one), else
    the fewest-device baselines' (valid in bytes, contiguous ones in a pipeline order the model
    takes), or None."""
    from placer.algorithms.check import stage_order
    from placer.algorithms.dp import dp
    from placer.algorithms.ffd import ffd
    from placer.algorithms.greedy import greedy

    instance = run.instance
    tries = [run.user_hint] if run.user_hint is not None else []
    tries += list((ffd,) if kind == "free" else (dp, greedy))
    for way in tries:
        got = way if isinstance(way, list) else way(instance, lower_bound=run.lower).assignment
        if got is None or not acceptable(instance, got):
            continue
        if kind == "free":
            return list(got), None
        order = stage_order(instance, got)
        pos = {d: k for k, d in enumerate(order or ())}
        if order is not None and (not instance.model.is_chain or all(
                0 <= pos[got[v]] - pos[got[u]] <= 1 for u, v in instance.edges)):
            return list(got), order
    return None
