"""Quantization as stored: per-layer weight bytes of quantized checkpoints, computed by hand.

Each test writes out the tensors the checkpoint stores for one layer (shapes from the family's
modeling code) and their bytes at the stored format, scales and zeros included.
"""

from __future__ import annotations

import json
from pathlib import Path

from placer import memory
from placer.hf import spec_from_hf_config
from placer.model import model_from_dict
from placer.workload import Workload, workload_for

FIXTURES = Path(__file__).parent / "fixtures" / "hf"


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
    assert Workload().to_dict()["weights_as_stored"] is True
