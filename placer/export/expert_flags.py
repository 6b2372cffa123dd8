"""The expert-parallel flags of the SGLang and vLLM launch commands: redundant experts and wide
expert-parallel groups (flag names and defaults as SGLang 0.5.23 and vLLM 0.33.0 define them).

* **Redundant experts** (``parallel.redundant_experts``, :mod:`placer.specs.experts`): SGLang
  ``--ep-num-redundant-experts N`` (``fields/exec_.py``, int, default 0) with ``--enable-eplb``
  (its load balancer moves the copies to the hot experts; the copies' bytes are what was placed
  either way); vLLM ``--enable-eplb --eplb-config '{"num_redundant_experts": N}'``
  (``EPLBConfig.num_redundant_experts``, int >= 0, default 0, refused without ``--enable-eplb``).
* **A group spanning nodes** (``group.racks``, :mod:`placer.problem.reductions.wide_ep`): the
  dispatch and combine all-to-alls run on DeepEP, as in the published wide-EP deployments and as
  the simulator and the latency level price them (:mod:`placer.problem.all_to_all`): SGLang ``--moe-a2a-backend
  deepep --deepep-mode auto`` (low-latency kernels for decode batches, normal ones for prefill);
  vLLM ``--all2all-backend deepep_low_latency`` and ``--data-parallel-backend ray`` (its
  data-parallel engines placed over the Ray cluster the command's comment lines start).
* **Experts that do not divide over the ranks** (``E mod ep`` without copies): vLLM's linear
  placement gives the first ``E mod ep`` ranks one more (the plan counts the heaviest); SGLang
  asserts ``(E + N) % ep_size == 0`` (``sglang/srt/eplb/expert_location.py``) and would not start,
  so its export warns with the ``--redundant-experts`` that fixes it.
"""

from __future__ import annotations

import json

from placer.mapping.view import MappingView
from placer.specs.experts import divisible_copies, routed_experts
from placer.specs.model import LayerGraph

__all__ = ["spans_nodes", "sglang_expert_flags", "vllm_expert_flags"]


def spans_nodes(view: MappingView) -> bool:
    """Whether some stage's group spans several nodes (a wide expert-parallel group)."""
    return any(st.group is not None and len(st.group.racks) > 1 for st in view.stages)


def sglang_expert_flags(view: MappingView, graph: LayerGraph, ep: int) -> tuple[list[str], list[str]]:
    """(SGLang launch flags, warnings) for the plan's experts on ``ep`` ranks."""
    copies = view.parallel.redundant_experts
    argv: list[str] = []
    warnings: list[str] = []
    if copies:
        argv += ["--ep-num-redundant-experts", str(copies), "--enable-eplb"]
    if spans_nodes(view):
        argv += ["--moe-a2a-backend", "deepep", "--deepep-mode", "auto"]
    experts = routed_experts(graph)
    if ep > 1 and experts is not None and (experts + copies) % ep:
        fix = divisible_copies(experts, copies, ep)
        warnings.append(f"{experts} experts do not divide over --ep-size {ep}: SGLang requires (experts + "
                        f"redundant) % ep_size == 0 and will not start; re-solve with --redundant-experts {fix} "
                        f"({(experts + fix) // ep} a rank), or run the plan on vLLM (the first {experts % ep} "
                        f"ranks hold one more expert)")
    return argv, warnings


def vllm_expert_flags(view: MappingView) -> list[str]:
    """vLLM launch flags for the plan's redundant experts and a group spanning nodes."""
    argv: list[str] = []
    copies = view.parallel.redundant_experts
    if copies:
        argv += ["--enable-eplb", "--eplb-config", json.dumps({"num_redundant_experts": copies},
                                                              separators=(",", ":"))]
    if spans_nodes(view):
        argv += ["--all2all-backend", "deepep_low_latency"]
        if view.parallel.attention_dp:
            argv += ["--data-parallel-backend", "ray"]
    return argv
