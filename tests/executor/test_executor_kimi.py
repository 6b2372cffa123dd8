"""The kimi-k3 seed example executes: contiguous and free mappings on wse-3t, scaled down.

The mappings are the committed ones in solutions/ when present, else made here with the fast
methods (greedy contiguous, the published type packing for free mode). 40 requests with at most 32
live at once, micro-batches of 4: every request's greedy tokens must equal the single-process
reference, and every stage's peak cache bytes must be placer.problem.memory's bytes per request times
its peak live requests.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from mapping_toys import kimi_mapping

from placer.executor.reference import context_for, make_requests
from placer.executor.run import compare_with_reference, execute, reference_run
from placer.executor.tiny import tiny_spec
from placer.mapping import instance_from_mapping, write_mapping

REQUESTS = make_requests(40, 4, seed=11)
MAX_LIVE = 32
MICRO_BATCH = 4


@pytest.fixture(scope="module")
def mappings():
    return {"contiguous": kimi_mapping("contiguous", "greedy"), "free": kimi_mapping("free", "typepack")}


def _spec(doc):
    _m, _f, _wl, inst = instance_from_mapping(doc)
    return tiny_spec(inst.nodes, doc["route"], seed=11, context_tokens=context_for(REQUESTS),
                     model_name="kimi-k3", base=inst.base_model)


@pytest.fixture(scope="module")
def reference(mappings):
    # the tiny layers do not depend on the placement: one reference serves both mappings
    specs = [_spec(doc) for doc in mappings.values()]
    assert specs[0].layers == specs[1].layers
    return reference_run(specs[0], REQUESTS)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["contiguous", "free"])
def test_kimi_k3_mapping_runs_token_exact(mappings, reference, mode):
    doc = mappings[mode]
    spec = _spec(doc)
    # the seed variant folds embedding and head: the twin adds them on the first and last stage
    assert spec.nodes[0].added and spec.nodes[-1].added
    assert len(spec.nodes) == 93 + 2
    assert [x.mixer for x in spec.layers[1:-1]] == (["kda"] * 3 + ["mla"]) * 23 + ["mla"]
    assert spec.devices == tuple(s["device"] for s in doc["stages"])
    result = execute(spec, REQUESTS, micro_batch=MICRO_BATCH, max_live=MAX_LIVE)
    check = compare_with_reference(spec, REQUESTS, result, reference)
    assert check["mismatched_requests"] == []
    for r in REQUESTS:
        assert result.tokens[r.id] == reference[r.id][0]
        np.testing.assert_allclose(result.logits[r.id], reference[r.id][1], rtol=1e-6, atol=1e-6)
    assert result.peak_live == MAX_LIVE and result.max_in_flight == MAX_LIVE // MICRO_BATCH
    assert check["memory_match"], [m for m in check["memory"] if not m["matches"]]
    # by hand: one MLA layer holds 20 latent+rope elements x 8 bytes per token; a KDA layer holds
    # 2 x 8 x 8 state + 3 x 3 x 16 conv elements at 8 bytes, for every live request
    ctx = spec.context_tokens
    mla, kda = 20 * 8 * ctx, (2 * 8 * 8 + 3 * 3 * 16) * 8
    for stage, st in zip(doc["stages"], result.stages):
        nodes = [n for n in stage["layers"]]
        n_mla = sum(1 for n in nodes if int(n.split(".")[1]) % 4 == 3 or n == "layers.92")
        assert st.peak_cache_bytes == (n_mla * mla + (len(nodes) - n_mla) * kda) * MAX_LIVE
        assert st.final_cache_bytes == 0
    if mode == "free":
        # type packing pairs KDA layers from different blocks: some wafer is entered twice per token
        assert any(st.batches > result.passes for st in result.stages)


@pytest.mark.slow
def test_placer_run_command_on_a_mapping_file(mappings, tmp_path, run_cli):
    path = tmp_path / "k3-free.json"
    write_mapping(path, mappings["free"])
    code, out, err = run_cli(["run", path, "--requests", 5, "--tokens", 3, "--micro-batch", 2, "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["check"]["tokens_match"] and doc["check"]["memory_match"]
    assert doc["devices"] == mappings["free"]["summary"]["devices_used"]
    assert doc["requests"] == 5 and doc["micro_batch"] == 2
    code, out, err = run_cli(["run", path, "--requests", 3, "--tokens", 2])
    assert code == 0, err
    assert "identical to the single-process reference for all 3 requests" in out
    assert "every stage matches placer's accounting" in out
    code, out, err = run_cli(["run", tmp_path / "missing.json"])
    assert code == 2 and err.startswith("error: ") and "missing.json" in err
