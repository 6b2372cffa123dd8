"""Megatron-LM: ``--pipeline-model-parallel-layout`` and, for hybrid models, ``--hybrid-layer-pattern``.

Layout grammar (``megatron/core/transformer/pipeline_parallel_layer_layout.py``): tokens ``E``
(embedding), ``t`` (decoder layer), ``m`` (MTP layer), ``L`` (loss: final norm and output head);
``|`` closes a stage, ``X*N`` repeats a token and ``(...)*N`` a group, commas are cosmetic. The
number of stages must be a multiple of the pipeline size (the quotient is the virtual-pipeline
degree; placer emits one stage per rank), the embedding comes first and the loss last, each
exactly once, and the decoder count must equal ``num_layers``.

Hybrid pattern (``megatron/core/ssm/mamba_hybrid_layer_allocation.py``): one symbol per mixer and
per FFN: ``M`` Mamba / linear-attention mixer, ``*`` attention, ``-`` dense MLP, ``E`` MoE; ``|``
marks a pipeline boundary.
"""

from __future__ import annotations

import re
import shlex

from ..model import LayerGraph
from .stages import Export, ExportRefused, RankStage, runtime_stages

__all__ = ["layout_string", "parse_layout", "hybrid_pattern", "parse_hybrid_pattern", "export_megatron"]

_LAYOUT_TOKENS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
_HYBRID_MIXERS = {"M", "*"}
_HYBRID_VALID = {"M", "*", "-", "E"}


def layout_string(counts: list[int]) -> str:
    """``E t*c0 | t*c1 | ... | t*cN L`` without spaces: ``[23, 24, 24, 23]`` -> ``Et*23|t*24|t*24|t*23L``."""
    parts = []
    for k, c in enumerate(counts):
        body = "t" if c == 1 else (f"t*{c}" if c > 1 else "")
        parts.append(("E" if k == 0 else "") + body + ("L" if k == len(counts) - 1 else ""))
    return "|".join(parts)


def parse_layout(text: str, pp_size: int, num_layers: int) -> list[int]:
    """Decoder layers per stage as Megatron reads ``text``; ``ValueError`` where Megatron would assert."""
    s = text.replace(",", "")
    s = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    s = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    stages = []
    for stage in s.split("|"):
        for ch in stage:
            if ch not in _LAYOUT_TOKENS:
                raise ValueError(f"Invalid layer character: {ch} (known: {list(_LAYOUT_TOKENS)})")
        stages.append(stage)
    if len(stages) % pp_size != 0:
        raise ValueError(f"pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size "
                         f"({len(stages)=}, {pp_size=})")
    flat = "".join(stages)
    if not flat or flat[0] != "E":
        raise ValueError("The first layer must be embedding")
    if flat[-1] != "L":
        raise ValueError("The last layer must be loss")
    if flat.count("E") != 1 or flat.count("L") != 1:
        raise ValueError("Embedding and loss must each be specified exactly once")
    if flat.count("t") != num_layers:
        raise ValueError(f"Number of decoder layers {flat.count('t')} must match num_layers {num_layers}")
    return [stage.count("t") for stage in stages]


def _symbols(kind: str, ffn: str | None) -> str:
    mixer = "*" if kind == "attention" else "M"
    return mixer + {"dense": "-", "moe": "E"}.get(ffn or "", "")


def hybrid_pattern(ranks: list[RankStage]) -> str:
    """``|``-separated stages, one mixer symbol and one FFN symbol (when the layer has an FFN) per layer."""
    return "|".join("".join(_symbols(k, f) for k, f in zip(r.kinds, r.ffns)) for r in ranks)


def parse_hybrid_pattern(text: str, pp_size: int) -> list[int]:
    """Decoder layers (mixers) per stage of a hybrid pattern; ``ValueError`` on a symbol or stage-count error."""
    stages = text.split("|")
    if len(stages) != pp_size:
        raise ValueError(f"the pattern has {len(stages)} pipeline stages, expected {pp_size}")
    for stage in stages:
        for ch in stage:
            if ch not in _HYBRID_VALID:
                raise ValueError(f"'{ch}' is not a valid layer symbol (valid: {sorted(_HYBRID_VALID)})")
        if not stage:
            raise ValueError("a pipeline stage of the hybrid pattern is empty")
    return [sum(ch in _HYBRID_MIXERS for ch in stage) for stage in stages]


def export_megatron(doc: dict, graph: LayerGraph, source: str = "<mapping>") -> Export:
    """Megatron-LM arguments for ``doc``: pipeline size, layout string and (hybrid models) hybrid pattern."""
    ranks = runtime_stages(doc, graph, "Megatron-LM", source)
    counts = [r.count for r in ranks]
    pp = len(ranks)
    layout = layout_string(counts)
    try:
        parsed = parse_layout(layout, pp, graph.num_hidden_layers)
    except ValueError as exc:
        raise ExportRefused(source, "/stages", f"Megatron-LM would reject layout {layout!r}: {exc}") from None
    if parsed != counts:
        raise ExportRefused(source, "/stages", f"layout {layout!r} reads back as {parsed}, expected {counts}")
    lines = [f"--pipeline-model-parallel-size {pp}", f"--pipeline-model-parallel-layout {shlex.quote(layout)}"]
    warnings: list[str] = []
    if any(k == "linear_attention" for r in ranks for k in r.kinds):
        empty = [r for r in ranks if r.count == 0]
        if empty:
            raise ExportRefused(source, f"/stages/{empty[0].index}",
                                f"stage {empty[0].index} holds no decoder layer; a hybrid layer pattern "
                                "cannot express an empty pipeline stage")
        pattern = hybrid_pattern(ranks)
        try:
            mixers = parse_hybrid_pattern(pattern, pp)
        except ValueError as exc:
            raise ExportRefused(source, "/stages", f"Megatron-LM would reject {pattern!r}: {exc}") from None
        if mixers != counts or sum(mixers) != graph.num_hidden_layers:
            raise ExportRefused(source, "/stages", f"hybrid pattern reads back as {mixers}, expected {counts}")
        lines.append(f"--hybrid-layer-pattern {shlex.quote(pattern)}")
        symbols = len(pattern) - pattern.count("|")
        warnings.append(f"hybrid model: Megatron's hybrid models read --hybrid-layer-pattern ({symbols} "
                        "symbols = their --num-layers) instead of --pipeline-model-parallel-layout")
    return Export(text="\n".join(lines), warnings=tuple(warnings))
