"""The corpus of real Hugging Face config.json files (tests/fixtures/hf_corpus, see its SOURCES.md).

For every corpus config: placer's importer reads it, and its total parameter count is within 0.1% of
transformers' own meta-device count (``tests/hf_oracle.py``, recorded in ``meta_counts.json``), or of
a hand count written below for the families the installed transformers cannot build. With
transformers and torch installed, the recorded counts are recomputed live and must equal the file:
by default for one config per transformers model class (``LIVE_ALL`` lists the rule), all of them
with ``PLACER_HF_ORACLE_ALL=1``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re

import hf_oracle
import pytest

from placer.specs.model import load_model

# Configs the importer cannot read yet. Each entry is an expected failure (strict): when the importer
# learns a family, its tests pass, pytest reports XPASS as a failure, and the entry must be removed.
NOT_YET_IMPORTED: set[str] = set()
NOT_YET_REASON = "issue 11: family not yet interpreted"
# towers placer counts (by its ViT formula) where transformers builds no wrapper to compare with
TOWER_WITHOUT_ORACLE = {"moonshotai--Kimi-K2.5", "nvidia--Kimi-K2.6-NVFP4"}

CORPUS = hf_oracle.CORPUS
CONFIGS = hf_oracle.corpus_configs()
STEMS = [p.stem for p in CONFIGS]
RECORDED = json.loads(hf_oracle.COUNTS_FILE.read_text())
TOLERANCE = 1e-3  # 0.1%
# one config per transformers model class is recomputed live by default; all with this variable set
LIVE_ALL = os.environ.get("PLACER_HF_ORACLE_ALL") == "1"


def _config(stem: str) -> dict:
    return json.loads((CORPUS / f"{stem}.json").read_text())


@functools.cache
def _model(stem: str):
    """The corpus config as placer reads it, once for the tests below (they only read it)."""
    return load_model(CORPUS / f"{stem}.json")


def _marks(stem: str):
    marks = [pytest.mark.hf] if stem in hf_oracle.META_ONLY else []
    return marks + ([pytest.mark.xfail(strict=True, reason=NOT_YET_REASON)] if stem in NOT_YET_IMPORTED else [])


def _cases(stems):
    return [pytest.param(s, id=s, marks=_marks(s)) for s in stems]


# ----------------------------------------------------------------------------- hand counts
def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def _mimo_dense(c: dict) -> int:
    """MiMo-7B (``MiMoForCausalLM``, model_type ``mimo``; transformers has no such type): Qwen2's
    decoder (q/k/v with bias, o without, SwiGLU MLP, two RMSNorms per layer), untied embedding and
    head, final norm. Its ``num_nextn_predict_layers`` MTP layer is not part of the main model."""
    h, n, heads, kv, hd = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                           c["num_key_value_heads"], c["head_dim"])
    assert c["attention_bias"] and not c["tie_word_embeddings"]
    attention = (h * heads * hd + heads * hd) + 2 * (h * kv * hd + kv * hd) + heads * hd * h
    layer = attention + 3 * h * c["intermediate_size"] + 2 * h
    return 2 * c["vocab_size"] * h + n * layer + h


def _decilm(c: dict) -> int:
    """DeciLM / Nemotron-NAS (``DeciLMForCausalLM``, model_type ``nemotron-nas``; remote code only):
    per block, attention is absent (``no_op``), one h x h linear (``replace_with_linear``) or GQA with
    ``num_attention_heads // n_heads_in_group`` KV heads of ``hidden_size / num_attention_heads``; the
    FFN is absent, one h x h linear, or SwiGLU of width ``int(2 * ffn_mult * h / 3)`` rounded up to a
    multiple of 256 (``_ffn_mult_to_intermediate_size``); each present sub-block has its RMSNorm."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    hd = h // heads
    assert not c["attention_bias"] and not c["mlp_bias"] and not c["tie_word_embeddings"]
    total = 2 * c["vocab_size"] * h + h
    for block in c["block_configs"]:
        a, f = block["attention"], block["ffn"]
        if not a["no_op"]:
            total += h + (h * h if a["replace_with_linear"] else
                          2 * h * heads * hd + 2 * h * (heads // a["n_heads_in_group"]) * hd)
        if not f["no_op"]:
            total += h + (h * h if f["replace_with_linear"] else
                          3 * h * _round_up(int(2 * f["ffn_mult"] * h / 3), 256))
    return total


# families the installed transformers cannot build, and the hand count that replaces its own
HAND_COUNTS = {
    "XiaomiMiMo--MiMo-7B-Base": _mimo_dense,
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1": _decilm,
}
# no independent count: transformers' kimi_linear has neither K3's activation ("situ") nor its latent
# experts, full-rank KDA gate or MLA output gate, and no reference implementation is published here
NO_ORACLE = {"moonshotai--Kimi-K3": "transformers cannot build it and no reference code is available"}


def test_hand_counts_match_the_published_totals():
    """The hand counts reproduce the vendors' figures: MiMo-7B "7B" without its MTP layer (7.62 B);
    Llama-3.3-Nemotron-Super-49B-v1 "49B" (49.87 B)."""
    assert _mimo_dense(_config("XiaomiMiMo--MiMo-7B-Base")) == 7_622_619_136
    assert _decilm(_config("nvidia--Llama-3_3-Nemotron-Super-49B-v1")) == 49_867_145_216


def _expected_total(stem: str) -> tuple[int, str]:
    rec = RECORDED["models"][stem]
    if rec["status"] == "built":
        return rec["total"], f"transformers {RECORDED['transformers']} meta-device count"
    if stem in HAND_COUNTS:
        return HAND_COUNTS[stem](_config(stem)), "hand count"
    pytest.skip(f"{stem}: no oracle ({NO_ORACLE[stem]})")


# ----------------------------------------------------------------------------- the corpus itself
def test_corpus_is_large_and_every_file_is_the_recorded_copy():
    listed = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{16})` \|$",
                             (CORPUS / "SOURCES.md").read_text(), flags=re.M))
    files = {p.name for p in CORPUS.glob("*.json") if p.name != hf_oracle.COUNTS_FILE.name}
    assert set(listed) == files
    for name, digest in listed.items():
        assert hashlib.sha256((CORPUS / name).read_bytes()).hexdigest()[:16] == digest, name
    assert len(CONFIGS) >= 40


def test_every_config_has_a_recorded_count_and_every_list_names_corpus_files():
    assert set(RECORDED["models"]) == set(STEMS)
    assert NOT_YET_IMPORTED <= set(STEMS)
    unavailable = {s for s, r in RECORDED["models"].items() if r["status"] != "built"}
    assert unavailable == set(HAND_COUNTS) | set(NO_ORACLE)


def test_recorded_counts_are_consistent():
    """Each built count splits exactly into embedding, decoder layers, LM head and the rest."""
    for stem, r in RECORDED["models"].items():
        if r["status"] != "built":
            continue
        layers = sum(count * repeat for count, repeat in r["decoder_layers"])
        assert sum(repeat for _, repeat in r["decoder_layers"]) == r["num_hidden_layers"], stem
        assert r["embedding"] + layers + r["extra_layers"] + r["lm_head"] + r["rest"] == r["total"], stem
        assert (r["lm_head"] == 0) == r["tied_embeddings"], stem
        assert r.get("full_total", r["total"]) >= r["total"], stem


# ----------------------------------------------------------------------------- the importer
@pytest.mark.parametrize("stem", sorted(hf_oracle.META_ONLY))
def test_a_meta_only_config_is_refused_without_the_extra(stem, monkeypatch):
    """Without transformers and torch, a META_ONLY config is refused in one line naming its family
    and the hf extra (the other configs are read by the families interpreter: the next test)."""
    from placer.specs.errors import InvalidSpec
    from placer.specs.hf import meta

    monkeypatch.setattr(meta, "meta_available", lambda: False)
    with pytest.raises(InvalidSpec) as info:
        load_model(CORPUS / f"{stem}.json")
    assert "is not one the interpreter lists" in info.value.message
    assert "pip install 'placer[hf]'" in info.value.message


@pytest.mark.parametrize("stem", _cases(STEMS))
def test_importer_reads_the_config(stem):
    model = _model(stem)
    # read by the families interpreter, or (META_ONLY, marked hf) from transformers' module tree
    assert ("families interpreter" in model.description) == (stem not in hf_oracle.META_ONLY), model.description
    text = _config(stem).get("text_config", _config(stem))
    # a per-layer list is the layer count when the config gives no number (Nemotron-3 Ultra)
    assert model.num_hidden_layers == text.get("num_hidden_layers", len(text.get("layers_block_type", [])))


_TEXT_KINDS = ("embedding", "attention", "linear_attention", "ffn", "lm_head")   # ffn: an FFN-only layer


@pytest.mark.parametrize("stem", _cases(STEMS))
def test_total_parameters_match_transformers(stem):
    """Within 0.1% of transformers' count of the causal LM (a vision / audio tower node, if the
    importer adds one, is compared with the whole wrapper's count instead)."""
    model = _model(stem)
    expected, what = _expected_total(stem)
    towers = sum(x.params for x in model.layers if x.kind not in _TEXT_KINDS)
    text = model.total_params - towers
    assert abs(text - expected) <= TOLERANCE * expected, \
        f"{stem}: placer {text:,} vs {what} {expected:,} ({(text - expected) / expected:+.4%})"
    if towers:
        full = RECORDED["models"][stem].get("full_total")
        if stem in TOWER_WITHOUT_ORACLE:
            assert full is None, f"{stem}: transformers now builds the wrapper; compare its tower"
            return
        assert full is not None, f"{stem}: placer adds {towers:,} tower parameters; transformers built no wrapper"
        assert abs(model.total_params - full) <= TOLERANCE * full


# ----------------------------------------------------------------------------- the oracle, live
def _live_stems() -> list[str]:
    if LIVE_ALL:
        return STEMS
    seen, out = set(), []
    for stem in STEMS:
        r = RECORDED["models"][stem]
        key = (r.get("model_class"), r.get("full_class")) if r["status"] == "built" else stem
        if key not in seen:
            seen.add(key)
            out.append(stem)
    return out


_NUMBERS = ("status", "model_class", "total", "embedding", "lm_head", "tied_embeddings", "num_hidden_layers",
            "decoder_layers", "extra_layers", "rest", "persistent_buffers", "full_class", "full_total")


@pytest.mark.hf
@pytest.mark.parametrize("stem", _live_stems())
def test_recorded_count_is_what_transformers_builds_now(stem):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    live = hf_oracle.count_file(CORPUS / f"{stem}.json")
    recorded = RECORDED["models"][stem]
    hint = (f"recorded with transformers {RECORDED['transformers']}, installed {hf_oracle.versions()['transformers']}: "
            "regenerate with `python -m tests.hf_oracle --write`")
    assert {k: live.get(k) for k in _NUMBERS} == {k: recorded.get(k) for k in _NUMBERS}, hint
