"""The placement step every planner takes: requirements -> instance -> placement -> per-device
result -> stage mapping. This is the only place that sequence is written.

* :func:`build_instance` turns a model, a fleet, a workload and :class:`Requirements` into an
  :class:`~placer.problem.instance.Instance` at one layout: the mode, granularity, pins, constraints and
  reserve all come from the requirements, so no planner can drop one;
* :func:`place_instance` places it with the solver settings and returns a :class:`Solved` (the
  result with device figures in devices, the method's own result in groups, and the mapping);
* :func:`search_layouts` does both at every layout of :func:`placer.planning.layouts.device_layouts`
  and keeps the best (:class:`DegreeSearch`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import cached_property

from placer import algorithms
from placer.algorithms.deadline import Deadline, interrupt_scope, interrupted
from placer.planning.layouts import Layouts, device_layouts
from placer.planning.requirements import Requirements, SolverSettings
from placer.planning.tasks import run_tasks
from placer.problem.instance import Instance, Layout, make_instance
from placer.problem.placement import Result, Status
from placer.problem.reductions.tensor_parallel import per_device
from placer.specs.errors import ARGUMENT, InfeasiblePlacement, InvalidSpec
from placer.specs.fleet import Fleet
from placer.specs.model import LayerGraph, is_draft_node
from placer.specs.speculative import needs_draft_embedding, with_draft_embedding
from placer.specs.workload import Workload

__all__ = ["Solved", "DegreeSearch", "build_instance", "place_instance", "search_layouts", "rank_key"]


@dataclass(frozen=True)
class Solved:
    """One placement step: the instance, the ``result`` with device figures in devices (a stage of
    degree ``g`` counts ``g``), the method's own result ``per_group`` (the instance's devices are
    groups of ``g`` devices; its assignment names groups, as the simulator and the mapping read it),
    ``stages`` (the stages of the placement, None when nothing placed) and, when it placed, the
    stage mapping (built on first use)."""

    instance: Instance | None
    result: Result
    per_group: Result | None = None
    stages: int | None = None

    @cached_property
    def mapping(self) -> dict | None:
        from placer.mapping import build_mapping

        if self.instance is None or not self.result.feasible:
            return None
        return build_mapping(self.instance, self.result)


def build_instance(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements, *,
                   method: str = "cpsat", tp: int = 1, ep: bool = False, concurrency: int | None = None,
                   attention_dp: bool = False) -> Instance:
    """The instance ``requirements`` ask for at degree ``tp`` (``ep``: experts spread whole;
    ``attention_dp``: requests split over each group's ranks, :mod:`placer.problem.reductions.attention_dp`), in
    the mode :meth:`Requirements.mode_for` gives for ``method``; ``concurrency`` replaces the
    workload's live requests."""
    mode = requirements.mode_for(method)
    placement = requirements.placement
    if concurrency is not None:
        workload = workload.replace(concurrency=concurrency)
    model, speculation = speculative_model(model, requirements)
    require = placement.constraints_for(model)
    if any(is_draft_node(x) for x in model.layers) and "mtp-with-head" not in require:
        # the runtimes build the drafter on the last pipeline rank (placer.specs.speculative)
        require = (*require, "mtp-with-head")
    inst = make_instance(model, fleet, workload, mode=mode, granularity=placement.granularity_of(mode),
                         pins=placement.pins, require=require,
                         layout=Layout(tp=tp, ep=ep, reserve=placement.reserve, attention_dp=attention_dp))
    if mode != "free" and _drafter_embedding_placed(inst, requirements):
        inst = make_instance(with_draft_embedding(model), fleet, workload, mode=mode,
                             granularity=placement.granularity_of(mode), pins=placement.pins, require=require,
                             layout=Layout(tp=tp, ep=ep, reserve=placement.reserve, attention_dp=attention_dp))
    if speculation is not None:
        inst = replace(inst, speculation=speculation)
    if requirements.targets.cached_prompt_tokens:
        inst = replace(inst, cached_prompt_tokens=requirements.targets.cached_prompt_tokens)
    if requirements.traffic is not None:
        inst = replace(inst, traffic=requirements.traffic)
    return inst


def _drafter_embedding_placed(inst: Instance, requirements: Requirements) -> bool:
    """Whether the drafter's own embedding copy (:func:`placer.specs.speculative.with_draft_embedding`)
    is placed: the runtimes hold it on pipelines of more than one rank, so it is left out only
    when every plan the solve can return is one stage: the whole model fits one device (group)
    and devices are the first level (the one-stage plan is then the optimum)."""
    if not needs_draft_embedding(inst.model):
        return False
    from placer.algorithms.objectives import parse_objective

    first = parse_objective(requirements.targets.cpsat_objective)[0]
    return not (sum(inst.demand_bytes) <= max(inst.capacity_bytes) and first == "devices")


def speculative_model(model: LayerGraph, requirements: Requirements):
    """(the graph placed, the :class:`~placer.specs.speculative.Speculation` or None): ``model`` with the
    draft model's nodes beside its own when the requirements name one."""
    spec = requirements.speculation
    if spec is None:
        return model, None
    from placer.specs.speculative import speculation_for, with_draft

    draft = spec.draft_model
    speculation = speculation_for(model, spec.tokens, method=spec.method, draft=draft, accept=spec.accept)
    if speculation.accept is None and (requirements.targets.has_speed_floor or requirements.pools is not None):
        check_accept(speculation)
    return (model if draft is None else with_draft(model, draft)), speculation


def check_accept(speculation) -> None:
    """:class:`InvalidSpec` (field ``spec_accept``) when a plan judged by simulated speed drafts
    with an acceptance length nobody published for its model and method."""
    if speculation is not None and speculation.accept is None:
        raise InvalidSpec(ARGUMENT, "spec_accept", f"no acceptance length is published for {speculation.method} on "
                                                   "this model; a plan judged by its speed needs --spec-accept")


def place_instance(instance: Instance, solver: SolverSettings, *, method: str | None = None,
                   objective: str | None = None, reports: bool = True, keep_interrupted: bool = True,
                   hint=None) -> Solved:
    """Place ``instance`` with ``method`` (default the settings', else the mode's search method).

    An impossible request is an ``infeasible`` result, never an exception. ``keep_interrupted``:
    after Ctrl-C the best placement so far is the answer (a solve); False raises
    :class:`KeyboardInterrupt` instead (a search of many solves must not take a stopped solve for
    a point's answer). ``reports``: pass the settings' progress and deadline to CP-SAT.
    """
    method = method or solver.method_in(instance.mode)
    try:
        # looked up at each call: tests and tools count or intercept solves there
        options = solver.options(method, objective, reports=reports)
        if hint is not None:
            options["hint"] = hint
        raw = algorithms.place(instance, method, **options)
    except InfeasiblePlacement as exc:
        raw = Result(method=method, mode=instance.mode, status=Status.INFEASIBLE, message=exc.reason,
                     max_concurrency=exc.max_concurrency)
    if raw.interrupted and not keep_interrupted:
        raise KeyboardInterrupt
    return Solved(instance, per_device(raw, instance), raw, raw.devices_used if raw.feasible else None)


@dataclass(frozen=True)
class DegreeSearch:
    """One solve per allowed layout and the best of them.

    ``best``: fewest devices, then the highest concurrency ceiling, then the least hop latency,
    then the lower degree. ``devices_proven``: the best device count is proven over every layout
    (each layout's device level proven, or the layout proven infeasible); ``proven``: every level
    of every layout proven. ``refused``: ``{degree: why}``; ``skipped``: degrees not solved (Ctrl-C
    stopped the search first).
    """

    best: Solved | None
    solved: tuple[Solved, ...]
    refused: dict
    skipped: tuple[int, ...] = ()

    @property
    def devices_proven(self) -> bool:
        return not self.skipped and all(s.result.status == "infeasible" or s.result.devices_proven
                                        for s in self.solved)

    @property
    def proven(self) -> bool:
        return not self.skipped and all(s.result.status == "infeasible" or s.result.proven_optimal
                                        for s in self.solved)


def rank_key(s: Solved):
    """The least price per hour when solved with the ``cost`` level, then fewest devices, then the
    highest concurrency ceiling, then the least hop latency, then the lower degree, then tensor
    parallelism before attention data parallelism."""
    r = s.result
    ceiling = r.concurrency_ceiling if r.concurrency_ceiling is not None else float("inf")
    cost = r.level("cost")
    return (0.0 if cost is None else cost.value, r.devices_used, -ceiling, r.hop_latency_us or 0.0, s.instance.tp, s.instance.attention_dp)


def _solve_layout(model, fleet, workload, requirements, solver, method, objective, layout) -> Solved:
    """One layout's :func:`build_instance` and :func:`place_instance` (module level: a worker runs it)."""
    tp, ep, adp = layout
    inst = build_instance(model, fleet, workload, requirements, method=method, tp=tp, ep=ep, attention_dp=adp)
    return place_instance(inst, solver, method=method, objective=objective)


def _solve_layout_task(model, fleet, workload, requirements, solver, method, objective, item) -> Solved:
    """:func:`_solve_layout` in a worker process or a Ray task: ``item`` is ``(index, layout, end)``
    with ``end`` the deadline in wall-clock seconds (a task may run on another machine, whose
    monotonic clock is not this one's), None without one."""
    _index, layout, end = item
    if end is not None:
        solver = replace(solver, deadline=Deadline.after(max(0.0, end - time.time())))
    return _solve_layout(model, fleet, workload, requirements, solver, method, objective, layout)


def _solve_all(shared: tuple, layouts: list[tuple], out: list[Solved], skipped: list[int], before, after) -> None:
    """Each of ``layouts`` (``(tp, ep, attention_dp)``) solved and appended to ``out`` in order,
    ``before``/``after`` called in that order; after a Ctrl-C (or an interrupted solve) the rest are
    ``skipped``. With ``solver.jobs`` above 1 in that many spawned processes at once, or with
    ``solver.backend`` ``"ray"`` one Ray task each (:func:`placer.planning.tasks.run_tasks`): the
    same solves, so the same results and proofs, ``before`` called for each as it is queued."""
    solver: SolverSettings = shared[4]

    def label(layout):
        return layout[0], "dp" if layout[2] else layout[1]

    def deliver(layout, solved):
        if out and (out[-1].result.interrupted or interrupted()):
            skipped.append(layout[0])
            return
        out.append(solved)
        if after is not None:
            after(*label(layout), solved)

    parallel = len(layouts) > 1 and (solver.backend == "ray" or solver.jobs > 1)
    if parallel and solver.backend == "process":
        import pickle

        try:
            pickle.dumps(shared)
        except Exception:       # a progress callback that cannot go to a worker: solve here
            parallel = False
    if not parallel:
        for layout in layouts:
            if out and (out[-1].result.interrupted or interrupted()):
                skipped.append(layout[0])
                continue
            if before is not None:
                before(*label(layout))
            deliver(layout, _solve_layout(*shared, layout))
        return
    for layout in layouts:
        if before is not None:
            before(*label(layout))
    left = solver.deadline.remaining() if solver.deadline is not None else math.inf
    end = time.time() + left if math.isfinite(left) else None
    done: dict[int, Solved] = {}
    ahead = [0]         # the next layout to deliver

    def finished(item, solved: Solved) -> None:     # in the layouts' order, whichever ends first
        done[item[0]] = solved
        while ahead[0] in done:
            deliver(layouts[ahead[0]], done.pop(ahead[0]))
            ahead[0] += 1

    run_tasks(_solve_layout_task, shared, [(k, layout, end) for k, layout in enumerate(layouts)], finished,
              backend=solver.backend, jobs=min(solver.jobs, len(layouts)), address=solver.address)


def search_layouts(model: LayerGraph, fleet: Fleet, workload: Workload, requirements: Requirements,
                   solver: SolverSettings, *, layouts: Layouts | None = None, before=None,
                   after=None) -> DegreeSearch:
    """:func:`build_instance` and :func:`place_instance` at every layout (default
    :func:`device_layouts` of the requirements), CP-SAT with the requirements' levels;
    ``before(tp, ep)`` is called before each solve and ``after(tp, ep, solved)`` after it (``ep``
    is ``"dp"`` for an attention-data-parallel layout). Raises :class:`InvalidSpec` (``tp``) when
    no layout runs. Each layout is independent: with ``solver.jobs`` above 1 they are solved in
    that many processes at once, or with ``solver.backend`` ``"ray"`` one Ray task each, with the
    same results in the same order.

    Attention-data-parallel layouts (:attr:`Layouts.attention_dp`) are solved after the others:
    always when ``requirements.placement.attention_dp`` is True (then alone), and when it is None only if
    no other layout placed (where tensor parallelism cannot hold the requests)."""
    method = solver.method or "cpsat"
    placement = requirements.placement
    if layouts is None:
        layouts = device_layouts(model, fleet, degrees=placement.layout_degrees,
                                 ep=bool(placement.expert_parallel), mode=requirements.mode_for(method),
                                 workload=workload, attention_dp=placement.attention_dp)
    refused = layouts.refused_degrees(bool(placement.expert_parallel))
    dp_refused = {f"{tp} attention-dp" if tp > 0 else "attention-dp": why
                  for (tp, e), why in layouts.refused.items() if e == "dp"}
    if placement.attention_dp:
        refused.update(dp_refused)
    layouts.require_some(model)
    out: list[Solved] = []
    skipped: list[int] = []
    objective = requirements.targets.cpsat_objective if method == "cpsat" else None
    shared = (model, fleet, workload, requirements, solver, method, objective)
    with interrupt_scope():     # a Ctrl-C during one degree's solve stops the search before the next
        _solve_all(shared, [(tp, ep, False) for tp, ep in layouts.allowed], out, skipped, before, after)
        if layouts.attention_dp and (placement.attention_dp or not any(s.result.feasible for s in out)):
            if placement.attention_dp is None:
                refused.update(dp_refused)
            _solve_all(shared, [(tp, True, True) for tp in layouts.attention_dp], out, skipped, before, after)
    if not out:
        raise InvalidSpec(ARGUMENT, "tp", "; ".join(f"tp {g}: {r}" for g, r in refused.items()))
    placed = [s for s in out if s.result.feasible]
    best = min(placed, key=rank_key) if placed else out[0]
    return DegreeSearch(best, tuple(out), refused, tuple(skipped))
