"""The layer graph: pattern grammar, the kimi-k3 seed model, both spec forms, refinement."""

from __future__ import annotations

import pytest

from placer.problem import memory
from placer.problem.reductions.refine import refine
from placer.specs.errors import InvalidSpec
from placer.specs.model import load_model, model_from_dict, parse_pattern
from placer.specs.workload import Workload


# ----------------------------------------------------------------------------- pattern grammar
@pytest.mark.parametrize("pattern, expected", [
    ("K", "K"),
    ("KKKM", "KKKM"),
    ("K K, K M", "KKKM"),                  # spaces and commas are separators
    ("K*3 M", "KKKM"),                     # a repeat applies to the letter before it
    ("KM*2", "KMM"),
    ("(KKKM)*2 M", "KKKMKKKMM"),
    ("(K M)*2 (A)*1", "KMKMA"),
    ("((AB)*2 C)*2", "ABABCABABC"),        # nested groups
    ("(AB)", "AB"),                        # a group without repeat is just its letters
])
def test_parse_pattern(pattern, expected):
    assert "".join(parse_pattern(pattern)) == expected


def test_parse_pattern_kimi_k3():
    letters = parse_pattern("(K K K M)*23 M")
    assert len(letters) == 23 * 4 + 1 == 93
    assert letters.count("M") == 24 and letters.count("K") == 69


@pytest.mark.parametrize("pattern, message", [
    ("(KKKM", "unbalanced '\\('"),
    ("KKKM)", "unbalanced '\\)'"),
    ("((K)*2", "unbalanced '\\('"),
    ("*3", "must follow"),
    ("K*2*3", "must follow"),
    ("K*0", "out of range"),
    ("K-M", "cannot read"),
    ("K2", "cannot read"),
    ("K*", "cannot read"),
])
def test_parse_pattern_errors(pattern, message):
    with pytest.raises(ValueError, match=message):
        parse_pattern(pattern)


# ----------------------------------------------------------------------------- kimi-k3 (seed)
@pytest.fixture(scope="module")
def k3():
    return load_model("kimi-k3")


def test_kimi_k3_layers(k3):
    assert k3.name == "kimi-k3"
    assert len(k3.layers) == 93 and k3.num_hidden_layers == 93
    mla = [x.index for x in k3.layers if x.kind == "attention"]
    # 1-based 4, 8, ..., 92 and 93 -> 0-based 3, 7, ..., 91 and 92
    assert mla == list(range(3, 92, 4)) + [92]
    assert len(mla) == 24
    assert sum(1 for x in k3.layers if x.kind == "linear_attention") == 69
    assert {x.mixer for x in k3.layers if x.kind == "attention"} == {"mla"}
    assert {x.mixer for x in k3.layers if x.kind == "linear_attention"} == {"kda"}
    assert [x.index for x in k3.layers] == list(range(93))
    assert [x.name for x in k3.layers[:2]] == ["layers.0", "layers.1"]


def test_kimi_k3_params_and_no_embeddings(k3):
    # floor(3e12 / 93) = floor(32,258,064,516.13) = 32,258,064,516 per layer
    assert {x.params for x in k3.layers} == {3 * 10**12 // 93} == {32_258_064_516}
    # 93 x 32,258,064,516 = 2,999,999,999,988
    assert k3.total_params == 2_999_999_999_988
    assert not any(x.kind in ("embedding", "lm_head") for x in k3.layers)
    assert k3.edges == tuple((i, i + 1) for i in range(92)) and k3.is_chain


def test_kimi_k3_per_layer_counts(k3):
    mla, kda = k3.layers[3], k3.layers[0]
    assert mla.kv_elements_per_token == 512 + 64          # kv_lora_rank + qk_rope_head_dim
    assert mla.state_elements_per_request == 0
    assert kda.kv_elements_per_token == 0
    assert kda.state_elements_per_request == 64 * 128 * 128 == 1_048_576
    assert kda.conv_state_elements_per_request == 3 * (3 * 64 * 128) == 73_728
    assert mla.activation_elements_per_token == 7168
    assert k3.default_workload["context"] == 262_144


# ----------------------------------------------------------------------------- explicit form
TOY = {
    "name": "toy",
    "layers": [
        {"kind": "linear_attention", "weight_bytes": 2684354560, "state_bytes_per_request": 4341760},
        {"kind": "attention", "params": 1000000, "kv_bytes_per_token": 576},
    ],
}


def test_explicit_form_from_design_doc():
    m = model_from_dict(TOY)
    assert [x.kind for x in m.layers] == ["linear_attention", "attention"]
    assert [x.name for x in m.layers] == ["layers.0", "layers.1"]
    lin, att = m.layers
    for bits in (4, 8, 16):
        wl = Workload(weight_bits=bits, kv_bits=bits)
        assert memory.weight_bytes(lin, wl) == 2_684_354_560          # fixed bytes: as given
        assert memory.weight_bytes(att, wl) == 1_000_000 * bits // 8  # 500,000 / 1e6 / 2e6
        assert memory.kv_bytes_per_token(att, wl) == 576              # fixed bytes per token
        assert memory.state_bytes_per_request(lin, wl) == 4_341_760


def test_explicit_form_units_and_elements():
    m = model_from_dict({"name": "u", "layers": [
        {"kind": "attention", "weight_bytes": "2 GiB", "kv_elements_per_token": 1024, "kv_window": 4096},
    ]})
    (x,) = m.layers
    wl = Workload(kv_bits=8, context_tokens=8192)
    assert memory.weight_bytes(x, wl) == 2 * 2**30
    assert memory.kv_bytes_per_token(x, wl) == 1024      # 1024 elements x 8 bits
    assert memory.kv_bytes_per_request(x, wl) == 1024 * 4096   # the window bounds 8192 tokens


# ----------------------------------------------------------------------------- compact form
def _compact(**over):
    spec = {
        "name": "c", "hidden_size": 64, "num_layers": 3, "pattern": "A L A",
        "mixers": {"gqa": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
                   "kda": {"type": "kda", "num_heads": 2, "head_dim": 8}},
        "ffns": {"mlp": {"type": "dense", "intermediate_size": 128}},
        "layer_types": {"A": {"mixer": "gqa", "ffn": "mlp"}, "L": {"mixer": "kda", "ffn": "mlp"}},
    }
    spec.update(over)
    return spec


def test_compact_form_counts():
    m = model_from_dict(_compact())
    a = m.layers[0]
    # GQA, h=64, 4 q heads, 2 kv heads, d=16: q 64*64 + kv 2*64*32 + o 64*64 = 4096+4096+4096
    assert a.params_mixer == 12_288
    assert a.params_ffn == 3 * 64 * 128 == 24_576     # SwiGLU gate, up, down
    assert a.params_other == 2 * 64                   # two RMSNorms per layer
    assert a.params == 12_288 + 24_576 + 128 == 36_992
    assert a.kv_elements_per_token == 2 * 2 * 16 == 64
    assert [x.kind for x in m.layers] == ["attention", "linear_attention", "attention"]


def test_embedding_and_head_are_first_and_last():
    m = model_from_dict(_compact(vocab_size=1000))
    assert [x.name for x in m.layers] == ["embedding", "layers.0", "layers.1", "layers.2", "lm_head"]
    emb, head = m.layers[0], m.layers[-1]
    assert emb.kind == "embedding" and emb.index is None
    assert emb.params == 1000 * 64                    # vocab x hidden
    assert head.kind == "lm_head" and head.index is None
    assert head.params == 1000 * 64 + 64              # untied head + final norm
    assert m.num_hidden_layers == 3
    assert m.edges == ((0, 1), (1, 2), (2, 3), (3, 4))
    tied = model_from_dict(_compact(vocab_size=1000, tie_word_embeddings=True))
    assert tied.layers[-1].params == 64               # the head shares the embedding: norm only
    folded = model_from_dict(_compact(vocab_size=1000, fold_embeddings=True))
    assert [x.name for x in folded.layers] == ["layers.0", "layers.1", "layers.2"]
    assert len(model_from_dict(_compact(vocab_size=1000), fold_embeddings=True).layers) == 3


@pytest.mark.parametrize("over, field", [
    ({"num_layers": 4}, "pattern"),                                   # pattern spells 3
    ({"pattern": "A L X"}, "pattern"),                                # unknown letter
    ({"pattern": "(A L A"}, "pattern"),                               # unbalanced
    ({"layer_types": {"A": {"mixer": "nope"}}, "pattern": "A*3"}, "layer_types.A.mixer"),
    ({"layer_types": {"A": {"mixer": "gqa", "ffn": "nope"}}, "pattern": "A*3"}, "layer_types.A.ffn"),
    ({"mixers": {"gqa": {"type": "gqa", "num_heads": 4}}}, "mixers.gqa"),   # no num_kv_heads
    ({"mixers": {"gqa": {"type": "rwkv", "num_heads": 4}}}, "mixers.gqa.type"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"hidden_size": -64}, "hidden_size"),
    ({"colour": "blue"}, "colour"),
])
def test_compact_form_errors_name_the_field(over, field):
    with pytest.raises(InvalidSpec) as info:
        model_from_dict(_compact(**over), source="spec.yaml")
    assert info.value.source == "spec.yaml"
    assert info.value.field == field


# ----------------------------------------------------------------------------- refinement
def test_refine_shards_keeps_weights_and_puts_kv_on_shard0(k3):
    r = refine(k3, "shards:4")
    assert len(r.layers) == 93 * 4 and r.granularity == "shards:4"
    assert r.total_params == k3.total_params
    first = r.layers[12:16]                      # layer 3 (MLA), four shards
    assert [x.name for x in first] == [f"layers.3.shard{s}" for s in range(4)]
    assert {x.parent for x in first} == {"layers.3"} and {x.index for x in first} == {3}
    # 32,258,064,516 / 4 = 8,064,516,129 exactly
    assert [x.params for x in first] == [8_064_516_129] * 4
    assert [x.kv_elements_per_token for x in first] == [576, 0, 0, 0]
    kda = r.layers[0:4]
    assert [x.state_elements_per_request for x in kda] == [1_048_576, 0, 0, 0]
    assert [x.conv_state_elements_per_request for x in kda] == [73_728, 0, 0, 0]
    wl16 = Workload(weight_bits=16)
    assert sum(memory.weight_bytes(x, wl16) for x in r.layers) == \
        sum(memory.weight_bytes(x, wl16) for x in k3.layers)
    assert r.is_chain


def test_refine_shards_splits_fixed_bytes_exactly():
    r = refine(model_from_dict(TOY), "shards:3")
    fixed = [x.weight_bytes_fixed for x in r.layers[:3]]
    # 2,684,354,560 = 3 x 894,784,853 + 1: the remainder goes to shard 0
    assert fixed == [894_784_854, 894_784_853, 894_784_853]
    assert sum(fixed) == 2_684_354_560
    assert [x.state_bytes_per_request_fixed for x in r.layers[:3]] == [4_341_760, None, None]
    assert [x.params for x in r.layers[3:]] == [333_334, 333_333, 333_333]
    assert [x.kv_bytes_per_token_fixed for x in r.layers[3:]] == [576, None, None]


MOE = {
    "name": "moe", "hidden_size": 64, "num_layers": 2, "pattern": "E E",
    "mixers": {"gqa": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16}},
    "ffns": {"moe": {"type": "moe", "num_experts": 8, "experts_per_token": 2, "moe_intermediate_size": 32,
                     "num_shared_experts": 1}},
    "layer_types": {"E": {"mixer": "gqa", "ffn": "moe"}},
}


def test_moe_layer_counts():
    x = model_from_dict(MOE).layers[0]
    # mixer 12,288 (as above); one expert 3*64*32 = 6,144; 8 experts 49,152; shared 6,144;
    # router 8*64 = 512 -> FFN 55,808; norms 128 -> 68,224
    assert (x.params_mixer, x.params_ffn, x.params_other) == (12_288, 55_808, 128)
    assert x.expert_params == 6_144 and x.num_experts == 8
    assert x.shared_params == 6_144 + 512
    # active: mixer + 2 experts + shared + router + norms = 12,288 + 12,288 + 6,656 + 128
    assert x.active_params == 31_360


def test_refine_block_moe():
    m = model_from_dict(MOE)
    r = refine(m, "block", expert_groups=3)
    names = [x.name for x in r.layers]
    assert names[:4] == ["layers.0.mixer", "layers.0.experts.0", "layers.0.experts.1", "layers.0.experts.2"]
    assert len(r.layers) == 8
    mixer, g0, g1, g2 = r.layers[:4]
    # 8 experts in 3 groups: 3, 3, 2; group 0 also holds the shared expert and the router
    assert [g.num_experts for g in (g0, g1, g2)] == [3, 3, 2]
    assert mixer.params == 12_288 + 128 == 12_416
    assert [g.params for g in (g0, g1, g2)] == [3 * 6_144 + 6_656, 3 * 6_144, 2 * 6_144] == [25_088, 18_432, 12_288]
    assert mixer.params + g0.params + g1.params + g2.params == m.layers[0].params == 68_224
    assert r.total_params == m.total_params
    assert mixer.kv_elements_per_token == 64 and {g.kv_elements_per_token for g in (g0, g1, g2)} == {0}
    assert {g.kind for g in (g0, g1, g2)} == {"ffn"} and {g.parent for g in (g0, g1, g2)} == {"layers.0"}
    # mixer fans out to the three groups; they join again at the next layer's mixer (node 4)
    assert set(r.edges) == {(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4), (4, 5), (4, 6), (4, 7)}
    assert not r.is_chain
    # active parameters are spread over the groups and still sum to the layer's
    assert sum(x.active_params for x in r.layers[:4]) == m.layers[0].active_params


def test_refine_block_dense_layer_is_mixer_then_ffn():
    r = refine(model_from_dict(_compact()), "block")
    assert [x.name for x in r.layers[:2]] == ["layers.0.mixer", "layers.0.ffn"]
    assert [x.params for x in r.layers[:2]] == [12_288 + 128, 24_576]
    assert r.is_chain and len(r.layers) == 6


def test_refine_block_keeps_layers_without_parts(k3):
    # kimi-k3 gives only a per-layer total: nothing to split
    assert [x.name for x in refine(k3, "block").layers] == [x.name for x in k3.layers]


@pytest.mark.parametrize("bad", ["shards:0", "shards:x", "rows", "shards:2000"])
def test_refine_rejects_bad_granularity(k3, bad):
    with pytest.raises(ValueError, match="granularity"):
        refine(k3, bad)
