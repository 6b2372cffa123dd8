"""placer: plan how a large model's layers are placed on a fleet of accelerators."""

from .errors import InfeasiblePlacement, InvalidSpec, PlacerError
from .fleet import Fleet, load_fleet
from .instance import Instance, make_instance
from .model import Layer, LayerGraph, load_model
from .workload import Workload, workload_for

__all__ = [
    "PlacerError", "InvalidSpec", "InfeasiblePlacement",
    "Fleet", "load_fleet", "Instance", "make_instance",
    "Layer", "LayerGraph", "load_model", "Workload", "workload_for",
]
__version__ = "0.1.0"
