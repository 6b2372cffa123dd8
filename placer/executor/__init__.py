"""Run a stage mapping for real on a scaled-down numeric twin of the model.

``run_mapping(doc)`` / ``run_placement(nodes, route)`` build the tiny model (:mod:`.tiny`), run it
on one worker per stage (:mod:`.local` threads or :mod:`.ray_backend` actors) with continuous
batching (:mod:`.run`), and check every request's tokens against the unpartitioned reference.
``backend="torch"`` (:mod:`.torch_backend`) runs real transformers modules of the model's family
instead, one gloo process per stage.
"""

from placer.executor.reference import ReferenceModel, Request, make_requests
from placer.executor.run import (
           ExecResult,
           RunOptions,
           compare_with_reference,
           execute,
           run_mapping,
           run_placement,
)
from placer.executor.tiny import TinySpec, tiny_layer_graph, tiny_spec

__all__ = ["ExecResult", "RunOptions", "execute", "compare_with_reference", "run_mapping", "run_placement",
           "ReferenceModel", "Request", "TinySpec", "make_requests", "tiny_layer_graph", "tiny_spec"]
