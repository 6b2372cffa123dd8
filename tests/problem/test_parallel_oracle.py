"""Per-rank parameters of layers the interpreter reads (from the config's dimensions, the solver's
rule) against transformers' own tensors of the same layer on the meta device, each divided as the
runtime divides it by its name (the validator's rule for named tensors): two derivations that
share nothing but the config. Needs the hf extra (transformers, torch)."""

from __future__ import annotations

import json

import pytest
from dirs import FIXTURES

from placer.mapping.named_ranks import named_rank_params
from placer.problem import parallel as P
from placer.specs.hf.meta import meta_available
from placer.specs.model import Layer, load_model

pytestmark = pytest.mark.skipif(not meta_available(), reason="the hf extra (transformers, torch) is not installed")
CORPUS = FIXTURES / "hf_corpus"

# (config, decoder layers to compare): one model per layer kind transformers builds with the
# names the runtimes use
CASES = [
    ("deepseek-ai--DeepSeek-V3.2.json", (0, 3)),                 # MLA with the DSA indexer; dense and MoE
    ("zai-org--GLM-5.json", (3,)),                               # GLM-5's DSA
    ("Qwen--Qwen3-Next-80B-A3B-Thinking.json", (0, 3)),          # Gated DeltaNet and gated attention, MoE
    ("Qwen--Qwen3.5-27B.json", (0, 3)),                          # Gated DeltaNet (split projections), dense
    ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json", (0, 5)),      # Mamba-2 alone, attention alone
    ("MiniMaxAI--MiniMax-M2.5.json", (0,)),                      # full-width q / k norms
    ("openai--gpt-oss-20b.json", (0, 1)),                        # sinks, sliding window, expert biases
    ("Qwen--Qwen3-235B-A22B.json", (0,)),                        # GQA with per-head q/k norms, MoE
    ("meta-llama--Meta-Llama-3.1-70B.json", (0,)),               # GQA, a SwiGLU MLP
]


def _transformers_layers(path, indices):
    """Each asked decoder layer of transformers' module tree as (tensors, heads), persistent
    buffers (a router's correction bias) counted with the parameters, as a checkpoint stores them."""
    from placer.specs.hf import meta, unwrap
    from placer.specs.hf.config import Config

    top = Config(json.loads(path.read_text()), str(path))
    text, _ = unwrap(top)
    cfg, model = meta._build(text, text.data.get("model_type") or top.data["model_type"], top)
    _, layers = meta._decoder_layers(model, cfg.num_hidden_layers)
    out = {}
    for i in indices:
        mod = layers[i]
        params = dict(mod.named_parameters())
        named = list(params.items()) + [(k, v) for k, v in mod.state_dict(keep_vars=True).items() if k not in params]
        out[i] = (tuple((k, tuple(v)) for k, v in meta._tensors(named).items()), meta._heads(mod))
    return out


@pytest.mark.parametrize("config,indices", CASES, ids=[c[0].removesuffix(".json") for c in CASES])
def test_dimensions_rule_matches_transformers_tensors_split_by_name(config, indices):
    path = CORPUS / config
    m = load_model(path, text_only=True)
    h = m.hidden_size
    theirs = _transformers_layers(path, indices)
    for i in indices:
        mine = next(x for x in m.layers if x.name == f"layers.{i}")
        tensors, heads = theirs[i]
        named = Layer(name=mine.name, kind=mine.kind, tensors=tensors, heads=heads)
        assert named_rank_params(named, 1) == mine.params, (config, i)
        for g in (2, 4, 8):
            for ep in (False, True):
                if P.refusal(mine, h, g, ep) is None:
                    assert named_rank_params(named, g, ep) == P.params_per_rank(mine, h, g, ep), (config, i, g, ep)
