"""SGLang: ``SGLANG_PP_LAYER_PARTITION`` and the ``sglang.launch_server`` command that runs the plan.

SGLang (``python/sglang/srt/distributed/utils.py::get_pp_indices``) parses and checks the string
exactly as vLLM does; only its default split differs, which is why placer always emits an explicit
one. SGLang ignores the variable when the pipeline size is 1. The command sets ``--pp-size``,
``--max-running-requests`` (the plan's concurrency ceiling), ``--context-length`` (its context),
``--kv-cache-dtype`` and, for models with recurrent state, ``--mamba-ssm-dtype``.

An attention-data-parallel plan (``parallel.attention_dp``, :mod:`placer.problem.reductions.attention_dp`) runs each
stage's group as ``--tp-size G --attn-dp-size G`` (SGLang 0.5.23's field ``attn_dp_size``, "the
number of data-parallel attention groups inside the TP group": G groups of one rank, attention
whole on every rank, requests split; the older ``--dp-size G --enable-dp-attention`` is a
deprecated spelling that 0.5.23 still translates, to be removed after 2026-12-31) with its experts
spread by ``--ep-size G``, ``--moe-dense-tp-size 1`` (dense MLPs replicated, as placed) and
``--enable-dp-lm-head`` (the LM head replicated, as placed). Redundant experts and groups spanning
nodes add the flags of :mod:`placer.export.expert_flags`.
"""

from __future__ import annotations

from placer.export.command import (
    cache_flags,
    header,
    multi_node_flags,
    multi_node_lines,
    plan_limits,
    served_model,
    shell_line,
)
from placer.export.expert_flags import sglang_expert_flags
from placer.export.offload import offload_flags
from placer.export.speculative import sglang_speculative
from placer.export.stages import Export, ExportOptions
from placer.export.vllm import partition_launch
from placer.mapping.view import MappingView
from placer.specs.model import LayerGraph

__all__ = ["export_sglang"]


def export_sglang(view: MappingView, graph: LayerGraph, source: str = "<mapping>",
                  options: ExportOptions = ExportOptions()) -> Export:
    """``SGLANG_PP_LAYER_PARTITION=... python -m sglang.launch_server ...``, or the partition alone (``bare``)."""
    launch = partition_launch(view, graph, "sglang", source, options, tp_flag="--tp-size", ep_flag="--ep-size",
                              tp_why=" (one tensor-parallel group size for the whole pipeline; solve without "
                                     "--per-stage-tp)")
    if options.bare:
        return Export(text=launch.text, warnings=tuple(launch.warnings))
    limits = plan_limits(view, source)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", served_model(view, options),
            "--pp-size", str(launch.pp)]
    if launch.tp > 1:
        argv += ["--tp-size", str(launch.tp)]
    if launch.ep > 1:
        argv += ["--ep-size", str(launch.ep)]
    if launch.tp > 1 and any(x.kind == "vision" for x in graph.layers):
        argv += ["--mm-enable-dp-encoder"]                  # the tower whole on every rank, as planned
    if view.parallel.attention_dp:
        argv += ["--attn-dp-size", str(launch.tp), "--moe-dense-tp-size", "1", "--enable-dp-lm-head"]
    expert_argv, expert_warnings = sglang_expert_flags(view, graph, launch.ep)
    argv += expert_argv
    argv += ["--max-running-requests", str(limits.concurrency), "--context-length", str(limits.context_tokens)]
    argv += cache_flags("sglang", graph, limits, source, kv="--kv-cache-dtype", state=(("state", "--mamba-ssm-dtype"),))
    spec_argv, spec_lines = sglang_speculative(view.speculative, graph, options, served_model(view, options))
    argv += spec_argv
    tier_argv, tier_lines = offload_flags("sglang", options.tier, options.tier_bytes, launch.tp)
    argv += tier_argv
    argv += multi_node_flags(view, "sglang")
    lines = header(view, "SGLang", launch.version, launch.pp, options) + spec_lines + tier_lines
    lines += multi_node_lines(view, "sglang")
    lines.append(shell_line({"SGLANG_PP_LAYER_PARTITION": launch.text}, argv))
    return Export(text="\n".join(lines), warnings=tuple(launch.warnings) + tuple(expert_warnings))
