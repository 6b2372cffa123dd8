"""What a pipeline runtime sees of a mapping: per rank, the decoder layers it builds.

Runtimes (vLLM, SGLang, Megatron, torch.distributed.pipelining) take contiguous ranges of decoder
layers in rank order; the embedding rides on the first rank and the LM head on the last. A
``free`` mapping (a device revisited) or a ``split`` mapping that cuts a layer across devices has
no such form and is refused here with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.mapping.view import MappingView
from placer.problem.runtime_rules import is_hybrid
from placer.specs.errors import InvalidSpec
from placer.specs.model import Layer, LayerGraph, is_draft_node

__all__ = ["RuntimeRank", "Export", "ExportOptions", "runtime_stages", "is_hybrid", "ExportRefused",
           "require_layers_per_rank", "ranks_without_full_attention", "uniform_degree"]


class ExportRefused(InvalidSpec):
    """A valid mapping that the requested runtime cannot express (exit code 2, with the reason)."""


@dataclass(frozen=True)
class RuntimeRank:
    """What a pipeline runtime builds on one rank (one :class:`~placer.mapping.view.MappingStage`):
    its device and the decoder layers (0-based indices, ascending)."""

    index: int
    device: str
    decoder: tuple[int, ...]
    kinds: tuple[str, ...]          # kind of each decoder layer, same order
    ffns: tuple[str | None, ...]    # FFN of each decoder layer (dense, moe or None)
    embedding: bool
    head: bool
    mixers: tuple[str | None, ...] = ()   # mixer type of each decoder layer (gqa, mla, kda, ...)
    # the stage's device-group degrees (1 for a pure pipeline); exporters turn them into
    # --tensor-parallel-size / expert-parallel flags and refuse what a runtime cannot express
    tensor_parallel: int = 1
    expert_parallel: int = 1

    @property
    def count(self) -> int:
        return len(self.decoder)


def runtime_stages(view: MappingView, graph: LayerGraph, runtime: str,
                   source: str = "<mapping>") -> list[RuntimeRank]:
    """The ranks of ``view`` (a validated mapping of ``graph``, refined as the mapping records).

    Raises :class:`ExportRefused` for free mappings, split mappings with a layer cut across devices,
    and mappings whose decoder layers are not in ascending contiguous ranges by rank.
    """
    if view.mode == "free":
        raise ExportRefused(source, "/mode",
                            f"{runtime} runs contiguous layer ranges in rank order; a free mapping revisits "
                            "devices and cannot be exported (solve with --mode contiguous)")
    by_name: dict[str, Layer] = {x.name: x for x in graph.layers}
    owner: dict[int, set[int]] = {}
    for k, st in enumerate(view.stages):
        for name in st.layers:
            layer = by_name[name]
            if layer.index is not None:
                owner.setdefault(layer.index, set()).add(k)
    cut = sorted(i for i, ks in owner.items() if len(ks) > 1)
    if cut:
        where = ", ".join(f"layers.{i} (stages {', '.join(map(str, sorted(owner[i])))})" for i in cut[:3])
        raise ExportRefused(source, "/stages",
                            f"{runtime} places whole layers; this split mapping cuts {len(cut)} layer(s) across "
                            f"devices: {where}{' ...' if len(cut) > 3 else ''}")
    kind_of: dict[int, str] = {}
    ffn_of: dict[int, str] = {}
    mixer_of: dict[int, str | None] = {}
    for x in graph.layers:
        if x.index is not None:
            # a block-refined layer's FFN nodes carry kind "ffn"; a whole FFN-only layer (Nemotron-H) too
            if x.kind != "ffn" or x.part is None:
                kind_of.setdefault(x.index, x.kind)
                mixer_of.setdefault(x.index, x.mixer)
            if x.ffn is not None:
                ffn_of.setdefault(x.index, x.ffn)
    ranks = []
    for k, st in enumerate(view.stages):
        layers = [by_name[n] for n in st.layers]
        decoder = sorted({x.index for x in layers if x.index is not None})
        ranks.append(RuntimeRank(
            index=k, device=st.device, decoder=tuple(decoder),
            kinds=tuple(kind_of[i] for i in decoder),
            ffns=tuple(ffn_of.get(i) for i in decoder),
            # a draft model's own embedding and head ride with the drafter on the last rank
            embedding=any(x.kind == "embedding" and not is_draft_node(x) for x in layers),
            head=any(x.kind == "lm_head" and not is_draft_node(x) for x in layers),
            mixers=tuple(mixer_of.get(i) for i in decoder),
            tensor_parallel=st.tp, expert_parallel=st.ep))
    flat = [i for r in ranks for i in r.decoder]
    if flat != list(range(graph.num_hidden_layers)):
        raise ExportRefused(source, "/stages", f"{runtime} needs decoder layers 0..{graph.num_hidden_layers - 1} "
                                               "in ascending contiguous ranges by rank")
    for r in ranks:
        if r.embedding and r.index != 0:
            raise ExportRefused(source, f"/stages/{r.index}", f"{runtime} builds the embedding on the first rank; "
                                                              f"this mapping puts it on stage {r.index}")
        if r.head and r.index != len(ranks) - 1:
            raise ExportRefused(source, f"/stages/{r.index}", f"{runtime} builds the LM head on the last rank; "
                                                              f"this mapping puts it on stage {r.index}")
    return ranks


def require_layers_per_rank(ranks: list[RuntimeRank], runtime: str, source: str) -> None:
    """Refuse a rank that builds no decoder layer (a rank of only the embedding or the head)."""
    for r in ranks:
        if r.count == 0:
            what = "the embedding" if r.embedding else ("the LM head" if r.head else "nothing")
            raise ExportRefused(source, f"/stages/{r.index}",
                                f"stage {r.index} ({r.device}) holds no decoder layer (only {what}); {runtime} "
                                "needs at least one decoder layer per rank")


def uniform_degree(ranks: list[RuntimeRank], attr: str, runtime: str, flag: str, source: str, why: str = "") -> int:
    """The one ``attr`` degree all ranks share; refuse when stages differ (the runtime takes one value;
    ``why`` adds the runtime's own word on it)."""
    values = sorted({getattr(r, attr) for r in ranks})
    if len(values) > 1:
        raise ExportRefused(source, "/stages", f"{runtime} takes one {flag} for every pipeline rank; this mapping's "
                                               f"stages use {', '.join(map(str, values))}{why}")
    return values[0]


@dataclass(frozen=True)
class Export:
    """An exporter's output: ``text`` for stdout, ``warnings`` for stderr (one line each)."""

    text: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExportOptions:
    """How to export: ``bare`` prints the runtime's value alone (no command), ``force`` exports for a
    runtime the support table says cannot run the model, ``runtime_version`` picks the release whose
    syntax and support apply (default: :data:`~placer.export.support.RUNTIME_VERSIONS`), ``served_model``
    is what the launch command loads (a Hugging Face id or a checkpoint directory; default: the
    mapping's model name), ``mapping_path`` names the mapping in the command's comment."""

    bare: bool = False
    force: bool = False
    runtime_version: str | None = None
    served_model: str | None = None
    mapping_path: str | None = None
    served_draft_model: str | None = None     # the draft checkpoint a speculative plan's command loads
    tier: str | None = None                   # a KV tier below the GPU to offload to (placer.export.offload)
    tier_bytes: int | None = None             # bytes of it per GPU (default: the hardware spec's)


def ranks_without_full_attention(ranks: list[RuntimeRank], graph: LayerGraph) -> list[RuntimeRank]:
    """For hybrid models, the ranks that hold no full-attention layer (vllm-project/vllm#51752); else []."""
    if not is_hybrid(graph):
        return []
    return [r for r in ranks if "attention" not in r.kinds]
