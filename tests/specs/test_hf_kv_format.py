"""The checkpoint's KV-cache format, read by the importer and planned as served: ModelOpt's
``hf_quant_config.json`` (``kv_cache_quant_algo``) and compressed-tensors' ``kv_cache_scheme`` make
the default KV cache 8-bit; ``--kv-bits`` overrides it and says so; exports carry the runtime's fp8
dtype; an imported spec records the format and reloads to the same plan."""

from __future__ import annotations

import json

import pytest
from dirs import FIXTURES

from placer.problem import memory
from placer.specs.errors import InvalidSpec
from placer.specs.hf import spec_from_hf_config
from placer.specs.model import load_model, model_from_dict
from placer.specs.workload import workload_for

# a small Llama: 4 decoder layers, 8 KV heads of 128 (2 x 8 x 128 = 2,048 KV elements per token per layer)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 4, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256}
LAYERS, KV_ELEMENTS = 4, 2 * 8 * 128

MODELOPT = {"producer": {"name": "modelopt", "version": "0.33.0"},
            "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
COMPRESSED = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
              "config_groups": {"group_0": {
                  "targets": ["Linear"],
                  "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
                              "dynamic": False},
                  "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}},
              "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False,
                                  "symmetric": True}}


def _modelopt_spec():
    return spec_from_hf_config(dict(LLAMA), "config.json", sibling=MODELOPT, sibling_source="hf_quant_config.json")


def _compressed_spec():
    return spec_from_hf_config({**LLAMA, "quantization_config": COMPRESSED}, "config.json")


@pytest.mark.parametrize("build, said", [
    (_modelopt_spec, "FP8 (hf_quant_config.json: quantization.kv_cache_quant_algo)"),
    (_compressed_spec, "FP8 (config.json: quantization_config.kv_cache_scheme: 8-bit float)"),
])
def test_each_form_plans_an_8_bit_kv_cache(build, said):
    spec = build()
    assert spec["default_workload"]["kv_bits"] == 8
    assert spec["kv_cache_format"] == said
    model = model_from_dict(spec)
    assert model.kv_cache_format == said
    wl = workload_for(model, context="128k", concurrency=32)
    assert wl.kv_bits == 8
    attn = [x for x in model.layers if x.has_kv]
    assert len(attn) == LAYERS
    # by hand: 2,048 elements per token at one byte each, 131,072 tokens per request
    assert memory.kv_bytes_per_request(attn[0], wl) == 2048 * 131072 == 268_435_456
    assert sum(memory.kv_bytes_per_request(x, wl) for x in attn) * 32 == 4 * 268_435_456 * 32
    # --kv-bits 16: twice the bytes
    wl16 = workload_for(model, context="128k", concurrency=32, kv_bits=16)
    assert memory.kv_bytes_per_request(attn[0], wl16) == 2 * 268_435_456


def test_no_kv_format_keeps_16_bits():
    spec = spec_from_hf_config(dict(LLAMA), "config.json")
    assert "kv_cache_format" not in spec
    assert workload_for(model_from_dict(spec)).kv_bits == 16
    # a null scheme (Kimi-K2.5's compressed-tensors config) says the KV cache is not quantized
    kimi = load_model(FIXTURES / "hf_corpus" / "moonshotai--Kimi-K2.5.json", text_only=True)
    assert kimi.kv_cache_format == "" and workload_for(kimi).kv_bits == 16


def test_the_fixtures_with_fp8_kv_read_8_bits():
    for name in ("hf_released/GLM-5.2-NVFP4.json", "hf_corpus/nvidia--GLM-5.1-NVFP4.json",
                 "hf_corpus/nvidia--Llama-3.1-70B-Instruct-FP8.json"):
        m = load_model(FIXTURES / name)
        assert m.kv_cache_format.startswith("FP8 (") and workload_for(m).kv_bits == 8, name


def test_an_unknown_kv_algorithm_names_the_field():
    bad = {**MODELOPT, "quantization": {**MODELOPT["quantization"], "kv_cache_quant_algo": "FP3"}}
    with pytest.raises(InvalidSpec) as exc:
        spec_from_hf_config(dict(LLAMA), "config.json", sibling=bad, sibling_source="hf_quant_config.json")
    assert exc.value.field == "quantization.kv_cache_quant_algo" and "FP3" in str(exc.value)


@pytest.fixture
def modelopt_dir(tmp_path):
    d = tmp_path / "Llama-FP8"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA))
    (d / "hf_quant_config.json").write_text(json.dumps(MODELOPT))
    return d


@pytest.fixture
def compressed_dir(tmp_path):
    d = tmp_path / "Llama-CT"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**LLAMA, "quantization_config": COMPRESSED}))
    return d


SOLVE = ["-H", "h100", "--racks", "1", "--context", "32k", "--concurrency", "8", "--method", "dp", "-q"]


@pytest.mark.parametrize("which", ["modelopt_dir", "compressed_dir"])
def test_solve_reserves_8_bit_kv_and_exports_fp8(which, request, run_cli, tmp_path):
    d = request.getfixturevalue(which)
    out_map = tmp_path / "m.json"
    code, out, err = run_cli(["solve", d, *SOLVE, "-o", out_map])
    assert code == 0, err
    assert "KV cache at 8 bits, the checkpoint's format: FP8 (" in err
    assert "KV 8-bit" in out
    doc = json.loads(out_map.read_text())
    assert doc["workload"]["kv_bits"] == 8
    # by hand: 4 layers x 2,048 bytes per token x 32,768 tokens x 8 requests
    assert sum(st["bytes"]["kv_reserve"] for st in doc["stages"]) == LAYERS * KV_ELEMENTS * 32768 * 8
    code, out, err = run_cli(["export", out_map, "--format", "vllm"])
    assert code == 0, err
    assert "--kv-cache-dtype fp8" in out and "KV at 8 bits" in out
    code, out, err = run_cli(["export", out_map, "--format", "sglang"])
    assert code == 0, err
    assert "--kv-cache-dtype fp8_e4m3" in out


def test_kv_bits_overrides_the_checkpoint_and_says_so(modelopt_dir, run_cli, tmp_path):
    out_map = tmp_path / "m16.json"
    code, out, err = run_cli(["solve", modelopt_dir, *SOLVE, "--kv-bits", "16", "-o", out_map])
    assert code == 0, err
    lines = [x for x in err.splitlines() if "--kv-bits 16" in x]
    assert lines == ["note: Llama-FP8: KV cache at 16 bits (--kv-bits 16), not the checkpoint's 8-bit format "
                     "FP8 (hf_quant_config.json: quantization.kv_cache_quant_algo)"]
    doc = json.loads(out_map.read_text())
    assert doc["workload"]["kv_bits"] == 16
    assert sum(st["bytes"]["kv_reserve"] for st in doc["stages"]) == LAYERS * KV_ELEMENTS * 2 * 32768 * 8
    code, out, _ = run_cli(["export", out_map, "--format", "vllm"])
    assert "--kv-cache-dtype bfloat16" in out
    # plan and frontier say it too
    code, _, err = run_cli(["plan", modelopt_dir, "-H", "h100", "--racks", "1", "-n", "8", "--context", "32k",
                            "--kv-bits", "16", "--method", "dp", "-q"])
    assert code == 0, err
    assert "(--kv-bits 16), not the checkpoint's 8-bit format" in err


def test_an_imported_spec_records_the_format_and_plans_the_same(modelopt_dir, run_cli, tmp_path):
    spec = tmp_path / "llama.yaml"
    code, _, err = run_cli(["import-hf", modelopt_dir, "-o", spec])
    assert code == 0, err
    text = spec.read_text()
    assert "kv_cache_format: 'FP8 (hf_quant_config.json: quantization.kv_cache_quant_algo)'" in text
    assert "# KV cache at 8 bits, the checkpoint's format: FP8" in text
    m = load_model(spec)
    assert m.kv_cache_format.startswith("FP8 (") and workload_for(m).kv_bits == 8
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert run_cli(["solve", modelopt_dir, *SOLVE, "-o", a])[0] == 0
    assert run_cli(["solve", spec, *SOLVE, "-o", b])[0] == 0
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    assert da["workload"] == db["workload"]
    assert [st["bytes"] for st in da["stages"]] == [st["bytes"] for st in db["stages"]]
