"""``SGLANG_PP_LAYER_PARTITION``: the same syntax and checks as vLLM's partition string.

SGLang (``python/sglang/srt/distributed/utils.py::get_pp_indices``) parses and checks the string
exactly as vLLM does; only its default split differs, which is why placer always emits an explicit one.
"""

from __future__ import annotations

from ..model import LayerGraph
from .stages import Export
from .vllm import export_partition

__all__ = ["export_sglang"]


def export_sglang(doc: dict, graph: LayerGraph, source: str = "<mapping>") -> Export:
    """The ``SGLANG_PP_LAYER_PARTITION`` value for ``doc`` (pipeline size = number of stages)."""
    return export_partition(doc, graph, "SGLang", source)
