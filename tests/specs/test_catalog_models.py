"""The shipped model catalog against the verified architecture facts (shared/reference/model_facts.md).

Every expected number below is copied from model_facts.md (its derived per-layer counts, totals
and KV/state sizes), not computed by placer's formulas.
"""

from __future__ import annotations

import json

import pytest

from placer.problem import memory
from placer.specs.catalog import list_models
from placer.specs.fleet import load_fleet
from placer.specs.model import load_model
from placer.specs.workload import Workload, workload_for

CATALOG = ["kimi-linear-48b", "kimi-k2", "deepseek-v3", "qwen3-next-80b", "minimax-text-01",
           "llama-3.1-405b", "jamba-1.5-large", "gpt-oss-120b", "qwen3-235b"]

# model_facts.md §0: total derived from the shapes (the "Derived total" column)
DERIVED_TOTAL = {
    "deepseek-v3": 671.03e9, "kimi-k2": 1026.4e9, "kimi-linear-48b": 49.12e9, "qwen3-next-80b": 79.67e9,
    "minimax-text-01": 456.09e9, "gpt-oss-120b": 116.83e9, "llama-3.1-405b": 405_853_388_800,
    "qwen3-235b": 235.09e9, "jamba-1.5-large": 398.56e9,
}

# model_facts.md per-model "Per-layer weights" rows: (mixer type, ffn type) -> (mixer params, ffn params),
# plus the embedding (= LM head) size.
PER_LAYER = {
    "deepseek-v3": ({("mla", "dense"): (187_107_328, 396_361_728),
                     ("mla", "moe"): (187_107_328, 11_320_164_608)}, 926_679_040),
    "kimi-k2": ({("mla", "dense"): (101_124_096, 396_361_728),
                 ("mla", "moe"): (101_124_096, 16_958_226_816)}, 1_174_405_120),
    "kimi-linear-48b": ({("kda", "dense"): (39_514_272, 63_700_992),
                         ("kda", "moe"): (39_514_272, 1_819_607_296),
                         ("mla", "moe"): (29_114_880, 1_819_607_296)}, 377_487_360),
    "qwen3-next-80b": ({("gated_deltanet", "moe"): (33_718_464, 1_614_809_088),
                        ("gqa", "moe"): (27_263_488, 1_614_809_088)}, 311_164_928),
    "minimax-text-01": ({("lightning", "moe"): (251_666_432, 5_436_014_592),
                         ("gqa", "moe"): (113_246_208, 5_436_014_592)}, 1_229_193_216),
    "llama-3.1-405b": ({("gqa", "dense"): (570_425_344, 2_617_245_696)}, 2_101_346_304),
    "jamba-1.5-large": ({("mamba", "dense"): (420_331_520, 603_979_776),
                         ("mamba", "moe"): (420_331_520, 9_663_807_488),
                         ("gqa", "dense"): (150_994_944, 603_979_776)}, 536_870_912),
    "gpt-oss-120b": ({("sliding", "moe"): (26_550_144, 3_186_524_288),
                      ("gqa", "moe"): (26_550_144, 3_186_524_288)}, 579_133_440),
    "qwen3-235b": ({("gqa", "moe"): (71_303_424, 2_416_443_392)}, 622_329_856),
}

# one routed expert (model_facts.md)
EXPERT = {"deepseek-v3": 44_040_192, "kimi-k2": 44_040_192, "kimi-linear-48b": 7_077_888,
          "qwen3-next-80b": 3_145_728, "minimax-text-01": 169_869_312, "jamba-1.5-large": 603_979_776,
          "gpt-oss-120b": 24_891_840, "qwen3-235b": 18_874_368}

# 0-based indices of full-attention layers (model_facts.md layer tables)
ATTENTION_AT = {
    "kimi-linear-48b": [3, 7, 11, 15, 19, 23, 26],
    "qwen3-next-80b": list(range(3, 48, 4)),
    "minimax-text-01": list(range(7, 80, 8)),
    "jamba-1.5-large": list(range(4, 72, 8)),
}

BF16 = Workload(weight_bits=16, kv_bits=16, state_bits=16, conv_state_bits=16)
FP32_STATE = Workload(weight_bits=16, kv_bits=16, state_bits=32, conv_state_bits=16)


@pytest.fixture(scope="module")
def models():
    return {name: load_model(name) for name in CATALOG}


def test_catalog_lists_every_model():
    names = {p.stem for p in list_models()}
    assert set(CATALOG) <= names


@pytest.mark.parametrize("name", CATALOG)
def test_total_within_one_percent_of_published_and_derived(models, name):
    m = models[name]
    assert m.published_total_params is not None
    assert abs(m.total_params - m.published_total_params) <= 0.01 * m.published_total_params
    assert abs(m.total_params - DERIVED_TOTAL[name]) <= 0.01 * DERIVED_TOTAL[name]
    # the derived totals are given to 0.01B: placer's count must agree to that precision
    assert abs(m.total_params - DERIVED_TOTAL[name]) < 0.01e9


def test_llama_total_is_exact(models):
    assert models["llama-3.1-405b"].total_params == 405_853_388_800


@pytest.mark.parametrize("name", CATALOG)
def test_per_layer_counts_match_model_facts(models, name):
    m = models[name]
    expected, embed = PER_LAYER[name]
    seen = set()
    for layer in m.decoder_layers():
        key = (layer.mixer, layer.ffn)
        assert key in expected, f"{layer.name}: unexpected {key}"
        assert (layer.params_mixer, layer.params_ffn) == expected[key], layer.name
        assert layer.params_other == 2 * m.hidden_size  # the two RMS norms
        seen.add(key)
    assert seen == set(expected)
    first, last = m.layers[0], m.layers[-1]
    assert (first.kind, first.params) == ("embedding", embed)
    assert (last.kind, last.params) == ("lm_head", embed + m.hidden_size)  # untied head + final norm


def test_llama_layer_total(models):
    layer = models["llama-3.1-405b"].decoder_layers()[0]
    assert layer.params == 3_187_703_808  # attn 570,425,344 + MLP 2,617,245,696 + norms 32,768


@pytest.mark.parametrize("name", sorted(EXPERT))
def test_one_expert(models, name):
    moe = [x for x in models[name].decoder_layers() if x.ffn == "moe"]
    assert moe and all(x.expert_params == EXPERT[name] for x in moe)


@pytest.mark.parametrize("name", sorted(ATTENTION_AT))
def test_hybrid_attention_positions(models, name):
    m = models[name]
    assert [x.index for x in m.decoder_layers() if x.kind == "attention"] == ATTENTION_AT[name]


def test_layer_layouts(models):
    ds = models["deepseek-v3"].decoder_layers()
    assert [x.ffn for x in ds[:4]] == ["dense", "dense", "dense", "moe"] and len(ds) == 61
    assert sum(x.ffn == "dense" for x in models["kimi-k2"].decoder_layers()) == 1
    kl = models["kimi-linear-48b"].decoder_layers()
    assert [x.ffn for x in kl].count("dense") == 1 and kl[0].ffn == "dense"
    jamba = models["jamba-1.5-large"].decoder_layers()
    assert [x.index for x in jamba if x.ffn == "moe"] == list(range(1, 72, 2))
    oss = models["gpt-oss-120b"].decoder_layers()
    assert [x.index for x in oss if x.mixer == "sliding"] == list(range(0, 36, 2))
    assert all(x.kv_window == 128 for x in oss if x.mixer == "sliding")
    assert all(x.kv_window is None for x in oss if x.mixer != "sliding")


# model_facts.md §10 and the per-model "KV per token" rows, 16-bit cache, summed over layers
@pytest.mark.parametrize("name, kv_bytes_per_token", [
    ("llama-3.1-405b", 516_096),        # 2*8*128*2 B x 126
    ("qwen3-next-80b", 24 * 1024),      # 2*2*256*2 B x 12
    ("deepseek-v3", 70_272),            # 576*2 B x 61
    ("kimi-k2", 70_272),
    ("kimi-linear-48b", 8_064),         # 576*2 B x 7
    ("minimax-text-01", 40 * 1024),     # 2*8*128*2 B x 10
    ("jamba-1.5-large", 36 * 1024),     # 2*8*128*2 B x 9
    ("qwen3-235b", 188 * 1024),         # 2*4*128*2 B x 94
])
def test_kv_bytes_per_token(models, name, kv_bytes_per_token):
    assert sum(memory.kv_bytes_per_token(x, BF16) for x in models[name].layers) == kv_bytes_per_token


def test_gpt_oss_sliding_window_bounds_kv():
    m = load_model("gpt-oss-120b")
    wl = BF16.replace(context_tokens=131072)
    full = sum(memory.kv_bytes_per_request(x, wl) for x in m.layers if x.mixer == "gqa")
    sliding = sum(memory.kv_bytes_per_request(x, wl) for x in m.layers if x.mixer == "sliding")
    assert full == 18 * 2048 * 131072          # 36 KiB/token on the full layers
    assert sliding == 18 * 2048 * 128          # 4.5 MiB per request at most
    assert sliding == 9 * 2**19


@pytest.mark.parametrize("name, layers, recurrent, conv", [
    ("kimi-linear-48b", 20, 32 * 128 * 128, 3 * 12288),
    ("qwen3-next-80b", 36, 32 * 128 * 128, 3 * 8192),
    ("minimax-text-01", 70, 64 * 128 * 128, 0),
    ("jamba-1.5-large", 63, 16384 * 16, 16384 * 3),
])
def test_state_elements_per_request(models, name, layers, recurrent, conv):
    linear = [x for x in models[name].layers if x.kind == "linear_attention"]
    assert len(linear) == layers
    assert {(x.state_elements_per_request, x.conv_state_elements_per_request) for x in linear} == {(recurrent, conv)}


# model_facts.md "state per request" rows: (bf16 everything, fp32 recurrent + bf16 conv), in bytes
@pytest.mark.parametrize("name, bf16_bytes, fp32_bytes", [
    ("kimi-linear-48b", 20 * (2 * 524_288 + 2 * 36_864), 20 * (4 * 524_288 + 2 * 36_864)),  # 21.4 / 41.4 MiB
    ("qwen3-next-80b", 36 * (2 * 524_288 + 2 * 24_576), 36 * (4 * 524_288 + 2 * 24_576)),  # 37.7 / 73.7 MiB
    ("jamba-1.5-large", 63 * (2 * 262_144 + 2 * 49_152), 63 * (4 * 262_144 + 2 * 49_152)),  # 37.4 / 68.9 MiB
    ("minimax-text-01", 140 * 2**20, 280 * 2**20),
])
def test_state_bytes_per_request(models, name, bf16_bytes, fp32_bytes):
    m = models[name]
    assert sum(memory.state_bytes_per_request(x, BF16) for x in m.layers) == bf16_bytes
    assert sum(memory.state_bytes_per_request(x, FP32_STATE) for x in m.layers) == fp32_bytes


def test_state_sizes_in_mib_match_model_facts(models):
    mib = {n: sum(memory.state_bytes_per_request(x, w) for x in models[n].layers) / 2**20
           for n, w in (("kimi-linear-48b", FP32_STATE), ("qwen3-next-80b", BF16), ("jamba-1.5-large", BF16))}
    assert round(mib["kimi-linear-48b"], 1) == 41.4
    assert round(mib["qwen3-next-80b"], 1) == 37.7
    assert round(mib["jamba-1.5-large"], 1) == 37.4


@pytest.mark.parametrize("name", CATALOG)
def test_default_workload_fits_wse3t(models, name):
    """Every layer, with its default workload's KV/state reserve, fits one 44 GB wafer."""
    m = models[name]
    wl = workload_for(m)
    assert m.default_workload, "every catalog model documents a default workload"
    fleet = load_fleet("wse-3t")
    device = max(fleet.available, key=lambda d: d.memory_bytes)
    room = device.memory_bytes - memory.activation_buffer_bytes(m.layers, wl)
    assert max(memory.layer_demand_bytes(x, wl) for x in m.layers) <= room


@pytest.mark.parametrize("name", CATALOG)
def test_inspect_with_hardware(run_cli, models, name):
    code, out, err = run_cli(["inspect", name, "--hardware", "wse-3t", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["totals"]["params"] == models[name].total_params
    d = doc["device"]
    assert d["memory_bytes"] == 44_000_000_000
    assert d["concurrency_ceiling"] >= workload_for(models[name]).concurrency


def test_gpt_oss_ceiling_uses_the_full_attention_layer(run_cli):
    code, out, err = run_cli(["inspect", "gpt-oss-120b", "--hardware", "wse-3t", "--json"])
    assert code == 0, err
    d = json.loads(out)["device"]
    weights = -(-(26_550_144 + 3_186_524_288 + 2 * 2880) * 4 // 8)
    assert d["kv_bytes_per_request_per_layer"] == 2048 * 131072
    assert d["kv_reserve_bytes"] == 44_000_000_000 - weights
    assert d["concurrency_ceiling"] == (44_000_000_000 - weights) // (2048 * 131072) == 157
