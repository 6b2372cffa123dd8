"""The numeric executor on a hand-written model holding every mixer kind.

Placements are written by hand so that stage boundaries fall where the interesting cases are: a
free-mode route that returns to a device, block nodes (mixer / expert groups) on different
devices, and shards of one layer spread over three devices.
"""

from __future__ import annotations

import numpy as np
import pytest

from placer.executor.reference import make_requests
from placer.executor.run import RunOptions, compare_with_reference, execute, reference_run, run_placement
from placer.executor.tiny import expected_request_bytes, node_program, tiny_layer_graph, tiny_spec
from placer.executor.tiny_numerics import TINY_MIXERS, alloc_cache
from placer.problem import memory
from placer.problem.reductions.refine import refine
from placer.specs.errors import InvalidSpec
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload

EVERY_MIXER = {
    "name": "every-mixer", "hidden_size": 256, "vocab_size": 1000,
    "mixers": {
        "g": {"type": "gqa", "num_heads": 8, "num_kv_heads": 2, "head_dim": 32},
        "a": {"type": "mha", "num_heads": 8, "head_dim": 32},
        "s": {"type": "sliding", "num_heads": 8, "num_kv_heads": 2, "sliding_window": 128},
        "m": {"type": "mla", "num_heads": 8, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
              "qk_rope_head_dim": 8, "v_head_dim": 16},
        "k": {"type": "kda", "num_heads": 4, "head_dim": 32},
        "d": {"type": "gated_deltanet", "num_k_heads": 2, "num_v_heads": 4, "head_k_dim": 32, "head_v_dim": 32},
        "l": {"type": "lightning", "num_heads": 4, "head_dim": 32},
        "b": {"type": "mamba", "d_state": 16},
        "c": {"type": "mamba2", "d_state": 16, "num_heads": 8},
    },
    "ffns": {"dense": {"type": "dense", "intermediate_size": 512},
             "moe": {"type": "moe", "num_experts": 16, "experts_per_token": 2, "moe_intermediate_size": 64,
                     "num_shared_experts": 1}},
    "layer_types": {"K": {"mixer": "k", "ffn": "moe"}, "G": {"mixer": "g", "ffn": "moe"},
                    "D": {"mixer": "d", "ffn": "dense"}, "A": {"mixer": "a", "ffn": "dense"},
                    "S": {"mixer": "s", "ffn": "moe"}, "M": {"mixer": "m", "ffn": "dense"},
                    "L": {"mixer": "l"}, "B": {"mixer": "b", "ffn": "moe"}, "C": {"mixer": "c", "ffn": "dense"}},
    "pattern": "K G D A S M L B C",
}
MODEL = model_from_dict(EVERY_MIXER)
REQUESTS = make_requests(33, 5, seed=3)   # one more than max_live: the 33rd starts when one finishes
MAX_LIVE = 32


def _route(layers, cut):
    """Devices d0, d1, ... per node: ``cut(i, layer)`` returns the device number of node i."""
    return [f"d{cut(i, x)}" for i, x in enumerate(layers)]


def _free_route(layers):
    # layers 0-1 on d0, 2-4 on d1, 5-6 back on d0, the rest on d2: d0 is visited twice per token
    def cut(i, x):
        if x.index is None:
            return 0 if x.kind == "embedding" else 2
        return {0: 0, 1: 0, 2: 1, 3: 1, 4: 1, 5: 0, 6: 0}.get(x.index, 2)
    return _route(layers, cut)


@pytest.fixture(scope="module")
def whole_spec():
    return tiny_spec(MODEL.layers, _free_route(MODEL.layers), seed=5, context_tokens=_ctx(), base=MODEL)


def _ctx():
    return max(len(r.prompt) + r.max_new_tokens - 1 for r in REQUESTS)


@pytest.fixture(scope="module")
def reference(whole_spec):
    return reference_run(whole_spec, REQUESTS)


def _check(spec, reference, micro_batch=3):
    result = execute(spec, REQUESTS, micro_batch=micro_batch, max_live=MAX_LIVE)
    check = compare_with_reference(spec, REQUESTS, result, reference)
    assert check["mismatched_requests"] == []
    for r in REQUESTS:
        assert result.tokens[r.id] == reference[r.id][0]
        assert len(result.tokens[r.id]) == r.max_new_tokens
        np.testing.assert_allclose(result.logits[r.id], reference[r.id][1], rtol=1e-6, atol=1e-6)
    assert check["memory_match"], check["memory"]
    assert result.peak_live == MAX_LIVE
    for st in result.stages:
        assert st.final_cache_bytes == 0          # every finished request was freed
    return result, check


def test_tiny_twin_keeps_kinds_order_and_mixers(whole_spec):
    d = whole_spec.layers
    assert [x.kind for x in d] == ["embedding"] + [x.kind for x in MODEL.layers[1:-1]] + ["lm_head"]
    assert [x.mixer for x in d[1:-1]] == ["kda", "gqa", "gated_deltanet", "mha", "sliding", "mla", "lightning",
                                           "mamba", "mamba2"]
    assert [x.ffn for x in d[1:-1]] == ["moe", "moe", "dense", "dense", "moe", "dense", None, "moe", "dense"]
    assert all(x.shared_expert for x in d if x.ffn == "moe")       # the spec has one shared expert
    assert whole_spec.devices == ("d0", "d1", "d2")
    assert [n.device for n in whole_spec.nodes] == _free_route(MODEL.layers)


def test_free_route_revisiting_a_device_matches_reference(whole_spec, reference):
    result, check = _check(whole_spec, reference)
    d0 = next(s for s in result.stages if s.device == "d0")
    # d0 is entered twice per pass: once for embedding..layers.1, once for layers.5-6
    assert d0.batches == 2 * result.passes
    # KV/state of layers 0, 1, 5, 6 live on d0: kda + gqa + mla + lightning per request
    wl = whole_spec.workload
    graph = tiny_layer_graph(whole_spec)
    per_req = sum(memory.request_bytes(graph.layers[1 + i], wl) for i in (0, 1, 5, 6))
    assert check["memory"][0]["request_bytes"] == per_req
    assert d0.peak_cache_bytes == per_req * MAX_LIVE


def test_block_nodes_on_different_devices_match_reference(reference):
    block = refine(MODEL, "block", expert_groups=4)
    names = [x.name for x in block.layers]
    assert "layers.0.experts.3" in names and "layers.2.ffn" in names

    def cut(i, x):   # mixer and each expert group of layer 0 on different devices, then alternate
        if x.name.startswith("layers.0.experts."):
            return 1 + int(x.name[-1]) % 2
        return 0 if i < 1 + names.index("layers.1.mixer") and not x.name.startswith("layers.0.exp") else 3
    route = _route(block.layers, cut)
    assert len(set(route)) == 4
    spec = tiny_spec(block.layers, route, seed=5, context_tokens=_ctx(), base=MODEL)
    result, _ = _check(spec, reference, micro_batch=4)
    assert [s.device for s in result.stages] == ["d0", "d1", "d2", "d3"]


def test_shards_of_one_layer_on_three_devices_match_reference(reference):
    sharded = refine(MODEL, "shards:3")

    def cut(i, x):   # shard s of every layer on device s: each layer crosses three devices
        return int(x.part[5]) if x.part else 0
    route = _route(sharded.layers, cut)
    spec = tiny_spec(sharded.layers, route, seed=5, context_tokens=_ctx(), base=MODEL)
    result, check = _check(spec, reference, micro_batch=5)
    # KV and state stay with shard 0 (placer.problem.reductions.refine): d1 and d2 hold none
    by_dev = {r["device"]: r for r in check["memory"]}
    assert by_dev["d1"]["request_bytes"] == by_dev["d2"]["request_bytes"] == 0
    assert by_dev["d0"]["peak_cache_bytes"] == by_dev["d0"]["request_bytes"] * MAX_LIVE > 0


def test_shard_programs_partition_the_whole_layer():
    sharded = refine(MODEL, "shards:3")
    spec = tiny_spec(sharded.layers, ["x"] * len(sharded.layers), base=MODEL)
    whole = tiny_spec(MODEL.layers, ["x"] * len(MODEL.layers), base=MODEL)
    for pos, d in enumerate(whole.layers):
        if d.index is None:
            continue
        ops = [op for n in spec.nodes if n.layer == pos for op in node_program(spec, n)]
        assert node_program(spec, next(n for n in spec.nodes if n.layer == pos))[0] == ("core",)
        assert sum(op[0] == "core" for op in ops) == 1
        oproj = sorted((op[1], op[2]) for op in ops if op[0] == "oproj")
        assert oproj[0][0] == 0 and all(a[1] == b[0] for a, b in zip(oproj, oproj[1:]))
        full = node_program(whole, next(n for n in whole.nodes if n.layer == pos))
        assert oproj[-1][1] == next(op[2] for op in full if op[0] == "oproj")
        if d.ffn == "moe":
            experts = sorted((op[1], op[2]) for op in ops if op[0] == "experts")
            assert experts[0][0] == 0 and experts[-1][1] == d.num_experts
            assert ops.index(("norm2",)) < ops.index(("router",)) < ops.index(("experts", *experts[0]))


@pytest.mark.parametrize("bits", [16, 32, 64])
def test_cache_arrays_are_what_placer_memory_counts(bits):
    spec = tiny_spec(MODEL.layers, ["x"] * len(MODEL.layers), context_tokens=40, kv_bits=bits,
                     state_bits=bits, conv_state_bits=64 if bits == 16 else bits, base=MODEL)
    graph = tiny_layer_graph(spec)
    wl = Workload(context_tokens=40, kv_bits=bits, state_bits=bits, conv_state_bits=spec.conv_state_bits)
    for d, layer in zip(spec.layers[1:-1], graph.layers[1:-1]):
        arrays = alloc_cache(spec, d.mixer)
        assert sum(a.nbytes for a in arrays.values()) == memory.request_bytes(layer, wl), d.mixer
    # hand check of two: GQA holds K and V of 2 heads x 8 for 40 tokens; sliding only 6 tokens
    assert memory.request_bytes(graph.layers[2], wl) == 40 * 2 * 2 * 8 * bits // 8
    assert memory.request_bytes(graph.layers[5], wl) == TINY_MIXERS["sliding"]["sliding_window"] * 32 * bits // 8


def test_lower_precision_caches_run_and_are_accounted():
    spec = tiny_spec(MODEL.layers, _free_route(MODEL.layers), seed=2, context_tokens=_ctx(), kv_bits=32,
                     state_bits=32, conv_state_bits=16, base=MODEL)
    reqs = REQUESTS[:8]
    result = execute(spec, reqs, micro_batch=2, max_live=6)
    check = compare_with_reference(spec, reqs, result)
    assert check["tokens_match"] and check["memory_match"]
    per = expected_request_bytes(spec)
    assert [s.peak_cache_bytes for s in result.stages] == [per[s.device] * 6 for s in result.stages]


def test_a_different_model_is_caught(whole_spec, reference):
    other = whole_spec.replace(seed=6)
    result = execute(other, REQUESTS, micro_batch=4, max_live=MAX_LIVE)
    check = compare_with_reference(other, REQUESTS, result, reference)
    assert not check["tokens_match"] and len(check["mismatched_requests"]) > 20


def test_folded_embedding_gets_embedding_and_head_on_first_and_last_device():
    folded = model_from_dict(EVERY_MIXER, fold_embeddings=True)
    assert folded.layers[0].kind != "embedding"
    route = [f"d{min(i // 3, 2)}" for i in range(len(folded.layers))]
    spec = tiny_spec(folded.layers, route, base=folded)
    assert (spec.nodes[0].name, spec.nodes[0].device, spec.nodes[0].added) == ("embedding", "d0", True)
    assert (spec.nodes[-1].name, spec.nodes[-1].device, spec.nodes[-1].added) == ("lm_head", "d2", True)
    assert len(spec.nodes) == len(folded.layers) + 2


def test_run_placement_report_and_errors():
    rep = run_placement(MODEL.layers, _free_route(MODEL.layers), RunOptions(requests=4, tokens=3, micro_batch=2, seed=1),
                        base=MODEL)
    assert rep["check"]["tokens_match"] and rep["check"]["memory_match"]
    assert rep["tokens_generated"] == sum(len(v) for v in rep["outputs"].values())
    assert [s["device"] for s in rep["stages"]] == ["d0", "d1", "d2"]
    with pytest.raises(InvalidSpec, match="micro_batch"):
        run_placement(MODEL.layers, _free_route(MODEL.layers), RunOptions(requests=2, tokens=2, micro_batch=0))
    with pytest.raises(InvalidSpec, match="backend"):
        run_placement(MODEL.layers, _free_route(MODEL.layers), RunOptions(requests=2, tokens=2, backend="mpi"))
    with pytest.raises(InvalidSpec, match="kv_bits"):
        run_placement(MODEL.layers, _free_route(MODEL.layers), RunOptions(requests=2, tokens=2, kv_bits=8))
