"""The joint level of several models on one fleet: which device types each model's replicas take.

A relaxation of every joint plan, solved exactly by CP-SAT. Each model ``i`` has ``replicas``
pipelines to place on disjoint devices; one replica placed on devices of type ``t`` alone takes at
least ``pure[t]`` devices (that type's proven minimum, or its lower bound), and a replica on any
mix of types at least ``mixed`` devices (the model's minimum on the whole fleet). A joint plan
gives each replica one of these kinds, and its devices of each type are then at least what
:func:`joint_choices` counts (a mixed replica's devices are spread over the types by the
solver), so the relaxation's optimum is a lower bound on every joint plan's devices (or watts:
each device weighted by its type's power), within the fleet's supply of each type and an
optional budget.

:func:`joint_choices` yields the relaxation's solutions in nondecreasing cost (each found by
excluding the earlier ones), the planner realises them one by one
(:mod:`placer.planning.fleet_plan`): a realisation that meets its choice's cost is optimal among
the joint plans of that choice, and the first choice not met bounds every plan still unseen.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ortools.sat.python import cp_model

from placer.algorithms.ortools_adapter import parameters, solve

__all__ = ["Demand", "Choice", "joint_choices"]


@dataclass(frozen=True)
class Demand:
    """One model's replicas and the fewest devices a replica takes: ``pure`` per device type
    (types it cannot use alone are absent), ``mixed`` on any mix of types (None: it is not
    placed across types), and the ``bytes`` any replica's devices hold between them, one device of
    type ``t`` holding at most ``capacity[t]``; with one tensor-parallel degree allowed, a replica's
    devices of each type come in whole groups of ``group`` (a group is of one node, one type).
    Maximising, ``replicas`` is the fewest and each replica serves ``rate``."""

    replicas: int
    pure: dict[str, int]
    mixed: int | None
    bytes: int = 0          # a replica's bytes (weights, KV and state at its concurrency): its devices hold them
    capacity: dict[str, int] | None = None     # per type: the bytes one device holds for a replica
    group: int = 1          # every stage a group of this many devices of one node (one degree allowed)
    rate: int = 0           # what one replica serves (the maximised objective's units), 0: not maximised


@dataclass(frozen=True)
class Choice:
    """A solution of the relaxation: per model, replicas per device type (``pure``), replicas
    across types (``mixed``) and the devices per type those mixed replicas take at least
    (``mixed_devices``); ``cost`` in the weights' units (devices, or milliwatts); ``value``: the
    objective (``cost`` when minimising, the replicas' rates when maximising)."""

    pure: tuple[dict[str, int], ...]
    mixed: tuple[int, ...]
    mixed_devices: tuple[dict[str, int], ...]
    cost: int
    value: int

    def devices(self, demands: list[Demand]) -> int:
        return sum(n * d.pure[t] for d, p in zip(demands, self.pure) for t, n in p.items()) + \
            sum(sum(m.values()) for m in self.mixed_devices)


def joint_choices(demands: list[Demand], supply: dict[str, int], weight: dict[str, int], *,
                  budget: int | None = None, maximize: bool = False, time_limit: float = 10.0, seed: int = 0,
                  limit: int = 20) -> Iterator[tuple[Choice | None, bool]]:
    """The relaxation's solutions, cheapest first (``maximize``: the most replicas' rates within the
    fleet and the budget, highest first): ``(choice, proven)`` pairs, ``proven`` when CP-SAT proved
    the choice the best of those not yet yielded; ``(None, True)`` when no
    choice is left (the relaxation proven infeasible), ``(None, False)`` when the time ran out
    before one was found. ``weight[t]``: the cost of one device of type ``t`` (1 counts devices);
    ``budget``: the most the plan may cost in those units. Mixed replicas' devices hold their
    bytes between them, and each mixed replica takes devices of two types at least (else it is a
    pure one). At most ``limit`` choices."""
    types = sorted(supply)
    m = cp_model.CpModel()
    pure, mixed, spread, served = [], [], [], []
    use = {t: [] for t in types}
    cost = []
    for i, d in enumerate(demands):
        most = max(d.replicas, supply_total(supply) // max(1, min([*d.pure.values(), d.mixed or 1]))) \
            if maximize else d.replicas
        n = m.NewIntVar(d.replicas, most, f"replicas_{i}")
        served.append(d.rate * n)
        p = {t: m.NewIntVar(0, most, f"pure_{i}_{t}") for t in types if t in d.pure}
        x = m.NewIntVar(0, most if d.mixed is not None and len(types) > 1 else 0, f"mixed_{i}")
        y = {t: m.NewIntVar(0, supply[t], f"spread_{i}_{t}") for t in types}
        if d.group > 1:
            for t in types:
                groups = m.NewIntVar(0, supply[t] // d.group, f"groups_{i}_{t}")
                m.Add(y[t] == d.group * groups)
        m.Add(sum(p.values()) + x == n)
        m.Add(sum(y.values()) >= (d.mixed or 0) * x)
        m.Add(sum(y.values()) <= supply_total(supply) * x)
        if d.capacity is not None and d.bytes:
            m.Add(sum(y[t] * max(0, d.capacity.get(t, 0)) for t in types) >= d.bytes * x)
        if len(types) > 1:
            some = m.NewBoolVar(f"mixed_some_{i}")
            m.Add(x >= 1).OnlyEnforceIf(some)
            m.Add(x == 0).OnlyEnforceIf(some.Not())
            present = []
            for t in types:
                b = m.NewBoolVar(f"mixed_{i}_has_{t}")
                m.Add(y[t] >= 1).OnlyEnforceIf(b)
                present.append(b)
            m.Add(sum(present) >= 2).OnlyEnforceIf(some)
        for t in types:
            taken = y[t] + (p[t] * d.pure[t] if t in p else 0)
            use[t].append(taken)
            cost.append(weight[t] * taken)
        pure.append(p)
        mixed.append(x)
        spread.append(y)
    for t in types:
        m.Add(sum(use[t]) <= supply[t])
    total = sum(cost)
    if budget is not None:
        m.Add(total <= budget)
    if maximize:
        m.Maximize(sum(served))
    else:
        m.Minimize(total)
    watch = {"pure": [v for p in pure for v in p.values()], "mixed": mixed,
             "spread": [v for y in spread for v in y.values()]}
    for _ in range(limit):
        out = solve(m, watch, params=parameters(time_limit=time_limit, seed=seed, threads=1))
        if not out.has_solution:
            yield None, out.status == "INFEASIBLE"
            return
        values = iter(out.values["pure"])
        chosen_pure = tuple({t: next(values) for t in p} for p in pure)
        spread_values = iter(out.values["spread"])
        chosen_spread = tuple({t: next(spread_values) for t in y} for y in spread)
        spent = sum(weight[t] * (n * d.pure[t]) for d, p in zip(demands, chosen_pure) for t, n in p.items()) + \
            sum(weight[t] * n for y in chosen_spread for t, n in y.items())
        choice = Choice(tuple({t: n for t, n in p.items() if n} for p in chosen_pure),
                        tuple(out.values["mixed"]), tuple({t: n for t, n in s.items() if n} for s in chosen_spread),
                        spent, int(round(out.objective)))
        yield choice, out.proven
        _exclude(m, pure, mixed, chosen_pure, out.values["mixed"])


def supply_total(supply: dict[str, int]) -> int:
    return sum(supply.values())


def _exclude(m: cp_model.CpModel, pure: list[dict], mixed: list, chosen_pure: tuple[dict, ...], chosen_mixed) -> None:
    """No later solution gives every model the same replicas per type and across types."""
    same = []
    for p, chosen in zip(pure, chosen_pure):
        for t, var in p.items():
            b = m.NewBoolVar("")
            m.Add(var == chosen[t]).OnlyEnforceIf(b)
            m.Add(var != chosen[t]).OnlyEnforceIf(b.Not())
            same.append(b)
    for var, value in zip(mixed, chosen_mixed):
        b = m.NewBoolVar("")
        m.Add(var == value).OnlyEnforceIf(b)
        m.Add(var != value).OnlyEnforceIf(b.Not())
        same.append(b)
    m.AddBoolOr([b.Not() for b in same])
