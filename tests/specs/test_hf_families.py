"""The families interpreter on real config.json files (tests/fixtures/hf_corpus): per-layer KV bytes
per token and state bytes per request by hand, one model per family; wrappers, towers, MTP, JSON
constants, and families the interpreter does not list."""

from __future__ import annotations

import json

import pytest
from dirs import FIXTURES as FIXTURES_DIR
from hf_oracle import META_ONLY

from placer.problem import memory
from placer.specs.errors import InvalidSpec
from placer.specs.hf import SUPPORTED_FAMILIES, spec_from_hf_config
from placer.specs.hf.quirks import FAMILIES
from placer.specs.model import load_model, model_from_dict
from placer.specs.workload import Workload

CORPUS = FIXTURES_DIR / "hf_corpus"
FIXTURES = FIXTURES_DIR / "hf"
BF16 = Workload(context_tokens=8192, kv_bits=16, state_bits=16, conv_state_bits=16)
CONFIGS = sorted(p for p in CORPUS.glob("*.json")
                 if not p.name.endswith(".hf_quant_config.json") and p.name != "meta_counts.json")


def _layers(name: str, **kw):
    m = load_model(CORPUS / name, **kw)
    return m, m.decoder_layers()


def _kv(layer) -> int:
    return memory.kv_bytes_per_token(layer, BF16)


def _state(layer) -> int:
    return memory.state_bytes_per_request(layer, BF16)


def test_gqa_llama():
    _, layers = _layers("meta-llama--Meta-Llama-3.1-8B.json")
    assert {_kv(x) for x in layers} == {2 * 8 * 128 * 2}          # K and V, 8 KV heads of 128, bf16
    assert {_state(x) for x in layers} == {0}


def test_mla_deepseek_and_the_dsa_indexer_key():
    _, v3 = _layers("deepseek-ai--DeepSeek-V3.json")
    assert {_kv(x) for x in v3} == {(512 + 64) * 2}               # latent + rope key
    _, v32 = _layers("deepseek-ai--DeepSeek-V3.2.json")
    assert {_kv(x) for x in v32} == {(512 + 64 + 128) * 2}        # + the indexer's own 128-wide key


def test_sliding_window_gpt_oss():
    m, layers = _layers("openai--gpt-oss-120b.json")
    sliding = [x for x in layers if x.kv_window]
    assert [x.index for x in sliding] == list(range(0, 36, 2)) and {x.kv_window for x in sliding} == {128}
    assert {_kv(x) for x in layers} == {2 * 8 * 64 * 2}
    full = layers[1]
    wl = BF16.replace(context_tokens=262144)
    assert memory.kv_bytes_per_request(sliding[0], wl) == 128 * 2048
    assert memory.kv_bytes_per_request(full, wl) == 262144 * 2048


def test_chunked_attention_llama_4():
    # RoPE layers attend within 8,192-token chunks; every fourth layer (NoPE) attends globally
    _, layers = _layers("meta-llama--Llama-4-Scout-17B-16E-Instruct.json")
    assert [x.index for x in layers if x.kv_window is None] == list(range(3, 48, 4))
    assert {x.kv_window for x in layers if x.kv_window} == {8192}
    assert {_kv(x) for x in layers} == {2 * 8 * 128 * 2}


def test_gated_deltanet_qwen3_5():
    _, layers = _layers("Qwen--Qwen3.5-27B.json")
    gdn = [x for x in layers if x.kind == "linear_attention"]
    full = [x for x in layers if x.kind == "attention"]
    assert len(gdn) == 48 and [x.index for x in full] == list(range(3, 64, 4))
    nk, nv, dk, dv = 16, 48, 128, 128
    assert {_state(x) for x in gdn} == {(nv * dv * dk + 3 * (2 * nk * dk + nv * dv)) * 2}
    assert {_kv(x) for x in full} == {2 * 4 * 256 * 2}


def test_kda_and_mla_kimi_k3():
    m, layers = _layers("moonshotai--Kimi-K3.json")
    kda = [x for x in layers if x.mixer == "kda"]
    assert len(kda) == 69
    # recurrent 96 x 128 x 128 in fp32, short convs 3 x (q, k, v of 96 x 128) in bf16
    assert {memory.state_bytes_per_request(x, Workload()) for x in kda} == {96 * 128 * 128 * 4 + 3 * 3 * 96 * 128 * 2}
    assert {_kv(x) for x in layers if x.mixer == "mla"} == {(512 + 64) * 2}


def test_mamba2_nemotron_h():
    _, layers = _layers("nvidia--Nemotron-H-56B-Base-8K.json")
    mamba = [x for x in layers if x.mixer == "mamba2"]
    heads, hd, ds, groups = 256, 64, 256, 8
    di = heads * hd
    assert {_state(x) for x in mamba} == {(heads * hd * ds + (di + 2 * groups * ds) * 3) * 2}
    # one sub-block per layer: attention layers have no FFN, MLP layers no mixer
    assert {(x.kind, x.ffn) for x in layers} == {("linear_attention", None), ("attention", None), ("ffn", "dense")}
    assert {_kv(x) for x in layers if x.kind == "attention"} == {2 * 8 * 128 * 2}


def test_lightning_and_mamba1_from_the_fixtures():
    m = load_model(FIXTURES / "minimax-text-01.json")
    assert {_state(x) for x in m.decoder_layers() if x.mixer == "lightning"} == {64 * 128 * 128 * 2}
    j = load_model(FIXTURES / "jamba-1.5-large.json")
    assert {_state(x) for x in j.decoder_layers() if x.mixer == "mamba"} == {(16384 * 16 + 16384 * 3) * 2}


# ----------------------------------------------------------------------------- wrappers, towers, MTP
def test_multimodal_tower_is_its_own_node_or_dropped():
    m = load_model(CORPUS / "Qwen--Qwen3.5-27B.json")
    assert [x.kind for x in m.layers[:2]] == ["vision", "embedding"]
    assert any("vision/audio tower" in n for n in m.notes)
    t = load_model(CORPUS / "Qwen--Qwen3.5-27B.json", text_only=True)
    assert [x.kind for x in t.layers[:1]] == ["embedding"]
    assert m.total_params - t.total_params == m.layers[0].params > 0
    assert any("--text-only" in n for n in t.notes)


def test_mtp_from_the_command_line(run_cli):
    code, out, err = run_cli(["inspect", CORPUS / "deepseek-ai--DeepSeek-V3.json", "--json"])
    assert code == 0 and "not placed (--mtp includes them)" in err
    base = json.loads(out)
    code, out, err = run_cli(["inspect", CORPUS / "deepseek-ai--DeepSeek-V3.json", "--json", "--mtp"])
    with_mtp = json.loads(out)
    assert [r["name"] for r in with_mtp["layers"][-2:]] == ["mtp.0", "lm_head"]
    assert with_mtp["totals"]["kv_bytes_per_token"] - base["totals"]["kv_bytes_per_token"] == 576 * 2


def test_imported_workload_defaults_are_stated(run_cli):
    code, out, err = run_cli(["inspect", CORPUS / "meta-llama--Meta-Llama-3.1-8B.json"])
    assert code == 0
    assert "context 131,072 tokens (the config's max_position_embeddings)" in err
    assert "concurrency 1 (placer's default" in err
    assert "context 128k (131,072 tokens), concurrency 1" in out


# ----------------------------------------------------------------------------- JSON constants
def test_infinity_and_nan_in_unused_fields_are_accepted(tmp_path):
    text = (CORPUS / "nvidia--Nemotron-H-56B-Base-8K.json").read_text()
    cfg = json.loads(text)
    cfg["time_step_limit"] = [0.0, float("inf")]
    cfg["some_unused_ratio"] = float("nan")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))          # json writes Infinity / NaN, as published files have them
    assert "Infinity" in path.read_text() and "NaN" in path.read_text()
    assert load_model(path).total_params == load_model(CORPUS / "nvidia--Nemotron-H-56B-Base-8K.json").total_params
    cfg["hidden_size"] = float("inf")
    path.write_text(json.dumps(cfg))
    with pytest.raises(InvalidSpec) as info:
        load_model(path)
    assert info.value.field == "hidden_size" and "expected an integer, got float inf" in info.value.message


# ----------------------------------------------------------------------------- unknown families
def _unknown() -> dict:
    cfg = json.loads((CORPUS / "meta-llama--Meta-Llama-3.1-8B.json").read_text())
    # Falcon: a family transformers knows and the interpreter does not list
    assert "falcon" not in SUPPORTED_FAMILIES
    return {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 256,
            "num_hidden_layers": 3, "num_attention_heads": 4, "num_kv_heads": 2, "new_decoder_architecture": True,
            "vocab_size": 1000, "max_position_embeddings": 2048, "bias": False, "torch_dtype": cfg["torch_dtype"]}


def test_unknown_family_without_the_extra_is_refused_naming_it(monkeypatch):
    from placer.specs.hf import meta
    monkeypatch.setattr(meta, "meta_available", lambda: False)
    with pytest.raises(InvalidSpec) as info:
        spec_from_hf_config(_unknown(), "falcon.json")
    assert info.value.field == "model_type"
    assert "family 'falcon' is not one the interpreter lists" in info.value.message
    assert "placer[hf]" in info.value.message


@pytest.mark.hf
def test_unknown_family_is_read_from_the_meta_device_module_tree():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spec = spec_from_hf_config(_unknown(), "falcon.json")
    assert "meta device" in spec["description"]
    m = model_from_dict(spec)
    cfg = transformers.AutoConfig.for_model("falcon", **{k: v for k, v in _unknown().items()
                                                         if k not in ("model_type", "architectures")})
    with torch.device("meta"):
        ref = transformers.AutoModelForCausalLM.from_config(cfg)
    assert m.total_params == sum(p.numel() for p in ref.parameters())
    per_layer = [sum(p.numel() for p in layer.parameters()) for layer in ref.transformer.h]
    assert [x.params for x in m.decoder_layers()] == per_layer
    # K and V: 2 KV heads of 256 / 4 = 64
    assert {x.kv_elements_per_token for x in m.decoder_layers()} == {2 * 2 * 64}
    assert m.default_workload["context"] == 2048


@pytest.mark.parametrize("fam", FAMILIES, ids=[f.model_types[0] for f in FAMILIES])
def test_every_quirk_row_has_a_fixture_that_imports_as_its_family(fam):
    path = FIXTURES_DIR / f"{fam.fixture}.json"
    data = json.loads(path.read_text())
    text = data.get("text_config") or data
    assert (text.get("model_type") or data.get("model_type")) in fam.model_types
    m = load_model(path)
    assert "families interpreter" in m.description


_DEFAULT_CONFIG_FAMILIES = [f for f in FAMILIES if (FIXTURES_DIR / f"{f.fixture}.json").parent.name == "hf_families"]


@pytest.mark.hf
@pytest.mark.parametrize("fam", _DEFAULT_CONFIG_FAMILIES, ids=[f.model_types[0] for f in _DEFAULT_CONFIG_FAMILIES])
def test_a_default_config_family_counts_what_transformers_builds(fam):
    """The quirk rows whose fixture is transformers' default config of the family (tests/fixtures/
    hf_families): transformers' meta-device count of that config is the oracle."""
    path = FIXTURES_DIR / f"{fam.fixture}.json"
    data = json.loads(path.read_text())
    m = load_model(path)
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(data["model_type"], **{k: v for k, v in data.items() if k != "model_type"})
    with torch.device("meta"):
        ref = transformers.AutoModelForCausalLM.from_config(cfg)
    expected = sum(p.numel() for p in ref.parameters())
    assert abs(m.total_params - expected) <= 1e-3 * expected, (m.total_params, expected)


# ----------------------------------------------------------------------------- every corpus file
@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=[pytest.mark.hf] if p.stem in META_ONLY else [])
                                  for p in CONFIGS])
def test_every_corpus_file_imports_and_reloads(path, tmp_path):
    from placer.specs.hf.spec_file import import_hf
    try:
        a = load_model(path)
    except InvalidSpec as exc:
        # only a family no reader knows (not the interpreter, not transformers) may be refused
        assert "is not one the interpreter lists" in exc.message, exc
        pytest.skip(str(exc)[:120])
    out = tmp_path / "m.yaml"
    import_hf(path, out)
    b = load_model(out)
    wl = Workload(context_tokens=4096)
    assert [(x.name, memory.weight_bytes(x, wl), memory.kv_bytes_per_token(x, wl),
             memory.state_bytes_per_request(x, wl)) for x in a.layers] == \
        [(x.name, memory.weight_bytes(x, wl), memory.kv_bytes_per_token(x, wl),
          memory.state_bytes_per_request(x, wl)) for x in b.layers]
