"""Several models on one fleet, placed jointly: ``placer.plan_fleet(spec)`` (``placer plan-fleet FILE``).

Each model of the fleet plan (:mod:`placer.planning.fleet_plan_file`) is first planned alone on the
whole fleet (:func:`placer.plan`): its proven minimum is the fewest devices any replica of it can
take, wherever it is placed. On a fleet of several device types it is also planned on each type
alone. These minima feed the joint level (:mod:`placer.algorithms.cpsat.joint`): a CP-SAT
relaxation of every joint plan that decides which device types each model's replicas take, whose
optimum is a lower bound on the joint plan's devices (or watts). Each of its solutions, cheapest
first, is then realised: every replica placed by :func:`placer.plan` on the devices of its type
that no earlier replica took (pure-type replicas first, the largest first). A realisation that
meets its solution's cost is optimal among the plans of that solution; the joint plan is proven
when the best realisation costs no more than the first solution not met (every plan not yet
seen costs at least that). Models that compete for scarce racks of one type are thus decided by
the joint CP-SAT, not by solving each alone.

With ``objective: requests`` the joint level is the most requests/s within the fleet and a budget
(devices or MW): each model's replicas (at least its ``replicas``) serve the requests/s one
replica serves alone at its load (simulated once, then a constant of the model), and the
relaxation's most is an upper bound that a realisation of all its replicas meets.

A device hosts layers of one model only. A model marked ``share: true`` may put its layers on the
devices other sharing replicas hold: each of its replicas is first offered those devices, each
with its memory less the bytes already there (the runtime reserve counted once), and takes new
devices only when it does not fit beside them. The validator adds the bytes on a shared device
up. With sharing allowed the disjoint relaxation bounds nothing: the bound is the largest single
model's own minimum.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from placer.mapping.fleet_mapping import build_fleet_mapping, stage_devices
from placer.planning.fleet_plan_file import FleetPlanSpec, ModelEntry, read_fleet_plan
from placer.planning.planner import Plan, plan
from placer.planning.requirements import SolverSettings
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet, load_fleet

__all__ = ["FleetPlan", "ModelPlan", "plan_fleet", "plan_devices"]

MW = 1e6


def plan_devices(p: Plan) -> list[str]:
    """The device ids a plan's replica runs on: every stage's group (or its device), in stage order."""
    doc = p.solved.mapping
    return [d for st in doc["stages"] for d in stage_devices(st)]


@dataclass(frozen=True)
class ModelPlan:
    """One model of the fleet plan: its ``entry``, the plan ``alone`` on the whole fleet, the plans on
    each device type alone (``by_type``; empty on a fleet of one type), and the ``replicas`` placed
    in the joint plan (each a :class:`~placer.planning.planner.Plan` on the devices left to it);
    maximising requests/s, the ``rate`` one replica serves (simulated alone at its load)."""

    entry: ModelEntry
    alone: Plan
    by_type: dict[str, Plan] = field(default_factory=dict)
    replicas: tuple[Plan, ...] = ()
    rate: float | None = None       # requests/s one replica serves (objective requests)

    @property
    def fewest(self) -> int | None:
        """The fewest devices one replica takes anywhere on the fleet (proven, else its lower bound)."""
        return _least(self.alone)

    @property
    def devices(self) -> int:
        """Distinct devices its replicas use (sharing replicas may hold the same device)."""
        return len({d for r in self.replicas for d in plan_devices(r)})


def _least(p: Plan) -> int | None:
    """The fewest devices a replica of ``p``'s model takes on ``p``'s fleet, over every layout the
    plan tried: each layout's proven count, else its devices level's lower bound (0 when nothing
    is known, or a layout was skipped); None when every layout is proven infeasible."""
    counts = [0] if p.skipped else []
    for s in p.tried or ((p.solved,) if p.solved is not None else ()):
        r = s.result
        if str(r.status) == "infeasible":
            continue
        if r.feasible and r.devices_proven:
            counts.append(r.devices_used)
            continue
        level = r.level("devices") if r.feasible else None
        bound = level.bound if level is not None else r.lower_bound_devices
        counts.append(max(1, int(math.ceil(bound))) if bound is not None else 0)
    if not counts:
        return None if p.tried or p.solved is not None else 0
    return min(counts)


@dataclass(frozen=True)
class FleetPlan:
    """The joint plan: ``models`` (each with its replicas placed), the joint level's ``value`` and
    ``bound`` (devices or W, a lower bound; requests/s under ``requests``, an upper bound), whether it is ``proven``, the relaxation's
    solutions tried and the ``message`` when nothing placed."""

    spec: FleetPlanSpec
    fleet: Fleet
    models: tuple[ModelPlan, ...]
    objective: str
    value: float | None
    bound: float | None
    proven: bool
    tried: int = 0
    message: str = ""
    seconds: float = 0.0

    @property
    def feasible(self) -> bool:
        return self.value is not None

    @property
    def devices(self) -> int | None:
        """Distinct devices the plan uses."""
        return len(self.used) if self.feasible else None

    @property
    def used(self) -> set[str]:
        return {d for m in self.models for r in m.replicas for d in plan_devices(r)}

    @property
    def alone_sum(self) -> int | None:
        """The sum over models of replicas x each one's fewest devices alone (None: one cannot place)."""
        counts = [m.fewest for m in self.models]
        return None if None in counts else sum(m.entry.replicas * n for m, n in zip(self.models, counts))

    @property
    def power_w(self) -> float | None:
        if not self.feasible:
            return None
        watts = [self.fleet.by_id[d].type.power_w for d in self.used]
        return None if None in watts else float(sum(watts))

    @property
    def mapping(self) -> dict | None:
        return build_fleet_mapping(self) if self.feasible else None

    def to_dict(self) -> dict:
        return dict(kind="fleet", hardware=self.fleet.name, objective=self.objective, feasible=self.feasible,
                    value=self.value, bound=self.bound, proven=self.proven, devices=self.devices,
                    power_w=self.power_w, alone_sum=self.alone_sum, tried=self.tried, message=self.message,
                    budget=self.spec.budget, budget_unit=self.spec.budget_unit,
                    models=[dict(name=m.entry.name, model=m.entry.model.name, replicas=len(m.replicas),
                                 fewest_alone=m.fewest, devices=m.devices, requests_per_s_per_replica=m.rate,
                                 types={t: _least(p) for t, p in m.by_type.items()})
                            for m in self.models])


def _type_fleet(fleet: Fleet, kind: str) -> Fleet:
    return fleet.without([d.id for d in fleet.devices if d.type.name != kind])


def _weights(fleet: Fleet, objective: str) -> dict[str, int]:
    """The joint level's cost of one device of each type: 1 (devices) or its power in mW, rounded
    down (the relaxation's optimum then stays a lower bound in watts)."""
    types = fleet.device_types
    if objective == "devices":
        return {t: 1 for t in types}
    missing = [t for t, dt in types.items() if dt.power_w is None]
    if missing:
        raise InvalidSpec(ARGUMENT, "objective", f"device type {missing[0]} of {fleet.name} has no power at the "
                                                 f"{fleet.power_label()} boundary (objective mw needs one)")
    return {t: int(math.floor(dt.power_w * 1e3)) for t, dt in types.items()}


def plan_fleet(spec: FleetPlanSpec | str, fleet: Fleet | None = None, solver: SolverSettings | None = None, *,
               log=None) -> FleetPlan:
    """Place every model of ``spec`` (a :class:`FleetPlanSpec` or a plan file's path) on ``fleet``
    (default: the plan's ``hardware`` at its ``racks``), jointly; see the module docstring. Each
    solve runs under ``solver.time_limit``, the whole plan under ``solver.deadline`` (None: four
    time limits from now)."""
    from placer.algorithms.deadline import Deadline

    t0 = time.perf_counter()
    if not isinstance(spec, FleetPlanSpec):
        spec = read_fleet_plan(spec)
    if fleet is None:
        if spec.hardware is None:
            raise InvalidSpec(spec.source, "hardware", "name the fleet (hardware: or -H)")
        fleet = load_fleet(spec.hardware, racks=spec.racks)
    solver = solver or SolverSettings(time_limit=spec.time_limit or 30.0)
    if solver.deadline is None:
        solver = solver.replace(deadline=Deadline.after(4 * solver.time_limit))
    say = log or (lambda line: None)
    weights = _weights(fleet, (spec.budget_unit or "devices") if spec.objective == "requests" else spec.objective)
    supply: dict[str, int] = {}
    for d in fleet.available:
        supply[d.type.name] = supply.get(d.type.name, 0) + 1
    models = []
    for e in spec.models:
        first = plan(e.model, fleet, e.workload, e.requirements, solver)
        fixed = _fixed_shape(e, first)
        # a speed floor's replicas are placed at its shape: their bounds are that shape's
        alone = first if fixed is e else plan(fixed.model, fleet, fixed.workload, fixed.requirements, solver)
        say(f"{e.name}: alone on {fleet.name}: {alone.devices if alone.feasible else 'no placement'}")
        by_type = {}
        if len(supply) > 1 and alone.feasible:
            by_type = {t: plan(fixed.model, _type_fleet(fleet, t), fixed.workload, fixed.requirements, solver)
                       for t in supply}
        rate = _rate(first) if spec.objective == "requests" and first.feasible else None
        models.append(ModelPlan(fixed, alone, by_type, rate=rate))
    unplaced = [m for m in models if not m.alone.feasible]
    if unplaced:
        m = unplaced[0]
        return FleetPlan(spec, fleet, tuple(models), spec.objective, None, None,
                         proven=all(_least(x.alone) is None for x in unplaced),
                         message=f"{m.entry.name}: {m.alone.message or 'no placement on the whole fleet'}",
                         seconds=time.perf_counter() - t0)
    return _joint(spec, fleet, tuple(models), supply, weights, solver, say, t0)


def _rate(alone: Plan) -> float:
    """Requests/s one replica of ``alone`` serves: the simulated tokens/s over each request's
    output tokens (a speed floor's own simulation at its load, else ``placer simulate``'s run of
    the replica's mapping: its traffic, a closed loop at its live requests, prompts prefilled)."""
    sim = alone.simulation
    if sim is None:
        from placer.simulate import simulate_mapping

        sim = simulate_mapping(alone.solved.mapping)
    return sim.aggregate_tokens_per_s / sim.output_tokens


def _fixed_shape(e: ModelEntry, alone: Plan) -> ModelEntry:
    """A speed-floored model as the joint plan places it: the speed search's replicas (times the
    entry's) of the shape it chose (degree, live requests per replica), without the floor (the
    shape meets it, as the search simulated)."""
    if not e.requirements.targets.has_speed_floor or not alone.feasible:
        return e
    inst = alone.instance
    placement = e.requirements.placement.replace(degrees=(inst.tp,), expert_parallel=inst.ep,
                                                 attention_dp=inst.attention_dp)
    targets = e.requirements.targets.replace(min_user_tps=None, max_itl_ms=None, max_ttft_ms=None)
    return replace(e, workload=e.workload.replace(concurrency=alone.load_per_replica or e.workload.concurrency),
                   requirements=e.requirements.replace(placement=placement, targets=targets),
                   replicas=e.replicas * alone.replicas)


def _demands(models: tuple[ModelPlan, ...], supply: dict[str, int], fleet: Fleet):
    """Each model's :class:`~placer.algorithms.cpsat.joint.Demand`: its fewest devices per type and
    anywhere, its bytes at degree 1 (any layout holds at least these between its devices, each
    device of a type holding at most its memory less the runtime reserve) and,
    maximising requests/s, a replica's rate in mrequests/s."""
    from placer.algorithms.cpsat.joint import Demand
    from placer.planning.solve import build_instance

    out = []
    for m in models:
        e = m.entry
        inst = build_instance(e.model, fleet, e.workload, e.requirements)
        capacity: dict[str, int] = {}
        for dev, reserve in zip(inst.devices, inst.reserve_bytes):
            # what any layout's rank may hold there: its memory less the runtime reserve (a
            # layout's activation buffers only take more)
            cap = dev.memory_bytes - reserve
            capacity[dev.type.name] = max(capacity.get(dev.type.name, cap), cap)
        if len(supply) == 1:
            pure = {next(iter(supply)): m.fewest}
        else:
            # a type proven to hold no replica is left out; one not known counts the fewest anywhere
            pure = {t: n or m.fewest for t, p in m.by_type.items() for n in [_least(p)] if n is not None}
        degrees = e.requirements.placement.layout_degrees
        group = degrees[0] if degrees is not None and len(degrees) == 1 else 1
        out.append(Demand(e.replicas, pure, m.fewest, sum(inst.demand_bytes), capacity, group,
                          _milli(m.rate)))
    return out


def _milli(rate: float | None) -> int:
    return 0 if rate is None else int(math.floor(rate * 1e3))


def _joint(spec, fleet, models, supply, weights, solver, say, t0) -> FleetPlan:
    """The relaxation's choices realised best first (see the module docstring): the best
    realisation, and the bound the first choice not met (or the last one seen) sets."""
    from placer.algorithms.cpsat.joint import joint_choices

    maximize = spec.objective == "requests"
    demands = _demands(models, supply, fleet)
    budget = None
    if spec.budget is not None:
        budget = int(spec.budget) if spec.budget_unit == "devices" else int(math.floor(spec.budget * MW * 1e3))
    better = (lambda a, b: a > b) if maximize else (lambda a, b: a < b)
    best, best_value, tried = None, None, 0
    first_unmet = last_seen = None
    exhausted = False
    for choice, proven in joint_choices(demands, supply, weights, budget=budget, maximize=maximize,
                                        time_limit=max(0.1, min(solver.time_limit, solver.deadline.remaining())),
                                        seed=solver.seed):
        if choice is None or not proven:
            exhausted = choice is None and proven
            break                            # no choice left, or the rest unordered: last_seen bounds them
        last_seen = choice.value
        if best_value is not None and not better(choice.value, best_value):
            break                            # no choice left beats the best realisation
        tried += 1
        replicas = _realise(models, choice, fleet, solver)
        value = None
        if replicas is not None and (budget is None or _cost(replicas, fleet, weights) <= budget):
            value = sum(d.rate * len(r) for d, r in zip(demands, replicas)) if maximize else \
                _cost(replicas, fleet, weights)
        say(f"joint choice {tried}: at best {_units(choice.value, spec):g}, realised "
            f"{'nothing' if value is None else format(_units(value, spec), 'g')}")
        if value is not None and (best_value is None or better(value, best_value)):
            best, best_value = replicas, value
        if value != choice.value and first_unmet is None:
            first_unmet = choice.value       # a plan of this choice may still reach this value
        if solver.deadline.expired:
            break
    bounds = [b for b in (first_unmet, None if exhausted else last_seen) if b is not None]
    bound = (max if maximize else min)(bounds) if bounds else (best_value if exhausted else None)
    if best is None:
        infeasible = exhausted and first_unmet is None
        need = sum(m.entry.replicas * (m.fewest or 0) for m in models)
        why = f": the models' replicas alone need {need} devices, the fleet has {len(fleet.available)}" \
            if infeasible and need > len(fleet.available) else ""
        return FleetPlan(spec, fleet, models, spec.objective, None, None if bound is None else _units(bound, spec),
                         proven=infeasible, tried=tried, seconds=time.perf_counter() - t0,
                         message="no joint placement of every model on the fleet" + (
                             " within the budget" if budget is not None else "") + (
                             " exists (proven)" if infeasible else " was found") + why)
    placed = tuple(replace(m, replicas=tuple(r)) for m, r in zip(models, best))
    if any(m.entry.share for m in placed):
        # devices may be shared: the disjoint relaxation bounds nothing; the largest model alone does
        bound = None if maximize else max(m.fewest or 1 for m in placed) * min(weights.values())
    proven = bound is not None and not better(bound, best_value)
    shown = None if bound is None else (max if maximize else min)(bound, best_value)
    return FleetPlan(spec, fleet, placed, spec.objective, _units(best_value, spec),
                     None if shown is None else _units(shown, spec), proven, tried,
                     seconds=time.perf_counter() - t0)


def _units(value: int, spec: FleetPlanSpec) -> float:
    """A joint value in the objective's units: devices, W (from mW) or requests/s (from mrequests/s)."""
    return float(value) if spec.objective == "devices" else value / 1e3


def _cost(replicas: list[list[Plan]], fleet: Fleet, weights: dict[str, int]) -> int:
    """The joint cost of the distinct devices the replicas use."""
    used = {d for rs in replicas for p in rs for d in plan_devices(p)}
    return sum(weights[fleet.by_id[d].type.name] for d in used)


def _realise(models, choice, fleet: Fleet, solver) -> list[list[Plan]] | None:
    """Every replica of ``choice`` placed on devices no other replica holds (pure-type replicas
    first, the largest first; then the mixed ones), or None when one does not place. A model's one
    mixed replica is first offered the devices of each type the relaxation spread it over (the
    first free ones), then, if it does not place there, every free device. A replica of a model
    that allows sharing is first offered the devices earlier sharing replicas hold, beside their
    bytes (:func:`_beside`)."""
    jobs = []
    for k, (m, pure) in enumerate(zip(models, choice.pure)):
        for t, n in pure.items():
            jobs += [(0, -(m.fewest or 0), k, t)] * n
        jobs += [(1, -(m.fewest or 0), k, None)] * choice.mixed[k]
    jobs.sort(key=lambda j: (j[0], j[1], j[2]))
    used: set[str] = set()
    held: dict[str, int] = {}        # devices of sharing replicas: the bytes on each
    out: list[list[Plan]] = [[] for _ in models]
    for _, _, k, kind in jobs:
        e = models[k].entry
        p = _beside_others(e, fleet, held, solver) if e.share and held else None
        if p is None:
            if kind is not None:
                offers = [used | {d.id for d in fleet.devices if d.type.name != kind}]
            else:
                offers = [used]
                if choice.mixed[k] == 1:
                    offers.insert(0, used | _beyond(fleet, used, choice.mixed_devices[k]))
            for taken in offers:
                p = plan(e.model, fleet.without(taken), e.workload, e.requirements, solver)
                if p.feasible:
                    break
            if not p.feasible:
                return None
        used.update(plan_devices(p))
        if e.share:
            for d, n in _bytes_on(p).items():
                held[d] = held.get(d, 0) + n
        out[k].append(p)
    return out


def _bytes_on(p: Plan) -> dict[str, int]:
    """Per device id, the bytes a replica's stages hold there (weights, KV, state, activations)."""
    out: dict[str, int] = {}
    for st in p.solved.mapping["stages"]:
        b = st["bytes"]
        for d in stage_devices(st):
            out[d] = out.get(d, 0) + b["weights"] + b["kv_reserve"] + b["state"] + b["activations"]
    return out


def _beside(fleet: Fleet, held: dict[str, int]) -> Fleet:
    """``fleet`` with only the devices ``held`` available, each with its memory less the bytes
    already there and its runtime reserve fixed at the whole device's (held once per device)."""
    from placer.specs.reserve import Reserve

    devices = []
    for d in fleet.devices:
        if d.id in held and d.available:
            t = d.type
            devices.append(replace(d, type=replace(t, memory_bytes=t.memory_bytes - held[d.id],
                                                   reserve=Reserve(bytes=t.reserve.of(t.memory_bytes)))))
        else:
            devices.append(replace(d, available=False))
    return replace(fleet, devices=tuple(devices))


def _beside_others(e: ModelEntry, fleet: Fleet, held: dict[str, int], solver) -> Plan | None:
    """A replica of ``e`` on the devices sharing replicas hold, beside their bytes (None: it does
    not fit there, or its placement reserves memory by a fraction of its own), its mapping written
    for the real devices (their whole memory; the validator adds the replicas' bytes up)."""
    from placer.planning.solve import Solved, build_instance

    if e.requirements.placement.reserve is not None:
        return None
    p = plan(e.model, _beside(fleet, held), e.workload, e.requirements, solver)
    if not p.feasible:
        return None
    inst = p.instance
    real_fleet = fleet.without([d.id for d in fleet.devices if d.id not in held])
    real = build_instance(p.model, real_fleet, p.workload, p.requirements, tp=inst.tp, ep=inst.ep,
                          attention_dp=inst.attention_dp)
    if real.n_nodes != inst.n_nodes or [d.id for d in real.devices] != [d.id for d in inst.devices]:
        return None
    solved = Solved(real, p.solved.result, p.solved.per_group, p.solved.stages)
    return replace(p, fleet=real_fleet, solved=solved, tried=(solved,))


def _beyond(fleet: Fleet, used: set[str], spread: dict[str, int]) -> set[str]:
    """The free devices past the first ``spread[t]`` free ones of each type ``t`` (all of a type
    the spread leaves out)."""
    left = dict(spread)
    out = set()
    for d in fleet.available:
        if d.id in used:
            continue
        if left.get(d.type.name, 0) > 0:
            left[d.type.name] -= 1
        else:
            out.add(d.id)
    return out
