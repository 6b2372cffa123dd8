"""placer: plan how a large model's layers are placed on a fleet of accelerators.

Public API (heavier parts load on first use)::

    from placer import load_model, load_fleet, workload_for, plan, replan, Placement, Requirements, SolverSettings
    model = load_model("kimi-k3")
    p = plan(model, load_fleet("wse-3t"), workload_for(model), Requirements(Placement(mode="contiguous")))
    p.devices, p.proven, p.mapping["summary"]["devices_used"]

    # after a failure: the plan again on the devices left, fewest weight bytes loaded anew first
    again = replan(p, ["r5w1"])      # or a mapping file; devices or whole racks ("rack:5")
    again.moved, again.fresh_moved, again.mapping

    # several models on one fleet, placed jointly (a plan file: models, traffic, replicas, objective)
    fp = plan_fleet("examples/fleet_plans/wafer_fleet.yaml")
    fp.devices, fp.bound, fp.proven, fp.mapping["models"]

    # one placement on one instance, without a planner:
    from placer import make_instance, place
    result = place(make_instance(model, load_fleet("wse-3t"), workload_for(model)), method="cpsat")

Packages, one folder per layer, in dependency order (``tests/package/test_structure.py`` ranks them):
``specs`` (model, fleet, workload, units, Hugging Face import), ``problem`` (instance, memory,
placement result, per-rank bytes, reductions), ``algorithms`` (placement methods, proofs),
``mapping`` (the document, its schema, the independent validator), ``simulate``, ``planning``
(``plan()`` and the studies on it), ``export``, ``executor``, ``plotting``, ``cli``.
"""

from placer.problem.instance import Instance, make_instance
from placer.specs.errors import InfeasiblePlacement, InvalidSpec, PlacerError
from placer.specs.fleet import Fleet, load_fleet
from placer.specs.model import Layer, LayerGraph, load_model
from placer.specs.workload import Workload, workload_for

__all__ = [
    "PlacerError", "InvalidSpec", "InfeasiblePlacement",
    "Fleet", "load_fleet", "Instance", "make_instance",
    "Layer", "LayerGraph", "load_model", "Workload", "workload_for",
    "place", "validate_mapping", "simulate_mapping", "build_mapping",
    "plan", "Plan", "Traffic", "Requirements", "Placement", "Targets", "SpecDecoding", "Pools", "SolverSettings",
    "replan", "plan_spares", "plan_fleet",
]
__version__ = "0.1.0"

_LAZY = {
    "place": ("placer.algorithms", "place"),
    "validate_mapping": ("placer.mapping.validate", "validate_mapping"),
    "simulate_mapping": ("placer.simulate", "simulate_mapping"),
    "build_mapping": ("placer.mapping", "build_mapping"),
    "plan": ("placer.planning", "plan"),
    "Plan": ("placer.planning", "Plan"),
    "Traffic": ("placer.simulate.arguments", "Traffic"),
    "Requirements": ("placer.planning", "Requirements"),
    "Placement": ("placer.planning", "Placement"),
    "Targets": ("placer.planning", "Targets"),
    "SpecDecoding": ("placer.planning", "SpecDecoding"),
    "Pools": ("placer.planning", "Pools"),
    "SolverSettings": ("placer.planning", "SolverSettings"),
    "replan": ("placer.planning.replan", "replan"),
    "plan_spares": ("placer.planning.spares", "plan_spares"),
    "plan_fleet": ("placer.planning.fleet_plan", "plan_fleet"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        # importing placer.planning binds the submodule, never a name of _LAZY: pin the public object
        globals()[name] = value
        return value
    raise AttributeError(f"module 'placer' has no attribute {name!r}")


def __dir__():
    return sorted(__all__ + ["__version__"])
