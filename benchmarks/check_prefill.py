"""The prefill model (what every TTFT and every prefill pool's size rests on) against a published
prefill throughput, with the constants as the hardware specs hold them (nothing here is fitted).

    python benchmarks/check_prefill.py

DeepSeek-V3 at FP8 on H100 nodes, 4,096-token prompts: SGLang's large-scale expert-parallel
deployment reports 50,302 prompt tokens/s per node for prefill alone (lm-sys blog
2025-05-05-large-scale-ep.md; V). That deployment runs a prefill instance over 4 nodes with expert
parallelism, attention data parallelism and DeepEP, batching many prompts per step; placer places
the model as a pipeline of tp 8 nodes (the fewest that hold it) and prices one prompt a step with
the calibrated per-operation model: the chunk's tokens are the GEMMs' M, each GEMM at the compute
rate that M reaches, beside the weight, expert, collective and per-layer costs
(placer/simulate/prefill.py, placer/simulate/cost.py: roofline_us). The figure is
``prompt / (busiest device's time per prompt)`` per node: the rate a replica starts prompts at
(placer/planning/disagg.py: prefill_times).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer import Placement, Requirements, SolverSettings, load_fleet, load_model, workload_for  # noqa: E402
from placer.planning.disagg import prefill_times  # noqa: E402
from placer.planning.solve import build_instance, place_instance  # noqa: E402

MEASURED = 50_302            # prompt tokens/s per node
PROMPT = 4096


def rows() -> list[dict]:
    """One row per layout (experts tensor-split, experts spread): the prompt alone, the interval,
    prompt tokens/s per node and model / measured."""
    model = load_model("deepseek-v3")
    fleet = load_fleet("h100", racks=4)
    wl = workload_for(model, context=PROMPT, weight_bits=8, kv_bits=16, concurrency=4, micro_batch=PROMPT)
    out = []
    for ep in (False, True):
        inst = build_instance(model, fleet, wl, Requirements(placement=Placement(mode="contiguous")), tp=8, ep=ep)
        solved = place_instance(inst, SolverSettings(method="dp"), reports=False, keep_interrupted=False)
        if not solved.result.feasible:
            continue
        alone_us, interval_us = prefill_times(solved, PROMPT, PROMPT)
        nodes = solved.stages
        rate = PROMPT / (interval_us / 1e6) / nodes
        out.append(dict(layout="tp 8 ep" if ep else "tp 8", nodes=nodes, alone_us=alone_us, interval_us=interval_us,
                        tokens_per_s_per_node=rate, error=rate / MEASURED))
    return out


def main() -> int:
    print(f"deepseek-v3 FP8 on H100 nodes, {PROMPT:,}-token prompts; measured {MEASURED:,} prompt tokens/s per node "
          "(SGLang, 4-node EP prefill instance)")
    for r in rows():
        print(f"  {r['layout']:<7} x {r['nodes']} nodes: a prompt alone {r['alone_us'] / 1e3:,.1f} ms, one started "
              f"every {r['interval_us'] / 1e3:,.1f} ms: {r['tokens_per_s_per_node']:,.0f} prompt tokens/s per node, "
              f"{r['error']:.2f}x measured")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
