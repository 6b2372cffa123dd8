"""vLLM: ``VLLM_PP_LAYER_PARTITION`` and the ``vllm serve`` command that runs the plan.

vLLM (``vllm/distributed/utils.py::get_pp_indices``) parses the partition with
``[int(layer) for layer in s.split(",")]`` and checks its length against the pipeline size and
its sum against ``num_hidden_layers``; rank r owns layers ``[sum(p[:r]), sum(p[:r]) + p[r])``.
It does not reject zero counts; placer never emits one. The embedding is built on the first rank
and the LM head on the last, so they are not counted.

The command sets the pipeline size, ``--max-num-seqs`` (the plan's concurrency ceiling),
``--max-model-len`` (its context), the KV and recurrent-state dtypes the plan's bytes were counted
at, and, for a hybrid model with ranks that hold no full-attention layer, ``--block-size``: vLLM
0.33.0 skips hybrid block-size alignment on such a rank and fails at startup unless the size is
given (vllm-project/vllm#51752). The value is what the alignment
(``vllm/platforms/interface.py::_align_hybrid_block_size``) picks on the ranks that do hold
attention with the default kernel block (16 tokens, at least 128 for MLA): the fewest aligned
tokens whose attention page holds the largest linear-attention state page.

An attention-data-parallel plan (``parallel.attention_dp``, :mod:`placer.problem.reductions.attention_dp`) runs each
stage's ``G`` devices as ``--data-parallel-size G --enable-expert-parallel``: ``G`` engines of
tensor size 1 (attention, dense layers and the LM head whole on each, as placed), the MoE experts
spread over all of them, and ``--max-num-seqs`` the ceiling's ``1/G`` share per engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from placer.export.command import (
    cache_flags,
    check_support,
    header,
    multi_node_flags,
    multi_node_lines,
    plan_limits,
    rank_list,
    served_model,
    shell_line,
    target_version,
)
from placer.export.expert_flags import vllm_expert_flags
from placer.export.offload import offload_flags
from placer.export.speculative import vllm_speculative
from placer.export.stages import (
    Export,
    ExportOptions,
    ExportRefused,
    RuntimeRank,
    ranks_without_full_attention,
    require_layers_per_rank,
    runtime_stages,
    uniform_degree,
)
from placer.mapping.view import MappingView
from placer.specs.model import LayerGraph
from placer.specs.workload import Workload

__all__ = ["partition_counts", "parse_partition", "check_partition", "hybrid_block_size", "export_vllm",
           "export_partition", "PartitionLaunch", "partition_launch"]

KERNEL_BLOCK_TOKENS = 16        # the smallest kernel block of vLLM's default attention backends
MLA_BLOCK_TOKENS = 128          # hybrid MLA models: a multiple of 128 (TRTLLM / FlashInfer MLA decode)


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


def export_partition(view: MappingView, graph: LayerGraph, runtime: str,
                     source: str) -> tuple[list[RuntimeRank], str]:
    """The ranks and the checked partition string (shared by vLLM and SGLang)."""
    ranks = runtime_stages(view, graph, runtime, source)
    require_layers_per_rank(ranks, runtime, source)
    text = ",".join(str(c) for c in partition_counts(ranks))
    check_partition(text, ranks, graph.num_hidden_layers, runtime, source)
    return ranks, text


@dataclass(frozen=True)
class PartitionLaunch:
    """What a vLLM or SGLang launch is built from: the release, the ranks and their checked
    partition string, the support warnings, the one tensor- and expert-parallel degree of every
    rank."""

    version: str
    ranks: list[RuntimeRank]
    text: str
    warnings: list[str]
    tp: int
    ep: int

    @property
    def pp(self) -> int:
        return len(self.ranks)


RUNTIME_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


def partition_launch(view: MappingView, graph: LayerGraph, runtime: str, source: str, options: ExportOptions, *,
                     tp_flag: str, ep_flag: str, tp_why: str = "") -> PartitionLaunch:
    """The checks and figures every partition-variable runtime (``vllm``, ``sglang``) starts from;
    ``tp_flag`` / ``ep_flag`` name its degrees in a refusal, ``tp_why`` says why stages of
    different tensor-parallel degrees cannot run."""
    name = RUNTIME_NAMES[runtime]
    version = target_version(runtime, options)
    ranks, text = export_partition(view, graph, name, source)
    warnings = check_support(runtime, version, graph, len(ranks), options, source)
    tp = uniform_degree(ranks, "tensor_parallel", name, tp_flag, source, tp_why)
    ep = uniform_degree(ranks, "expert_parallel", name, ep_flag, source)
    return PartitionLaunch(version, ranks, text, warnings, tp, ep)


def hybrid_block_size(graph: LayerGraph, wl: Workload, tensor_parallel: int = 1) -> int:
    """Tokens per KV block that vLLM's hybrid alignment picks on a rank holding attention.

    ``kernel * ceil(state_page / (kernel * attention_page_per_token))`` where ``state_page`` is the
    largest per-request state of one linear-attention layer and ``attention_page_per_token`` the
    largest KV bytes per token of one full-attention layer, both per tensor-parallel rank (an MLA
    latent is whole on every rank), ``kernel`` 16 tokens (128 when the attention is MLA).
    """
    from placer.problem import memory

    attention = [x for x in graph.layers if x.index is not None and x.kind == "attention" and x.part is None]
    linear = [x for x in graph.layers if x.index is not None and x.kind == "linear_attention" and x.part is None]
    mla = any(x.mixer == "mla" for x in attention)
    per_token = max(memory.kv_bytes_per_token(x, wl) for x in attention)
    if not mla:
        per_token = -(-per_token // tensor_parallel)
    state_page = -(-max(memory.state_bytes_per_request(x, wl) for x in linear) // tensor_parallel)
    kernel = MLA_BLOCK_TOKENS if mla else KERNEL_BLOCK_TOKENS
    return kernel * -(-state_page // (kernel * per_token))


def memory_utilization(view: MappingView) -> str | None:
    """``--gpu-memory-utilization`` for a plan made with an explicit ``--reserve``: one minus its
    fraction of memory, as exact decimal text (vLLM never touches the rest). None when the plan
    took the hardware spec's reserve (the catalog GPUs hold back vLLM's default 0.1) or has no
    fraction to give."""
    from fractions import Fraction

    reserve = view.parallel.reserve
    fraction = Fraction(0) if reserve is None else reserve.fraction
    if fraction == 0:
        return None
    left = 1 - fraction
    text = f"{float(left):.6f}".rstrip("0").rstrip(".")
    return text if Fraction(text) == left else str(float(left))


def export_vllm(view: MappingView, graph: LayerGraph, source: str = "<mapping>",
                options: ExportOptions = ExportOptions()) -> Export:
    """``VLLM_PP_LAYER_PARTITION=... vllm serve MODEL ...`` for ``view``, or the partition alone (``bare``)."""
    launch = partition_launch(view, graph, "vllm", source, options, tp_flag="--tensor-parallel-size",
                              ep_flag="expert-parallel degree",
                              tp_why=" (per-stage tensor parallelism is an open request, vllm-project/vllm#27239; "
                                     "solve without --per-stage-tp for a plan vLLM runs)")
    warnings, tp, pp = launch.warnings, launch.tp, launch.pp
    no_attention = ranks_without_full_attention(launch.ranks, graph)
    limits = plan_limits(view, source)
    block = hybrid_block_size(graph, view.workload, tp) if no_attention else None
    if no_attention:
        warnings.append(f"{len(no_attention)} of {pp} ranks hold no full-attention layer (stages "
                        f"{rank_list(no_attention)}): vLLM fails at startup on such a rank without an explicit "
                        f"--block-size (vllm-project/vllm#51752); the command sets --block-size {block}, or "
                        "re-solve with `placer solve --require attention-per-stage`")
    if options.bare:
        return Export(text=launch.text, warnings=tuple(warnings))
    argv = ["vllm", "serve", served_model(view, options), "--pipeline-parallel-size", str(pp)]
    seqs = limits.concurrency
    if view.parallel.attention_dp:
        # attention data parallelism: tp engines of tensor size 1 per stage, experts spread over
        # all of them; each engine schedules its own requests, a 1/tp share of the plan's ceiling
        argv += ["--data-parallel-size", str(tp), "--enable-expert-parallel"]
        seqs = -(-seqs // tp)
    else:
        if tp > 1:
            argv += ["--tensor-parallel-size", str(tp)]
        if launch.ep > 1:
            argv += ["--enable-expert-parallel"]
        if tp > 1 and any(x.kind == "vision" for x in graph.layers):
            argv += ["--mm-encoder-tp-mode", "data"]       # the tower whole on every rank, as planned
    argv += vllm_expert_flags(view)
    argv += ["--max-num-seqs", str(seqs), "--max-model-len", str(limits.context_tokens)]
    utilization = memory_utilization(view)
    if utilization is not None:
        argv += ["--gpu-memory-utilization", utilization]
    argv += cache_flags("vllm", graph, limits, source, kv="--kv-cache-dtype",
                        state=(("conv_state", "--mamba-cache-dtype"), ("state", "--mamba-ssm-cache-dtype")))
    spec_argv, spec_lines = vllm_speculative(view.speculative, graph, options)
    argv += spec_argv
    tier_argv, tier_lines = offload_flags("vllm", options.tier, options.tier_bytes, tp)
    argv += tier_argv
    lines = header(view, "vLLM", launch.version, pp, options) + spec_lines + tier_lines
    if no_attention:
        lines.append(f"# --block-size {block}: {len(no_attention)} of {pp} ranks hold no full-attention layer; "
                     "vLLM skips hybrid block-size alignment there and fails at startup unless the size is given "
                     "(vllm-project/vllm#51752). It is the size the alignment picks on the ranks with attention "
                     "(attention page >= the largest linear-attention state page). Or re-solve with "
                     "`placer solve --require attention-per-stage` for a plan that needs none.")
        argv += ["--block-size", str(block)]
    lines += multi_node_lines(view, "vllm")
    argv += multi_node_flags(view, "vllm")
    lines.append(shell_line({"VLLM_PP_LAYER_PARTITION": launch.text}, argv))
    return Export(text="\n".join(lines), warnings=tuple(warnings))
