"""Pieces every launch command shares: the plan's limits, cache dtypes, support checks, shell quoting.

A launch command is ``# comment`` lines saying where each value comes from, then one shell line.
``N`` (concurrent requests) is the plan's concurrency ceiling: the smallest stage's, which the
runtimes cut every stage to and placer proved in exact bytes; ``L`` (context) is the workload's
context the plan holds for every one of those requests.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..model import LayerGraph
from .stages import ExportOptions, ExportRefused, RankStage
from .support import RUNTIME_VERSIONS, runtime_support, version_tuple

__all__ = ["PlanLimits", "plan_limits", "shell_line", "check_support", "target_version", "served_model",
           "cache_dtype", "cache_flags", "rank_list", "header"]


@dataclass(frozen=True)
class PlanLimits:
    """What the plan guarantees every stage holds at once."""

    concurrency: int            # requests (the concurrency ceiling over stages)
    context_tokens: int         # tokens per request
    kv_bits: int
    state_bits: int
    conv_state_bits: int
    weight_bits: int


def plan_limits(doc: dict, source: str) -> PlanLimits:
    wl = doc["workload"]
    ceiling = doc["summary"].get("concurrency_ceiling")
    if not isinstance(ceiling, int) or ceiling < 1:
        raise ExportRefused(source, "/summary/concurrency_ceiling",
                            f"the plan holds no full request on some stage (ceiling {ceiling!r}); nothing to launch")
    return PlanLimits(concurrency=ceiling, context_tokens=int(wl["context_tokens"]), kv_bits=int(wl["kv_bits"]),
                      state_bits=int(wl["state_bits"]), conv_state_bits=int(wl["conv_state_bits"]),
                      weight_bits=int(wl["weight_bits"]))


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


def served_model(doc: dict, options: ExportOptions) -> str:
    return options.served_model or doc["model"]["name"]


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


def rank_list(ranks: list[RankStage], limit: int = 8) -> str:
    shown = ", ".join(str(r.index) for r in ranks[:limit])
    return shown + (f", ... ({len(ranks)} in all)" if len(ranks) > limit else "")


def header(doc: dict, runtime: str, version: str, pp: int, options: ExportOptions) -> list[str]:
    where = f"; {options.mapping_path}" if options.mapping_path else ""
    lim = doc["summary"].get("concurrency_ceiling")
    wl = doc["workload"]
    lines = [f"# placer: {doc['model']['name']} on {pp} pipeline ranks of {doc['hardware']['name']} "
             f"({doc['mode']}{where}), for {runtime} {version}",
             f"# every stage holds {lim:,} requests of {wl['context_tokens']:,} tokens (the plan's concurrency "
             f"ceiling and context; KV at {wl['kv_bits']} bits)"]
    if not options.served_model:
        lines.append(f"# {doc['model']['name']} is placer's catalog name: put the checkpoint's Hugging Face id or "
                     "local path in its place (placer export --served-model ID writes it)")
    return lines
