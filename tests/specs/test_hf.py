"""Hugging Face config.json import: fixtures written from model_facts.md's published values."""

from __future__ import annotations

import json

import pytest
import yaml
from dirs import FIXTURES as FIXTURES_DIR
from dirs import MODELS
from hypothesis import given
from hypothesis import strategies as st

from placer.specs.errors import InvalidSpec
from placer.specs.hf import compress_pattern, spec_from_hf_config
from placer.specs.model import load_model, model_from_dict, parse_pattern

FIXTURES = FIXTURES_DIR / "hf"
# fixture stem = catalog name; published totals from model_facts.md §0 (vendor figures; Kimi's
# rounded "1T" / "48B" are checked against the derived totals the table cross-checks)
PUBLISHED = {
    "deepseek-v3": 671e9, "kimi-k2": 1026.4e9, "kimi-linear-48b": 49.12e9, "qwen3-next-80b": 80e9,
    "minimax-text-01": 456e9, "gpt-oss-120b": 117e9, "llama-3.1-405b": 405e9, "qwen3-235b": 235e9,
    "jamba-1.5-large": 398e9,
}
ARCHITECTURES = {
    "deepseek-v3": "DeepseekV3ForCausalLM", "kimi-k2": "DeepseekV3ForCausalLM",
    "kimi-linear-48b": "KimiLinearForCausalLM", "qwen3-next-80b": "Qwen3NextForCausalLM",
    "minimax-text-01": "MiniMaxText01ForCausalLM", "gpt-oss-120b": "GptOssForCausalLM",
    "llama-3.1-405b": "LlamaForCausalLM", "qwen3-235b": "Qwen3MoeForCausalLM",
    "jamba-1.5-large": "JambaForCausalLM",
}


def _counts(model):
    """Everything memory accounting reads from a layer (names and indices included)."""
    return [(x.name, x.kind, x.index, x.mixer, x.ffn, x.params_mixer, x.params_ffn, x.params_other,
             x.active_params, x.kv_elements_per_token, x.kv_window, x.state_elements_per_request,
             x.conv_state_elements_per_request, x.activation_elements_per_token, x.num_experts,
             x.expert_params, x.shared_params) for x in model.layers]


def _config(stem: str) -> dict:
    return json.loads((FIXTURES / f"{stem}.json").read_text())


def _spec(config: dict, source: str = "config.json") -> dict:
    return spec_from_hf_config(config, source)


def test_every_architecture_has_a_fixture():
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(PUBLISHED)
    assert {_config(s)["architectures"][0] for s in PUBLISHED} == set(ARCHITECTURES.values())


@pytest.mark.parametrize("stem", sorted(PUBLISHED))
def test_fixture_matches_catalog(stem):
    imported = load_model(FIXTURES / f"{stem}.json")
    catalog = load_model(stem)
    assert _counts(imported) == _counts(catalog)
    assert abs(imported.total_params - PUBLISHED[stem]) <= 0.01 * PUBLISHED[stem]


# letters: A attention (GQA or MLA), S sliding, K KDA, G Gated DeltaNet, L lightning, M Mamba;
# upper case with an MoE FFN (or the model's only FFN kind), lower case with a dense one
@pytest.mark.parametrize("stem, pattern", [
    ("deepseek-v3", "a*3 A*58"),
    ("kimi-k2", "a A*60"),
    ("kimi-linear-48b", "kKKA (KKKA)*5 KKA"),
    ("qwen3-next-80b", "(GGGA)*12"),
    ("minimax-text-01", "(L*7 A)*10"),
    ("llama-3.1-405b", "A*126"),
    ("jamba-1.5-large", "(mMmMaMmM)*9"),
    ("gpt-oss-120b", "(SA)*18"),
    ("qwen3-235b", "A*94"),
])
def test_imported_pattern_is_readable_and_matches_catalog(stem, pattern):
    spec = _spec(_config(stem))
    assert spec["pattern"] == pattern
    catalog = yaml.safe_load((MODELS / f"{stem}.yaml").read_text())
    mine = [(spec["layer_types"][x]["mixer"], spec["layer_types"][x].get("ffn")) for x in parse_pattern(spec["pattern"])]
    theirs = [(catalog["layer_types"][x]["mixer"], catalog["layer_types"][x].get("ffn"))
              for x in parse_pattern(catalog["pattern"])]
    # the same mixer and FFN, layer by layer (their names may differ)
    assert [(spec["mixers"][m]["type"], spec["ffns"][f]["type"]) for m, f in mine] == \
        [(catalog["mixers"][m]["type"], catalog["ffns"][f]["type"]) for m, f in theirs]
    assert spec["architecture"] == ARCHITECTURES[stem]


def test_name_from_name_or_path_then_file(tmp_path):
    assert _spec(_config("kimi-k2"))["name"] == "Kimi-K2-Instruct"
    cfg = _config("llama-3.1-405b")
    del cfg["_name_or_path"]
    assert _spec(cfg, "some/dir/llama-405b.json")["name"] == "llama-405b"
    # a file called config.json is named after its folder, as Hugging Face snapshots lay them out
    folder = tmp_path / "Llama-3.1-405B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    m = load_model(folder / "config.json")
    assert m.name == "Llama-3.1-405B"
    assert m.total_params == 405_853_388_800


def test_stored_formats_from_quantization_config():
    ds = _spec(_config("deepseek-v3"))     # fp8 with 128 x 128 block scales
    assert ds["weight_storage"]["formats"]["fp8-block128x128"] == {
        "bits": 8, "block": [128, 128], "scale_bits": 32, "method": "fp8 block"}
    assert ds["layer_types"]["A"]["storage"] == {"fp8-block128x128": ["self_attn.*", "mlp.experts.*",
                                                                     "mlp.shared_experts.*"]}
    oss = _spec(_config("gpt-oss-120b"))   # mxfp4 experts only; attention stays bf16
    assert oss["layer_types"]["A"]["storage"] == {"mxfp4": ["mlp.experts.*"]}
    llama = _spec(_config("llama-3.1-405b"))
    assert "weight_storage" not in llama and llama["default_workload"]["weight_bits"] == 16
    cfg = _config("llama-3.1-405b")
    cfg["torch_dtype"] = "float32"
    assert _spec(cfg)["default_workload"]["weight_bits"] == 32


def test_mtp_layers_are_an_optional_node():
    spec = _spec(_config("deepseek-v3"))
    assert spec["num_layers"] == 61
    assert spec["mtp"] == {"count": 1, "layer_type": "A", "extra_params": 2 * 7168 * 7168 + 3 * 7168}
    assert "mtp" not in _spec(_config("kimi-k2"))
    off, on = model_from_dict(spec), model_from_dict(spec, mtp=True)
    assert "not placed (--mtp includes them)" in " ".join(off.notes)
    assert [x.name for x in on.layers[-3:]] == ["layers.60", "mtp.0", "lm_head"]
    mtp = on.layers[-2]
    assert mtp.kind == "mtp" and mtp.kv_elements_per_token == 576
    # one MoE decoder layer (MLA 187,107,328 + MoE 11,320,164,608 + 2 norms) + eh_proj + 3 norms
    assert mtp.params == 187_107_328 + 11_320_164_608 + 2 * 7168 + 2 * 7168 * 7168 + 3 * 7168
    assert on.total_params - off.total_params == mtp.params


def test_model_type_fallback():
    cfg = _config("jamba-1.5-large")
    del cfg["architectures"]
    assert _counts(model_from_dict(_spec(cfg))) == _counts(load_model("jamba-1.5-large"))


def test_qwen3_next_layer_types_equal_interval_rule():
    cfg = _config("qwen3-next-80b")
    del cfg["full_attention_interval"]
    cfg["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(48)]
    assert _counts(model_from_dict(_spec(cfg))) == _counts(load_model("qwen3-next-80b"))
    cfg["layer_types"] = ["linear_attention"] * 48
    m = model_from_dict(_spec(cfg))
    assert m.count_by_kind()["linear_attention"] == 48


def test_gpt_oss_without_layer_types_slides_on_even_layers():
    cfg = _config("gpt-oss-120b")
    del cfg["layer_types"]
    assert _counts(model_from_dict(_spec(cfg))) == _counts(load_model("gpt-oss-120b"))


def test_jamba_dt_rank_auto_is_hidden_over_16():
    cfg = _config("jamba-1.5-large")
    cfg["mamba_dt_rank"] = "auto"
    spec = _spec(cfg)
    assert spec["mixers"]["mamba"]["dt_rank"] == 512
    # a different attention offset moves the attention layers
    cfg["attn_layer_offset"] = 0
    m = model_from_dict(_spec(cfg))
    assert [x.index for x in m.decoder_layers() if x.kind == "attention"] == list(range(0, 72, 8))


def test_minimax_layer_types_variant():
    cfg = _config("minimax-text-01")
    cfg["architectures"] = ["MiniMaxForCausalLM"]
    cfg["layer_types"] = ["full_attention" if t else "linear_attention" for t in cfg.pop("attn_type_list")]
    assert _counts(model_from_dict(_spec(cfg))) == _counts(load_model("minimax-text-01"))


def test_qwen3_moe_dense_layers_and_sliding_window():
    cfg = _config("qwen3-235b")
    cfg["mlp_only_layers"] = [0, 1]
    cfg["use_sliding_window"] = True
    cfg["sliding_window"] = 4096
    cfg["max_window_layers"] = 90
    m = model_from_dict(_spec(cfg))
    layers = m.decoder_layers()
    assert [x.ffn for x in layers[:3]] == ["dense", "dense", "moe"]
    assert layers[0].params_ffn == 3 * 4096 * 12288
    assert [x.index for x in layers if x.kv_window == 4096] == [90, 91, 92, 93]


def test_kimi_linear_dense_mla_layer_gets_its_own_type():
    cfg = _config("kimi-linear-48b")
    cfg["first_k_dense_replace"] = 4  # layers 0-3 dense, so MLA layer 3 is dense too
    spec = _spec(cfg)
    assert spec["layer_types"]["a"] == {"mixer": "mla", "ffn": "dense"}
    assert parse_pattern(spec["pattern"])[:5] == list("kkkaK")


# ----------------------------------------------------------------------------- bad configs
def _error(config: dict) -> InvalidSpec:
    with pytest.raises(InvalidSpec) as info:
        model_from_dict(_spec(config, "bad.json"))
    assert info.value.source == "bad.json"
    return info.value


@pytest.mark.parametrize("stem, change, field, words", [
    ("llama-3.1-405b", {"num_hidden_layers": None}, "num_hidden_layers", "required key is missing"),
    ("llama-3.1-405b", {"num_hidden_layers": "126"}, "num_hidden_layers", "expected an integer, got str"),
    ("llama-3.1-405b", {"hidden_size": 16384.0}, "hidden_size", "expected an integer, got float"),
    ("llama-3.1-405b", {"num_attention_heads": True}, "num_attention_heads", "expected an integer, got bool"),
    ("llama-3.1-405b", {"intermediate_size": 0}, "intermediate_size", "must be between 1"),
    ("llama-3.1-405b", {"tie_word_embeddings": "no"}, "tie_word_embeddings", "expected true or false"),
    ("deepseek-v3", {"num_experts_per_tok": 300}, "num_experts_per_tok", "exceed the 256 experts"),
    ("deepseek-v3", {"kv_lora_rank": -512}, "kv_lora_rank", "must be between 1"),
    ("kimi-linear-48b", {"linear_attn_config": [1, 2]}, "linear_attn_config", "expected a mapping"),
    ("qwen3-next-80b", {"layer_types": ["full_attention"] * 47}, "layer_types", "has 47 entries"),
    ("qwen3-next-80b", {"layer_types": ["full_attention"] * 47 + ["conv"]}, "layer_types.47", "unknown layer type"),
    ("minimax-text-01", {"attn_type_list": [0] * 79 + [2]}, "attn_type_list.79", "expected 0"),
    ("jamba-1.5-large", {"mamba_dt_rank": "big"}, "mamba_dt_rank", "expected an integer"),
    ("gpt-oss-120b", {"sliding_window": None}, "sliding_window", "no window size is given"),
])
def test_bad_config_names_the_key(stem, change, field, words):
    cfg = _config(stem)
    cfg.update(change)
    err = _error(cfg)
    assert err.field == field
    assert words in err.message


def test_missing_keys_are_named():
    cfg = _config("llama-3.1-405b")
    del cfg["num_hidden_layers"]
    err = _error(cfg)
    assert (err.field, err.message) == (
        "num_hidden_layers", "required key is missing (also looked for n_layers, num_layers, n_layer)")
    cfg = _config("kimi-linear-48b")
    del cfg["linear_attn_config"]["num_heads"]
    assert _error(cfg).field == "linear_attn_config.num_heads"


def test_kimi_linear_layer_lists_must_partition():
    cfg = _config("kimi-linear-48b")
    cfg["linear_attn_config"]["kda_layers"].append(4)   # also listed as full attention
    err = _error(cfg)
    assert err.field == "linear_attn_config.kda_layers" and "split layers 1..27" in err.message
    cfg = _config("kimi-linear-48b")
    cfg["linear_attn_config"]["full_attn_layers"][-1] = 28  # 1-based lists: 28 does not exist
    assert _error(cfg).field == "linear_attn_config.full_attn_layers"
    cfg = _config("kimi-linear-48b")
    cfg["linear_attn_config"]["kda_layers"][0] = "1"
    assert _error(cfg).field == "linear_attn_config.kda_layers.0"


# ----------------------------------------------------------------------------- patterns
@pytest.mark.parametrize("seq, text", [
    ("DDD" + "E" * 58, "D*3 E*58"),
    ("KKKM" * 23 + "M", "(KKKM)*23 M"),
    ("AB", "AB"),
    ("A", "A"),
    ("AAB" * 2, "AABAAB"),
])
def test_compress_pattern_examples(seq, text):
    assert compress_pattern(list(seq)) == text
    assert parse_pattern(text) == list(seq)


@given(st.lists(st.sampled_from("KMDAe"), min_size=1, max_size=200))
def test_compress_pattern_round_trips(seq):
    assert parse_pattern(compress_pattern(seq)) == seq


@given(st.lists(st.sampled_from("KM"), min_size=1, max_size=8), st.integers(2, 30),
       st.lists(st.sampled_from("KMD"), max_size=6))
def test_compress_pattern_round_trips_periodic(block, reps, tail):
    seq = block * reps + tail
    assert parse_pattern(compress_pattern(seq)) == seq


# ----------------------------------------------------------------------------- command line
@pytest.mark.parametrize("stem", sorted(PUBLISHED))
def test_import_hf_round_trip(run_cli, tmp_path, stem):
    src = FIXTURES / f"{stem}.json"
    out = tmp_path / f"{stem}.yaml"
    code, stdout, stderr = run_cli(["import-hf", src, "-o", out])
    assert code == 0, stderr
    assert stdout == ""
    written = out.read_text()
    assert _counts(load_model(out)) == _counts(load_model(src))
    assert load_model(out).name == load_model(src).name
    code, stdout, _ = run_cli(["import-hf", src])
    assert code == 0 and stdout == written
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_import_hf_overwrites(run_cli, tmp_path):
    out = tmp_path / "m.yaml"
    out.write_text("old\n")
    code, _, _ = run_cli(["import-hf", FIXTURES / "qwen3-235b.json", "-o", out])
    assert code == 0
    assert yaml.safe_load(out.read_text())["pattern"] == "A*94"


def test_inspect_accepts_a_config_json(run_cli):
    code, out, err = run_cli(["inspect", FIXTURES / "llama-3.1-405b.json", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["totals"]["params"] == 405_853_388_800
    assert doc["totals"]["kv_bytes_per_token"] == 516_096


@pytest.mark.parametrize("change, field", [
    ({"num_hidden_layers": "many"}, "num_hidden_layers"),
    ({"num_key_value_heads": "8"}, "num_key_value_heads"),
    ("delete num_hidden_layers", "num_hidden_layers"),
])
def test_import_hf_bad_config_exits_2_and_writes_nothing(run_cli, tmp_path, change, field):
    cfg = _config("llama-3.1-405b")
    if isinstance(change, str):
        del cfg[change.split()[1]]
    else:
        cfg.update(change)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cfg))
    out = tmp_path / "out.yaml"
    code, stdout, stderr = run_cli(["import-hf", bad, "-o", out])
    assert code == 2
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: {field}: ")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
    # an existing file is left as it was
    out.write_text("keep\n")
    assert run_cli(["import-hf", bad, "-o", out])[0] == 2
    assert out.read_text() == "keep\n"


@pytest.mark.parametrize("content, words", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "expected a mapping"),
])
def test_import_hf_unreadable(run_cli, tmp_path, content, words):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, _, stderr = run_cli(["import-hf", bad])
    assert code == 2
    assert len(stderr.splitlines()) == 1 and words in stderr
    code, _, stderr = run_cli(["import-hf", tmp_path / "missing.json"])
    assert code == 2 and "file not found" in stderr
