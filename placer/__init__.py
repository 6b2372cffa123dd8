"""placer: plan how a large model's layers are placed on a fleet of accelerators.

Public API (heavier parts load on first use)::

    from placer import load_model, load_fleet, workload_for, plan, Requirements, SolverSettings
    model = load_model("kimi-k3")
    p = plan(model, load_fleet("wse-3t"), workload_for(model), Requirements(mode="contiguous"))
    p.result.devices_used, p.mapping["summary"]["proven_optimal"]

    # one placement on one instance, without a planner:
    from placer import make_instance, place
    result = place(make_instance(model, load_fleet("wse-3t"), workload_for(model)), method="cpsat")

Packages, in dependency order: specs (``model``, ``fleet``, ``workload``, ``hf``), the problem
(``instance``, ``groups``, ``parallel``, ``refine``), ``algorithms`` (placement methods, proofs),
``mapping`` (the document, its schema, the validator), ``simulate``, ``planning`` (``plan()`` and
the searches on it), ``export``, ``executor``, ``plotting``, ``cli``.
"""

from .errors import InfeasiblePlacement, InvalidSpec, PlacerError
from .fleet import Fleet, load_fleet
from .instance import Instance, make_instance
from .model import Layer, LayerGraph, load_model
from .workload import Workload, workload_for

__all__ = [
    "PlacerError", "InvalidSpec", "InfeasiblePlacement",
    "Fleet", "load_fleet", "Instance", "make_instance",
    "Layer", "LayerGraph", "load_model", "Workload", "workload_for",
    "place", "validate_mapping", "simulate_mapping", "build_mapping",
    "plan", "Plan", "Requirements", "SolverSettings",
]
__version__ = "0.1.0"

_LAZY = {
    "place": ("placer.algorithms", "place"),
    # placer.mapping.validate and placer.simulate are modules; their entry points keep their own names
    "validate_mapping": ("placer.mapping.validate", "validate_mapping"),
    "simulate_mapping": ("placer.simulate", "simulate_mapping"),
    "build_mapping": ("placer.mapping", "build_mapping"),
    "plan": ("placer.planning", "plan"),
    "Plan": ("placer.planning", "Plan"),
    "Requirements": ("placer.planning", "Requirements"),
    "SolverSettings": ("placer.planning", "SolverSettings"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'placer' has no attribute {name!r}")
