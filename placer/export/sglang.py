"""SGLang: ``SGLANG_PP_LAYER_PARTITION`` and the ``sglang.launch_server`` command that runs the plan.

SGLang (``python/sglang/srt/distributed/utils.py::get_pp_indices``) parses and checks the string
exactly as vLLM does; only its default split differs, which is why placer always emits an explicit
one. SGLang ignores the variable when the pipeline size is 1. The command sets ``--pp-size``,
``--max-running-requests`` (the plan's concurrency ceiling), ``--context-length`` (its context),
``--kv-cache-dtype`` and, for models with recurrent state, ``--mamba-ssm-dtype``.
"""

from __future__ import annotations

from ..model import LayerGraph
from .command import cache_dtype, check_support, header, plan_limits, served_model, shell_line, target_version
from .stages import Export, ExportOptions, uniform_degree
from .vllm import export_partition

__all__ = ["export_sglang"]


def export_sglang(doc: dict, graph: LayerGraph, source: str = "<mapping>",
                  options: ExportOptions = ExportOptions()) -> Export:
    """``SGLANG_PP_LAYER_PARTITION=... python -m sglang.launch_server ...``, or the partition alone (``bare``)."""
    version = target_version("sglang", options)
    ranks, text = export_partition(doc, graph, "SGLang", source)
    pp = len(ranks)
    warnings = check_support("sglang", version, graph, pp, options, source)
    tp = uniform_degree(ranks, "tensor_parallel", "SGLang", "--tp-size", source,
                        " (one tensor-parallel group size for the whole pipeline; solve without --per-stage-tp)")
    ep = uniform_degree(ranks, "expert_parallel", "SGLang", "--ep-size", source)
    if options.bare:
        return Export(text=text, warnings=tuple(warnings))
    limits = plan_limits(doc, source)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", served_model(doc, options),
            "--pp-size", str(pp)]
    if tp > 1:
        argv += ["--tp-size", str(tp)]
    if ep > 1:
        argv += ["--ep-size", str(ep)]
    argv += ["--max-running-requests", str(limits.concurrency), "--context-length", str(limits.context_tokens)]
    if any(x.has_kv for x in graph.layers):
        argv += ["--kv-cache-dtype", cache_dtype("sglang", "kv", limits.kv_bits, "--kv-cache-dtype", source)]
    if any(x.has_state for x in graph.layers):
        argv += ["--mamba-ssm-dtype", cache_dtype("sglang", "state", limits.state_bits, "--mamba-ssm-dtype", source)]
    lines = header(doc, "SGLang", version, pp, options)
    lines.append(shell_line({"SGLANG_PP_LAYER_PARTITION": text}, argv))
    return Export(text="\n".join(lines), warnings=tuple(warnings))
