"""Re-placement after failures: ``placer.replan(plan_or_mapping, failed)``.

A plan's devices fail (one device, a GPU of a tensor-parallel group, a whole rack); the model must
be placed again on what is left, and every weight byte placed on a device that did not hold it
before must be loaded from storage. :func:`replan` reads the requirements back from the mapping
document (model, hardware, workload, mode and granularity, pins, ``require``, tensor-parallel
degree, expert parallelism, reserve), takes the failed devices out of the fleet, and solves with
CP-SAT's ``moved`` level first (:mod:`placer.algorithms.cpsat.moved`): the fewest weight bytes
loaded anew, then the fewest devices, the guaranteed concurrency and the hop latency, each
proven or with its bound. The new mapping is checked by the independent validator
(:func:`placer.mapping.validate.validate_mapping`) on the surviving fleet. Beside it, a fresh
solve on the survivors (the plan ``placer solve`` would make there) and the bytes it would move,
and the time to reload either at a stated storage bandwidth (:data:`RELOAD_BANDWIDTH`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from placer.algorithms.cpsat.moved import Previous, moved_bytes
from placer.algorithms.objectives import DEFAULT_OBJECTIVE
from placer.planning.requirements import SolverSettings
from placer.planning.solve import Solved, place_instance
from placer.problem.instance import Instance
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet

__all__ = ["RELOAD_BANDWIDTH", "RELOAD_SOURCE", "REPLAN_OBJECTIVE", "Replan", "replan", "failed_devices",
           "previous_placement", "mapping_of", "lost_devices"]

# the storage read rate assumed for reloading weights, bytes/s (--reload-bandwidth overrides it)
RELOAD_BANDWIDTH = 26.4e9
RELOAD_SOURCE = ("26.4 GB/s: NVMe to GPU with GPUDirect Storage, one loader (fastsafetensors README, "
                 "unverified; the project's fleet facts, sections 3d and 5)")
# the re-placement's levels: the bytes loaded anew first, then what placer solve minimises
REPLAN_OBJECTIVE = "moved," + DEFAULT_OBJECTIVE


@dataclass(frozen=True)
class Replan:
    """A re-placement: ``failed`` (device ids taken out), ``before`` (the mapping's instance on the
    whole fleet), ``instance`` (on the survivors), ``previous`` (per node of ``instance``: the device
    index that held it, or a negative number for a lost device), ``solved`` (moved bytes first),
    ``fresh`` (a fresh solve on the survivors; None when not asked), the bytes each moves, the
    validator's ``violations`` of the new mapping, and the ``bandwidth`` (B/s) reloads are timed at."""

    failed: tuple[str, ...]
    before: Instance
    instance: Instance
    previous: tuple[int, ...]
    solved: Solved
    fresh: Solved | None
    moved: int | None
    fresh_moved: int | None
    violations: tuple = ()
    bandwidth: float = RELOAD_BANDWIDTH

    @property
    def feasible(self) -> bool:
        return self.solved.result.feasible

    @property
    def proven(self) -> bool:
        return self.feasible and self.solved.result.proven_optimal

    @property
    def mapping(self) -> dict | None:
        return self.solved.mapping

    def reload_seconds(self, n_bytes: int | None) -> float | None:
        return None if n_bytes is None else n_bytes / self.bandwidth

    def to_dict(self) -> dict:
        """JSON-ready: the failures, both plans' devices, levels and bytes moved, and the reload times."""
        def plan_doc(s: Solved | None, moved: int | None) -> dict | None:
            if s is None:
                return None
            r = s.result
            return dict(status=str(r.status), devices=r.devices_used, proven=r.proven_optimal,
                        moved_bytes=moved, reload_seconds=self.reload_seconds(moved),
                        levels=[lv.to_dict() for lv in r.levels], message=r.message)
        return dict(model=self.before.model.name, hardware=self.before.fleet.name, failed=list(self.failed),
                    reload_bandwidth=self.bandwidth, replan=plan_doc(self.solved, self.moved),
                    fresh=plan_doc(self.fresh, self.fresh_moved),
                    violations=[str(v) for v in self.violations])


def mapping_of(plan_or_mapping) -> tuple[dict, str]:
    """(the mapping document, where it came from) of a :class:`~placer.planning.planner.Plan`, a
    mapping dict or a mapping file; :class:`InvalidSpec` naming the file and field otherwise."""
    from placer.mapping import read_mapping

    if isinstance(plan_or_mapping, (str, os.PathLike)):
        return read_mapping(plan_or_mapping), str(plan_or_mapping)
    if isinstance(plan_or_mapping, dict):
        from placer.mapping.schema import check_mapping

        return check_mapping(plan_or_mapping, "<mapping>"), "<mapping>"
    doc = getattr(plan_or_mapping, "mapping", None)
    if not isinstance(doc, dict):
        raise InvalidSpec("<plan>", "mapping", "the plan holds no placement to re-place")
    return doc, "<plan>"


def failed_devices(fleet: Fleet, failed) -> tuple[str, ...]:
    """The device ids ``failed`` names: device ids of ``fleet`` or ``rack:N`` (every device of rack
    N); :class:`InvalidSpec` (``--failed``) for an unknown one or none at all."""
    out: list[str] = []
    racks = sorted({d.rack for d in fleet.devices})
    for item in failed:
        text = str(item).strip()
        if text.startswith("rack:"):
            try:
                rack = int(text[5:])
            except ValueError:
                raise InvalidSpec(ARGUMENT, "failed", f"{text!r}: a rack is rack:N, N a number") from None
            if rack not in racks:
                raise InvalidSpec(ARGUMENT, "failed", f"{text!r}: {fleet.name} has racks {racks[0]}..{racks[-1]}")
            ids = [d.id for d in fleet.devices if d.rack == rack]
        elif text in fleet.by_id:
            ids = [text]
        else:
            raise InvalidSpec(ARGUMENT, "failed", f"{text!r} is no device of {fleet.name} (a device id such as "
                                                    f"{fleet.devices[0].id}, or rack:N)")
        out += [i for i in ids if i not in out]
    if not out:
        raise InvalidSpec(ARGUMENT, "failed", "name at least one failed device or rack")
    return tuple(out)


def lost_devices(instance: Instance, failed) -> tuple[str, ...]:
    """The fleet devices out of service when ``failed`` fail: each failed device's whole group under
    tensor parallelism (its other members stay idle; the other groups keep their members)."""
    lost = list(dict.fromkeys(failed))
    groups = instance.layout.groups if instance.layout is not None else ()
    for members in groups or ():
        if set(members) & set(failed):
            lost += [m for m in members if m not in lost]
    return tuple(lost)


def previous_placement(doc: dict, instance: Instance) -> tuple[int, ...]:
    """Per node of ``instance``: the index of the device (group) that held it in ``doc``, or
    -(k + 1) when stage k's device (or a member of its group) is no longer among ``instance``'s."""
    index = {tuple(instance.members(j)): j for j in range(instance.n_devices)}
    names = {x.name: i for i, x in enumerate(instance.nodes)}
    previous = [None] * instance.n_nodes
    for k, st in enumerate(doc["stages"]):
        members = tuple((st.get("group") or {}).get("devices") or [st["device"]])
        j = index.get(members, -(k + 1))
        for name in st["layers"]:
            if name not in names:
                raise InvalidSpec("<mapping>", f"/stages/{k}/layers", f"{name!r} is no node of the plan's model")
            previous[names[name]] = j
    missing = [instance.nodes[i].name for i, p in enumerate(previous) if p is None]
    if missing:
        raise InvalidSpec("<mapping>", "/stages", f"{missing[0]} is on no stage")
    return tuple(previous)


def replan(plan_or_mapping, failed, *, model=None, hardware=None, solver: SolverSettings | None = None,
           fresh: bool = True, bandwidth: float = RELOAD_BANDWIDTH) -> Replan:
    """Place the plan again without the ``failed`` devices (ids or ``rack:N``): fewest weight bytes
    loaded anew, then devices, concurrency and hop latency (see the module docstring).

    ``plan_or_mapping``: a Plan, a mapping document or its file; ``model`` / ``hardware`` override
    the specs the mapping (or the Plan) names; ``solver``: CP-SAT's settings (time limit, seed, threads, progress,
    deadline) for each of the two solves; ``fresh``: also solve afresh on the survivors;
    ``bandwidth``: B/s from storage for the reload times.
    """
    from placer.mapping import instance_from_mapping
    from placer.mapping.validate import validate_mapping

    if not bandwidth > 0:
        raise InvalidSpec(ARGUMENT, "reload_bandwidth", "a positive rate")
    doc, _ = mapping_of(plan_or_mapping)
    if not isinstance(plan_or_mapping, (str, os.PathLike, dict)):     # a Plan: its own specs
        model = model if model is not None else plan_or_mapping.model
        hardware = hardware if hardware is not None else plan_or_mapping.fleet
    if doc.get("kind") == "disaggregated":
        raise InvalidSpec("<mapping>", "/kind", "a disaggregated plan: re-place each pool's own mapping")
    if (doc.get("parallel") or {}).get("per_stage"):
        raise InvalidSpec("<mapping>", "/parallel/per_stage", "re-placement of per-stage plans is not supported")
    spec_model, fleet, _, before = instance_from_mapping(doc, model=model, hardware=hardware)
    ids = failed_devices(fleet, failed)
    survivors = fleet.without(lost_devices(before, ids))
    if not survivors.available:
        raise InvalidSpec(ARGUMENT, "failed", f"every device of {fleet.name} failed")
    after = before.with_fleet(survivors)
    previous = previous_placement(doc, after)
    solver = (solver or SolverSettings()).replace(method="cpsat")
    solved = place_instance(after, solver, method="cpsat", objective=REPLAN_OBJECTIVE, hint=Previous(previous))
    moved = moved_bytes(after, previous, solved.per_group.assignment) if solved.result.feasible else None
    violations = ()
    if solved.mapping is not None:
        violations = tuple(validate_mapping(solved.mapping, model=spec_model, fleet=survivors))
    again, again_moved = None, None
    if fresh:
        again = place_instance(after, solver, method="cpsat", objective=DEFAULT_OBJECTIVE)
        if again.result.feasible:
            again_moved = moved_bytes(after, previous, again.per_group.assignment)
    return Replan(ids, before, after, previous, solved, again, moved, again_moved, violations, float(bandwidth))
