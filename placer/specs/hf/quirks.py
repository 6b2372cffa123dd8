"""The one table of family quirks: what a family's config leaves unsaid or spells its own way.

The interpreter (:mod:`placer.specs.hf.interpret`) reads the keys decoder configs share; a row here only
records what differs from that reading for one family (``model_type``), following the family's
``configuration_*.py`` (defaults of absent keys) and ``modeling_*.py`` (which tensors exist) in
transformers. Every row names a fixture under ``tests/fixtures/`` (a real config.json of the corpus
where there is one, else transformers' own default config of the family) that exercises it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Family", "FAMILIES", "family_of"]


@dataclass(frozen=True)
class Family:
    """What one family does differently from the common reading.

    ``defaults``: values of keys the family's config class fills in when a file leaves them out.
    ``qkv_bias`` / ``o_bias``: biases the modeling code always builds (None: from ``attention_bias``).
    ``qk_norm``: ``"head"`` (one norm of head_dim), ``"full"`` (over all heads), ``"key"`` (per head
    when ``use_qk_norm`` is set), ``"none"`` (norms without weights), or None (``use_qk_norm``). ``gated_attention``: q_proj also emits an output gate.
    ``norms``: RMSNorms per layer in units of the hidden size (Gemma has four; 1 means every layer
    is one sub-block, a mixer or an FFN, as in Nemotron-H). ``expert_bias``: experts with biases.
    ``router_bias``: the router carries a per-expert score-correction bias (``"key:<name>"``: when
    that key is true). ``shared_expert_gate``: a sigmoid gate of width 1 on the shared expert.
    ``sliding_period``: with no ``layer_types``, layer i slides unless (i+1) is a multiple of it.
    ``linear_kind``: the mixer ``linear_attention`` layers use when the dimensions do not tell.
    ``names``: checkpoint module names that differ from the DeepSeek / Llama naming the interpreter
    uses (matched by quantization ignore lists). ``tie``: ``tie_word_embeddings`` when absent.
    """

    model_types: tuple[str, ...]
    fixture: str
    defaults: dict = field(default_factory=dict)
    qkv_bias: bool | None = None
    o_bias: bool | None = None
    qk_norm: str | None = None
    gated_attention: bool = False
    norms: int = 2
    router_bias: bool | str = False
    shared_expert_gate: bool = False
    sinks: bool = False
    gated_mlp: bool = True
    expert_bias: bool = False
    sliding_period: int = 0         # without layer_types: full attention every this many layers, else sliding
    linear_kind: str | None = None  # what "linear_attention" in layer_types means when dims do not say
    names: tuple[tuple[str, str], ...] = ()
    tie: bool = False
    notes: str = ""


_MIXTRAL_NAMES = (("mlp.", "block_sparse_moe."), ("experts.0.gate_proj", "experts.0.w1"),
                  ("experts.0.up_proj", "experts.0.w3"), ("experts.0.down_proj", "experts.0.w2"))

FAMILIES: tuple[Family, ...] = (
    Family(("llama", "mistral", "ministral", "olmo", "granite", "smollm3", "seed_oss", "exaone4"), "hf_corpus/meta-llama--Meta-Llama-3.1-8B",
           notes="GQA + SwiGLU; attention_bias / mlp_bias keys"),
    Family(("arcee",), "hf_families/arcee", gated_mlp=False, notes="ReLU^2 MLP: up and down only"),
    Family(("apertus",), "hf_families/apertus", gated_mlp=False, qk_norm="head", notes="xIELU MLP: up and down only"),
    Family(("qwen2", "mimo"), "hf_corpus/Qwen--Qwen2.5-7B", qkv_bias=True, o_bias=False, defaults={"tie_word_embeddings": False},
           notes="q/k/v biases always present; MiMo is Qwen2 with MTP layers"),
    Family(("qwen3",), "hf_corpus/Qwen--Qwen3-8B", qk_norm="head", defaults={"head_dim": 128}),
    Family(("qwen2_moe",), "hf_families/qwen2_moe", qkv_bias=True, o_bias=False, shared_expert_gate=True,
           names=(("shared_experts.", "shared_expert."),)),
    Family(("qwen3_moe",), "hf_corpus/Qwen--Qwen3-30B-A3B", qk_norm="head", defaults={"head_dim": 128}),
    Family(("qwen3_next",), "hf_corpus/Qwen--Qwen3-Next-80B-A3B-Thinking", qk_norm="head", gated_attention=True, shared_expert_gate=True,
           names=(("shared_experts.", "shared_expert."),)),
    Family(("qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"), "hf_corpus/Qwen--Qwen3.5-35B-A3B",
           qk_norm="head", gated_attention=True, shared_expert_gate=True,
           # the checkpoint splits the fused projections (in_proj_qkv + in_proj_z, in_proj_b + in_proj_a):
           # each fused tensor takes the format of its first part
           names=(("shared_experts.", "shared_expert."), ("linear_attn.in_proj_qkvz", "linear_attn.in_proj_qkv"),
                  ("linear_attn.in_proj_ba", "linear_attn.in_proj_b"))),
    Family(("mixtral",), "hf_corpus/mistralai--Mixtral-8x7B-v0.1", names=_MIXTRAL_NAMES, defaults={"num_key_value_heads": 8}),
    Family(("phi3",), "hf_families/phi3", notes="fused qkv_proj and gate_up_proj: same parameters"),
    Family(("deepseek_v3", "kimi_k2"), "hf_corpus/deepseek-ai--DeepSeek-V3", router_bias=True),
    Family(("deepseek_v32",), "hf_corpus/deepseek-ai--DeepSeek-V3.2", router_bias=True),
    Family(("glm_moe_dsa",), "hf_corpus/zai-org--GLM-5", router_bias=True),
    Family(("glm4_moe",), "hf_families/glm4_moe", router_bias=True, qk_norm="key",
           defaults={"attention_bias": False}, notes="GQA, q/k/v biases by attention_bias"),
    Family(("glm4_moe_lite",), "hf_families/glm4_moe_lite", router_bias=True),
    Family(("kimi_linear",), "hf/kimi-linear-48b", router_bias=True),
    Family(("minimax", "minimax_text_01"), "hf/minimax-text-01", names=_MIXTRAL_NAMES, linear_kind="lightning"),
    Family(("minimax_m2",), "hf_corpus/MiniMaxAI--MiniMax-M2.5", qk_norm="full", router_bias="key:use_routing_bias",
           names=_MIXTRAL_NAMES),
    Family(("jamba",), "hf/jamba-1.5-large", names=(("mlp.", "feed_forward."),),
           defaults={"num_experts": 16, "num_experts_per_tok": 2, "attn_layer_period": 8, "attn_layer_offset": 4,
                     "expert_layer_period": 2, "expert_layer_offset": 1}),
    Family(("gpt_oss",), "hf_corpus/openai--gpt-oss-20b", qkv_bias=True, o_bias=True, sinks=True, router_bias=True, expert_bias=True, sliding_period=2,
           names=(("mlp.gate", "mlp.router"),)),
    Family(("llama4_text", "llama4"), "hf_corpus/meta-llama--Llama-4-Scout-17B-16E-Instruct", defaults={"n_shared_experts": 1}, qk_norm="none", names=(("mlp.", "feed_forward."),
                                                              ("shared_experts.", "shared_expert.")),
           notes="q/k L2 norms without weights; chunked attention on RoPE layers"),
    Family(("ernie4_5_moe",), "hf_families/ernie4_5_moe", router_bias=True, qkv_bias=None),
    Family(("nemotron_h",), "hf_corpus/nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", norms=1, gated_mlp=False,
           names=(("self_attn.", "mixer."), ("mamba.", "mixer."), ("mlp.", "mixer.")),
           notes="one sub-block per layer (Mamba-2, attention, MLP or MoE); relu2 MLPs"),
    Family(("nemotron-nas", "deci", "decilm"), "hf_corpus/nvidia--Llama-3_3-Nemotron-Super-49B-v1",
           notes="per-layer block_configs: attention or FFN absent, KV heads and FFN width per layer"),
    Family(("gemma2",), "hf_families/gemma2", norms=4, tie=True, sliding_period=2),
    Family(("gemma3_text", "gemma3"), "hf_families/gemma3_text", norms=4, qk_norm="head", tie=True, sliding_period=6),
)


def family_of(model_type: str | None) -> Family | None:
    """The table row of ``model_type``, or None for a family the interpreter does not list."""
    for f in FAMILIES:
        if model_type in f.model_types:
            return f
    return None
