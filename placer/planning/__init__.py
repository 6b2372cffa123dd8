"""Planning: the one entry point, :func:`plan`, and the searches built on its placement step.

Modules, in dependency order: :mod:`~placer.planning.requirements` (what the user asks,
:class:`Requirements` in four parts: :class:`Placement`, :class:`Targets`, :class:`SpecDecoding`,
:class:`Pools`; and how to solve, :class:`SolverSettings`; the planners' defaults),
:mod:`~placer.planning.layouts` (the tensor- and expert-parallel layouts a plan may use, with
refusals), :mod:`~placer.planning.solve` (the placement step: instance, placement, per-device
result, mapping), :mod:`~placer.planning.budget` (device budgets and replica counts),
:mod:`~placer.planning.stage_degrees` (a degree per stage), :mod:`~placer.planning.speed` (speed
floors), :mod:`~placer.planning.planner` (:func:`plan` and :class:`Plan`), then the reports that
call it many times: :mod:`~placer.planning.studies.compare`, :mod:`~placer.planning.studies.modes`,
:mod:`~placer.planning.studies.sweep`, :mod:`~placer.planning.studies.frontier`, and
:mod:`~placer.planning.studies.explain` (why a request does not fit).

Example::

    from placer import load_fleet, load_model, workload_for
    from placer.planning import Placement, Requirements, SolverSettings, plan

    model = load_model("kimi-k3")
    p = plan(model, load_fleet("wse-3t"), workload_for(model), Requirements(Placement(mode="contiguous")),
             SolverSettings(time_limit=10))
    p.result.devices_used, p.result.proven_optimal     # (70, True)
"""

from placer.planning.layouts import Layouts, device_layouts
from placer.planning.planner import Plan, plan
from placer.planning.requirements import Placement, Pools, Requirements, SolverSettings, SpecDecoding, Targets
from placer.planning.solve import DegreeSearch, Solved, build_instance, place_instance, search_layouts

__all__ = ["plan", "Plan", "Requirements", "Placement", "Targets", "SpecDecoding", "Pools", "SolverSettings",
           "Solved", "DegreeSearch", "Layouts",
           "device_layouts", "build_instance", "place_instance", "search_layouts"]
