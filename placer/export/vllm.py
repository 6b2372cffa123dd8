"""``VLLM_PP_LAYER_PARTITION``: one decoder-layer count per pipeline rank, e.g. ``20,21,21``.

vLLM (``vllm/distributed/utils.py::get_pp_indices``) parses the string with
``[int(layer) for layer in s.split(",")]`` and checks its length against the pipeline size and
its sum against ``num_hidden_layers``; rank r owns layers ``[sum(p[:r]), sum(p[:r]) + p[r])``.
It does not reject zero counts; placer never emits one. The embedding is built on the first rank
and the LM head on the last, so they are not counted.
"""

from __future__ import annotations

from ..model import LayerGraph
from .stages import Export, ExportRefused, no_attention_warnings, require_layers_per_rank, runtime_stages

__all__ = ["partition_counts", "parse_partition", "check_partition", "export_vllm"]


def partition_counts(ranks) -> list[int]:
    return [r.count for r in ranks]


def parse_partition(text: str, pp_size: int, num_hidden_layers: int) -> list[int]:
    """The counts vLLM / SGLang read from ``text``, with their own checks (``ValueError`` as they raise it)."""
    try:
        partitions = [int(layer) for layer in text.split(",")]
    except ValueError as err:
        raise ValueError(f"Invalid partition string: {text}") from err
    if len(partitions) != pp_size:
        raise ValueError(f"{len(partitions)=} does not match {pp_size=}.")
    if sum(partitions) != num_hidden_layers:
        raise ValueError(f"{sum(partitions)=} does not match {num_hidden_layers=}.")
    return partitions


def pp_indices(partitions: list[int], rank: int) -> tuple[int, int]:
    """Layers ``[start, end)`` that ``rank`` owns under an explicit partition, as vLLM assigns them."""
    start = sum(partitions[:rank])
    return start, start + partitions[rank]


def check_partition(text: str, ranks, num_hidden_layers: int, runtime: str, source: str) -> None:
    """Parse ``text`` back as the runtime does and confirm every rank owns exactly its stage's layers."""
    try:
        parts = parse_partition(text, len(ranks), num_hidden_layers)
    except ValueError as exc:
        raise ExportRefused(source, "/stages", f"{runtime} would reject {text!r}: {exc}") from None
    if any(p < 1 for p in parts):
        raise ExportRefused(source, "/stages", f"{runtime} partition {text!r} has a rank with no layer")
    for r in ranks:
        start, end = pp_indices(parts, r.index)
        if tuple(range(start, end)) != r.decoder:
            raise ExportRefused(source, f"/stages/{r.index}",
                                f"{runtime} would give rank {r.index} layers {start}..{end - 1}, the mapping "
                                f"holds {r.decoder[0]}..{r.decoder[-1]}")


def export_partition(doc: dict, graph: LayerGraph, runtime: str, source: str) -> Export:
    ranks = runtime_stages(doc, graph, runtime, source)
    require_layers_per_rank(ranks, runtime, source)
    text = ",".join(str(c) for c in partition_counts(ranks))
    check_partition(text, ranks, graph.num_hidden_layers, runtime, source)
    return Export(text=text, warnings=no_attention_warnings(ranks, graph))


def export_vllm(doc: dict, graph: LayerGraph, source: str = "<mapping>") -> Export:
    """The ``VLLM_PP_LAYER_PARTITION`` value for ``doc`` (pipeline size = number of stages)."""
    return export_partition(doc, graph, "vLLM", source)
