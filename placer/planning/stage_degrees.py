"""Per-stage tensor-parallel degrees (``placer solve --per-stage-tp``): every stage a group of g
devices of one node, g chosen per stage from the allowed degrees, for fleets and runtimes that
allow it (mixed GPU types; vLLM and SGLang take one degree for all stages).

:func:`solve_per_stage` builds the exact problem of :mod:`placer.algorithms.stage_degrees` from the
specs (per degree the per-rank bytes of every layer, :mod:`placer.problem.parallel`; per node of the
fleet its available devices and per-rank capacity), solves it, and turns the plan into a
placement of a *plan instance* (:func:`placer.problem.instance.per_stage_instance`): an ordinary :class:`~placer.problem.instance.Instance`
whose devices are the plan's groups and whose nodes are one rank's share of each layer at the
degree of the stage holding it. That instance is what the exact re-check, the mapping, the
simulator and the exporters read, so a per-stage plan goes through the same pipeline as any other.

Device counts count devices (the sum of the degrees). Contiguous mode only (a stage is a range
of layers); pins are not supported with per-stage degrees. Hop latency between two groups is the
node pair's: the fleet must link every device pair of two nodes alike (``inter_rack_topology:
full`` without extra links does), else which devices form a group would change a hop and the
request is refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.algorithms.deadline import interrupt_scope
from placer.algorithms.registry import parse_objective
from placer.algorithms.stage_degrees import FleetNode, PerStageProblem, solve_problem
from placer.planning.layouts import device_layouts
from placer.planning.requirements import Requirements, SolverSettings
from placer.planning.solve import Solved
from placer.problem.instance import REQUIREMENTS, Instance, Layout, per_stage_instance
from placer.problem.parallel import shard_model
from placer.problem.placement import Result, Status, evaluate
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.reserve import Reserve
from placer.specs.workload import Workload

__all__ = ["PerStageSolved", "per_stage_degrees", "per_stage_problem", "solve_per_stage", "fleet_nodes"]


@dataclass(frozen=True)
class PerStageSolved(Solved):
    """A per-stage solve: the plan instance and placement (None without a plan), the result
    (device figures in devices), its stage mapping (:attr:`Solved.mapping`), and the problem solved."""

    problem: PerStageProblem | None = None
    refused: dict | None = None


def fleet_nodes(fleet: Fleet) -> list[tuple[int, str, tuple[str, ...]]]:
    """(rack, device type, available device ids in slot order) per node of one device type."""
    out: dict[tuple[int, str], list] = {}
    for d in fleet.available:
        out.setdefault((d.rack, d.type.name), []).append(d)
    return [(rack, t, tuple(d.id for d in sorted(ds, key=lambda d: d.slot))) for (rack, t), ds in sorted(out.items())]


def per_stage_degrees(model: LayerGraph, fleet: Fleet, ep: bool = False, workload: Workload | None = None
                      ) -> tuple[list[int], dict[int, str]]:
    """The degrees ``--per-stage-tp`` tries unless told: every divisor of some node's size that the
    model allows (1 on wafer fleets). Returns (degrees, {refused degree: reason})."""
    found = device_layouts(model, fleet, ep=ep, workload=workload, per_stage=True)
    return found.degrees, found.refused_degrees(bool(ep))


def _node_latencies(fleet: Fleet, nodes) -> list[list[float | None]]:
    """Hop latency between groups of two nodes (and inside one); :class:`InvalidSpec` when some pair of
    nodes links its device pairs unevenly (then the devices of a group would matter)."""
    where = {}
    for u, (_, _, ids) in enumerate(nodes):
        for i in ids:
            where[i] = u
    seen: dict[tuple[int, int], list] = {}
    for a, b, data in fleet.graph.edges(data=True):
        if a not in where or b not in where:
            continue
        u, v = sorted((where[a], where[b]))
        seen.setdefault((u, v), []).append(data["latency_us"])
    out: list[list[float | None]] = [[None] * len(nodes) for _ in nodes]
    for u in range(len(nodes)):
        for v in range(u, len(nodes)):
            lats = seen.get((u, v), [])
            su, sv = len(nodes[u][2]), len(nodes[v][2])
            pairs = su * (su - 1) // 2 if u == v else su * sv
            if not lats:
                continue
            if len(lats) != pairs or len(set(lats)) != 1:
                what = f"inside rack {nodes[u][0]}" if u == v else f"between racks {nodes[u][0]} and {nodes[v][0]}"
                raise InvalidSpec(fleet.source or fleet.name, "fleet.inter_rack_topology",
                                  f"{fleet.name}: device pairs {what} are not all linked alike ({len(lats)} of "
                                  f"{pairs} linked, latencies {sorted(set(lats))}); per-stage degrees need every "
                                  "device pair of two nodes linked at one latency (inter_rack_topology: full)")
            out[u][v] = out[v][u] = lats[0]
    return out


def per_stage_problem(model: LayerGraph, fleet: Fleet, workload: Workload, degrees, *, ep: bool = False,
                      reserve: Reserve | None = None, require=()) -> PerStageProblem:
    """The exact per-stage problem: per degree the per-rank bytes of every layer, per node of the
    fleet its per-rank capacity at each degree (the same arithmetic as the uniform reduction)."""
    nodes = fleet_nodes(fleet)
    weights, requests, capacity = {}, {}, {}
    for g in degrees:
        inst = Instance(shard_model(model, workload, g, ep), fleet, workload, layout=Layout(1, False, reserve))
        weights[g], requests[g] = inst.weight_bytes, inst.request_bytes
        index = inst.device_index
        capacity[g] = [min(inst.capacity_bytes[index[i]] for i in ids) for _, _, ids in nodes]
    attention = None
    if "attention-per-stage" in require:
        attention = Instance(model, fleet, workload).attention_nodes
    fleet_list = tuple(FleetNode(rack, t, ids, {g: capacity[g][u] for g in degrees})
                       for u, (rack, t, ids) in enumerate(nodes))
    return PerStageProblem(n=len(model.layers), degrees=tuple(degrees), weights=weights, requests=requests,
                           concurrency=workload.concurrency, nodes=fleet_list,
                           latency=tuple(tuple(row) for row in _node_latencies(fleet, nodes)), attention=attention)


def _refuse(model: LayerGraph, fleet: Fleet, mode, pins, objective):
    if mode not in (None, "contiguous"):
        raise InvalidSpec(ARGUMENT, "mode", "per-stage degrees place contiguous stages; use --mode contiguous")
    if pins:
        raise InvalidSpec(ARGUMENT, "pins", "pins are not supported with --per-stage-tp")
    if not model.is_chain:
        raise InvalidSpec(ARGUMENT, "model", f"{model.name} is not a chain of layers; per-stage degrees "
                                           "cut a chain into stages")
    try:
        order = parse_objective(objective)
    except ValueError as exc:
        raise InvalidSpec(ARGUMENT, "objective", str(exc)) from None
    if "bottleneck" in order:
        raise InvalidSpec(ARGUMENT, "objective", "per-stage degrees solve devices, concurrency and latency "
                                           "levels; bottleneck is not one of them")
    return order


def solve_per_stage(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements,
                    solver: SolverSettings) -> PerStageSolved:
    """Place ``model`` on ``fleet`` with a degree per stage chosen from the requirements' degrees
    (default :func:`per_stage_degrees`): fewest devices, then (in the CP-SAT objective's order) the
    highest guaranteed concurrency and the least hop latency; experts spread whole when the
    requirements' ``expert_parallel`` is True. Raises :class:`InvalidSpec` for what per-stage
    degrees do not support (see the module docstring)."""
    p = requirements.placement
    mode, pins, degrees, ep, reserve = p.mode, p.pins, p.degrees, bool(p.expert_parallel), p.reserve
    require = p.constraints_for(model)
    objective = requirements.targets.cpsat_objective
    order = _refuse(model, fleet, mode, pins, objective)
    for r in require:
        if r not in REQUIREMENTS:
            raise InvalidSpec(ARGUMENT, "require", f"unknown requirement {r!r} (one of {', '.join(REQUIREMENTS)})")
    found = device_layouts(model, fleet, degrees=degrees, ep=ep, workload=workload, per_stage=True)
    found.require_some(model)
    allowed, refused = found.degrees, found.refused_degrees(bool(ep))
    prob = per_stage_problem(model, fleet, workload, allowed, ep=ep, reserve=reserve, require=require)
    with interrupt_scope():     # the solve owns its Ctrl-C unless a caller's scope does
        out = solve_problem(prob, order=order, time_limit=solver.time_limit, seed=solver.seed, threads=solver.threads,
                            progress=solver.progress, deadline=solver.deadline)
    stats = dict(out.stats, degrees=list(allowed))
    if not out.feasible:
        devices = next((lv for lv in out.levels if lv.name == "devices"), None)
        result = Result("cpsat", "contiguous", out.status, message=out.message, seconds=out.seconds,
                        interrupted=out.interrupted, stats=stats,
                        lower_bound_devices=None if devices is None else devices.bound)
        return PerStageSolved(None, result, problem=prob, refused=refused)
    groups = [s.devices for s in out.stages]
    degree_of_node = [0] * prob.n
    assignment = [0] * prob.n
    for k, s in enumerate(out.stages):
        for i in range(s.start, s.end):
            degree_of_node[i], assignment[i] = s.degree, k
    inst = per_stage_instance(model, fleet, workload, groups, degree_of_node, ep=ep, reserve=reserve, require=require)
    result = _result(inst, assignment, out, stats)
    return PerStageSolved(inst, result, stages=len(out.stages), problem=prob, refused=refused)


def _result(inst: Instance, assignment, out, stats) -> Result:
    """The placement on the plan instance, re-checked in exact bytes there (as every method's is), with
    device figures in devices."""
    from placer.algorithms.check import PlacementBug, check_placement

    order = tuple(range(max(assignment) + 1))
    r = evaluate(inst, assignment, method="cpsat", status=out.status, seconds=out.seconds, order=order,
                 interrupted=out.interrupted, message=out.message, stats=stats)
    check_placement(inst, r)
    gpus = sum(len(inst.members(d)) for d in order)
    levels = {lv.name: lv for lv in out.levels}
    if levels.get("devices") is not None and levels["devices"].value != gpus:
        raise PlacementBug(f"per-stage plan counts {levels['devices'].value} devices, its groups hold {gpus}")
    conc = levels.get("concurrency")
    if conc is not None and conc.value != r.concurrency_ceiling:
        raise PlacementBug(f"per-stage plan states concurrency {conc.value}, the plan instance holds "
                           f"{r.concurrency_ceiling}")
    dev = levels.get("devices")
    bound = None if dev is None else dev.bound
    proven = out.status == Status.OPTIMAL and not out.interrupted
    return r.replace(devices_used=gpus, lower_bound_devices=bound, objective=float(gpus),
                     bound=None if bound is None else float(bound), proven_optimal=proven,
                     gap=None if bound is None else (gpus - bound) / gpus, stats=stats,
                     levels=tuple(out.levels))
