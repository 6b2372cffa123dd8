"""``placer run --backend torch``: a mapping executed on tiny transformers modules of its own family,
one gloo process per stage, greedy tokens checked against the unsplit model."""

from __future__ import annotations

import json

import pytest
from mapping_toys import spec_mapping
from tiny_hf import write_config

from placer import load_model
from placer.executor.torch_backend import tiny_hf_config
from placer.mapping import write_mapping
from placer.specs.errors import InvalidSpec


def tiny_mapping(tmp_path, family: str, stages: list[list[int]]) -> dict:
    folder = write_config(tmp_path / family, family)
    return spec_mapping(tmp_path, folder / "config.json", stages=stages, memory=10**12, context=64)


def test_tiny_config_follows_the_mappings_layer_kinds():
    qwen_next = tiny_hf_config(load_model("qwen3-next-80b"))
    assert qwen_next["num_hidden_layers"] == 48
    assert qwen_next["layer_types"] == (["linear_attention"] * 3 + ["full_attention"]) * 12
    assert qwen_next["mlp_only_layers"] == []            # every layer MoE
    assert tiny_hf_config(load_model("llama-3.1-8b"))["model_type"] == "llama"
    with pytest.raises(InvalidSpec, match="the torch backend runs .*kimi-k3 is KimiLinear-style hybrid"):
        tiny_hf_config(load_model("kimi-k3"))


@pytest.mark.runtimes
@pytest.mark.parametrize("family, stages", [
    ("llama", [[0, 1], [2, 3]]),                 # dense GQA
    ("qwen3_moe", [[0, 1], [2, 3]]),             # MoE
    ("qwen3_next", [[0], [1, 2], [3]]),          # hybrid: Gated DeltaNet x3 + full attention
])
def test_torch_backend_matches_the_unsplit_model_for_32_requests(run_cli, tmp_path, family, stages):
    pytest.importorskip("torch", reason="torch is the runtimes extra (pip install torch==2.13.0 -e '.[runtimes]')")
    pytest.importorskip("transformers", reason="transformers is the runtimes extra")
    path = tmp_path / "m.json"
    write_mapping(path, tiny_mapping(tmp_path, family, stages))
    code, out, err = run_cli(["run", path, "--backend", "torch", "--requests", "32", "--tokens", "4", "--json"])
    assert code == 0, err
    rep = json.loads(out)
    assert rep["check"] == {"tokens_match": True, "mismatched_requests": []}
    assert rep["processes"] == len(stages) and rep["requests"] == 32 and len(rep["outputs"]) == 32
    assert all(len(v) == 4 for v in rep["outputs"].values())
    # caches after 6 prompt + 3 fed tokens = 9 cached tokens per request, float32:
    # an attention layer keeps K and V of 2 KV heads x 8 dims: 32 x 2 x 16 x 4 B x 9 = 36,864 B
    for st in rep["stages"]:
        a, b = st["layers"]
        if family == "qwen3_next":
            linear = sum(1 for i in range(a, b) if i != 3)
            # transformers keeps the whole conv window (kernel 4) where placer counts kernel - 1 = 3
            # columns: 32 requests x conv dim (2 x 2 x 8 + 4 x 8 = 64) x 1 column x 4 B = 8,192 B a layer
            assert st["cache_bytes"] - st["placer_bytes"] == linear * 8192
            if linear == 0:
                assert st["cache_bytes"] == 36864
        else:
            assert st["cache_bytes"] == st["placer_bytes"] == (b - a) * 36864
