"""Other catalog models execute token-exact: each mixer family, each mode, placed by placer.

qwen3-next-80b (Gated DeltaNet + GQA, MoE with a shared expert) split into blocks (3 expert groups); jamba-1.5-large
(Mamba + GQA, MoE) contiguous; gpt-oss-120b (sliding + full GQA, MoE) split into 2 shards per
layer; minimax-text-01 (lightning + GQA, MoE) contiguous. 33 requests with at most 32 live.
"""

from __future__ import annotations

import pytest

from placer import load_fleet, load_model, make_instance, workload_for
from placer.algorithms import place
from placer.executor.reference import context_for, make_requests
from placer.executor.run import compare_with_reference, execute
from placer.executor.tiny import tiny_spec

REQUESTS = make_requests(33, 3, seed=4, max_prompt=2)

CASES = [
    ("qwen3-next-80b", "split", "block", "dp", {"gated_deltanet", "gqa"}),
    ("jamba-1.5-large", "contiguous", "layer", "greedy", {"mamba", "gqa"}),
    ("gpt-oss-120b", "split", "shards:2", "dp", {"sliding", "gqa"}),
    ("minimax-text-01", "contiguous", "layer", "greedy", {"lightning", "gqa"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,mode,granularity,method,mixers", CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_catalog_model_runs_token_exact(name, mode, granularity, method, mixers):
    model, fleet = load_model(name), load_fleet("wse-3t")
    inst = make_instance(model, fleet, workload_for(model), mode=mode, granularity=granularity,
                         expert_groups=3)
    result = place(inst, method=method)
    assert result.feasible
    route = [inst.devices[a].id for a in result.assignment]
    spec = tiny_spec(inst.nodes, route, seed=4, context_tokens=context_for(REQUESTS), model_name=name,
                     base=model)
    assert {x.mixer for x in spec.layers if x.mixer} == mixers
    assert len(spec.devices) == result.devices_used
    run = execute(spec, REQUESTS, micro_batch=3, max_live=32)
    check = compare_with_reference(spec, REQUESTS, run)
    assert check["mismatched_requests"] == []
    assert check["logits_match"], check["max_logit_abs_diff"]
    assert check["memory_match"], [m for m in check["memory"] if not m["matches"]]
    assert run.peak_live == 32
    assert sum(len(v) for v in run.tokens.values()) == sum(r.max_new_tokens for r in REQUESTS)
    if granularity == "block":
        assert any(n.part == "experts" for n in spec.nodes)
    if granularity.startswith("shards"):
        assert all(n.part == "shard" for n in spec.nodes)
