"""Pieces every launch command shares: the plan's limits, cache dtypes, support checks, shell quoting.

A launch command is ``# comment`` lines saying where each value comes from, then one shell line.
``N`` (concurrent requests) is the plan's concurrency ceiling: the smallest stage's, which the
runtimes cut every stage to and placer proved in exact bytes; ``L`` (context) is the workload's
context the plan holds for every one of those requests.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath

from placer.export.stages import ExportOptions, ExportRefused, RuntimeRank
from placer.export.support import RUNTIME_VERSIONS, runtime_support, version_tuple
from placer.mapping.view import MappingView
from placer.specs.model import LayerGraph
from placer.specs.units import plural

__all__ = ["PlanLimits", "plan_limits", "shell_line", "check_support", "target_version", "served_model",
           "default_served_model", "cache_dtype", "cache_flags", "rank_list", "header", "plan_nodes",
           "is_wafer_plan", "multi_node_lines", "multi_node_flags"]


@dataclass(frozen=True)
class PlanLimits:
    """What the plan guarantees every stage holds at once."""

    concurrency: int            # requests: the concurrency ceiling over stages, or a speed floor's load
    context_tokens: int         # tokens per request
    kv_bits: int
    state_bits: int
    conv_state_bits: int
    weight_bits: int
    ceiling: int = 0            # the concurrency ceiling over stages (what memory holds)


def plan_limits(view: MappingView, source: str) -> PlanLimits:
    """The requests every stage serves at once and their context. A plan made for a speed floor
    (``serving``) serves its live requests per replica, fewer than memory holds: more would slow
    every user below the floor."""
    wl, ceiling = view.workload, view.summary.concurrency_ceiling
    if not isinstance(ceiling, int) or ceiling < 1:
        raise ExportRefused(source, "/summary/concurrency_ceiling",
                            f"the plan holds no full request on some stage (ceiling {ceiling!r}); nothing to launch")
    serving = view.serving
    load = ceiling if serving is None else min(ceiling, serving.live_per_replica)
    return PlanLimits(concurrency=load, context_tokens=wl.context_tokens, kv_bits=wl.kv_bits,
                      state_bits=wl.state_bits, conv_state_bits=wl.conv_state_bits,
                      weight_bits=wl.weight_bits, ceiling=ceiling)


def target_version(runtime: str, options: ExportOptions) -> str:
    version = options.runtime_version or RUNTIME_VERSIONS[runtime]
    if version != "main":
        try:
            version_tuple(version)
        except ValueError as exc:
            raise ExportRefused("--runtime-version", "runtime_version", str(exc)) from None
    return version


def check_support(runtime: str, version: str, graph: LayerGraph, pp_size: int, options: ExportOptions,
                  source: str) -> list[str]:
    """Refuse (unless ``force``) a model the runtime release cannot run; the warning lines to print."""
    verdict = runtime_support(runtime, version, graph.architecture or None, pp_size)
    if verdict.runs is False:
        if not options.force:
            raise ExportRefused(source, "/model", f"{verdict.reason}; --force exports anyway")
        return [f"{verdict.reason} (exported anyway: --force)"]
    if verdict.runs is None and verdict.reason:
        return [f"support not checked: {verdict.reason}"]
    return []


# org--repo, as Hugging Face's cache names a repository (models--org--repo) and as download tools name
# its files (org--repo_config.json): the repository id is org/repo
_HUB_NAME = re.compile(r"^(?:models--)?([A-Za-z0-9][\w.-]*?)--([A-Za-z0-9][\w.-]*?)(?:[_.-]config)?$")


def default_served_model(view: MappingView) -> tuple[str, str]:
    """(what the launch command loads when ``--served-model`` is not given, where that came from).

    A model read from a checkpoint's ``config.json`` is served from that checkpoint directory; a
    model named ``org--repo`` (a hub cache or download name) as the Hugging Face id ``org/repo``;
    anything else (a catalog name) by its name, which the user has to replace."""
    model = view.model
    source = model.source
    if source.endswith(".json") and PurePath(source).name == "config.json":
        return str(PurePath(source).parent), "the directory of the config.json the plan was made from"
    for text in (model.name, PurePath(source).stem if source.endswith(".json") else ""):
        m = _HUB_NAME.match(text)
        if m:
            return f"{m.group(1)}/{m.group(2)}", f"the Hugging Face id in the model's name {model.name!r}"
    return model.name, ""


def served_model(view: MappingView, options: ExportOptions) -> str:
    return options.served_model or default_served_model(view)[0]


def is_wafer_plan(view: MappingView) -> bool:
    """The mapping places its stages on wafers: placer names wafer devices ``r<rack>w<slot>`` and GPUs
    ``r<rack>g<slot>`` (``placer.specs.fleet``)."""
    return any(re.fullmatch(r"r\d+w\d+", st.device) for st in view.stages)


def plan_nodes(view: MappingView) -> list[int]:
    """The nodes (racks: a GPU rack is one NVLink node) the mapping's stages run on, in pipeline order."""
    return list(dict.fromkeys(r for st in view.stages
                              for r in (st.group.racks if st.group is not None and st.group.racks else (st.rack,))))


# workload bits -> the runtime's cache dtype names; a width the runtime has no dtype for is refused
_KV_DTYPES = {"vllm": {8: "fp8", 16: "bfloat16", 32: "float32"},
              "sglang": {8: "fp8_e4m3", 16: "bfloat16"}}
_STATE_DTYPES = {16: "bfloat16", 32: "float32"}


def cache_dtype(runtime: str, what: str, bits: int, flag: str, source: str) -> str:
    table = _KV_DTYPES[runtime] if what == "kv" else _STATE_DTYPES
    if bits not in table:
        raise ExportRefused(source, f"/workload/{what}_bits",
                            f"{runtime} has no {flag} of {bits} bits (it stores {', '.join(map(str, table))}); "
                            f"the plan's byte counts would not hold: re-solve at one of those precisions")
    return table[bits]


def cache_flags(runtime: str, graph: LayerGraph, limits: PlanLimits, source: str, *, kv: str,
                state: tuple[tuple[str, str], ...]) -> list[str]:
    """The cache-dtype flags of a launch command at the plan's bits: ``kv`` when the model keeps a
    KV cache; each ``(what, flag)`` of ``state`` (``what`` a workload field, ``state`` or
    ``conv_state``) when it keeps recurrent state."""
    argv: list[str] = []
    if any(x.has_kv for x in graph.layers):
        argv += [kv, cache_dtype(runtime, "kv", limits.kv_bits, kv, source)]
    if any(x.has_state for x in graph.layers):
        for what, flag in state:
            argv += [flag, cache_dtype(runtime, what, getattr(limits, f"{what}_bits"), flag, source)]
    return argv


def shell_line(env: dict[str, str], argv: list[str]) -> str:
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *(shlex.quote(a) for a in argv)])


def rank_list(ranks: list[RuntimeRank], limit: int = 8) -> str:
    shown = ", ".join(str(r.index) for r in ranks[:limit])
    return shown + (f", ... ({len(ranks)} in all)" if len(ranks) > limit else "")


def header(view: MappingView, runtime: str, version: str, pp: int, options: ExportOptions) -> list[str]:
    where = f"; {options.mapping_path}" if options.mapping_path else ""
    lim = view.summary.concurrency_ceiling
    wl = view.workload
    lines = [f"# placer: {view.model.name} on {plural(pp, 'pipeline rank')} of {view.hardware.name} "
             f"({view.mode}{where}), for {runtime} {version}"]
    if is_wafer_plan(view):
        lines.append(f"# {view.hardware.name} is a wafer fleet and {runtime} runs on GPUs: this is the split a "
                     f"GPU pipeline of the same stages would take, not a launch for these wafers (solve on a GPU "
                     f"fleet, e.g. -H h100, for a plan {runtime} runs as written)")
    serving = view.serving
    if serving is not None:
        k = serving.replicas
        lines.append(f"# every stage serves {serving.live_per_replica:,} requests of {wl.context_tokens:,} tokens, "
                     f"the load that keeps each user at or above the speed floor of "
                     f"{serving.min_user_tokens_per_s:,.1f} tokens/s (memory holds {lim:,}; KV at "
                     f"{wl.kv_bits} bits)")
        if k > 1:
            lines.append(f"# {k} replicas serve the {serving.planned_live_requests:,} planned live requests: run this "
                         f"command once per replica, each on its own {plural(view.summary.devices_used, 'device')} "
                         f"(no device shared), behind one load balancer")
    else:
        lines.append(f"# every stage holds {lim:,} requests of {wl.context_tokens:,} tokens (the plan's concurrency "
                     f"ceiling and context; KV at {wl.kv_bits} bits)")
    dropped = view.model.dropped
    if dropped:
        lines.append(f"# planned without {', '.join(dropped)} (--text-only): load the text model only, or the "
                     f"runtime's memory holds what the plan left out")
    if not options.served_model:
        name, why = default_served_model(view)
        if why:
            lines.append(f"# serves {name}: {why} (placer export --served-model ID serves another)")
        else:
            lines.append(f"# {name} is placer's catalog name: put the checkpoint's Hugging Face id or "
                         "local path in its place (placer export --served-model ID writes it)")
    return lines


def multi_node_lines(view: MappingView, runtime: str) -> list[str]:
    """Comment lines that say how to start a GPU plan spanning several nodes, empty on one node:
    vLLM runs a pipeline across nodes on a Ray cluster (``ray start`` on every node, then the
    command on the head node with ``--distributed-executor-backend ray``); SGLang starts the same
    command on every node with its ``--node-rank`` (the flags are :func:`multi_node_flags`)."""
    nodes = plan_nodes(view)
    if len(nodes) < 2 or is_wafer_plan(view):
        return []
    racks = ", ".join(f"r{r}" for r in nodes)
    head = f"# {len(nodes)} nodes ({racks}; node 0 = r{nodes[0]}, which holds stage 0; HEAD_IP = its address):"
    if runtime == "vllm":
        return [head + " vLLM runs the pipeline on a Ray cluster",
                f"#   on r{nodes[0]}: ray start --head --port=6379",
                f"#   on {', '.join(f'r{r}' for r in nodes[1:])}: ray start --address=HEAD_IP:6379",
                f"#   then on r{nodes[0]}, once `ray status` lists every node, the command below"]
    return [head + " run the command below on every node with its --node-rank",
            *(f"#   on r{r}: the same command with --node-rank {k}" for k, r in enumerate(nodes) if k)]


def multi_node_flags(view: MappingView, runtime: str) -> list[str]:
    """The launch flags of a multi-node GPU plan for node 0 (see :func:`multi_node_lines`)."""
    nodes = plan_nodes(view)
    if len(nodes) < 2 or is_wafer_plan(view):
        return []
    if runtime == "vllm":
        return ["--distributed-executor-backend", "ray"]
    return ["--nnodes", str(len(nodes)), "--node-rank", "0", "--dist-init-addr", "HEAD_IP:5000"]
