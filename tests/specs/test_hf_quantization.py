"""Quantization as stored: per-layer weight bytes of quantized checkpoints, computed by hand.

Each test writes out the tensors the checkpoint stores for one layer (shapes from the family's
modeling code) and their bytes at the stored format, scales and zeros included.
"""

from __future__ import annotations

import json
from pathlib import Path

from dirs import FIXTURES as FIXTURES_DIR

from placer.problem import memory
from placer.problem.reductions.refine import refine
from placer.specs.hf import spec_from_hf_config
from placer.specs.model import model_from_dict
from placer.specs.workload import Workload, workload_for

FIXTURES = FIXTURES_DIR / "hf"


def _config(stem: str) -> dict:
    return json.loads((FIXTURES / f"{stem}.json").read_text())


def _model(cfg: dict, **kw):
    return model_from_dict(spec_from_hf_config(cfg, "config.json"), **kw)


def _ceil(a, b):
    return -(-a // b)


def fp8_block(out, inp):
    """e4m3 weight + one fp32 weight_scale_inv per 128 x 128 block."""
    return out * inp + _ceil(out, 128) * _ceil(inp, 128) * 4


def test_deepseek_v3_fp8_block_moe_layer():
    m = _model(_config("deepseek-v3"))
    layer = m.layers[1 + 3]                       # decoder layer 3: the first MoE layer
    assert layer.name == "layers.3" and layer.ffn == "moe"
    h, qlr, kvr, n = 7168, 1536, 512, 128
    attention = (fp8_block(qlr, h) + qlr * 2                 # q_a_proj, q_a_layernorm (bf16)
                 + fp8_block(n * 192, qlr)                   # q_b_proj
                 + fp8_block(kvr + 64, h) + kvr * 2          # kv_a_proj_with_mqa, kv_a_layernorm
                 + fp8_block(n * 256, kvr)                   # kv_b_proj
                 + fp8_block(h, n * 128))                    # o_proj
    expert = 2 * fp8_block(2048, h) + fp8_block(h, 2048)     # gate, up, down
    router = 256 * h * 2 + 256 * 2                           # bf16 router and score-correction bias
    norms = 2 * h * 2
    assert memory.weight_bytes(layer, workload_for(m)) == attention + 257 * expert + router + norms
    # --weight-bits overrides every stored format
    assert memory.weight_bytes(layer, workload_for(m, weight_bits=4)) == _ceil(layer.params * 4, 8)
    assert {g.format for g in layer.weight_groups} == {"bf16", "fp8-block128x128"}


def test_gpt_oss_mxfp4_experts_keep_attention_in_bf16():
    m = _model(_config("gpt-oss-120b"))
    layer = m.layers[1]
    h, e, i = 2880, 128, 2880
    # experts: gate_up (2i, h) and down (h, i), 4-bit with one uint8 scale per 32, bf16 biases
    experts = e * ((2 * i * h // 2 + 2 * i * (h // 32)) + (h * i // 2 + h * (i // 32)) + (2 * i + h) * 2)
    attention = (64 * 64 * h + 2 * 8 * 64 * h + 64 * 64 * h + (64 * 64 + 2 * 8 * 64) + h + 64) * 2
    router = (e * h + e) * 2
    assert memory.weight_bytes(layer, workload_for(m)) == experts + attention + router + 2 * h * 2


def test_weights_as_stored_is_recorded_in_the_workload():
    m = _model(_config("deepseek-v3"))
    assert workload_for(m).weights_as_stored is True
    assert workload_for(m, weight_bits=8).weights_as_stored is False
    assert "weights_as_stored" not in Workload().to_dict()                  # the default, left out
    assert workload_for(m, weight_bits=8).to_dict()["weights_as_stored"] is False
    assert Workload(**workload_for(m, weight_bits=8).to_dict()) == workload_for(m, weight_bits=8)


# ----------------------------------------------------------------------------- more formats, by hand
CORPUS = FIXTURES_DIR / "hf_corpus"


def _corpus(name: str):
    from placer.specs.model import load_model
    return load_model(CORPUS / name)


def mxfp4(out, inp):
    """4-bit e2m1 weights packed two per byte + one uint8 (e8m0) scale per 32 weights."""
    return out * inp // 2 + out * _ceil(inp, 32)


def test_kimi_k3_mxfp4_with_ignore_list():
    # compressed-tensors mxfp4-pack-quantized on every Linear, except its ignore list: self_attn (MLA
    # and KDA), shared experts, the dense MLP, lm_head and the vision tower stay bf16
    m = _corpus("moonshotai--Kimi-K3.json")
    wl = workload_for(m)
    h, proj, d, heads = 7168, 96 * 128, 128, 96
    kda = 2 * (4 * proj * h + h * proj             # q, k, v, full-rank output gate; o_proj
               + 3 * proj * 4                      # q, k, v short convs
               + d * h + proj * d + heads * h      # decay low rank, beta
               + heads + proj + d)                 # A_log, dt_bias, output norm
    latent, e, i = 3584, 896, 3072
    moe = (2 * (e * h + e)                                              # bf16 router and its bias
           + mxfp4(latent, h) + mxfp4(h, latent) + 2 * latent           # latent down / up, norm
           + e * (2 * mxfp4(i, latent) + mxfp4(latent, i))              # routed experts
           + 2 * 3 * (2 * i) * h)                                       # 2 shared experts, bf16
    layer = next(x for x in m.layers if x.name == "layers.1")
    assert memory.weight_bytes(layer, wl) == kda + moe + 2 * h * 2
    # layer 0: KDA and a dense MLP (intermediate 33,792), every tensor bf16 (the ignore list)
    first = next(x for x in m.layers if x.name == "layers.0")
    assert memory.weight_bytes(first, wl) == kda + 2 * 3 * 33792 * h + 2 * h * 2
    assert {g.format for g in layer.weight_groups} == {"bf16", "mxfp4-4bit-g32"}
    head = m.layers[-1]
    assert head.kind == "lm_head" and memory.weight_bytes(head, wl) == 2 * (163840 * h + h)


def nvfp4(out, inp):
    """4-bit e2m1 weights + one fp8 scale per 16 + fp32 global scale and input scale per tensor."""
    return out * inp // 2 + out * _ceil(inp, 16) + 8


def test_nvfp4_from_the_sibling_hf_quant_config():
    # config.json has no quantization_config; <name>.hf_quant_config.json says NVFP4 with group 16,
    # excluding the routers (mlp.gate) and lm_head
    m = _corpus("nvidia--Qwen3-235B-A22B-NVFP4.json")
    wl = workload_for(m)
    h, e, i = 4096, 128, 1536
    attention = nvfp4(64 * 128, h) + 2 * nvfp4(4 * 128, h) + nvfp4(h, 64 * 128) + 2 * 128 * 2   # + q/k norms
    moe = e * h * 2 + e * (2 * nvfp4(i, h) + nvfp4(h, i))
    layer = m.layers[1]
    assert memory.weight_bytes(layer, wl) == attention + moe + 2 * h * 2
    assert memory.weight_bytes(m.layers[-1], wl) == 2 * (151936 * h + h)     # lm_head excluded


def _with_quant(stem_or_path, quant: dict):
    cfg = json.loads(Path(stem_or_path).read_text())
    cfg["quantization_config"] = quant
    return model_from_dict(spec_from_hf_config(cfg, "config.json"))


def test_compressed_tensors_int4_group_128():
    m = _with_quant(CORPUS / "Qwen--Qwen3-8B.json", {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}}})

    def int4(out, inp):   # weight_packed int32 (out, in/8), bf16 weight_scale (out, in/128), weight_shape 2 x int64
        return out * inp // 2 + out * _ceil(inp, 128) * 2 + 16

    h, i = 4096, 12288
    expected = (int4(4096, h) + 2 * int4(1024, h) + int4(h, 4096) + 2 * 128 * 2       # attention, q/k norms
                + 2 * int4(i, h) + int4(h, i) + 2 * h * 2)                            # MLP, layer norms
    assert memory.weight_bytes(m.layers[1], workload_for(m)) == expected
    assert memory.weight_bytes(m.layers[-1], workload_for(m)) == 2 * (151936 * h + h)


def test_awq_4bit_group_128_with_zeros():
    m = _with_quant(CORPUS / "meta-llama--Meta-Llama-3.1-8B.json", {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"})

    def awq(out, inp):   # qweight int32 (in, out/8), fp16 scales (in/128, out), qzeros int32 (in/128, out/8)
        return inp * out // 2 + (inp // 128) * out * 2 + (inp // 128) * out // 2

    h, i = 4096, 14336
    expected = awq(4096, h) + 2 * awq(1024, h) + awq(h, 4096) + 2 * awq(i, h) + awq(h, i) + 2 * h * 2
    assert memory.weight_bytes(m.layers[1], workload_for(m)) == expected


def test_gptq_adds_g_idx_and_bitsandbytes_nf4_double_quant():
    g = _with_quant(CORPUS / "meta-llama--Meta-Llama-3.1-8B.json",
                    {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False})
    a = _with_quant(CORPUS / "meta-llama--Meta-Llama-3.1-8B.json",
                    {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    h, i = 4096, 14336
    # GPTQ stores the same packed weights, scales and zeros as AWQ plus one int32 g_idx per input column
    inputs = h + h + h + 4096 + h + h + i
    assert memory.weight_bytes(g.layers[1], workload_for(g)) == memory.weight_bytes(a.layers[1], workload_for(a)) \
        + inputs * 4
    b = _with_quant(CORPUS / "meta-llama--Meta-Llama-3.1-8B.json", {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True})

    def nf4(out, inp):    # packed 4-bit, one 8-bit absmax per 64, one fp32 per 256 absmax blocks
        blocks = out * inp // 64
        return out * inp // 2 + blocks + _ceil(blocks, 256) * 4

    expected = nf4(4096, h) + 2 * nf4(1024, h) + nf4(h, 4096) + 2 * nf4(i, h) + nf4(h, i) + 2 * h * 2
    assert memory.weight_bytes(b.layers[1], workload_for(b)) == expected


def test_stored_formats_survive_import_hf_and_shards(tmp_path):
    from placer.specs.hf.spec_file import import_hf
    from placer.specs.model import load_model
    out = tmp_path / "k3.yaml"
    import_hf(CORPUS / "moonshotai--Kimi-K3.json", out)
    a, b = load_model(CORPUS / "moonshotai--Kimi-K3.json"), load_model(out)
    wa, wb = workload_for(a), workload_for(b)
    assert [memory.weight_bytes(x, wa) for x in a.layers] == [memory.weight_bytes(x, wb) for x in b.layers]
    # split mode cuts the stored bytes with the params: the shards add up to the layer
    layer = a.layers[3]
    shards = refine(a, "shards:4").layers[4 * 3:4 * 4]
    assert [x.parent for x in shards] == [layer.name] * 4
    assert sum(memory.weight_bytes(x, wa) for x in shards) == memory.weight_bytes(layer, wa)
    blocks = [x for x in refine(a, "block").layers if x.parent == layer.name]
    assert sum(memory.weight_bytes(x, wa) for x in blocks) == memory.weight_bytes(layer, wa)
