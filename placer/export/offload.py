"""KV offloading flags: a launch command that parks idle KV in a tier below the GPU.

``placer export --tier host [--tier-size SIZE]`` adds the runtime's own setting for the tier a
session plan uses (:mod:`placer.specs.tiers`; ``shared/reference/fleet_facts.md`` section 3):

* vLLM 0.33.0: ``--kv-offloading-size GIB --kv-offloading-backend native`` (the size in GiB is the
  total over a stage's tensor-parallel ranks, ``vllm/config/cache.py``; ``native`` selects the
  ``OffloadingConnector`` with ``cpu_bytes_to_use`` = size x 2^30, ``vllm/config/vllm.py``). It
  offloads to CPU memory only: an ``nvme`` or ``remote`` tier has no vLLM flag of its own (LMCache
  or a KV connector does it, configured outside the command).
* SGLang 0.5.23: ``--enable-hierarchical-cache --hicache-size GB --hicache-write-policy
  write_through`` (``sglang/srt/arg_groups/fields/memory.py``; the size an integer of GB of host
  memory per rank, U: per rank as SGLang allocates one host pool per scheduler process;
  write-through, as placer's session simulation assumes). A lower tier is a storage backend
  (``--hicache-storage-backend``), configured with its own service: not exported.
* Megatron-LM and torch pipelining: no KV offloading setting; the export says so.
"""

from __future__ import annotations

__all__ = ["offload_flags", "OFFLOAD_RUNTIMES"]

OFFLOAD_RUNTIMES = ("vllm", "sglang")


def offload_flags(runtime: str, tier: str | None, tier_bytes: int | None, tp: int) -> tuple[list[str], list[str]]:
    """(launch flags, comment lines) of ``tier`` with ``tier_bytes`` per GPU for ``runtime``
    (``tp``: a stage's tensor-parallel ranks); nothing when no tier is asked for."""
    if tier is None:
        return [], []
    if runtime not in OFFLOAD_RUNTIMES:
        return [], [f"# {runtime} has no KV offloading setting: the {tier} tier of the plan is not exported"]
    if tier != "host":
        return [], [f"# the {tier} tier has no {runtime} launch flag (vLLM offloads to CPU memory only; SGLang "
                    f"takes a storage backend with its own service): not exported"]
    size = tier_bytes or 0
    if runtime == "vllm":
        gib = size * tp / 2**30
        return (["--kv-offloading-size", f"{gib:.1f}", "--kv-offloading-backend", "native"],
                [f"# KV offloading: {size / 1e9:,.0f} GB of host memory per GPU for idle sessions' KV "
                 f"({gib:,.1f} GiB over {tp} tensor-parallel rank(s), vLLM's OffloadingConnector)"])
    gb = max(1, int(size // 10**9))
    return (["--enable-hierarchical-cache", "--hicache-size", str(gb), "--hicache-write-policy", "write_through"],
            [f"# hierarchical cache: {gb:,} GB of host memory per rank for idle sessions' KV, written through"])
