"""Exact bytes per layer under a workload, checked against hand arithmetic."""

from __future__ import annotations

import pytest

from placer.problem import memory
from placer.specs.errors import InvalidSpec
from placer.specs.model import Layer, load_model, model_from_dict
from placer.specs.workload import Workload, workload_for


@pytest.fixture(scope="module")
def k3():
    return load_model("kimi-k3")


@pytest.fixture(scope="module")
def k3_wl(k3):
    return workload_for(k3)


def test_kimi_k3_default_workload(k3_wl):
    assert k3_wl == Workload(context_tokens=262_144, concurrency=184, weight_bits=4, kv_bits=8, state_bits=32,
                             conv_state_bits=16, activation_bits=16, micro_batch=1)


def test_kimi_k3_weight_bytes_per_layer(k3, k3_wl):
    # 32,258,064,516 params x 4 bits / 8 = 16,129,032,258 B (an even count: no rounding)
    assert {memory.weight_bytes(x, k3_wl) for x in k3.layers} == {16_129_032_258}
    # 93 x 16,129,032,258 = 1,499,999,999,994 B
    assert sum(memory.weight_bytes(x, k3_wl) for x in k3.layers) == 1_499_999_999_994


def test_kimi_k3_kv_per_request_mla(k3, k3_wl):
    mla = k3.layers[3]
    assert memory.kv_bytes_per_token(mla, k3_wl) == 576               # 576 elements x 8 bits
    assert memory.kv_bytes_per_request(mla, k3_wl) == 150_994_944     # 576 x 262,144
    assert memory.state_bytes_per_request(mla, k3_wl) == 0
    assert memory.request_bytes(mla, k3_wl) == 150_994_944
    # one dense layer with 184 live requests: 16,129,032,258 + 184 x 150,994,944 = 43,912,101,954
    assert memory.layer_demand_bytes(mla, k3_wl) == 43_912_101_954
    assert memory.layer_demand_bytes(mla, k3_wl, concurrency=0) == 16_129_032_258


def test_kimi_k3_kda_state_per_request(k3, k3_wl):
    kda = k3.layers[0]
    # recurrent 64 x 128 x 128 = 1,048,576 fp32 = 4,194,304 B; conv 3 x (3 x 64 x 128) = 73,728 bf16
    # = 147,456 B; total 4,341,760 B, independent of the context length
    assert memory.state_bytes_per_request(kda, k3_wl) == 4_341_760
    assert memory.kv_bytes_per_request(kda, k3_wl) == 0
    assert memory.state_bytes_per_request(kda, k3_wl.replace(context_tokens=1024)) == 4_341_760
    # recurrent state at 16 bits: 2,097,152 + 147,456 (conv state keeps its 16 bits)
    assert memory.state_bytes_per_request(kda, k3_wl.replace(state_bits=16)) == 2_244_608
    # 16,129,032,258 + 184 x 4,341,760 = 16,927,916,098
    assert memory.layer_demand_bytes(kda, k3_wl) == 16_927_916_098


def test_kimi_k3_activations(k3, k3_wl):
    assert memory.activation_bytes_per_token(k3.layers[0], k3_wl) == 7168 * 2 == 14_336
    # one input and one output micro-batch of the widest activation: 2 x 1 x 14,336
    assert memory.activation_buffer_bytes(k3.layers, k3_wl) == 28_672
    assert memory.activation_buffer_bytes(k3.layers, k3_wl.replace(micro_batch=4)) == 114_688


LLAMA_405B = {
    # Llama-3.1-405B as a compact spec (model_facts: hidden 16384, 126 layers, 128 q heads, 8 KV heads,
    # head_dim 128, intermediate 53248, vocab 128256, untied)
    "name": "llama-405b-test", "hidden_size": 16384, "vocab_size": 128256, "num_layers": 126,
    "pattern": "A*126",
    "mixers": {"gqa": {"type": "gqa", "num_heads": 128, "num_kv_heads": 8, "head_dim": 128}},
    "ffns": {"mlp": {"type": "dense", "intermediate_size": 53248}},
    "layer_types": {"A": {"mixer": "gqa", "ffn": "mlp"}},
}


def test_llama_405b_kv_and_params():
    m = model_from_dict(LLAMA_405B)
    x = m.layers[1]
    wl = Workload(kv_bits=16, weight_bits=16, context_tokens=131_072)
    # K and V, 8 KV heads x 128 dims x 2 bytes: 2 x 8 x 128 x 2 = 4096 B per token per layer
    assert memory.kv_bytes_per_token(x, wl) == 4096
    assert memory.kv_bytes_per_request(x, wl) == 4096 * 131_072 == 536_870_912
    assert memory.kv_bytes_per_token(x, wl.replace(kv_bits=8)) == 2048
    # q 16384*16384 + kv 2*16384*1024 + o 16384*16384 = 570,425,344; MLP 3*16384*53248
    # = 2,617,245,696; norms 32,768 -> 3,187,703,808 per layer
    assert x.params == 3_187_703_808
    # 126 layers + embedding and head (2 x 128256 x 16384) + final norm 16384 = 405,853,388,800,
    # the published 405B to the parameter
    assert m.total_params == 126 * 3_187_703_808 + 2 * 128_256 * 16_384 + 16_384 == 405_853_388_800
    assert memory.weight_bytes(x, wl) == 6_375_407_616


def test_qwen3_next_and_deepseek_v3_kv_per_token():
    qwen = model_from_dict({
        "name": "qwen-attn", "hidden_size": 2048, "num_layers": 1, "pattern": "F",
        "mixers": {"full": {"type": "gqa", "num_heads": 16, "num_kv_heads": 2, "head_dim": 256, "gated": True}},
        "layer_types": {"F": {"mixer": "full"}}})
    # Qwen3-Next full attention: 2 KV heads x 256 dims x (K, V) = 1024 elements = 2048 B in bf16
    assert memory.kv_bytes_per_token(qwen.layers[0], Workload(kv_bits=16)) == 2048
    dsv3 = model_from_dict({
        "name": "dsv3-attn", "hidden_size": 7168, "num_layers": 1, "pattern": "M",
        "mixers": {"mla": {"type": "mla", "num_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
                           "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}},
        "layer_types": {"M": {"mixer": "mla"}}})
    # DeepSeek-V3 MLA caches the latent: 512 + 64 = 576 elements = 1152 B in bf16
    assert memory.kv_bytes_per_token(dsv3.layers[0], Workload(kv_bits=16)) == 1152


def test_sub_byte_rounding_is_ceil():
    assert memory.bits_to_bytes(3, 4) == 2           # 12 bits -> 2 bytes, not 1.5
    assert memory.bits_to_bytes(5, 3) == 2           # 15 bits -> 2 bytes
    assert memory.bits_to_bytes(8, 3) == 3           # 24 bits exactly
    assert memory.bits_to_bytes(0, 4) == 0
    odd = Layer(name="x", kind="attention", params_other=3, kv_elements_per_token=5)
    wl = Workload(weight_bits=4, kv_bits=3, context_tokens=10)
    assert memory.weight_bytes(odd, wl) == 2
    assert memory.kv_bytes_per_token(odd, wl) == 2
    # the per-token bytes are rounded first, then multiplied by the context: 2 x 10, not ceil(150/8)
    assert memory.kv_bytes_per_request(odd, wl) == 20


def test_weight_group_size_adds_scales():
    layer = Layer(name="x", kind="attention", params_other=1000)
    wl = Workload(weight_bits=4)
    assert memory.weight_bytes(layer, wl) == 500                 # off by default
    # 1000 x 4 bits = 500 B, plus ceil(1000 / 128) = 8 scales of 16 bits = 16 B
    assert memory.weight_bytes(layer, wl.replace(weight_group_size=128)) == 516
    # 8-bit scales: 8 B
    assert memory.weight_bytes(layer, wl.replace(weight_group_size=128, weight_scale_bits=8)) == 508


def test_weight_group_size_on_kimi_k3(k3, k3_wl):
    # 32,258,064,516 / 32 = 1,008,064,516.125 -> 1,008,064,517 scales x 2 B = 2,016,129,034 B
    assert memory.weight_bytes(k3.layers[0], k3_wl.replace(weight_group_size=32)) == \
        16_129_032_258 + 2_016_129_034 == 18_145_161_292


def test_fixed_bytes_ignore_precisions():
    layer = Layer(name="x", kind="linear_attention", weight_bytes_fixed=2_684_354_560,
                  state_bytes_per_request_fixed=4_341_760, state_elements_per_request=99)
    for wl in (Workload(weight_bits=4, state_bits=8), Workload(weight_bits=16, weight_group_size=32)):
        assert memory.weight_bytes(layer, wl) == 2_684_354_560
        assert memory.state_bytes_per_request(layer, wl) == 4_341_760


def test_sliding_window_bounds_kv():
    m = model_from_dict({
        "name": "swa", "hidden_size": 512, "num_layers": 1, "pattern": "S",
        "mixers": {"swa": {"type": "sliding", "num_heads": 8, "num_kv_heads": 2, "head_dim": 64,
                           "sliding_window": 4096}},
        "layer_types": {"S": {"mixer": "swa"}}})
    x = m.layers[0]
    assert x.mixer == "sliding" and x.kv_window == 4096
    wl = Workload(kv_bits=16, context_tokens=131_072)
    # 2 x 2 KV heads x 64 dims = 256 elements = 512 B per token
    assert memory.kv_bytes_per_token(x, wl) == 512
    assert memory.kv_bytes_per_request(x, wl) == 512 * 4096 == 2_097_152   # window, not 131,072
    assert memory.kv_bytes_per_request(x, wl.replace(context_tokens=1000)) == 512_000


def test_workload_for_precedence(k3):
    wl = workload_for(k3, context="128k", kv_bits=16)
    assert wl.context_tokens == 131_072 and wl.kv_bits == 16
    assert wl.weight_bits == 4 and wl.concurrency == 184          # from the model's defaults
    plain = workload_for(model_from_dict({"name": "t", "layers": [
        {"kind": "attention", "params": 10, "kv_bytes_per_token": 4}]}))
    assert plain == Workload()                                   # library defaults
    assert plain.context_tokens == 8192 and plain.weight_bits == 16


@pytest.mark.parametrize("bad", [
    {"weight_bits": 0}, {"kv_bits": 65}, {"concurrency": -1}, {"context_tokens": 0},
    {"micro_batch": 0}, {"weight_group_size": -1}, {"weight_bits": True}, {"concurrency": 1.5},
])
def test_workload_rejects(bad):
    field = next(iter(bad))
    with pytest.raises(InvalidSpec) as info:
        Workload(**bad)
    assert info.value.field == field
