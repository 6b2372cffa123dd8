"""``placer.plan``: the one planning entry point.

:func:`plan` takes a model, a fleet, a workload, what the plan must satisfy
(:class:`~placer.planning.requirements.Requirements`) and how to solve
(:class:`~placer.planning.requirements.SolverSettings`), and returns a :class:`Plan`. It chooses
the planner the requirements call for, each a branch of this function:

* disaggregated pools (``requirements.pools``): a prefill pool and a decode pool, the ratio of their
  replicas chosen for a request rate under TTFT and TPOT targets
  (:func:`placer.planning.disagg.plan_disagg`);
* a speed floor (``requirements.targets``' ``min_user_tps`` / ``max_itl_ms``): the fewest devices (or least power, or most
  tokens/s per MW) of identical replicas whose simulated per-user speed meets the floor
  (:func:`placer.planning.speed.speed_search`);
* per-stage degrees (``requirements.placement.per_stage_degrees``): a tensor-parallel degree chosen per stage
  (:func:`placer.planning.stage_degrees.solve_per_stage`);
* otherwise every device layout the model and the fleet allow, each placed and proven, the best
  kept (:func:`placer.planning.solve.search_layouts`).

Every branch builds its instances with :func:`placer.planning.solve.build_instance` (so no
requirement is dropped on any path) and places them with
:func:`~placer.planning.solve.place_instance`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from placer.planning.requirements import Requirements, SolverSettings
from placer.planning.solve import Solved, search_layouts
from placer.problem.instance import Instance
from placer.problem.placement import Result
from placer.specs.errors import ARGUMENT, InvalidSpec
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

if TYPE_CHECKING:
    from placer.planning.disagg import DisaggPlan
    from placer.planning.speed import SpeedPlan
    from placer.planning.stage_degrees import PerStageSolved
    from placer.simulate.result import SimResult

__all__ = ["Plan", "plan"]


@dataclass(frozen=True)
class Plan:
    """A plan: the chosen placement of one replica (``solved``; None when nothing placed), how many
    replicas serve the workload and the live requests each holds, the simulation of one replica at
    that load (speed floors and disaggregated pools), every layout tried and what was refused
    (``{"tp 3": why}``).

    The planner a plan came from is in its types: ``speed`` is the speed floor's
    :class:`~placer.planning.speed.SpeedPlan` (None for other plans), ``pools`` the disaggregated
    plan's :class:`~placer.planning.disagg.DisaggPlan` (``solved`` is then the decode replica and
    ``mapping`` the two-pool document), and a per-stage plan's ``solved`` is a
    :class:`~placer.planning.stage_degrees.PerStageSolved` (:attr:`per_stage`); with none of them
    the plan is the degree search's. ``devices`` counts every device of every replica (of both
    pools).
    """

    model: LayerGraph
    fleet: Fleet
    workload: Workload
    requirements: Requirements
    solver: SolverSettings
    solved: Solved | PerStageSolved | None
    tried: tuple[Solved, ...] = ()
    refused: dict[str, str] = field(default_factory=dict)
    skipped: tuple[int, ...] = ()
    replicas: int = 1
    load_per_replica: int | None = None
    simulation: SimResult | None = None
    speed: SpeedPlan | None = None          # the speed floor's search (candidates, shapes, message)
    devices_proven: bool = False            # the device count is proven over every layout tried
    message: str = ""
    pools: DisaggPlan | None = None         # disaggregated: both pools, the ratio, the transfer

    @property
    def per_stage(self) -> bool:
        """A plan of per-stage degrees (:func:`placer.planning.stage_degrees.solve_per_stage`)."""
        from placer.planning.stage_degrees import PerStageSolved

        return isinstance(self.solved, PerStageSolved)

    # ------------------------------------------------------------------ the chosen placement
    @property
    def feasible(self) -> bool:
        return self.solved is not None and self.solved.result.feasible

    @property
    def instance(self) -> Instance | None:
        return None if self.solved is None else self.solved.instance

    @property
    def result(self) -> Result | None:
        return None if self.solved is None else self.solved.result

    @property
    def mapping(self) -> dict | None:
        """The stage mapping of one replica (None without a placement); a speed-floor plan's records
        the floor, the replicas and the live requests of each (:func:`placer.mapping.speed_floor_mapping`);
        a disaggregated plan's is the two-pool document."""
        if self.pools is not None:
            return self.pools.mapping
        if self.speed is not None and self.speed.chosen is not None:
            from placer.mapping import speed_floor_mapping

            return speed_floor_mapping(self.speed)
        return None if self.solved is None else self.solved.mapping

    @property
    def interrupted(self) -> bool:
        from placer.algorithms.deadline import interrupted

        return bool(self.result is not None and self.result.interrupted) or interrupted()

    @property
    def devices(self) -> int | None:
        if not self.feasible:
            return None
        if self.pools is not None:
            return self.pools.chosen.devices
        return self.replicas * self.result.devices_used

    @property
    def proven(self) -> bool:
        """Every level of every layout tried proven (the device count alone: :attr:`devices_proven`)."""
        if self.pools is not None:
            return self.pools.proven
        return (self.feasible and not self.skipped
                and all(s.result.status == "infeasible" or s.result.proven_optimal for s in self.tried))

    def explain(self, *, time_limit: float = 20.0, deadline=None) -> str:
        """Why nothing placed, in bytes, and what would fit (:func:`placer.planning.studies.explain.explain_infeasible`)."""
        from placer.planning.studies.explain import explain_infeasible

        if self.instance is None:
            return self.message or "no placement"
        return explain_infeasible(self.instance, time_limit=time_limit, deadline=deadline)

    def to_dict(self) -> dict:
        """JSON-ready: the kind, requirements, the chosen placement's summary and levels, replicas,
        load, the layouts tried and refused, and the speed search when there was one."""
        r = self.result
        kind = "disagg" if self.pools is not None else "speed-floor" if self.speed is not None else \
            "per-stage" if self.per_stage else "layouts"
        doc = dict(kind=kind, model=self.model.name, hardware=self.fleet.name,
                   requirements=self.requirements.to_dict(), feasible=self.feasible,
                   devices=self.devices, replicas=self.replicas, load_per_replica=self.load_per_replica,
                   devices_proven=self.devices_proven, proven=self.proven, message=self.message,
                   refused=dict(self.refused), skipped=list(self.skipped))
        if r is not None:
            doc["result"] = dict(status=str(r.status), devices_used=r.devices_used,
                                 concurrency_ceiling=r.concurrency_ceiling, hop_latency_us=r.hop_latency_us,
                                 proven_optimal=r.proven_optimal,
                                 levels=[dict(name=lv.name, value=lv.value, bound=lv.bound, proven=lv.proven)
                                         for lv in r.levels])
        doc["tried"] = [dict(tp=s.instance.tp, ep=s.instance.ep, attention_dp=s.instance.attention_dp,
                             status=str(s.result.status),
                             devices_used=s.result.devices_used, proven_optimal=s.result.proven_optimal)
                        for s in self.tried if s.instance is not None]
        if self.speed is not None:
            doc["speed_target"] = self.speed.to_dict()
        speculation = getattr(self.instance, "speculation", None) if self.instance is not None else None
        if speculation is not None:
            doc["speculative"] = speculation.to_dict()      # the drafter, on the LM head's stage
        if self.instance is not None and self.instance.require:
            doc["require"] = list(self.instance.require)
        if self.pools is not None:
            doc["disagg"] = self.pools.to_dict()
        return doc


def plan(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements | None = None,
         solver: SolverSettings | None = None, *, traffic=None, log=None) -> Plan:
    """Plan ``model`` on ``fleet`` under ``workload``: the one entry point (see the module docstring).

    ``traffic`` (:class:`placer.Traffic`; else ``requirements.traffic``): the requests every speed
    of the plan is for, its prompt and output lengths and prefix-cache hit (speed floors, TTFT,
    disaggregated pools, the plan's simulation and its mapping's ``traffic`` record); None: the
    model spec's ``default_traffic``, else the standard 8k-token prompt / 1k output tokens cut to
    fit ``workload.context_tokens``. The capacity reserved stays ``workload``'s context.

    ``log(line)`` hears the planner's own steps (each shape of a speed search); the solver's
    reports go to ``solver.progress``. Raises :class:`~placer.specs.errors.InvalidSpec` for requirements
    the fleet or the method cannot honour (naming the field), never for an impossible request: an
    infeasible plan says why (:meth:`Plan.explain`).
    """
    req = with_traffic(requirements or Requirements(), traffic, model, workload)
    solver = solver or SolverSettings()
    if req.placement.per_stage_degrees and solver.method not in (None, "cpsat"):
        raise InvalidSpec(ARGUMENT, "method", "per-stage degrees are solved by cpsat")
    if req.pools is not None:
        return _disagg_plan(model, fleet, workload, req, solver, log)
    if req.targets.has_speed_floor:
        return _speed_plan(model, fleet, workload, req, solver, log)
    if req.placement.per_stage_degrees:
        return _per_stage_plan(model, fleet, workload, req, solver)
    return _layouts_plan(model, fleet, workload, req, solver)


def with_traffic(req: Requirements, traffic, model: LayerGraph, workload: Workload) -> Requirements:
    """``req`` planned for ``traffic`` (else ``req.traffic``; None: the model spec's default
    traffic, else the standard shape at ``workload``'s context): a traffic given is recorded
    resolved (every instance and mapping of the plan carries it), and the targets' output tokens
    and cached prompt (what the speed searches and the pools read) are taken from it."""
    from placer.simulate.arguments import Traffic, resolve_lengths

    given = traffic if traffic is not None else req.traffic
    t, targets = given or Traffic(), req.targets
    if t.output_tokens is None:
        t = replace(t, output_tokens=targets.output_tokens)
    if targets.cached_prompt_tokens and t.cached_prompt_tokens is None and t.cached_share is None:
        t = replace(t, cached_prompt_tokens=targets.cached_prompt_tokens)
    resolved, shapes = resolve_lengths(t, workload.context_tokens, getattr(model, "default_traffic", None) or {})
    changes = {"output_tokens": max(1, round(shapes.mean_output))}
    if given is not None:
        share = resolved.cached_share
        changes["cached_prompt_tokens"] = resolved.cached_prompt_tokens or 0 if share is None else \
            int(share * (shapes.mean_context - shapes.mean_output))
    return req.replace(traffic=resolved if given is not None else None, targets=targets.replace(**changes))


def _layouts_plan(model, fleet, workload, req: Requirements, solver: SolverSettings) -> Plan:
    search = search_layouts(model, fleet, workload, req, solver)
    best = search.best
    load = None
    if best is not None and best.result.feasible:
        ceiling = best.result.concurrency_ceiling
        load = workload.concurrency if ceiling is None else min(workload.concurrency, ceiling)
    refused = {f"tp {g}": why for g, why in search.refused.items()}
    return Plan(model, fleet, workload, req, solver, best, search.solved, refused, search.skipped,
                load_per_replica=load, devices_proven=search.devices_proven,
                message=_layouts_message(best, refused))


def _layouts_message(best: Solved | None, refused: dict[str, str]) -> str:
    """Why a layout search placed nothing (empty when it placed): the best layout's own reason,
    else every refusal."""
    if best is not None and best.result.feasible:
        return ""
    if best is not None and best.result.message:
        return best.result.message
    return "; ".join(f"{k}: {why}" for k, why in refused.items()) or "no layout placed"


def _per_stage_plan(model, fleet, workload, req: Requirements, solver: SolverSettings) -> Plan:
    from placer.planning.stage_degrees import solve_per_stage

    solved = solve_per_stage(model, fleet, workload, req, solver)
    r = solved.result
    return Plan(model, fleet, workload, req, solver, solved, (solved,),
                {f"tp {g}": why for g, why in (solved.refused or {}).items()},
                load_per_replica=workload.concurrency if r.feasible else None,
                devices_proven=r.devices_proven, message=r.message or "")


def _speed_plan(model, fleet, workload, req: Requirements, solver: SolverSettings, log) -> Plan:
    from placer.planning.speed import speed_search

    sp = speed_search(model, fleet, workload, req, solver, log=log)
    chosen = sp.chosen
    if chosen is None:
        return Plan(model, fleet, workload, req, solver, None, refused=dict(sp.refused), speed=sp,
                    message=sp.message)
    return Plan(model, fleet, workload, req, solver, chosen.shape.solved,
                tuple(s.solved for s in sp.shapes), dict(sp.refused), replicas=chosen.replicas,
                load_per_replica=chosen.load, simulation=chosen.sim, speed=sp,
                devices_proven=chosen.shape.result.devices_proven, message=sp.message)


def _disagg_plan(model, fleet, workload, req: Requirements, solver: SolverSettings, log) -> Plan:
    from placer.planning.disagg import plan_disagg

    dp = plan_disagg(model, fleet, workload, req, solver, log=log)
    c = dp.chosen
    if c is None:
        return Plan(model, fleet, workload, req, solver, None, message=dp.message, pools=dp)
    tried = tuple(s.solved for s in dp.prefill_shapes) + tuple(s.solved for s in dp.decode_shapes)
    return Plan(model, fleet, workload, req, solver, dp.decode_solved, tried, replicas=c.y,
                load_per_replica=c.load, simulation=c.decode_sim,
                devices_proven=c.prefill.solved.result.devices_proven and dp.decode_solved.result.devices_proven,
                message=dp.message, pools=dp)
