"""Spares planned in advance: the fewest devices such that every failure of a kind can be re-placed.

``placer solve ... --survive 1-device | 1-rack`` (:func:`plan_spares`): the plan's own devices plus
spares, as few as a valid re-placement after any one failure of the kind allows.

* **Lower bound.** After a failure the survivors must hold a placement, which needs at least the
  fewest devices N* of the plan. A single device lost: at least N* + 1 devices. A rack lost: with
  at most k devices per rack, at least N* + k, and the racks must hold N* + k devices at k each:
  the smallest such k gives the bound. (Counted in the instance's devices: the groups of a
  tensor-parallel layout, which one failed GPU takes down.)
* **The devices provisioned.** The plan's devices, then spares one at a time, each from the rack
  holding fewest provisioned devices (a rack failure takes the fewest), the one closest to the
  pipeline first, until the bound is met; when a failure then has no re-placement, one more.
* **Every failure checked.** Failures whose devices hold the same weights (device type and the
  weight bytes of every device lost) form a class; one failure of each class is re-placed by
  CP-SAT with the fewest bytes moved first (:func:`placer.planning.replan.replan`); every other one
  by moving each lost device's nodes onto a spare (:func:`placer.algorithms.cpsat.moved.substitute`),
  whose bytes moved are the lost bytes, the least any re-placement moves (proven), or by CP-SAT
  when no spare takes them. Every re-placement is checked by the independent validator.

The count is **proven** when it meets the bound, the plan's device count is proven, and every
failure was re-placed. The pipeline's availability (a series system: every device must be up)
follows from a per-device availability (:data:`AVAILABILITY`, a stated input), without spares
and with them (up while the devices down fit in one failure of the kind).
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.algorithms.cpsat.moved import moved_bytes, substitute
from placer.planning.replan import lost_devices, previous_placement, replan
from placer.planning.requirements import SolverSettings
from placer.planning.solve import Solved
from placer.problem.placement import Status, evaluate
from placer.problem.reductions.tensor_parallel import per_device
from placer.specs.errors import ARGUMENT, InvalidSpec

__all__ = ["SURVIVE", "AVAILABILITY", "AVAILABILITY_SOURCE", "Failure", "Spares", "plan_spares",
           "spares_lower_bound", "availability_with"]

SURVIVE = ("1-device", "1-rack")
# per-device availability when none is stated: one all-cause failure per 5.8 years per GPU (4.7e-4
# per GPU-day: 419 unexpected interruptions on 16,384 H100 over 54 days, Llama 3 paper) and one day
# to repair or replace it (an assumption): 1 - 4.7e-4 = 0.99953
AVAILABILITY = 0.9995
AVAILABILITY_SOURCE = ("0.9995: 4.7e-4 failures per GPU-day (Llama 3 paper, 16,384 H100 over 54 days; the "
                       "project's fleet facts, section 5) and an assumed one day to repair; no wafer failure "
                       "rate is published, so wafers get the same")


@dataclass(frozen=True)
class Failure:
    """One failure: ``failed`` (fleet device ids lost), ``how`` it was re-placed (``"cpsat"``: solved
    with the fewest bytes moved first; ``"spare"``: each lost device's nodes onto a spare, checked),
    the bytes ``moved`` (None: no re-placement), ``proven`` (the bytes moved are the least),
    ``devices`` of the re-placement, the validator's ``violations``, the ``message`` of an
    unplaced failure, and ``like``: the failure of its class solved by CP-SAT (None for that one)."""

    failed: tuple[str, ...]
    how: str
    moved: int | None
    proven: bool
    devices: int | None = None
    violations: tuple = ()
    message: str = ""
    like: tuple[str, ...] | None = None

    @property
    def survived(self) -> bool:
        return self.moved is not None and not self.violations

    def to_dict(self) -> dict:
        return dict(failed=list(self.failed), how=self.how, moved_bytes=self.moved, proven=self.proven,
                    devices=self.devices, violations=[str(v) for v in self.violations], message=self.message,
                    like=None if self.like is None else list(self.like))


@dataclass(frozen=True)
class Spares:
    """The devices a plan needs to survive every failure of a kind (see the module docstring).

    ``plan``: the plan without spares; ``provisioned``: the instance's device indices (the plan's
    and the spares); ``lower_bound``: the bound on their number (None: no fleet survives);
    ``failures``: every failure checked; ``availability``: per device."""

    survive: str
    plan: object
    provisioned: tuple[int, ...]
    lower_bound: int | None
    failures: tuple[Failure, ...]
    availability: float = AVAILABILITY

    @property
    def instance(self):
        return self.plan.instance

    @property
    def used(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.plan.solved.per_group.assignment)))

    @property
    def spares(self) -> tuple[int, ...]:
        return tuple(d for d in self.provisioned if d not in set(self.used))

    @property
    def devices(self) -> int:
        """Fleet devices provisioned (a group counts its devices)."""
        return len(self.provisioned) * self.instance.tp

    @property
    def survives(self) -> bool:
        return bool(self.failures) and all(f.survived for f in self.failures)

    @property
    def proven(self) -> bool:
        return (self.survives and self.lower_bound == len(self.provisioned) and self.plan.devices_proven
                and all(f.proven for f in self.failures))

    @property
    def worst(self) -> Failure | None:
        done = [f for f in self.failures if f.moved is not None]
        return max(done, key=lambda f: f.moved) if done else None

    def pipeline_availability(self, spares: bool) -> float:
        """The share of time the pipeline serves: every device of the plan up (``spares`` False), or
        with the spares, the devices down within one failure of the kind."""
        inst, per = self.instance, self.availability ** self.instance.tp
        if not spares:
            return per ** len(self.used)
        racks = [inst.devices[d].rack for d in self.provisioned]
        return availability_with(per, racks, self.survive)

    def price_per_hour(self, spares: bool) -> float | None:
        """US dollars per hour of the plan's devices (``spares``: and the spares'); None when a type
        has no price."""
        inst = self.instance
        prices = [inst.devices[d].type.price_per_hour for d in (self.provisioned if spares else self.used)]
        return None if None in prices else sum(prices) * inst.tp

    def to_dict(self) -> dict:
        inst = self.instance
        worst = self.worst
        return dict(survive=self.survive, devices=self.devices, plan_devices=len(self.used) * inst.tp,
                    lower_bound=None if self.lower_bound is None else self.lower_bound * inst.tp,
                    proven=self.proven, survives=self.survives,
                    spares=[list(inst.members(d)) for d in self.spares],
                    worst=None if worst is None else worst.to_dict(),
                    availability=dict(per_device=self.availability, source=AVAILABILITY_SOURCE,
                                      without_spares=self.pipeline_availability(False),
                                      with_spares=self.pipeline_availability(True)),
                    price_per_hour=dict(without_spares=self.price_per_hour(False),
                                        with_spares=self.price_per_hour(True)),
                    failures=[f.to_dict() for f in self.failures])


def availability_with(per: float, racks, survive: str) -> float:
    """The chance that the devices down (each down with chance ``1 - per``, independently) fit one
    failure of ``survive``: at most one device down (``1-device``), or all of them in one rack
    (``racks``: each provisioned device's rack)."""
    n = len(racks)
    if survive == "1-device":
        return per ** n + n * per ** (n - 1) * (1 - per)
    counts: dict[int, int] = {}
    for r in racks:
        counts[r] = counts.get(r, 0) + 1
    all_up = per ** n
    return all_up + sum((1 - per ** c) * per ** (n - c) for c in counts.values())


def spares_lower_bound(needed: int, rack_sizes, survive: str) -> int | None:
    """The fewest devices that leave ``needed`` after any failure of ``survive`` on racks of
    ``rack_sizes`` devices (see the module docstring); None when no choice of devices does."""
    if survive == "1-device":
        return needed + 1 if sum(rack_sizes) >= needed + 1 else None
    for k in range(1, max(rack_sizes, default=0) + 1):
        if sum(min(s, k) for s in rack_sizes) >= needed + k:
            return needed + k
    return None


def plan_spares(plan, survive: str, *, solver: SolverSettings | None = None, availability: float = AVAILABILITY,
                extra: int = 2) -> Spares:
    """The devices ``plan`` (a :class:`~placer.planning.planner.Plan` of one pipeline) needs to
    survive every failure of ``survive`` (``1-device`` or ``1-rack``), each failure re-placed and
    validated (see the module docstring); ``solver``: CP-SAT's settings for each re-placement;
    ``extra``: spares added past the bound when a failure finds no re-placement."""
    if survive not in SURVIVE:
        raise InvalidSpec(ARGUMENT, "survive", f"one of {', '.join(SURVIVE)}, got {survive!r}")
    if not 0 < availability <= 1:
        raise InvalidSpec(ARGUMENT, "availability", f"a share of time in (0, 1], got {availability}")
    if plan.pools is not None or plan.speed is not None or plan.per_stage:
        raise InvalidSpec(ARGUMENT, "survive", "spares are planned for one pipeline: not with a speed floor, "
                                               "disaggregated pools or per-stage degrees")
    if not plan.feasible:
        return Spares(survive, plan, (), None, (), availability)
    inst, placed = plan.instance, plan.solved.per_group
    used = sorted(set(placed.assignment))
    needed = len(used) if plan.devices_proven else max(placed.lower_bound_devices or 1, 1)
    sizes: dict[int, int] = {}
    for d in inst.devices:
        sizes[d.rack] = sizes.get(d.rack, 0) + 1
    bound = spares_lower_bound(needed, list(sizes.values()), survive)
    provisioned = list(used)
    while not _enough(inst, provisioned, bound, len(used), survive):
        if not _add_spare(inst, provisioned, survive):
            break
    solver = (solver or SolverSettings()).replace(method="cpsat")
    failures = _check(plan, provisioned, survive, solver)
    for _ in range(extra):
        if all(f.survived for f in failures) or not _add_spare(inst, provisioned, survive):
            break
        failures = _check(plan, provisioned, survive, solver)
    return Spares(survive, plan, tuple(sorted(provisioned)), bound, failures, availability)


def _racks(inst, devices) -> dict[int, int]:
    counts: dict[int, int] = {}
    for d in devices:
        counts[inst.devices[d].rack] = counts.get(inst.devices[d].rack, 0) + 1
    return counts


def _enough(inst, provisioned, bound, used: int, survive: str) -> bool:
    """The bound met, and (a rack lost) the plan's own device count left after the worst rack."""
    if len(provisioned) < (bound if bound is not None else used + 1):
        return False
    return survive == "1-device" or len(provisioned) - max(_racks(inst, provisioned).values()) >= used


def _add_spare(inst, provisioned: list, survive: str) -> bool:
    """One more device: from the rack holding fewest provisioned ones (a rack lost), the one with the
    cheapest hop to the pipeline first. False when every device is provisioned."""
    have = set(provisioned)
    free = [d for d in range(inst.n_devices) if d not in have]
    if not free:
        return False
    counts = _racks(inst, provisioned)

    def key(d):
        near = min((inst.hop_us(d, p) for p in provisioned), default=0.0)
        return (counts.get(inst.devices[d].rack, 0) if survive == "1-rack" else 0, near, d)

    provisioned.append(min(free, key=key))
    return True


def _check(plan, provisioned, survive: str, solver: SolverSettings) -> tuple[Failure, ...]:
    """Every failure of ``survive`` among the ``provisioned`` devices, each re-placed (CP-SAT for
    the first of its class, a spare for the rest) and validated."""
    inst, doc, placed = plan.instance, plan.mapping, plan.solved.per_group
    keep = {m for d in provisioned for m in inst.members(d)}
    fleet = plan.fleet.without([d.id for d in plan.fleet.devices if d.id not in keep])
    before = inst.with_fleet(fleet)
    held: dict[int, int] = {}
    for node, d in enumerate(placed.assignment):
        held[d] = held.get(d, 0) + inst.weight_bytes[node]
    if survive == "1-device":
        cases = [[d] for d in sorted(provisioned)]
    else:
        by_rack: dict[int, list[int]] = {}
        for d in sorted(provisioned):
            by_rack.setdefault(inst.devices[d].rack, []).append(d)
        cases = list(by_rack.values())
    solved: dict[tuple, tuple[str, ...]] = {}
    out = []
    for lost in cases:
        failed = tuple(inst.members(d)[0] for d in lost) if survive == "1-device" else \
            tuple(m for d in lost for m in inst.members(d))
        kind = tuple(sorted((inst.devices[d].type.name, held.get(d, 0)) for d in lost))
        if kind in solved:
            out.append(_by_spare(plan, before, fleet, failed, solver, like=solved[kind]))
        else:
            solved[kind] = failed
            out.append(_by_cpsat(plan, doc, fleet, failed, solver))
    return tuple(out)


def _by_cpsat(plan, doc, fleet, failed, solver, like=None) -> Failure:
    got = replan(doc, failed, model=plan.model, hardware=fleet, solver=solver, fresh=False)
    r = got.solved.result
    level = r.level("moved")
    return Failure(failed, "cpsat", got.moved, bool(level is not None and level.proven),
                   r.devices_used if r.feasible else None, tuple(got.violations),
                   "" if r.feasible else (r.message or str(r.status)), like)


def _by_spare(plan, before, fleet, failed, solver, *, like) -> Failure:
    """Each lost device's nodes onto a spare, checked by the validator (CP-SAT when no spare takes them)."""
    from placer.mapping.validate import validate_mapping

    survivors = fleet.without(lost_devices(before, failed))
    after = before.with_fleet(survivors)
    previous = previous_placement(plan.mapping, after)
    start = substitute(after, previous)
    if start is None:
        return _by_cpsat(plan, plan.mapping, fleet, failed, solver, like)
    placed = evaluate(after, start[0], method="spare", status=Status.HEURISTIC)
    doc = Solved(after, per_device(placed, after), placed).mapping
    violations = tuple(validate_mapping(doc, model=plan.model, fleet=survivors))
    moved = moved_bytes(after, previous, start[0])
    lost = after.tp * sum(w for w, p in zip(after.weight_bytes, previous) if p < 0)
    return Failure(failed, "spare", moved, moved == lost, placed.devices_used * after.tp, violations, "", like)
